package storagetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
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
	sweepsSideBySide(t, s, many, cutoff, storage.Tx.DeleteDoneOutbox)
	// A View cannot sweep.
	if err := s.View(ctx, func(tx storage.Tx) error {
		_, err := tx.DeleteDoneOutbox(cutoff, 10)
		return err
	}); err == nil {
		t.Fatal("a View swept the outbox")
	}
}

// testAuthorizationRetention: DeleteAuthorizationsExpiredBefore removes
// authorization tokens whose expiry is before its time, used, expired or
// deleted alike, earliest first and at most limit; it keeps a token expiring
// at or after that time and every customer token, follows a deleted id put
// again to its new expiry, and concurrent sweeps remove each token once.
func testAuthorizationRetention(t *testing.T, s storage.Store) {
	cutoff := Now().Add(-30 * 24 * time.Hour)
	tok := func(merchant, id string, expires time.Time) *token.Authorization {
		return &token.Authorization{Token: id, MerchantID: merchant, Country: "SE", Currency: "SEK", Locale: "sv-SE",
			PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
			CreatedAt:     expires.Add(-time.Hour), ExpiresAt: expires}
	}
	old := cutoff.Add(-10 * 24 * time.Hour)
	used := tok("m1", "old-used", old)
	if err := used.Consume(old.Add(-time.Minute), "order:o1"); err != nil {
		t.Fatal(err)
	}
	expired := tok("m1", "old-expired", old.Add(time.Second))
	expired.Expire(old.Add(time.Second))
	deleted := tok("m1", "old-deleted", old.Add(2*time.Second))
	deleted.Deleted = true
	// Deleted long ago, then put again as a new token: its new expiry counts.
	reput := tok("m1", "reput", old.Add(3*time.Second))
	update(t, s, func(tx storage.Tx) error {
		for _, a := range []*token.Authorization{used, expired, deleted,
			tok("m1", "old-unmarked", old.Add(4*time.Second)), // expiry passed, the expiry job never ran
			tok("m1", "at-cutoff", cutoff),                    // not before the cutoff: kept
			tok("m1", "recent-used", Now().Add(-time.Hour)),
			tok("m1", "live", Now().Add(time.Hour)),
			tok("m2", "old-used", old.Add(5*time.Second)), // another merchant's token of the same id
			reput,
		} {
			if err := tx.PutAuthorization(a); err != nil {
				return err
			}
		}
		reput.Deleted = true
		if err := tx.PutAuthorization(reput); err != nil {
			return err
		}
		return tx.PutCustomerToken(&token.Customer{Record: token.Record{TokenID: "ct-revoked", State: token.StateRevoked,
			MerchantID: "m1"}, Currency: "SEK", Locale: "sv-SE", CreatedAt: old, RevokedAt: &old})
	})
	update(t, s, func(tx storage.Tx) error {
		return tx.PutAuthorization(tok("m1", "reput", Now().Add(time.Hour)))
	})
	sweep := func(before time.Time, limit int) int {
		var n int
		update(t, s, func(tx storage.Tx) error {
			var err error
			n, err = tx.DeleteAuthorizationsExpiredBefore(before, limit)
			return err
		})
		return n
	}
	exists := func(merchant, id string) bool {
		var ok bool
		view(t, s, func(tx storage.Tx) error {
			_, err := tx.GetAuthorization(merchant, id)
			if err != nil && fault.KindOf(err) != fault.NotFound {
				return err
			}
			ok = err == nil
			return nil
		})
		return ok
	}
	// The limit bounds a sweep, which takes the earliest first: the used
	// token, then the expired one.
	if n := sweep(cutoff, 2); n != 2 || exists("m1", "old-used") || exists("m1", "old-expired") || !exists("m1", "old-unmarked") {
		t.Fatalf("a sweep of 2 removed %d, not the two earliest", n)
	}
	// The next sweep goes on from there: the deleted token (which no read
	// finds, but which is still held), the unmarked one and m2's.
	if n := sweep(cutoff, 100); n != 3 {
		t.Fatalf("the second sweep removed %d tokens; want 3", n)
	}
	for _, k := range [][2]string{{"m1", "old-unmarked"}, {"m2", "old-used"}} {
		if exists(k[0], k[1]) {
			t.Errorf("%s's %s was kept", k[0], k[1])
		}
	}
	for _, id := range []string{"at-cutoff", "recent-used", "live", "reput"} {
		if !exists("m1", id) {
			t.Errorf("%s was removed", id)
		}
	}
	view(t, s, func(tx storage.Tx) error {
		c, err := tx.GetCustomerToken("m1", "ct-revoked")
		if err != nil || c.State != token.StateRevoked {
			t.Errorf("the revoked customer token: %+v, %v; want it kept", c, err)
		}
		return nil
	})
	if n := sweep(cutoff, 100); n != 0 {
		t.Fatalf("a third sweep removed %d", n)
	}
	// A removed id is free: a token put under it again is a new token.
	update(t, s, func(tx storage.Tx) error { return tx.PutAuthorization(tok("m1", "old-used", Now().Add(time.Hour))) })
	view(t, s, func(tx storage.Tx) error {
		a, err := tx.GetAuthorization("m1", "old-used")
		if err != nil || a.UsedAt != nil || !a.ExpiresAt.Equal(Now().Add(time.Hour)) {
			t.Fatalf("the id put again: %+v, %v", a, err)
		}
		return nil
	})
	// Up to an hour on, the sweep takes the tokens expiring before it, and
	// none expiring at it; a nanosecond later, those too.
	if n := sweep(Now().Add(time.Hour), 100); n != 2 || exists("m1", "recent-used") || !exists("m1", "live") ||
		!exists("m1", "reput") || !exists("m1", "old-used") {
		t.Fatalf("a sweep up to an hour on removed %d; want 2 (at-cutoff, recent-used)", n)
	}
	if n := sweep(Now().Add(time.Hour+time.Nanosecond), 100); n != 3 || exists("m1", "live") || exists("m1", "reput") {
		t.Fatalf("a sweep past the last expiry removed %d; want 3 (live, reput, old-used)", n)
	}

	// Sweeps side by side (replicas) remove each token once.
	const many = 40
	update(t, s, func(tx storage.Tx) error {
		for i := range many {
			if err := tx.PutAuthorization(tok("m4", fmt.Sprint("c", i), old.Add(time.Duration(i)*time.Millisecond))); err != nil {
				return err
			}
		}
		return nil
	})
	sweepsSideBySide(t, s, many, cutoff, storage.Tx.DeleteAuthorizationsExpiredBefore)
	// A View cannot sweep.
	if err := s.View(ctx, func(tx storage.Tx) error {
		_, err := tx.DeleteAuthorizationsExpiredBefore(Now().Add(48*time.Hour), 10)
		return err
	}); err == nil {
		t.Fatal("a View swept the authorization tokens")
	}
}

// sweepsSideBySide runs four sweeps at once, as replicas do, each removing
// at most 3 rows before cutoff a transaction until one removes none, and
// fails unless they removed many in all: each row once.
func sweepsSideBySide(t *testing.T, s storage.Store, many int, cutoff time.Time, sweep func(storage.Tx, time.Time, int) (int, error)) {
	t.Helper()
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
					n, err = sweep(tx, cutoff, 3)
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
}
