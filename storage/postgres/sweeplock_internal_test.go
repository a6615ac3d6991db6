package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/token"
)

// The retention sweeps pass over a row another transaction holds (a token
// being used, a key's request under way, a redelivery, another replica's
// sweep) rather than wait for it: each removes the rows it can at once and
// leaves the held one to a later sweep, which removes it once it is let go.
// A sweep that waited would hold its batch's locks, and a replica's jobs,
// for as long as the request it waits for.
func TestSweepsPassOverHeldRows(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 3 {
			at := old.Add(time.Duration(i) * time.Minute)
			if err := tx.PutAuthorization(&token.Authorization{Token: fmt.Sprint("a", i), MerchantID: "m1", Country: "SE", Currency: "SEK",
				PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
				CreatedAt:     at, ExpiresAt: at.Add(time.Hour)}); err != nil {
				return err
			}
			if err := tx.PutIdempotency(&storage.IdempotencyRecord{MerchantID: "m1", Key: fmt.Sprint("k", i), Fingerprint: "fp",
				Status: 201, Body: []byte(`{}`), ExpiresAt: at.Add(24 * time.Hour)}); err != nil {
				return err
			}
			if err := tx.AddOutbox(&storage.OutboxMessage{ID: fmt.Sprint("n", i), MerchantID: "m1", Topic: "order.fullCapture",
				Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at, Attempts: 1, Delivered: true}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cutoff := old.Add(365 * 24 * time.Hour)
	for _, c := range []struct {
		name, lock string
		sweep      func(storage.Tx) (int, error)
	}{
		{"authorization token", `SELECT 1 FROM auth_tokens WHERE token = 'a1' FOR UPDATE`,
			func(tx storage.Tx) (int, error) { return tx.DeleteAuthorizationsExpiredBefore(cutoff, 10) }},
		{"idempotency", `SELECT 1 FROM idempotency WHERE key = 'k1' FOR UPDATE`,
			func(tx storage.Tx) (int, error) { return tx.DeleteExpiredIdempotency(cutoff, 10) }},
		{"notification", `SELECT 1 FROM outbox WHERE id = 'n1' FOR UPDATE`,
			func(tx storage.Tx) (int, error) { return tx.DeleteDoneOutbox(cutoff, 10) }},
	} {
		sweep := func() (int, error) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var n int
			err := s.Update(ctx, func(tx storage.Tx) error {
				var err error
				n, err = c.sweep(tx)
				return err
			})
			return n, err
		}
		holder, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, c.lock); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		n, err := sweep()
		if err != nil || n != 2 {
			t.Errorf("%s sweep beside a transaction holding one row: removed %d (%v) after %v; want the 2 others at once",
				c.name, n, err, time.Since(began).Round(time.Millisecond))
		}
		if err := holder.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := sweep(); err != nil || n != 1 {
			t.Errorf("%s sweep once the row was let go: removed %d (%v); want it", c.name, n, err)
		}
	}
}
