package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestStartLocksExcludeThroughATransactionPooler: behind PgBouncer in
// transaction mode, a replica holding the migration lock keeps another from
// migrating. The lock was a session lock taken by a statement of its own, so
// it stayed with whichever server connection ran that statement, which the
// pooler then gave to other clients: another replica's try on that same
// server connection was granted (advisory locks nest in a session), and
// replicas starting together migrated at once (one failed with a duplicate
// key in pg_type), and the unlock, run wherever, left the lock behind.
func TestStartLocksExcludeThroughATransactionPooler(t *testing.T) {
	u := pgtest.PoolerDatabase(t)
	ctx := context.Background()
	a, err := Open(ctx, u, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- withAdvisoryLock(ctx, a.pool, lockMigrate, "migration", func(*pgx.Conn) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	wait, cancel := context.WithTimeout(ctx, time.Second)
	b, err := Open(wait, u, Options{MaxConns: 4})
	cancel()
	if err == nil {
		b.Close()
		t.Error("a second store opened, migration lock granted, while the first held it")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Released: no server connection of the pooler keeps it.
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1
		AND objid::bigint = `+schemaKey+`::bigint & 4294967295 AND objsubid = 2 AND granted`, int64(lockMigrate)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("migration lock held %d times after it was released", n)
	}
	s, err := Open(ctx, u, Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open after the lock was released: %v", err)
	}
	s.Close()
}
