package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
)

func openNow(t *testing.T, dbURL string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dbURL, postgres.Options{MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ptr[T any](v T) *T { return &v }

// TestTwoReplicasCaptureOneOrder: two stores (two replicas' pools) capture
// the lines of one order at once, and every capture is also sent with the
// same Idempotency-Key through the other replica. Each line is captured
// exactly once, the amounts add up to the minor unit, and a key answered by
// both replicas answered the same bytes.
func TestTwoReplicasCaptureOneOrder(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	ledgers := []*kassa.Ledger{kassa.New(openNow(t, u), kassa.Options{}), kassa.New(openNow(t, u), kassa.Options{})}
	creds, _, err := ledgers[0].EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	authorize(t, ledgers[1], creds.MerchantID, "t")
	const lines = 16
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"}
	for i := range lines {
		req.OrderLines = append(req.OrderLines, order.LineInput{Description: ptr(fmt.Sprint("line ", i)), Quantity: ptr(int64(1)),
			UnitPrice: ptr(int64(1000 + i)), Vat: ptr(int64(2500))})
	}
	res, err := ledgers[0].CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", req)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Order
	var mu sync.Mutex
	answers := map[string][][]byte{}
	var wg sync.WaitGroup
	for i, l := range o.Uncaptured.Lines {
		for r := range 2 {
			wg.Go(func() {
				key := fmt.Sprint("cap-", i)
				got, err := ledgers[(i+r)%2].PartialCapture(ctx, kassa.Call{MerchantID: creds.MerchantID, IdempotencyKey: key}, o.ID,
					&capture.PartialRequest{OrderLines: []order.LineInput{{ID: ptr(l.ID)}}, TotalCaptureAmount: ptr(l.TotalAmount)})
				if err != nil {
					t.Errorf("capture %d via replica %d: %v", i, (i+r)%2, err)
					return
				}
				mu.Lock()
				answers[key] = append(answers[key], got.Body)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for k, bodies := range answers {
		if len(bodies) != 2 || !bytes.Equal(bodies[0], bodies[1]) {
			t.Errorf("key %s: %d answers, equal=%v", k, len(bodies), len(bodies) == 2 && bytes.Equal(bodies[0], bodies[1]))
		}
	}
	got, _, err := ledgers[1].GetOrder(ctx, creds.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Amounts()
	if len(got.Captured) != lines || a.Captured != o.Amounts().Uncaptured || a.Uncaptured != 0 {
		t.Fatalf("%d captures, captured %d of %d, uncaptured %d", len(got.Captured), a.Captured, o.Amounts().Uncaptured, a.Uncaptured)
	}
	// Gapless invoice numbers across replicas.
	var refs []string
	for _, c := range got.Captured {
		refs = append(refs, c.DocumentReference)
	}
	slices.Sort(refs)
	if len(slices.Compact(slices.Clone(refs))) != lines {
		t.Fatalf("document numbers repeat: %v", refs)
	}
}

// TestConcurrentOpenMigratesOnce: replicas starting together on an empty
// schema all open, and the schema is migrated once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	u := freshSchema(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 2})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("open: %v", err)
	}
	s := openNow(t, u)
	// The primary key on version means each migration ran once; all ran.
	files, err := os.ReadDir("migrations")
	if err != nil || len(files) < 3 {
		t.Fatalf("migrations directory: %d files, %v", len(files), err)
	}
	// Versions are the files' number prefixes; they may have gaps.
	var want []int32
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(f.Name(), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", f.Name(), err)
		}
		want = append(want, int32(v))
	}
	var versions []int32
	if err := s.Pool().QueryRow(context.Background(), `SELECT array_agg(version ORDER BY version) FROM schema_migrations`).Scan(&versions); err != nil ||
		!slices.Equal(versions, want) {
		t.Fatalf("migrations recorded %v, want %v: %v", versions, want, err)
	}
}

// TestClaimsAreDisjoint: two transactions open at once on two replicas
// claim due tasks and pending notifications; neither gets the other's rows.
func TestClaimsAreDisjoint(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	a, b := openNow(t, u), openNow(t, u)
	now := time.Now()
	if err := a.Update(ctx, func(tx storage.Tx) error {
		for i := range 10 {
			id := fmt.Sprint("x", i)
			if err := tx.ScheduleTask(&storage.Task{ID: id, Kind: "k", DueAt: now.Add(-time.Minute)}); err != nil {
				return err
			}
			if err := tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: "m", CreatedAt: now, NextAttempt: now.Add(-time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	claimedA := make(chan []string)
	release := make(chan struct{})
	go func() {
		a.Update(ctx, func(tx storage.Tx) error {
			ids := claim(t, tx, now, 6)
			claimedA <- ids
			<-release // hold the rows while the other replica claims
			return nil
		})
	}()
	idsA := <-claimedA
	var idsB []string
	if err := b.Update(ctx, func(tx storage.Tx) error { idsB = claim(t, tx, now, 10); return nil }); err != nil {
		t.Fatal(err)
	}
	close(release)
	if len(idsA) != 12 || len(idsB) != 8 {
		t.Fatalf("claimed %d and %d rows, want 12 and 8", len(idsA), len(idsB))
	}
	for _, id := range idsB {
		if slices.Contains(idsA, id) {
			t.Fatalf("%s claimed by both replicas", id)
		}
	}
}

func claim(t *testing.T, tx storage.Tx, now time.Time, limit int) []string {
	var ids []string
	tasks, err := tx.DueTasks(now, limit)
	if err != nil {
		t.Error(err)
	}
	for _, tk := range tasks {
		ids = append(ids, "task "+tk.ID)
	}
	msgs, err := tx.PendingOutbox(now, limit, 0)
	if err != nil {
		t.Error(err)
	}
	for _, m := range msgs {
		ids = append(ids, "outbox "+m.ID)
	}
	return ids
}

// TestSameKeyOnTwoReplicasWaitsAndReplays: while one replica holds a key's
// transaction open, the other's request with that key waits, then finds the
// record instead of running again.
func TestSameKeyOnTwoReplicasWaitsAndReplays(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	a, b := openNow(t, u), openNow(t, u)
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- a.Update(ctx, func(tx storage.Tx) error {
			if r, err := tx.GetIdempotency("m", "k"); r != nil || err != nil {
				return fmt.Errorf("first sees %v %v", r, err)
			}
			close(inside)
			<-release
			return tx.PutIdempotency(&storage.IdempotencyRecord{MerchantID: "m", Key: "k", Status: 201, Body: []byte("first"),
				ExpiresAt: time.Now().Add(time.Hour)})
		})
	}()
	<-inside
	var seen *storage.IdempotencyRecord
	second := make(chan error)
	go func() {
		second <- b.Update(ctx, func(tx storage.Tx) error {
			var err error
			seen, err = tx.GetIdempotency("m", "k")
			return err
		})
	}()
	select {
	case err := <-second:
		t.Fatalf("the second request did not wait for the first: %v, saw %v", err, seen)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil || seen == nil || string(seen.Body) != "first" {
		t.Fatalf("second saw %v, %v", seen, err)
	}
	err := b.Update(ctx, func(tx storage.Tx) error {
		return tx.PutIdempotency(&storage.IdempotencyRecord{MerchantID: "m", Key: "k", ExpiresAt: time.Now()})
	})
	if !fault.Is(err, fault.Conflict) {
		t.Fatalf("a second record for the key: %v", err)
	}
}
