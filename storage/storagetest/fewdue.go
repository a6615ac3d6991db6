package storagetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
)

// ClaimFewDueAmongManyPending gives each of merchants merchants a message
// due an hour later (a receiver that is down keeps one pending for the
// retry schedule's hours), makes four due (three of one merchant, one of
// another), and claims with a window of 200 and a cap of 2 a merchant: the
// claim must take x0, x1 and y0. A store's own test then checks what the
// claim visited to find them: in proportion to the four due, not to the
// merchants with one pending later.
func ClaimFewDueAmongManyPending(t *testing.T, s storage.Store, merchants int) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	add := func(tx storage.Tx, id, merchant string, at time.Time) error {
		return tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: merchant, Topic: "order.create",
			Payload: []byte(`{}`), CreatedAt: now, NextAttempt: at})
	}
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range merchants {
			if err := add(tx, fmt.Sprintf("later%05d", i), fmt.Sprintf("m%05d", i), now.Add(time.Hour)); err != nil {
				return err
			}
		}
		for i, id := range []string{"x0", "x1", "x2"} {
			if err := add(tx, id, "m00042", now.Add(-time.Duration(3-i)*time.Minute)); err != nil {
				return err
			}
		}
		return add(tx, "y0", fmt.Sprintf("m%05d", merchants*8/10), now.Add(-90*time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := s.Update(ctx, func(tx storage.Tx) error {
		ms, err := tx.PendingOutbox(now, 200, 2)
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x0", "x1", "y0"}; !slices.Equal(ids, want) {
		t.Fatalf("claimed %v, want %v", ids, want)
	}
}
