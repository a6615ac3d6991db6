package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
)

// withSetting is u with a session default (as ALTER DATABASE or ALTER ROLE
// … SET gives every session) in its startup options.
func withSetting(u, setting string) string {
	return u + "&options=" + strings.ReplaceAll(url.QueryEscape("-c "+setting), "+", "%20")
}

// TestStatementTimeoutIsStoreUnavailable: a database or role with a
// statement_timeout (a DBA's protection) cancels a statement that waits on a
// lock longer (SQLSTATE 57014): the transaction is aborted and wrote
// nothing, so the caller is told store_unavailable (503 with Retry-After),
// as for the caller's own deadline, and may send the request again. It was
// an internal error, 500.
func TestStatementTimeoutIsStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	u := freshSchema(t)
	s := open(t, u)
	limited := open(t, withSetting(u, "statement_timeout=100ms"))

	release := holdNumber(t, s)
	defer release()
	start := time.Now()
	err := limited.Update(ctx, func(tx storage.Tx) error {
		_, err := tx.NextSequence("m1", "held")
		return err
	})
	waited := time.Since(start)
	if fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" {
		t.Fatalf("a lock wait cut by statement_timeout: %v (kind %v, code %s), want store_unavailable", err, fault.KindOf(err), fault.CodeOf(err))
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("the error does not keep the database's: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("no context ended, yet the error says one did: %v", err)
	}
	if waited > 10*time.Second {
		t.Fatalf("the Update returned after %v", waited)
	}
	release()
	nextNumberIs(t, s, 2, "the cancelled Update took one")
}

// waitForLockWait waits until a backend of c's database runs a statement
// whose text has like in it and waits on a lock.
func waitForLockWait(t *testing.T, c *pgx.Conn, like string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%' || $1 || '%'
			AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`, like).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no statement with %q waits on a lock", like)
}

// TestMigrationsOutliveStatementTimeout: a database or role with a
// statement_timeout still migrates. A migration longer than it (a large
// table's index build; here, one waiting on a transaction, which counts
// alike) was cancelled at the same point at every start, so the start
// failed each time and the migration never finished. A migration runs with
// no statement_timeout, in its transaction (SET LOCAL) or, for one that runs
// outside a transaction, on its connection until it is done, which then
// goes back to the pool with the database's setting.
func TestMigrationsOutliveStatementTimeout(t *testing.T) {
	const limit = "statement_timeout=200ms"
	check := func(t *testing.T, s *postgres.Store) {
		t.Helper()
		conns := s.Pool().AcquireAllIdle(context.Background())
		if len(conns) == 0 {
			t.Fatal("no idle connection in the pool")
		}
		for _, c := range conns {
			var got string
			err := c.QueryRow(context.Background(), `SELECT current_setting('statement_timeout')`).Scan(&got)
			c.Release()
			if err != nil {
				t.Fatal(err)
			}
			if got != "200ms" {
				t.Fatalf("a connection of the pool runs with statement_timeout %s after the migrations, want the database's 200ms", got)
			}
		}
	}
	openLimited := func(u string) (<-chan *postgres.Store, <-chan error) {
		stores, errs := make(chan *postgres.Store, 1), make(chan error, 1)
		go func() {
			s, err := postgres.Open(context.Background(), withSetting(u, limit), postgres.Options{MaxConns: 4})
			errs <- err
			stores <- s
		}()
		return stores, errs
	}

	t.Run("in a transaction", func(t *testing.T) {
		ctx := context.Background()
		// As replicas of the build before migration 6 left the schema.
		u := freshSchema(t)
		openNow(t, u).Close()
		c := connect(t, u)
		for _, q := range []string{
			`ALTER TABLE sessions DROP COLUMN store_id, DROP COLUMN merchant_ref, DROP COLUMN updated_key`,
			`DELETE FROM schema_migrations WHERE version = 6`,
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		// A transaction that read sessions: the migration's ALTER TABLE
		// waits for it.
		hc := connect(t, u)
		tx, err := hc.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT count(*) FROM sessions`); err != nil {
			t.Fatal(err)
		}
		stores, errs := openLimited(u)
		waitForLockWait(t, c, "ALTER TABLE sessions")
		time.Sleep(500 * time.Millisecond) // past the statement_timeout
		tx.Rollback(ctx)
		if err := wait(t, errs); err != nil {
			t.Fatalf("open with a migration longer than the statement_timeout: %v", err)
		}
		s := <-stores
		defer s.Close()
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = 6`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("migration 6 recorded %d times, %v", n, err)
		}
		if err := c.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE updated_key IS NULL`).Scan(&n); err != nil {
			t.Fatalf("sessions.updated_key: %v", err)
		}
		check(t, s)
	})

	t.Run("outside a transaction", func(t *testing.T) {
		u, c := beforeMigration8(t)
		release := holdOutbox(t, u) // the concurrent build waits for it
		stores, errs := openLimited(u)
		waitForIndexBuild(t, c)
		time.Sleep(500 * time.Millisecond) // past the statement_timeout
		release()
		if err := wait(t, errs); err != nil {
			t.Fatalf("open with a concurrent index build longer than the statement_timeout: %v", err)
		}
		s := <-stores
		defer s.Close()
		checkMigration8(t, c)
		check(t, s)
	})
}

// TestContentionOutlastingTheRetriesIsStoreUnavailable: a database or role
// with a lock_timeout ends a lock wait with 55P03, which the store retries
// as a lost race, forty times. When every attempt loses (a lock held
// longer than the retries last), the transaction wrote nothing and the same
// request may succeed later: store_unavailable, 503 with Retry-After, as a
// statement_timeout's cut is. It was an internal error, 500, which reads
// as a fault of the server and of unknown outcome.
func TestContentionOutlastingTheRetriesIsStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	u := freshSchema(t)
	s := open(t, u)
	limited := open(t, withSetting(u, "lock_timeout=20ms"))

	release := holdNumber(t, s)
	defer release()
	attempts := 0
	err := limited.Update(ctx, func(tx storage.Tx) error {
		attempts++
		_, err := tx.NextSequence("m1", "held")
		return err
	})
	if fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" {
		t.Fatalf("a lock wait cut by lock_timeout on each of %d attempts: %v (kind %v, code %s), want store_unavailable", attempts, err, fault.KindOf(err), fault.CodeOf(err))
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("the error does not keep the database's: %v", err)
	}
	if attempts < 2 {
		t.Fatalf("%d attempts: a lost race is run again", attempts)
	}
	release()
	nextNumberIs(t, s, 2, "an attempt that lost took one")
}

// holdNumber takes m1's "held" number in a transaction of s and holds it,
// its row locked, until release, which reports the holder's failure.
func holdNumber(t *testing.T, s *postgres.Store) (release func()) {
	t.Helper()
	holding, done := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Update(context.Background(), func(tx storage.Tx) error {
			if _, err := tx.NextSequence("m1", "held"); err != nil {
				return err
			}
			close(holding)
			<-done
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-held:
		t.Fatalf("the holder: %v", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			if err := <-held; err != nil {
				t.Errorf("the holder: %v", err)
			}
		})
	}
}

// nextNumberIs checks that m1's next "held" number is want: an Update that
// failed took none.
func nextNumberIs(t *testing.T, s *postgres.Store, want int64, why string) {
	t.Helper()
	var n int64
	if err := s.Update(context.Background(), func(tx storage.Tx) error {
		var err error
		n, err = tx.NextSequence("m1", "held")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("next number %d, want %d: %s", n, want, why)
	}
}
