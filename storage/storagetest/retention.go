package storagetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// testOutboxRetention: DeleteDoneOutbox removes delivered and failed
// messages created before its time, oldest first and at most limit, with
// their delivery logs; it never removes a pending one (one never attempted,
// one retrying, one redelivered), nor a recent one, and concurrent sweeps
// remove each message once.
func testOutboxRetention(t *testing.T, s storage.Store) {
	old := Now().Add(-40 * 24 * time.Hour)
	cutoff := Now().Add(-30 * 24 * time.Hour)
	msg := func(merchant, id string, created time.Time, state string) *storage.OutboxMessage {
		m := &storage.OutboxMessage{ID: id, MerchantID: merchant, Topic: "order.event", Payload: []byte(`{}`),
			CreatedAt: created, NextAttempt: created}
		switch state {
		case "delivered":
			m.Delivered, m.Attempts = true, 1
			m.Log = []storage.DeliveryAttempt{{At: created, StatusCode: 200}}
		case "failed":
			m.Failed, m.Attempts, m.LastError = true, 12, "answered 500"
			m.Log = []storage.DeliveryAttempt{{At: created, StatusCode: 500, Error: "answered 500"}}
		case "retrying":
			m.Attempts, m.LastError, m.NextAttempt = 3, "answered 503", Now().Add(time.Hour)
		}
		return m
	}
	update(t, s, func(tx storage.Tx) error {
		for _, m := range []*storage.OutboxMessage{
			msg("m1", "old-delivered", old, "delivered"),
			msg("m1", "old-failed", old.Add(time.Second), "failed"),
			msg("m1", "old-pending", old.Add(2*time.Second), ""),
			msg("m1", "old-retrying", old.Add(3*time.Second), "retrying"),
			msg("m1", "old-redelivered", old.Add(4*time.Second), "delivered"),
			msg("m1", "new-delivered", Now().Add(-time.Hour), "delivered"),
			msg("m1", "at-cutoff", cutoff, "delivered"), // not before the cutoff: kept
			msg("m2", "m2-old-delivered", old.Add(5*time.Second), "delivered"),
		} {
			if err := tx.AddOutbox(m); err != nil {
				return err
			}
		}
		// Done, then asked for again: pending once more.
		m := msg("m1", "old-redelivered", old.Add(4*time.Second), "delivered")
		m.Delivered, m.Attempts, m.NextAttempt = false, 0, Now()
		return tx.UpdateOutbox(m)
	})
	sweep := func(before time.Time, limit int) int {
		var n int
		update(t, s, func(tx storage.Tx) error {
			var err error
			n, err = tx.DeleteDoneOutbox(before, limit)
			return err
		})
		return n
	}
	exists := func(merchant, id string) bool {
		var ok bool
		view(t, s, func(tx storage.Tx) error {
			_, err := tx.GetOutbox(merchant, id)
			if err != nil && fault.KindOf(err) != fault.NotFound {
				return err
			}
			ok = err == nil
			return nil
		})
		return ok
	}
	if n := sweep(cutoff, 100); n != 3 {
		t.Fatalf("the sweep removed %d messages; want 3 (two of m1's, one of m2's)", n)
	}
	for _, id := range []string{"old-delivered", "old-failed"} {
		if exists("m1", id) {
			t.Errorf("%s was kept", id)
		}
	}
	if exists("m2", "m2-old-delivered") {
		t.Error("m2-old-delivered was kept")
	}
	for _, id := range []string{"old-pending", "old-retrying", "old-redelivered", "new-delivered", "at-cutoff"} {
		if !exists("m1", id) {
			t.Errorf("%s was removed", id)
		}
	}
	view(t, s, func(tx storage.Tx) error {
		page, next, err := tx.ListOutbox("m1", "", time.Time{}, 100)
		var ids []string
		for _, m := range page {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		if want := []string{"at-cutoff", "new-delivered", "old-pending", "old-redelivered", "old-retrying"}; err != nil || next != "" || !slices.Equal(ids, want) {
			t.Fatalf("the log lists %v (next %q, %v); want %v", ids, next, err, want)
		}
		due, err := tx.PendingOutbox(Now().Add(2*time.Hour), 10, 0)
		if err != nil || len(due) != 3 {
			t.Fatalf("pending after the sweep: %d, %v; want 3", len(due), err)
		}
		return nil
	})
	if n := sweep(cutoff, 100); n != 0 {
		t.Fatalf("a second sweep removed %d", n)
	}
	// A redelivered message done again goes at the next sweep.
	update(t, s, func(tx storage.Tx) error {
		m, err := tx.GetOutbox("m1", "old-redelivered")
		if err != nil {
			return err
		}
		m.Delivered, m.Attempts = true, 1
		return tx.UpdateOutbox(m)
	})
	if n := sweep(cutoff, 100); n != 1 || exists("m1", "old-redelivered") {
		t.Fatalf("the redelivered message, done again: removed %d", n)
	}

	// The limit bounds a sweep, which takes the oldest first.
	update(t, s, func(tx storage.Tx) error {
		for i := range 5 {
			if err := tx.AddOutbox(msg("m3", fmt.Sprint("batch", 4-i), old.Add(-time.Duration(4-i)*time.Minute), "delivered")); err != nil {
				return err
			}
		}
		return nil
	})
	if n := sweep(cutoff, 2); n != 2 || exists("m3", "batch4") || exists("m3", "batch3") || !exists("m3", "batch2") {
		t.Fatalf("a sweep of 2 removed %d, not the two oldest", n)
	}
	if a, b := sweep(cutoff, 10), sweep(cutoff, 10); a != 3 || b != 0 {
		t.Fatalf("later sweeps removed %d, %d; want 3, 0", a, b)
	}

	// Sweeps side by side (replicas) remove each message once.
	const many = 40
	update(t, s, func(tx storage.Tx) error {
		for i := range many {
			if err := tx.AddOutbox(msg("m4", fmt.Sprint("c", i), old.Add(time.Duration(i)*time.Millisecond), "failed")); err != nil {
				return err
			}
		}
		return nil
	})
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range many {
				var n int
				err := s.Update(ctx, func(tx storage.Tx) error {
					var err error
					n, err = tx.DeleteDoneOutbox(cutoff, 3)
					return err
				})
				if err != nil {
					t.Errorf("concurrent sweep: %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if total != many {
		t.Fatalf("concurrent sweeps removed %d; want %d", total, many)
	}
	// A View cannot sweep.
	if err := s.View(ctx, func(tx storage.Tx) error {
		_, err := tx.DeleteDoneOutbox(cutoff, 10)
		return err
	}); err == nil {
		t.Fatal("a View swept the outbox")
	}
}
