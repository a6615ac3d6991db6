package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// lockMigrate is the database-wide migration lock of older builds
// (postgres.legacyLockMigrate), which a replica of such a build waits for
// with a plain pg_advisory_lock, and this build also takes while migration 8
// is pending.
const lockMigrate int64 = 0x6b61737361_01

// beforeMigration8 gives a schema as replicas of the build before migration 8
// left it: migrated to 7, without outbox_merchant_pending.
func beforeMigration8(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	u := freshSchema(t)
	openNow(t, u).Close()
	c := connect(t, u)
	for _, q := range []string{
		`DROP INDEX outbox_merchant_pending`,
		`DELETE FROM schema_migrations WHERE version = 8`,
	} {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return u, c
}

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// outboxRow inserts a message of merchant m through c.
func outboxRow(ctx context.Context, c *pgx.Conn, id string) error {
	_, err := c.Exec(ctx, `INSERT INTO outbox (id, merchant_id, created_key, next_key, done, body) VALUES ($1, 'm1', '\x00', '\x00', false, '\x7b7d')`, id)
	return err
}

// holdOutbox opens a transaction that has written to outbox and stays open
// until the returned func ends it: an index build waits for it.
func holdOutbox(t *testing.T, u string) func() {
	t.Helper()
	ctx := context.Background()
	c := connect(t, u)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, merchant_id, created_key, next_key, done, body) VALUES ('held', 'm1', '\x00', '\x00', false, '\x7b7d')`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	end := func() { once.Do(func() { tx.Commit(ctx) }) }
	t.Cleanup(end)
	return end
}

// waitForIndexBuild waits until a backend of the schema's database runs a
// CREATE INDEX that waits on a lock.
func waitForIndexBuild(t *testing.T, c *pgx.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%CREATE INDEX%outbox_merchant_pending%'
			AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no index build of outbox_merchant_pending started")
}

// waitForPidLockWait waits until the backend pid waits on a lock.
func waitForPidLockWait(t *testing.T, c *pgx.Conn, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock'`, int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("backend %d does not wait on a lock", pid)
}

// waitForLockAsked waits until n backends of the schema's database have
// asked for an advisory transaction lock, waiting or polling for it (whose
// tries end their transaction and begin another) or holding it.
func waitForLockAsked(t *testing.T, c *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var got int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND (query LIKE '%advisory_xact_lock%' OR query LIKE 'ROLLBACK; BEGIN%')`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d backends asked for an advisory lock", n)
}

func checkMigration8(t *testing.T, c *pgx.Conn) {
	t.Helper()
	var valid bool
	var def string
	if err := c.QueryRow(context.Background(), `SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indexrelid = to_regclass('outbox_merchant_pending')`).Scan(&valid, &def); err != nil {
		t.Fatalf("outbox_merchant_pending: %v", err)
	}
	if !valid || !strings.Contains(def, "(merchant_id, next_key, id) WHERE (NOT done)") {
		t.Fatalf("outbox_merchant_pending valid %v, %s", valid, def)
	}
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations WHERE version = 8`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 8 recorded %d times, %v", n, err)
	}
}

func openAsync(u string) <-chan error {
	done := make(chan error, 1)
	go func() {
		s, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 4})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	return done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("open did not return in 30 s")
		return nil
	}
}

// TestMigration8LeavesOutboxWritable: the first replica of a newer build
// builds outbox_merchant_pending while replicas of the older build go on
// writing notifications. Before, the index was built by a plain CREATE INDEX
// in the migration's transaction, whose lock stopped every insert into outbox
// (every operation that announces a notification) for the whole build.
func TestMigration8LeavesOutboxWritable(t *testing.T) {
	ctx := context.Background()
	u, c := beforeMigration8(t)
	end := holdOutbox(t, u) // keeps the build from finishing while we write
	done := openAsync(u)
	waitForIndexBuild(t, c)
	if _, err := c.Exec(ctx, `SET lock_timeout = '2s'`); err != nil {
		t.Fatal(err)
	}
	if err := outboxRow(ctx, c, "during"); err != nil {
		t.Errorf("insert into outbox during the migration: %v", err)
	}
	end()
	if err := wait(t, done); err != nil {
		t.Fatalf("open: %v", err)
	}
	checkMigration8(t, c)
}

// TestMigration8RebuildsAnInvalidIndex: a build cut off midway (the replica
// killed, the statement cancelled) leaves the index INVALID; the next start
// drops it and builds it again rather than taking it as built or failing on
// its name.
func TestMigration8RebuildsAnInvalidIndex(t *testing.T) {
	ctx := context.Background()
	u, c := beforeMigration8(t)
	for _, id := range []string{"a", "b"} {
		if err := outboxRow(ctx, c, id); err != nil {
			t.Fatal(err)
		}
	}
	// A unique build over two rows of one merchant fails, leaving the name
	// taken by an invalid index, as a cut-off concurrent build does.
	_, err := c.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY outbox_merchant_pending ON outbox (merchant_id)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("failed build: %v", err)
	}
	if err := wait(t, openAsync(u)); err != nil {
		t.Fatalf("open: %v", err)
	}
	checkMigration8(t, c)
}

// TestReplicasStartingTogetherBuildMigration8Once: two replicas of the newer
// build start while the index is being built; both open. A replica waiting
// for the migration lock must not hold a snapshot meanwhile: a concurrent
// index build waits for every older snapshot, and the one holding the lock
// would wait for the one waiting for it.
//
// The build ends once the second is seen asking for the lock: a fixed
// sleep (300 ms) let a loaded machine end it before the second got there,
// and the test passed without the wait it is about.
func TestReplicasStartingTogetherBuildMigration8Once(t *testing.T) {
	u, c := beforeMigration8(t)
	end := holdOutbox(t, u)
	first := openAsync(u)
	waitForIndexBuild(t, c)
	second := openAsync(u)
	waitForLockAsked(t, c, 2) // the holder's and the second's
	end()
	if err := wait(t, first); err != nil {
		t.Errorf("first open: %v", err)
	}
	if err := wait(t, second); err != nil {
		t.Errorf("second open: %v", err)
	}
	checkMigration8(t, c)
}

// TestMigration8WithAnOlderReplicaStarting: a replica of the older build,
// which waits for the migration lock with pg_advisory_lock (holding a
// snapshot), starts while the index is built. The database breaks the cycle
// (a deadlock error, in either of the two); the newer replica still opens,
// with migration 8 recorded once and its index valid.
func TestMigration8WithAnOlderReplicaStarting(t *testing.T) {
	ctx := context.Background()
	u, c := beforeMigration8(t)
	end := holdOutbox(t, u)
	done := openAsync(u)
	waitForIndexBuild(t, c)
	old := connect(t, u)
	oldDone := make(chan error, 1)
	go func() {
		_, err := old.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockMigrate)
		if err == nil {
			_, err = old.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockMigrate)
		}
		oldDone <- err
	}()
	// The older replica waits for the lock before the build may end: a
	// fixed sleep (300 ms) let a loaded machine end it first, and the test
	// passed without the cycle it is about.
	waitForPidLockWait(t, c, old.PgConn().PID())
	end()
	if err := wait(t, done); err != nil {
		t.Fatalf("open: %v", err)
	}
	checkMigration8(t, c)
	var pe *pgconn.PgError
	if err := wait(t, oldDone); err != nil && !(errors.As(err, &pe) && pe.Code == "40P01") {
		t.Errorf("older replica's lock: %v", err)
	}
}

// TestStartWithoutCreateRights: a replica whose database user may read and
// write the tables but not create any (the schema migrated by its owner)
// starts once there is nothing to migrate. Before, every start ran CREATE
// TABLE IF NOT EXISTS schema_migrations, which PostgreSQL refuses without the
// CREATE right on the schema even when the table exists.
func TestStartWithoutCreateRights(t *testing.T) {
	ctx := context.Background()
	u := freshSchema(t)
	openNow(t, u).Close()
	admin := connect(t, u)
	var schema string
	if err := admin.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role := "kassa_t_app_" + strings.TrimPrefix(schema, "kassa_t_")
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
		t.Skipf("cannot create a role: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), `DROP OWNED BY `+role)
		admin.Exec(context.Background(), `DROP ROLE `+role)
	})
	for _, q := range []string{
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.User(role)
	s, err := postgres.Open(ctx, pu.String(), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open as a user without CREATE: %v", err)
	}
	s.Close()
}

// TestMigrationOutlivesOpenDeadline: Open's deadline bounds reaching the
// database, not a migration under way. Before, kassa serve's one-minute
// deadline cancelled a migration that took longer (a large table's index
// build, one waiting on a long transaction), which rolled it back, so each
// start began it again and none finished.
func TestMigrationOutlivesOpenDeadline(t *testing.T) {
	u, c := beforeMigration8(t)
	release := holdOutbox(t, u) // the concurrent build waits for it
	done := make(chan error, 1)
	// Open's context ends once the migration is under way, as a deadline
	// would. A deadline of 500 ms, set before, could end while a loaded
	// machine was still connecting, and no migration began.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 4})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	waitForIndexBuild(t, c)
	cancel()
	time.Sleep(time.Second) // time for the end to reach the build, were it tied to Open's context
	release()
	if err := wait(t, done); err != nil {
		t.Fatalf("open with the migration past its deadline: %v", err)
	}
	checkMigration8(t, c)
}

// TestOpenFailsFastOnAnUnreachableDatabase: with the migration free of the
// deadline, a database that cannot be reached still fails Open at once, not
// at its deadline: the deadline is ten minutes, and a refused connection
// fails in milliseconds, so a guard of half a minute tells the two apart
// whatever the load of the machine.
func TestOpenFailsFastOnAnUnreachableDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := postgres.Open(ctx, "postgres://kassa@"+addr+"/kassa", postgres.Options{})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("opened a database nobody serves")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Open of an unreachable database still waits after 30 s, with ten minutes to its deadline")
	}
}

// TestStatusIndexWaitsForItsExtension: migration 13's index needs the
// btree_gin extension, which a user without CREATE on the database cannot
// make. Such a user (owning its schema and tables, in a database another
// role owns) still starts and serves, with orders_statuses alone; the start
// warns once, naming the SQL a DBA runs, and leaves the migration pending.
// Once the extension exists, the next start of the owner builds the index
// and records it; a start of a user that only reads and writes the tables
// cannot build it and still starts, with one warning, and records an index
// the DBA built.
func TestStatusIndexWaitsForItsExtension(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	admin := connect(t, base)
	name := fmt.Sprintf("kassa_t_ext_%d", time.Now().UnixNano()%1_000_000_000)
	role := name + "_app"
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
		t.Skipf("cannot create a role: %v", err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		admin.Exec(ctx, `DROP ROLE `+role)
		t.Skipf("cannot create a database: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`)
		admin.Exec(context.Background(), `DROP ROLE `+role)
	})
	du, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	du.Path = "/" + name
	dba := connect(t, du.String())
	if _, err := dba.Exec(ctx, `CREATE SCHEMA app AUTHORIZATION `+role); err != nil {
		t.Fatal(err)
	}
	du.User = url.User(role)
	q := du.Query()
	q.Set("search_path", "app")
	du.RawQuery = q.Encode()
	u := du.String()

	var logs bytes.Buffer
	s, err := postgres.Open(ctx, u, postgres.Options{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open without the right to create the extension: %v", err)
	}
	f := ordertest.New()
	o := f.Order(t)
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.View(ctx, func(tx storage.Tx) error {
		page, err := tx.ListOrders(o.MerchantID, storage.OrderQuery{Status: []order.Status{order.StatusUncaptured}})
		n = len(page.Orders)
		return err
	}); err != nil || n != 1 {
		t.Fatalf("list by status: %d orders, %v", n, err)
	}
	s.Close()
	c := connect(t, u)
	indexes := func() (merchantStatuses, statuses bool, recorded int) {
		t.Helper()
		if err := c.QueryRow(ctx, `SELECT to_regclass('orders_merchant_statuses') IS NOT NULL, to_regclass('orders_statuses') IS NOT NULL,
			(SELECT count(*) FROM schema_migrations WHERE version = 13)`).Scan(&merchantStatuses, &statuses, &recorded); err != nil {
			t.Fatal(err)
		}
		return
	}
	if ms, st, rec := indexes(); ms || !st || rec != 0 {
		t.Errorf("without the extension: orders_merchant_statuses %v, orders_statuses %v, migration 13 recorded %d; want false, true, 0", ms, st, rec)
	}
	warning := logs.String()
	if strings.Count(warning, "level=WARN") != 1 || !strings.Contains(warning, `sql="CREATE EXTENSION IF NOT EXISTS btree_gin; CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_merchant_statuses ON \"app\".orders USING gin (merchant_id, statuses);"`) ||
		!strings.Contains(warning, "0013_orders_merchant_statuses.sql") {
		t.Errorf("want one warning naming the SQL to run, got:\n%s", warning)
	}

	// The DBA makes the extension. The replicas run as a user with only
	// USAGE and SELECT, INSERT, UPDATE, DELETE (the owner started first, as
	// docs/postgres.md says): not owning orders, they cannot build the
	// index, and must still start, leaving the migration to the owner with
	// one warning. Before, each failed its start with "must be owner of
	// table orders", so restarting them took the service down.
	if _, err := dba.Exec(ctx, `CREATE EXTENSION btree_gin`); err != nil {
		t.Fatal(err)
	}
	app := name + "_rw"
	for _, q := range []string{`CREATE ROLE ` + app + ` LOGIN`, `GRANT USAGE ON SCHEMA app TO ` + app,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA app TO ` + app} {
		if _, err := dba.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // before the database's drop, which runs later: its grants go first
		dba.Exec(context.Background(), `DROP OWNED BY `+app)
		admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+app)
	})
	au, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	au.User = url.User(app)
	logs.Reset()
	s, err = postgres.Open(ctx, au.String(), postgres.Options{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open as a user that does not own the tables, with the extension made: %v", err)
	}
	s.Close()
	if ms, st, rec := indexes(); ms || !st || rec != 0 {
		t.Errorf("after a start of a user not owning orders: orders_merchant_statuses %v, orders_statuses %v, migration 13 recorded %d; want false, true, 0", ms, st, rec)
	}
	if w := logs.String(); strings.Count(w, "level=WARN") != 1 || !strings.Contains(w, "owner") ||
		!strings.Contains(w, `CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_merchant_statuses ON \"app\".orders USING gin (merchant_id, statuses);`) {
		t.Errorf("want one warning naming the owner and the SQL, got:\n%s", w)
	}

	// The next start of the owner builds the index.
	logs.Reset()
	s, err = postgres.Open(ctx, u, postgres.Options{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if ms, st, rec := indexes(); !ms || !st || rec != 1 {
		t.Errorf("with the extension: orders_merchant_statuses %v, orders_statuses %v, migration 13 recorded %d; want true, true, 1", ms, st, rec)
	}
	var valid bool
	if err := c.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'orders_merchant_statuses'::regclass`).Scan(&valid); err != nil || !valid {
		t.Errorf("orders_merchant_statuses valid %v: %v", valid, err)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a start with the extension warned:\n%s", logs.String())
	}

	// An index the DBA built (the SQL the warning names), not yet recorded:
	// a start of the user not owning orders records it, with no DDL.
	if _, err := dba.Exec(ctx, `DELETE FROM app.schema_migrations WHERE version = 13`); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	s, err = postgres.Open(ctx, au.String(), postgres.Options{MaxConns: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open as a user not owning orders, with the index built: %v", err)
	}
	s.Close()
	if ms, st, rec := indexes(); !ms || !st || rec != 1 {
		t.Errorf("index built, then a start of a user not owning orders: orders_merchant_statuses %v, orders_statuses %v, migration 13 recorded %d; want true, true, 1", ms, st, rec)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a start with the index built warned:\n%s", logs.String())
	}
}

// schemaURL is u with its search_path set to path (a list, quoted as
// PostgreSQL reads it).
func schemaURL(t *testing.T, u, path string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("search_path", path)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// noTransactionIndexes lists which of the no-transaction migrations'
// indexes schema holds, valid.
func noTransactionIndexes(t *testing.T, c *pgx.Conn, schema string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND i.indisvalid AND c.relname = ANY($2) ORDER BY 1`,
		schema, []string{"auth_tokens_expires", "orders_merchant_statuses", "outbox_done", "outbox_merchant_pending", "settlement_transactions_id"})
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestMigrationsInASchemaNamedWithCapitals: a deployment's schema may be
// named with capitals (search_path="Kassa", quoted). The check whether a
// no-transaction migration's index is already built must look in that
// schema: read as an identifier, its name folded to lower case named
// another schema (a deployment in "kassa" beside one in "Kassa"), whose
// indexes were taken for this one's, or none, failing every first start.
func TestMigrationsInASchemaNamedWithCapitals(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	admin := connect(t, base)
	lower := fmt.Sprint("kassa_t_caps_", time.Now().UnixNano())
	upper := strings.Replace(lower, "kassa_t_caps_", "Kassa_T_Caps_", 1)
	for _, s := range []string{lower, upper} {
		if _, err := admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{s}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), base); err == nil {
				c.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{s}.Sanitize()+` CASCADE`)
				c.Close(context.Background())
			}
		})
	}
	// The deployment of the lower-case name is migrated first.
	openNow(t, schemaURL(t, base, lower)).Close()
	want := noTransactionIndexes(t, admin, lower)
	if len(want) < 4 {
		t.Fatalf("the lower-case schema holds only %v", want)
	}
	s, err := postgres.Open(ctx, schemaURL(t, base, pgx.Identifier{upper}.Sanitize()), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open in schema %q: %v", upper, err)
	}
	s.Close()
	if got := noTransactionIndexes(t, admin, upper); !slices.Equal(got, want) {
		t.Errorf("schema %q holds %v, want %v as the other schema", upper, got, want)
	}
}

// TestInvalidIndexOfAnotherSchemaLeftAlone: a deployment whose search path
// goes on to another deployment's schema (the default "$user", public,
// with a schema named after its role beside one in public) leaves that
// schema's index alone when it builds its own: one left INVALID there (a
// build cut off, or under way) was found by its name through the search
// path and dropped, as if it were this schema's.
func TestInvalidIndexOfAnotherSchemaLeftAlone(t *testing.T) {
	ctx := context.Background()
	base := pgtest.URL(t)
	admin := connect(t, base)
	own, other := fmt.Sprint("kassa_t_own_", time.Now().UnixNano()), fmt.Sprint("kassa_t_other_", time.Now().UnixNano())
	for _, s := range []string{own, other} {
		if _, err := admin.Exec(ctx, `CREATE SCHEMA `+s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), base); err == nil {
				c.Exec(context.Background(), `DROP SCHEMA `+s+` CASCADE`)
				c.Close(context.Background())
			}
		})
	}
	for _, q := range []string{`CREATE TABLE ` + other + `.outbox (merchant_id text)`,
		`INSERT INTO ` + other + `.outbox VALUES ('m1'), ('m1')`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err := admin.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY outbox_merchant_pending ON `+other+`.outbox (merchant_id)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("failed build: %v", err)
	}
	s, err := postgres.Open(ctx, schemaURL(t, base, own+","+other), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.Close()
	var left bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'outbox_merchant_pending')`, other).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if !left {
		t.Errorf("the other schema's invalid outbox_merchant_pending was dropped")
	}
	if got := noTransactionIndexes(t, admin, own); !slices.Contains(got, "outbox_merchant_pending") {
		t.Errorf("own schema's indexes %v, want outbox_merchant_pending among them", got)
	}
}
