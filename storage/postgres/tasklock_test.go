package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/storage"
)

// TestTaskWhoseOrderStaysLockedIsSetAside: a task transaction locks its
// order NOWAIT, and runs again while an API change holds it, forty times.
// When the order stays locked past those attempts (a change waiting on a
// row locked elsewhere, a transaction left open), the task is set aside
// like any task that failed, and the run goes on with the tasks behind
// it. The contention is the one order's, not the database's: had the run
// ended there as for an unreachable database, every task due after it
// would wait for as long as the order stayed locked.
func TestTaskWhoseOrderStaysLockedIsSetAside(t *testing.T) {
	ctx := context.Background()
	u := freshSchema(t)
	s := openNow(t, u)
	l := kassa.New(s, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := sandbox.Mint(&sandbox.TokenRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"},
		creds.MerchantID, "at_"+kassa.RandomSecret(20), time.Now(), l.AuthorizationTTL())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutAuthorization(ctx, auth); err != nil {
		t.Fatal(err)
	}
	desc, qty, price, vat := "Tiles", int64(1), int64(12500), int64(2500)
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, auth.Token, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{{Description: &desc, Quantity: &qty, UnitPrice: &price, Vat: &vat}},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Order
	// The locked order's task falls due first; one behind it is for an
	// order that is gone, which the run deletes as done.
	if err := s.Update(ctx, func(tx storage.Tx) error {
		if err := tx.ScheduleTask(&storage.Task{ID: "locked", Kind: kassa.TaskAutoCapture, MerchantID: creds.MerchantID, OrderID: o.ID, DueAt: time.Now().Add(-2 * time.Hour)}); err != nil {
			return err
		}
		return tx.ScheduleTask(&storage.Task{ID: "behind", Kind: kassa.TaskAutoCapture, MerchantID: creds.MerchantID, OrderID: "gone", DueAt: time.Now().Add(-time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}

	db, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	var n int
	if err := holder.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM orders WHERE id = $1 FOR UPDATE) l`, o.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("lock the order: %d rows, %v", n, err)
	}

	stats, err := l.RunTasks(ctx, 10)
	var aside *kassa.TasksSetAside
	if !errors.As(err, &aside) || len(aside.Failures) != 1 {
		t.Fatalf("RunTasks with the first task's order locked: %v (%+v), want the task set aside and the run gone on", err, stats)
	}
	if stats.Failed != 1 || stats.NothingToDo != 1 || stats.TasksProcessed != 2 {
		t.Fatalf("stats %+v, want the locked order's task failed and the one behind it done", stats)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The order's own tasks (its token's expiry, …) fall due later.
	left := map[string]*storage.Task{}
	if err := s.View(ctx, func(tx storage.Tx) error {
		due, err := tx.DueTasks(time.Now().Add(24*time.Hour), 100)
		for _, task := range due {
			left[task.ID] = task
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if left["behind"] != nil {
		t.Fatalf("the task behind the locked order's is left: %+v", left["behind"])
	}
	if task := left["locked"]; task == nil || task.Attempts != 1 || !task.DueAt.After(time.Now()) {
		t.Fatalf("the locked order's task: %+v, want it due again later, its attempt counted", task)
	}
}
