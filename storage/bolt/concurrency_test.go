package bolt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// op is one operation on the shared order, described so that it can be
// replayed: capture uncaptured line number line (by position in the
// original order), or refund 1.00 SEK of the capture ledger at index ledger.
type op struct {
	capture bool
	line    int
	ledger  int
	version int64 // the version the commit produced
}

// apply performs op on o; lineIDs are the original order's line ids.
func (p op) apply(o *order.Order, lineIDs []string, e order.Env) error {
	if p.capture {
		_, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{{ID: ptr(lineIDs[p.line])}},
			TotalCaptureAmount: ptr(int64(1000))}, e)
		return err
	}
	_, err := refund.Partial(o, o.Captured[p.ledger].ID, &refund.PartialRequest{
		OrderLines: []order.LineInput{line("credit", 1, 100, 2500)}, TotalRefundAmount: ptr(int64(100))}, e)
	return err
}

// choose picks an operation the snapshot allows, or ok=false when none is left.
func choose(o *order.Order, lineIDs []string, r *rand.Rand) (op, bool) {
	var uncaptured []int
	for i, id := range lineIDs {
		if slices.ContainsFunc(o.Uncaptured.Lines, func(l order.Line) bool { return l.ID == id }) {
			uncaptured = append(uncaptured, i)
		}
	}
	var refundable []int
	for i := range o.Captured {
		if order.SumLines(o.Captured[i].Lines, o.VATMode).Gross-o.RefundedOf(o.Captured[i].ID) >= 100 {
			refundable = append(refundable, i)
		}
	}
	switch {
	case len(uncaptured) > 0 && (len(refundable) == 0 || r.IntN(2) == 0):
		return op{capture: true, line: uncaptured[r.IntN(len(uncaptured))]}, true
	case len(refundable) > 0:
		return op{ledger: refundable[r.IntN(len(refundable))]}, true
	}
	return op{}, false
}

// TestConcurrentCaptureRefundSameOrder has many goroutines capture and refund
// one order, each loading it, applying the rule and saving it with the
// version it loaded, retrying on conflict. Every success produced its own
// version, so the versions are exactly 2..n+1, and replaying the successes
// in version order from the original order gives the stored order's amounts:
// no update was lost.
func TestConcurrentCaptureRefundSameOrder(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ids := &counterIDs{}
	const lines, workers, opsEach = 24, 8, 6
	var original *order.Order
	if err := s.Update(ctx, func(tx storage.Tx) error {
		original = newOrder(t, "m1", lines, env(tx, "m1", ids))
		return tx.CreateOrder(original)
	}); err != nil {
		t.Fatal(err)
	}
	original = original.Clone()
	var lineIDs []string
	for _, l := range original.Uncaptured.Lines {
		lineIDs = append(lineIDs, l.ID)
	}

	var mu sync.Mutex
	var done []op
	conflicts := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for n := 0; n < opsEach; {
				var snap *order.Order
				if err := s.View(ctx, func(tx storage.Tx) error {
					var err error
					snap, err = tx.GetOrder("m1", original.ID)
					return err
				}); err != nil {
					t.Error(err)
					return
				}
				p, ok := choose(snap, lineIDs, r)
				if !ok {
					return
				}
				err := s.Update(ctx, func(tx storage.Tx) error {
					o := snap.Clone() // the store may run fn again: never change the snapshot
					if err := p.apply(o, lineIDs, env(tx, "m1", ids)); err != nil {
						return err
					}
					if err := tx.UpdateOrder(o); err != nil {
						return err
					}
					p.version = o.Version
					return nil
				})
				switch {
				case fault.Is(err, fault.Conflict):
					mu.Lock()
					conflicts++
					mu.Unlock()
					continue
				case err != nil:
					t.Errorf("worker %d: %v", w, err)
					return
				}
				mu.Lock()
				done = append(done, p)
				mu.Unlock()
				n++
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.SortFunc(done, func(a, b op) int { return int(a.version - b.version) })
	for i, p := range done {
		if p.version != int64(i+2) {
			t.Fatalf("success %d produced version %d: versions must be 2..%d, one each", i, p.version, len(done)+1)
		}
	}
	var stored *order.Order
	var nextInvoice, nextCredit int64
	if err := s.Update(ctx, func(tx storage.Tx) error {
		var err error
		if stored, err = tx.GetOrder("m1", original.ID); err != nil {
			return err
		}
		nextInvoice, _ = tx.NextSequence("m1", order.SeriesInvoice)
		nextCredit, _ = tx.NextSequence("m1", order.SeriesCreditNote)
		return errors.New("only looking") // give the numbers back
	}); err == nil {
		t.Fatal("rollback expected")
	}
	// Sequential replay of the successes.
	replay := original.Clone()
	rids := &counterIDs{prefix: "replay-"}
	docs := &seqDocs{}
	for i, p := range done {
		e := order.Env{Now: replay.UpdatedAt, IDs: rids, Docs: docs, Policy: order.DefaultPolicy()}
		if err := p.apply(replay, lineIDs, e); err != nil {
			t.Fatalf("replay of success %d (%+v): %v", i, p, err)
		}
	}
	if stored.Version != int64(len(done)+1) || stored.Amounts() != replay.Amounts() ||
		len(stored.Captured) != len(replay.Captured) || len(stored.Refunded) != len(replay.Refunded) {
		t.Fatalf("stored v%d %+v (%d captures, %d refunds), replay of %d successes %+v (%d, %d)",
			stored.Version, stored.Amounts(), len(stored.Captured), len(stored.Refunded),
			len(done), replay.Amounts(), len(replay.Captured), len(replay.Refunded))
	}
	for i := range stored.Captured {
		id := stored.Captured[i].ID
		if got, want := stored.RefundedOf(id), replay.RefundedOf(replay.Captured[i].ID); got != want {
			t.Fatalf("capture %d refunded %d, replay %d", i, got, want)
		}
		if stored.Captured[i].DocumentSeq != int64(i+1) {
			t.Fatalf("capture %d has invoice number %d: numbers must follow commits", i, stored.Captured[i].DocumentSeq)
		}
	}
	if nextInvoice != int64(len(stored.Captured)+1) || nextCredit != int64(len(stored.Refunded)+1) {
		t.Fatalf("sequences next %d/%d after %d captures and %d refunds: numbers were lost", nextInvoice, nextCredit,
			len(stored.Captured), len(stored.Refunded))
	}
	if len(done) != workers*opsEach && len(stored.Uncaptured.Lines) > 0 {
		t.Fatalf("only %d of %d operations succeeded", len(done), workers*opsEach)
	}
	t.Logf("%d operations, %d version conflicts retried", len(done), conflicts)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

type seqDocs struct{ n map[string]int64 }

func (d *seqDocs) Next(series string) (int64, error) {
	if d.n == nil {
		d.n = map[string]int64{}
	}
	d.n[series]++
	return d.n[series], nil
}

// openBatchStore opens a new store on a fixed clock, closed when the test ends.
func openBatchStore(t *testing.T) *bolt.Store {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{Clock: newClock(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)).Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBatchIsolation runs many writers at once so that they share
// transactions; some fail after writing and one panics. Exactly the others'
// changes are committed.
func TestBatchIsolation(t *testing.T) {
	s := openBatchStore(t)
	ctx := context.Background()
	ids := &counterIDs{}
	const writers = 64
	boom := errors.New("boom")
	errs := make([]error, writers)
	orderIDs := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx storage.Tx) error {
				o := newOrder(t, "m1", 2, env(tx, "m1", ids))
				orderIDs[i] = o.ID
				if err := tx.CreateOrder(o); err != nil {
					return err
				}
				if _, err := tx.NextSequence("m1", "n"); err != nil {
					return err
				}
				switch {
				case i == 13:
					panic("bug in a writer")
				case i%5 == 0:
					return fmt.Errorf("writer %d: %w", i, boom)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	committed := 0
	for i, err := range errs {
		switch {
		case i == 13:
			if fault.KindOf(err) != fault.Internal || err == nil {
				t.Fatalf("panicking writer got %v", err)
			}
		case i%5 == 0:
			if !errors.Is(err, boom) {
				t.Fatalf("failing writer %d got %v", i, err)
			}
		case err != nil:
			t.Fatalf("writer %d got %v", i, err)
		default:
			committed++
		}
	}
	if err := s.View(ctx, func(tx storage.Tx) error {
		page, err := tx.ListOrders("m1", storage.OrderQuery{Size: 1000})
		if err != nil {
			return err
		}
		if len(page.Orders) != committed {
			t.Fatalf("%d orders stored, %d writers committed", len(page.Orders), committed)
		}
		for i, id := range orderIDs {
			_, err := tx.GetOrder("m1", id)
			if ok := err == nil; ok != (i != 13 && i%5 != 0) {
				t.Fatalf("writer %d: order present=%v", i, ok)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var n int64
	s.Update(ctx, func(tx storage.Tx) error { n, _ = tx.NextSequence("m1", "n"); return errors.New("look only") })
	if n != int64(committed+1) {
		t.Fatalf("sequence at %d after %d commits", n-1, committed)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	calls, commits := bolt.Stats(s)
	t.Logf("%d calls in %d commits", calls, commits)
}

// TestBatchUndoOfALargeOrderUpdate: a writer that rewrites a large order and
// then fails shares transactions with writers of large new orders, which
// grow the file, so that bbolt remaps it while committing what the failed
// writer's journal put back. The order reads back exactly as it was stored,
// in every round, and the file is sound.
func TestBatchUndoOfALargeOrderUpdate(t *testing.T) {
	s := openBatchStore(t)
	ctx := context.Background()
	ids := &counterIDs{}
	var big *order.Order
	if err := s.Update(ctx, func(tx storage.Tx) error {
		big = newOrder(t, "m1", 400, env(tx, "m1", ids))
		return tx.CreateOrder(big)
	}); err != nil {
		t.Fatal(err)
	}
	stored := func() []byte {
		var js []byte
		if err := s.View(ctx, func(tx storage.Tx) error {
			o, err := tx.GetOrder("m1", big.ID)
			if err == nil {
				js, err = json.Marshal(o)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return js
	}
	want := stored()
	boom := errors.New("boom")
	for round := range 6 {
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Update(ctx, func(tx storage.Tx) error {
					if i%4 != 0 {
						return tx.CreateOrder(newOrder(t, "m2", 300, env(tx, "m2", ids)))
					}
					o, err := tx.GetOrder("m1", big.ID)
					if err != nil {
						return err
					}
					o.MerchantReference = fmt.Sprint("round ", round, " writer ", i)
					o.Uncaptured.Lines = o.Uncaptured.Lines[:len(o.Uncaptured.Lines)-1-i]
					if err := tx.UpdateOrder(o); err != nil {
						return err
					}
					return boom
				})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if (i%4 == 0) != errors.Is(err, boom) || (i%4 != 0 && err != nil) {
				t.Fatalf("round %d, writer %d: %v", round, i, err)
			}
		}
		if got := stored(); !bytes.Equal(got, want) {
			t.Fatalf("round %d: the order changed after only failed updates:\n%.300s\nwant\n%.300s", round, got, want)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	calls, commits := bolt.Stats(s)
	t.Logf("%d calls in %d commits", calls, commits)
}
