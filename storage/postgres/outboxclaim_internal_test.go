package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// A claim with few notifications due costs in proportion to them, not to
// the merchants with one pending later: a merchant whose receiver is down
// keeps one for the retry schedule's 7 to 14.5 hours, and the skip scan
// visited every such merchant at every claim, two or more a second per
// replica (50 000 of them: 260 to 280 ms of the database per claim).
func TestClaimWithFewDueRunsNoSkipScan(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	add := func(tx storage.Tx, id, merchant string, at time.Time) error {
		return tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: merchant, Topic: "order.create",
			Payload: []byte(`{}`), CreatedAt: now, NextAttempt: at})
	}
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 500 {
			if err := add(tx, fmt.Sprintf("later%04d", i), fmt.Sprintf("m%04d", i), now.Add(time.Hour)); err != nil {
				return err
			}
		}
		// Due: three of one merchant (a cap of two takes two) and one of another.
		for i, id := range []string{"x0", "x1", "x2"} {
			if err := add(tx, id, "m0042", now.Add(-time.Duration(3-i)*time.Minute)); err != nil {
				return err
			}
		}
		return add(tx, "y0", "m0400", now.Add(-90*time.Second))
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
	if n := s.outboxSkipScans.Load(); n != 0 {
		t.Fatalf("the claim ran the skip scan over the 500 merchants with pending messages %d times, want 0 (4 are due)", n)
	}
}
