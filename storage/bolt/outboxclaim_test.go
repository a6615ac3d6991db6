package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// A claim with few messages due costs in proportion to them, not to the
// merchants with messages pending later: a merchant whose receiver is down
// keeps one pending for the retry schedule's 7 to 14.5 hours, and the skip
// scan visited every such merchant at every claim, two or more a second
// (50 000 of them: 7 to 20 ms per claim, under the writer's lock).
func TestClaimWithFewDueSkipsNoMerchant(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	add := func(tx storage.Tx, id, merchant string, at time.Time) error {
		return tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: merchant, Topic: "order.create",
			Payload: []byte(`{}`), CreatedAt: now, NextAttempt: at})
	}
	if err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 5000 {
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
		return add(tx, "y0", "m4000", now.Add(-90*time.Second))
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
	if n := bolt.OutboxSkips(s); n != 0 {
		t.Fatalf("the claim visited %d merchants with pending messages, want 0 (4 messages are due)", n)
	}
}
