package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// TestWaitersOfASharedRowLeaveHalfThePool: transactions waiting for a
// merchant's document-number row, locked by another session, hold half the
// pool's connections between them, not one each; another merchant's
// transaction is served while they wait; each waiter ends at its deadline
// with store_unavailable, having taken no number.
func TestWaitersOfASharedRowLeaveHalfThePool(t *testing.T) {
	s, u := migrated(t) // a pool of 4
	ctx := context.Background()
	take := func(c context.Context, m string) error {
		return s.Update(c, func(tx storage.Tx) error {
			_, err := tx.NextSequence(m, "invoice")
			return err
		})
	}
	if err := take(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lock, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM sequences WHERE merchant_id = 'm1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	const waiters = 8 // twice the pool
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	errs := make([]error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = take(c, "m1") }()
	}
	time.Sleep(300 * time.Millisecond) // all waiting by then
	if n := s.pool.Stat().AcquiredConns(); n != 2 {
		t.Errorf("%d connections held by %d transactions waiting for one row, want 2 (half the pool)", n, waiters)
	}
	if err := take(ctx, "m2"); err != nil || c.Err() != nil {
		t.Errorf("another merchant's number while they wait: %v (served after the waiters' deadline: %v)", err, c.Err())
	}
	wg.Wait()
	for i, err := range errs {
		if fault.CodeOf(err) != "store_unavailable" || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiter %d: %v, want store_unavailable at its deadline", i, err)
		}
	}
	lock.Rollback(ctx)
	var n int64
	if err := s.Update(ctx, func(tx storage.Tx) (err error) { n, err = tx.NextSequence("m1", "invoice"); return err }); err != nil || n != 2 {
		t.Fatalf("next number %d (%v), want 2: the waiters took none", n, err)
	}
}
