package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// migrated opens a store on a fresh schema, migrated to this build.
func migrated(t *testing.T) (*Store, string) {
	t.Helper()
	u := pgtest.FreshSchema(t)
	s, err := Open(context.Background(), u, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, u
}

// TestLocksOfOneSchemaLeaveAnotherAlone: two deployments in two schemas of
// one database do not wait for each other's migration lock, settlement run
// or status sweep. The lock ids were fixed numbers of the whole database, so
// a replica migrating (or waiting on a table lock while it migrates) in one
// schema held back the start of every replica of the other, and their
// settlement runs queued behind each other.
func TestLocksOfOneSchemaLeaveAnotherAlone(t *testing.T) {
	a, _ := migrated(t)
	b, bURL := migrated(t)

	// A replica of schema a holds its migration lock.
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- withAdvisoryLock(context.Background(), a.pool, lockMigrate, "migration", func(*pgx.Conn) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	s, err := Open(ctx, bURL, Options{MaxConns: 4})
	cancel()
	if err != nil {
		t.Errorf("open on schema b while schema a migrates: %v", err)
	} else {
		s.Close()
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A settlement run of schema a is under way.
	held = make(chan struct{})
	release = make(chan struct{})
	go func() {
		done <- a.Update(context.Background(), func(tx storage.Tx) error {
			if _, err := tx.PendingSettlementItems(10); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	// In the two-key space (objsubid 2), apart from the one-key hashes of
	// idempotency keys (objsubid 1), which could meet a fixed id before.
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND classid = $1 AND objsubid = 2 AND granted`, int64(lockSettlement)).Scan(&n); err != nil || n != 1 {
		t.Errorf("settlement lock in the two-key space: %d, %v", n, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	err = b.Update(ctx, func(tx storage.Tx) error {
		_, err := tx.PendingSettlementItems(10)
		return err
	})
	cancel()
	if err != nil {
		t.Errorf("settlement run on schema b while one runs on schema a: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMigrationExcludesAnOlderBuild: during a rolling upgrade a replica of a
// build before the per-schema locks migrates under one lock of the whole
// database. While a migration such a build also carries is pending, a start
// of this build waits for that lock; once they are all applied, it does not.
func TestMigrationExcludesAnOlderBuild(t *testing.T) {
	_, migratedURL := migrated(t)
	fresh := pgtest.FreshSchema(t)
	ctx := context.Background()
	old, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	c, err := old.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	// The older build waits with pg_advisory_lock, holding a snapshot, so
	// an index build another package's test runs at that moment may end its
	// wait as a deadlock (see migrate): it then tries again, as that build
	// would when restarted.
	for attempt := 1; ; attempt++ {
		_, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, legacyLockMigrate)
		var pe *pgconn.PgError
		if err == nil {
			break
		} else if attempt == 5 || !errors.As(err, &pe) || pe.Code != "40P01" {
			t.Fatal(err)
		}
	}
	defer c.Exec(ctx, `SELECT pg_advisory_unlock($1)`, legacyLockMigrate)

	wait, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	s, err := Open(wait, fresh, Options{MaxConns: 4})
	cancel()
	if err == nil {
		s.Close()
		t.Error("a fresh schema was migrated while an older build held the migration lock")
	}
	// Generous: it should not wait at all, and connecting on a loaded
	// machine may take a second or more.
	wait, cancel = context.WithTimeout(ctx, 30*time.Second)
	s, err = Open(wait, migratedURL, Options{MaxConns: 4})
	cancel()
	if err != nil {
		t.Errorf("open of a migrated schema while an older build migrates another: %v", err)
	} else {
		s.Close()
	}
}

// syncBuffer is a log destination safe for the goroutines that write it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestOpenLogsWhatItWaitsFor: a start held back by another session's
// migration lock, or by a migration waiting on a table another transaction
// has written, says so in the log, with the sessions in the way, instead of
// waiting silently (Open had no logger).
func TestOpenLogsWhatItWaitsFor(t *testing.T) {
	defer func(d time.Duration) { waitLogEvery = d }(waitLogEvery)
	waitLogEvery = 100 * time.Millisecond
	a, u := migrated(t)
	ctx := context.Background()

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	held := make(chan int)
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- withAdvisoryLock(ctx, a.pool, lockMigrate, "migration", func(c *pgx.Conn) error {
			held <- int(c.PgConn().PID())
			<-release
			return nil
		})
	}()
	pid := <-held
	// The start is ended once it has logged the holder, not at a fixed
	// deadline: a deadline of one second failed on a loaded machine, where
	// connecting took most of it and the start was cut before its first
	// log line was due.
	wait, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() {
		s, err := Open(wait, u, Options{MaxConns: 4, Logger: log})
		if err == nil {
			s.Close()
		}
		waiting <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), fmt.Sprintf("pid %d,", pid)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	err := <-waiting
	close(release)
	if err == nil || <-done != nil {
		t.Fatalf("open while the migration lock is held: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "waiting for the migration lock") || !strings.Contains(out, fmt.Sprintf("pid %d,", pid)) {
		t.Errorf("log while the migration lock is held names no holder (pid %d):\n%s", pid, out)
	}

	// Migration 8 pending, and a transaction that wrote outbox still open:
	// the index build waits for it.
	for _, q := range []string{`DROP INDEX outbox_merchant_pending`, `DELETE FROM schema_migrations WHERE version = 8`} {
		if _, err := a.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var holder int
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (id, merchant_id, created_key, next_key, done, body)
		VALUES ('held', 'm1', '\x00', '\x00', false, '\x7b7d') RETURNING pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	var logs2 syncBuffer
	opened := make(chan error, 1)
	go func() {
		s, err := Open(ctx, u, Options{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(&logs2, nil))})
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(logs2.String(), fmt.Sprintf("pid %d,", holder)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if out := logs2.String(); !strings.Contains(out, "waits for locks other sessions hold") || !strings.Contains(out, fmt.Sprintf("pid %d,", holder)) {
		t.Errorf("log of a migration blocked by pid %d names no blocker:\n%s", holder, out)
	}
	tx.Rollback(ctx)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
}
