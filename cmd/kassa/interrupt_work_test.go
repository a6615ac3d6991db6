package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// These tests interrupt settle, store copy and store check once their work
// is under way, past the wait for the bolt store that
// TestInterruptedCommandsSayWhatTheyLeft interrupts: the command runs in this
// process, which sends itself SIGINT, and each says what it left as it
// does when interrupted earlier, with exit 130.

// runInterrupted runs kassa args in this process, sends the process SIGINT
// once busy says the command is where the test wants it, and returns its
// exit code and its stdout and stderr.
func runInterrupted(t *testing.T, busy func() bool, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(args, &out, &errb) }()
	for deadline := time.Now().Add(20 * time.Second); !busy(); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			t.Fatalf("kassa %s ended before it was interrupted: exit %d, stderr %s", strings.Join(args, " "), code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kassa %s never got to where it is interrupted", strings.Join(args, " "))
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case code := <-done:
		return code, out.String(), errb.String()
	case <-time.After(20 * time.Second):
		t.Fatalf("kassa %s did not end within 20 s of SIGINT: %s", strings.Join(args, " "), errb.String())
	}
	return 0, "", ""
}

// lockWaiter reports whether a session of the database at dbURL waits on a
// lock in a statement that contains query. It looks on a connection of its
// own: one in a transaction (the lock holder's) sees pg_stat_activity as it
// was at its first look.
func lockWaiter(t *testing.T, dbURL, query string) func() bool {
	t.Helper()
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return func() bool {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0`, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
}

// TestSettleInterruptedWhileItsRunWaits: settle on PostgreSQL, interrupted
// while its run waits for the settlement queue (a table lock the test
// holds, as a long transaction elsewhere would), says no settlement was
// written and exits 130; none was, and a rerun once the lock is gone
// writes the settlement, once.
func TestSettleInterruptedWhileItsRunWaits(t *testing.T) {
	dbURL := pgtest.FreshSchema(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := kassa.New(db, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	captureOneLine(t, l, creds.MerchantID, "t", time.Now(), "tiles", 10000)
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `BEGIN; LOCK TABLE settlement_queue IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runInterrupted(t, lockWaiter(t, dbURL, "FROM settlement_queue"),
		"settle", "--store", "postgres", "--database-url", dbURL, "--data", t.TempDir())
	if want := "kassa settle: interrupted (SIGINT); no settlement was written\n"; code != 130 || out != "" || errs != want {
		t.Fatalf("settle interrupted while its run waits: exit %d, stdout %q, stderr %q; want 130, nothing, %q", code, out, errs, want)
	}
	if _, err := holder.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	page, err := l.ListSettlements(ctx, creds.MerchantID, settlement.Query{})
	if err != nil || len(page.Settlements) != 0 {
		t.Fatalf("settlements after the interrupted run: %+v %v, want none", page.Settlements, err)
	}
	var o, e bytes.Buffer
	if code := run([]string{"settle", "--store", "postgres", "--database-url", dbURL, "--data", t.TempDir()}, &o, &e); code != 0 || !strings.HasSuffix(o.String(), "\n1 settlements\n") {
		t.Fatalf("the rerun: exit %d, stdout %q, stderr %s", code, o.String(), e.String())
	}
	page, err = l.ListSettlements(ctx, creds.MerchantID, settlement.Query{})
	if err != nil || len(page.Settlements) != 1 || page.Settlements[0].GrossAmount.MinorUnits != 10000 {
		t.Fatalf("settlements after the rerun: %+v %v, want one of 100.00", page.Settlements, err)
	}
}

// TestStoreCopyInterruptedDuringLoad: store copy, interrupted while its
// Load waits to lock the database's tables (a lock the test holds on one),
// says nothing was copied and exits 130; the database holds no record, and
// a rerun copies.
func TestStoreCopyInterruptedDuringLoad(t *testing.T) {
	dbURL := pgtest.FreshSchema(t)
	t.Setenv("KASSA_KEY", "")
	ctx := context.Background()
	dir := oneMerchantStore(t)
	// The schema is migrated first, so that the test has a table to lock.
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `BEGIN; LOCK TABLE signing_key IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	code, out, errs := runInterrupted(t, lockWaiter(t, dbURL, "LOCK TABLE merchants"),
		"store", "copy", "--data", dir, "--database-url", dbURL)
	if want := "kassa store copy: interrupted (SIGINT); nothing was copied (the database holds no record; its schema is migrated)\n"; code != 130 || out != "" || errs != want {
		t.Fatalf("store copy interrupted during Load: exit %d, stdout %q, stderr %q; want 130, nothing, %q", code, out, errs, want)
	}
	if _, err := holder.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	records := func() int {
		t.Helper()
		var n int
		if err := holder.QueryRow(ctx, `SELECT (SELECT count(*) FROM merchants) + (SELECT count(*) FROM sequences) + (SELECT count(*) FROM signing_key)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := records(); n != 0 {
		t.Fatalf("records in the database after the interrupted copy: %d, want none", n)
	}
	rerunCopiesOneMerchant(t, holder, dir, dbURL)
}

// TestStoreCopyInterruptedWhileTheDatabaseOpens: store copy, interrupted
// while its open of the database waits for the schema's migration lock
// (held by the test, as by a replica migrating), says nothing was copied
// and exits 130; a rerun copies.
func TestStoreCopyInterruptedWhileTheDatabaseOpens(t *testing.T) {
	dbURL := pgtest.FreshSchema(t)
	t.Setenv("KASSA_KEY", "")
	ctx := context.Background()
	dir := oneMerchantStore(t)
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	// The migration lock (storage/postgres: lockMigrate, schemaKey).
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(1801548545, hashtext(coalesce(current_schema(), '')))`); err != nil {
		t.Fatal(err)
	}
	waiting := func() bool {
		var n int
		if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND position('pg_try_advisory_xact_lock' in query) > 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	code, out, errs := runInterrupted(t, waiting, "store", "copy", "--data", dir, "--database-url", dbURL)
	if want := "kassa store copy: interrupted (SIGINT); nothing was copied\n"; code != 130 || out != "" || errs != want {
		t.Fatalf("store copy interrupted while the database opens: exit %d, stdout %q, stderr %q; want 130, nothing, %q", code, out, errs, want)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		t.Fatal(err)
	}
	rerunCopiesOneMerchant(t, holder, dir, dbURL)
}

// TestStoreCheckInterruptedDuringCheck: store check, interrupted while it
// walks the records (here as it prints the first problem it found, an
// undecodable record), says the check did not finish and how many problems
// it found before, and exits 130, without the verdict of a finished check.
func TestStoreCheckInterruptedDuringCheck(t *testing.T) {
	dir := soundStore(t)
	bdb, err := bbolt.Open(filepath.Join(dir, "kassa.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket([]byte("custtokens"))
		k, _ := b.Cursor().First()
		return b.Put(bytes.Clone(k), []byte(`{"tokenId": 7`))
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The interrupt lands in the walk: the first problem's line is written
	// once the signal has been caught and the check's context ended.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT)
	defer signal.Stop(caught)
	var out bytes.Buffer
	interrupted := false
	stdout := writerFunc(func(p []byte) (int, error) {
		if !interrupted {
			interrupted = true
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			select {
			case <-caught:
			case <-time.After(5 * time.Second):
				t.Error("SIGINT was not delivered")
			}
			time.Sleep(200 * time.Millisecond) // for catchInterrupts to end the context
		}
		return out.Write(p)
	})
	var errb bytes.Buffer
	code := run([]string{"store", "check", "--data", dir}, stdout, &errb)
	if !interrupted {
		t.Fatalf("store check found no problem to be interrupted at: exit %d, %s", code, errb.String())
	}
	if want := "kassa store check: interrupted (SIGINT); the check did not finish (1 problems found before it; a check writes nothing)\n"; code != 130 || errb.String() != want {
		t.Fatalf("store check interrupted during its walk: exit %d, stderr %q; want 130, %q", code, errb.String(), want)
	}
	if !strings.HasPrefix(out.String(), "record customer tokens ") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("store check interrupted during its walk printed %q, want the problem found only", out.String())
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// oneMerchantStore is the data directory of a bolt store holding one
// sandbox merchant, for store copy.
func oneMerchantStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := kassa.New(st, kassa.Options{}).EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m", Sandbox: true}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rerunCopiesOneMerchant runs store copy of dir into dbURL again, which must
// copy, and finds the one merchant there through holder.
func rerunCopiesOneMerchant(t *testing.T, holder *pgx.Conn, dir, dbURL string) {
	t.Helper()
	var o, e bytes.Buffer
	if code := run([]string{"store", "copy", "--data", dir, "--database-url", dbURL}, &o, &e); code != 0 || !strings.Contains(o.String(), "copied ") {
		t.Fatalf("the rerun: exit %d, stdout %q, stderr %s", code, o.String(), e.String())
	}
	var merchants int
	if err := holder.QueryRow(context.Background(), `SELECT count(*) FROM merchants`).Scan(&merchants); err != nil || merchants != 1 {
		t.Fatalf("merchants after the rerun: %d %v, want 1", merchants, err)
	}
}
