package postgres

import (
	"context"
	"testing"
	"time"

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
		done <- withSessionLock(context.Background(), a.pool, lockMigrate, "migration", func(*pgxpool.Conn) error {
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
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, legacyLockMigrate); err != nil {
		t.Fatal(err)
	}
	defer c.Exec(ctx, `SELECT pg_advisory_unlock($1)`, legacyLockMigrate)

	wait, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	s, err := Open(wait, fresh, Options{MaxConns: 4})
	cancel()
	if err == nil {
		s.Close()
		t.Error("a fresh schema was migrated while an older build held the migration lock")
	}
	wait, cancel = context.WithTimeout(ctx, 3*time.Second)
	s, err = Open(wait, migratedURL, Options{MaxConns: 4})
	cancel()
	if err != nil {
		t.Errorf("open of a migrated schema while an older build migrates another: %v", err)
	} else {
		s.Close()
	}
}
