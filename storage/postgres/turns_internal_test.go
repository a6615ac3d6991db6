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
	"github.com/kassahq/kassa/token"
)

// TestWaitersOfASharedRowLeaveHalfThePool: transactions waiting for a row
// many transactions share, locked by another session, hold half the pool's
// connections between them, not one each; another merchant's transaction
// is served while they wait; each waiter ends at its deadline with
// store_unavailable, having changed nothing. The rows: a merchant's
// document-number row (every capture and refund takes a number), and a
// customer token's (every order from it reads it for update; a platform's
// monthly run makes many at once).
func TestWaitersOfASharedRowLeaveHalfThePool(t *testing.T) {
	for _, row := range []struct {
		name, lock string
		put        func(tx storage.Tx, m string) error
		use        func(tx storage.Tx, m string) error
		check      func(t *testing.T, s *Store)
	}{
		{name: "document number", lock: `SELECT 1 FROM sequences WHERE merchant_id = 'm1' FOR UPDATE`,
			put: func(tx storage.Tx, m string) error { _, err := tx.NextSequence(m, "invoice"); return err },
			use: func(tx storage.Tx, m string) error { _, err := tx.NextSequence(m, "invoice"); return err },
			check: func(t *testing.T, s *Store) {
				var n int64
				if err := s.Update(context.Background(), func(tx storage.Tx) (err error) { n, err = tx.NextSequence("m1", "invoice"); return err }); err != nil || n != 2 {
					t.Fatalf("next number %d (%v), want 2: the waiters took none", n, err)
				}
			}},
		{name: "customer token", lock: `SELECT 1 FROM customer_tokens WHERE merchant_id = 'm1' FOR UPDATE`,
			put: func(tx storage.Tx, m string) error {
				return tx.PutCustomerToken(&token.Customer{Record: token.Record{TokenID: "ct-" + m, MerchantID: m}, Currency: "SEK"})
			},
			use: func(tx storage.Tx, m string) error {
				c, err := tx.GetCustomerToken(m, "ct-"+m)
				if err != nil {
					return err
				}
				c.CompanyName += "x"
				return tx.PutCustomerToken(c)
			},
			check: func(t *testing.T, s *Store) {
				if err := s.View(context.Background(), func(tx storage.Tx) error {
					c, err := tx.GetCustomerToken("m1", "ct-m1")
					if err == nil && c.CompanyName != "" {
						t.Errorf("the waiters changed the token: %q", c.CompanyName)
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(row.name, func(t *testing.T) {
			s, u := migrated(t) // a pool of 4
			ctx := context.Background()
			run := func(c context.Context, m string, fn func(storage.Tx, string) error) error {
				return s.Update(c, func(tx storage.Tx) error { return fn(tx, m) })
			}
			for _, m := range []string{"m1", "m2"} {
				if err := run(ctx, m, row.put); err != nil {
					t.Fatal(err)
				}
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
			if _, err := lock.Exec(ctx, row.lock); err != nil {
				t.Fatal(err)
			}

			const waiters = 8 // twice the pool
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			errs := make([]error, waiters)
			var wg sync.WaitGroup
			for i := range waiters {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = run(c, "m1", row.use) }()
			}
			// All waiting: two with a turn and a connection, blocked on
			// the row, the others waiting for a turn without one. Waited
			// for rather than slept on (300 ms were), so that a stalled
			// machine fails nothing before the waiters' deadline.
			for s.turns.users() != waiters || s.pool.Stat().AcquiredConns() != 2 {
				select {
				case <-c.Done():
					t.Fatalf("%d of %d waiters had come to the row at their deadline, %d connections held",
						s.turns.users(), waiters, s.pool.Stat().AcquiredConns())
				case <-time.After(5 * time.Millisecond):
				}
			}
			if n := s.pool.Stat().AcquiredConns(); n != 2 {
				t.Errorf("%d connections held by %d transactions waiting for one row, want 2 (half the pool)", n, waiters)
			}
			if err := run(ctx, "m2", row.use); err != nil || c.Err() != nil {
				t.Errorf("another merchant's change while they wait: %v (served after the waiters' deadline: %v)", err, c.Err())
			}
			wg.Wait()
			for i, err := range errs {
				if fault.CodeOf(err) != "store_unavailable" || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("waiter %d: %v, want store_unavailable at its deadline", i, err)
				}
			}
			lock.Rollback(ctx)
			row.check(t, s)
		})
	}
}

// users is how many transactions have or wait for a turn, of any row.
func (ts *turns) users() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, s := range ts.slots {
		n += s.users
	}
	return n
}
