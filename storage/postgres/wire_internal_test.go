package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// openFresh opens a store on a schema of its own, closed when the test ends.
func openFresh(t *testing.T, conns int32) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.FreshSchema(t), Options{MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestHeldWriteThatMissesFailsTheTransaction: an order update held back for
// the commit's round trip is still checked to change one row. Here the
// transaction is made to believe it holds the order at a version it does
// not have, so the held update changes nothing: the commit must then fail
// and take the rest of the transaction (an idempotency record, also held)
// with it, and a read sent after the held write must report its error.
func TestHeldWriteThatMissesFailsTheTransaction(t *testing.T) {
	s := openFresh(t, 4)
	ctx := context.Background()
	o := &order.Order{ID: "o1", MerchantID: "m1", CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()}
	if err := s.Update(ctx, func(st storage.Tx) error { return st.CreateOrder(o) }); err != nil {
		t.Fatal(err)
	}
	rec := &storage.IdempotencyRecord{MerchantID: "m1", Key: "k1", Fingerprint: "fp", Status: 200, Body: []byte(`{}`),
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	lie := func(st storage.Tx) (*order.Order, error) {
		t := st.(*tx)
		got, err := t.GetOrder("m1", "o1")
		if err != nil {
			return nil, err
		}
		got.Version = 7
		t.locked["m1/o1"] = 7
		return got, nil
	}

	err := s.Update(ctx, func(st storage.Tx) error {
		if _, err := st.GetIdempotency("m1", "k1"); err != nil {
			return err
		}
		got, err := lie(st)
		if err != nil {
			return err
		}
		if err := st.UpdateOrder(got); err != nil {
			t.Fatalf("a held update reported %v before it was sent", err)
		}
		return st.PutIdempotency(rec)
	})
	var pe *pgconn.PgError
	if fault.KindOf(err) != fault.Internal || !errors.As(err, &pe) || pe.Code != "KS001" {
		t.Fatalf("commit of a held update that changed no row: %v, want internal KS001", err)
	}

	err = s.Update(ctx, func(st storage.Tx) error {
		got, err := lie(st)
		if err != nil {
			return err
		}
		if err := st.UpdateOrder(got); err != nil {
			return err
		}
		_, err = st.GetIdempotency("m1", "k1")
		return err
	})
	if !errors.As(err, &pe) || pe.Code != "KS001" {
		t.Fatalf("read sent after a failing held update: %v, want its KS001", err)
	}

	err = s.View(ctx, func(st storage.Tx) error {
		got, err := st.GetOrder("m1", "o1")
		if err != nil {
			return err
		}
		if got.Version != 1 {
			t.Errorf("order version %d after two failed updates, want 1", got.Version)
		}
		r, err := st.GetIdempotency("m1", "k1")
		if r != nil {
			t.Errorf("idempotency record of a rolled-back transaction was stored: %+v", r)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The connections went back to the pool usable: a normal update works.
	if err := s.Update(ctx, func(st storage.Tx) error {
		got, err := st.GetOrder("m1", "o1")
		if err != nil {
			return err
		}
		if err := st.UpdateOrder(got); err != nil {
			return err
		}
		return st.PutIdempotency(rec)
	}); err != nil {
		t.Fatalf("update after the failed ones: %v", err)
	}
	if err := s.View(ctx, func(st storage.Tx) error {
		got, err := st.GetOrder("m1", "o1")
		if err == nil && got.Version != 2 {
			t.Errorf("version %d after one update, want 2", got.Version)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestHeldIdempotencyInsertConflict: a record held back for the commit
// whose key was stored meanwhile by a writer that skipped the advisory lock
// is refused at commit with the same Conflict PutIdempotency gives at once,
// and nothing of the transaction stays.
func TestHeldIdempotencyInsertConflict(t *testing.T) {
	s := openFresh(t, 4)
	ctx := context.Background()
	rec := func(fp string) *storage.IdempotencyRecord {
		return &storage.IdempotencyRecord{MerchantID: "m1", Key: "k1", Fingerprint: fp, Status: 200, Body: []byte(`{}`),
			CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	}
	err := s.Update(ctx, func(st storage.Tx) error {
		if r, err := st.GetIdempotency("m1", "k1"); r != nil || err != nil {
			t.Fatalf("fresh key: %v %v", r, err)
		}
		// Another writer, without the key's advisory lock, stores it first.
		if err := s.Update(ctx, func(other storage.Tx) error { return other.PutIdempotency(rec("other")) }); err != nil {
			t.Fatalf("other writer: %v", err)
		}
		if err := st.ScheduleTask(&storage.Task{ID: "t1", Kind: "k", DueAt: time.Now()}); err != nil {
			return err
		}
		return st.PutIdempotency(rec("mine"))
	})
	if fault.KindOf(err) != fault.Conflict || fault.CodeOf(err) != "idempotency_key_exists" {
		t.Fatalf("held insert of a key stored meanwhile: %v (%s), want Conflict idempotency_key_exists", err, fault.CodeOf(err))
	}
	if err := s.View(ctx, func(st storage.Tx) error {
		r, err := st.GetIdempotency("m1", "k1")
		if err != nil || r == nil || r.Fingerprint != "other" {
			t.Errorf("stored record %+v, %v: want the other writer's", r, err)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wantNoTasks(t, s, "the refused transaction's task was kept")
}

// wantNoTasks fails the test when s holds any task.
func wantNoTasks(t *testing.T, s *Store, why string) {
	t.Helper()
	if err := s.View(context.Background(), func(st storage.Tx) error {
		tasks, err := st.DueTasks(time.Now().Add(time.Minute), 10)
		if len(tasks) != 0 {
			t.Errorf("%s: %d tasks", why, len(tasks))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFailedRoundTripSticks: when the round trip that carries BEGIN fails
// before anything runs (here pgx cannot prepare the statement), the
// transaction may never have begun. A caller that carries on regardless
// must not get later statements autocommitted, nor a commit.
func TestFailedRoundTripSticks(t *testing.T) {
	s := openFresh(t, 1)
	ctx := context.Background()
	var first, second error
	err := s.Update(ctx, func(st storage.Tx) error {
		tx := st.(*tx)
		_, first = tx.scanRow("nothing", `SELECT body FROM no_such_table WHERE id = $1`, []any{"a"}, new([]byte))
		second = tx.ScheduleTask(&storage.Task{ID: "t1", Kind: "k", DueAt: time.Now()})
		if second == nil {
			_, second = tx.exec("task", `INSERT INTO tasks (id, due_key, body) VALUES ('t2', '\x00'::bytea, '{}'::bytea)`)
		}
		return nil // a careless caller
	})
	if first == nil || second == nil || err == nil {
		t.Fatalf("after a failed first round trip: read %v, later write %v, commit %v; want three errors", first, second, err)
	}
	wantNoTasks(t, s, "writes after the failed round trip were kept")
}

// TestCommitAnsweredThenConnectionEnded: the server answers COMMIT, then
// ends the connection before the round trip's last message (a termination at
// that moment). The change is committed, so Update must say so: an error
// would have a caller without an idempotency key apply it again.
func TestCommitAnsweredThenConnectionEnded(t *testing.T) {
	s := openFresh(t, 2)
	ctx := context.Background()
	afterCommitForTests = "select pg_terminate_backend(pg_backend_pid())"
	attempts := 0
	err := s.Update(ctx, func(tx storage.Tx) error {
		attempts++
		return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1", Name: "committed"})
	})
	afterCommitForTests = ""
	if err != nil || attempts != 1 {
		t.Fatalf("update: %v after %d attempts", err, attempts)
	}
	var name string
	if err := s.View(ctx, func(tx storage.Tx) error {
		m, err := tx.GetMerchant("m1")
		if err == nil {
			name = m.Name
		}
		return err
	}); err != nil || name != "committed" {
		t.Fatalf("after the update: %q %v", name, err)
	}
}

// TestCommitWaitingOnALockIsCancelled: a held write that travels with
// COMMIT waits on a lock held elsewhere (a LOCK TABLE, a long migration)
// past commitTimeout. Dropping the connection then would leave the server's
// side waiting, to commit once the lock is released, after the caller was
// told the outcome is unknown (a 500 for a capture that is applied later).
// The statement is cancelled instead and its answer read: nothing was
// written, and the error says the database was unavailable (503).
func TestCommitWaitingOnALockIsCancelled(t *testing.T) {
	u := pgtest.FreshSchema(t)
	ctx := context.Background()
	s, err := Open(ctx, u, Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	schedule := func(id string) error {
		return s.Update(ctx, func(tx storage.Tx) error {
			return tx.ScheduleTask(&storage.Task{ID: id, Kind: "autoCapture", MerchantID: "m1", OrderID: "o", DueAt: time.Now().Add(time.Hour)})
		})
	}
	// The connection has the statement prepared, as a busy server's have:
	// only the commit's round trip waits.
	if err := schedule("task-0"); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE tasks IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { commitTimeout = d }(commitTimeout)
	commitTimeout = 300 * time.Millisecond
	err = schedule("task-1")
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != "store_unavailable" {
		t.Errorf("commit that waited on a lock: %v; want store_unavailable", err)
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a commit left waiting on the server would land now
	var n int
	if err := holder.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE id = 'task-1'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the task was committed after its Update failed")
	}
}

// TestReadWhoseStatementFailedIsNoSuccess: a read whose COMMIT is answered
// ROLLBACK (a statement of it failed, and its function went on) reports an
// error. Only a COMMIT lost with its connection lets a read's result stand.
func TestReadWhoseStatementFailedIsNoSuccess(t *testing.T) {
	s := openFresh(t, 1)
	ctx := context.Background()
	var failed error
	err := s.View(ctx, func(st storage.Tx) error {
		tx := st.(*tx)
		if _, err := tx.GetMerchant("nobody"); err == nil {
			return errors.New("found a merchant in an empty store")
		}
		_, failed = tx.scanRow("nothing", `SELECT body FROM no_such_table WHERE id = $1`, []any{"a"}, new([]byte))
		return nil // a careless caller
	})
	if failed == nil || err == nil {
		t.Fatalf("read with a failed statement: statement %v, view %v; want both errors", failed, err)
	}
}

// TestSettleWaitsForASlot: at most cap(settling) lost commits are asked
// about at once, each on a connection beside the pool; one more waits for a
// slot, and past settleWait its outcome stays unknown without connecting.
func TestSettleWaitsForASlot(t *testing.T) {
	for range cap(settling) {
		settling <- struct{}{}
	}
	defer func() {
		for range cap(settling) {
			<-settling
		}
	}()
	xid := int64(1)
	w := &wire{probed: true, xid: &xid} // no pool: connecting would panic
	start := time.Now()
	if got := w.settle(context.Background()); got != "" {
		t.Fatalf("settle without a slot: %q, want unknown", got)
	}
	if waited := time.Since(start); waited < settleWait {
		t.Fatalf("gave up after %v, want settleWait (%v)", waited, settleWait)
	}
}
