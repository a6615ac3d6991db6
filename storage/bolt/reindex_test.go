package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// A file indexed under older status rules is reindexed when opened: an order
// whose stored status entries no longer match its statuses lists by the new
// ones, and the file passes the consistency check.
func TestReindexStatusesOnOpen(t *testing.T) {
	path, f, versions, _ := staleOrders(t, 1, func(int) bool { return true })
	checkSwept(t, path, f, versions, 1)
}

// staleOrders makes a file of n orders on hold in merchant m1 and leaves
// those stale(i) says as older status rules would have: the body says the
// hold is gone, the index still lists the order as onHold, and the file
// records rules 1. The last commit is marked as this build's, so that
// opening it sweeps the statuses and rebuilds nothing else. It returns the
// file, the fixture, every order's version by id, and the stale orders'
// keys in key order.
func staleOrders(t *testing.T, n int, stale func(i int) bool) (string, *ordertest.Fixture, map[string]int64, [][]byte) {
	t.Helper()
	path, f, s := openFresh(t)
	ctx := context.Background()
	versions := map[string]int64{}
	var keys [][]byte
	err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range n {
			o := f.Order(t)
			o.MerchantID = "m1"
			o.Hold = order.HoldOnHold
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
			versions[o.ID] = o.Version
			if stale(i) {
				keys = append(keys, orderKey(o.MerchantID, o.ID))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(keys, bytes.Compare)
	err = s.db.Update(func(btx *bbolt.Tx) error {
		for _, k := range keys {
			v := btx.Bucket(bOrders).Get(k)
			m, err := orderMeta(v)
			if err != nil {
				return err
			}
			_, js, err := splitOrder(v)
			if err != nil {
				return err
			}
			var stored order.Order
			if err := json.Unmarshal(js, &stored); err != nil {
				return err
			}
			stored.Hold = ""
			if js, err = json.Marshal(&stored); err != nil {
				return err
			}
			if err := btx.Bucket(bOrders).Put(k, encodeOrder(&m, js)); err != nil {
				return err
			}
		}
		if err := btx.Bucket(bInfo).Put(keyStatusRules, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
		return markOurs(btx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, f, versions, keys
}

// checkSwept opens the file at path and checks that the sweep is done: the
// file records the current rules, wantReady orders list as readyForCapture
// and the others as onHold, no version changed, and the file checks.
func checkSwept(t *testing.T, path string, f *ordertest.Fixture, versions map[string]int64, wantReady int) {
	t.Helper()
	s, err := Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("consistency after the sweep: %v", err)
	}
	ctx := context.Background()
	err = s.View(ctx, func(tx storage.Tx) error {
		count := func(st order.Status) int {
			p, err := tx.ListOrders("m1", storage.OrderQuery{Status: []order.Status{st}, Size: storage.MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			return len(p.Orders)
		}
		if held, ready := count(order.StatusOnHold), count(order.StatusReadyForCapture); held != len(versions)-wantReady || ready != wantReady {
			t.Errorf("after the sweep: %d orders list as onHold, %d as readyForCapture; want %d and %d",
				held, ready, len(versions)-wantReady, wantReady)
		}
		for id, version := range versions {
			o, err := tx.GetOrder("m1", id)
			if err != nil {
				return err
			}
			if o.Version != version {
				t.Errorf("order %s: version %d after the sweep, want %d", id, o.Version, version)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(btx *bbolt.Tx) error {
		if v := btx.Bucket(bInfo).Get(keyStatusRules); len(v) != 8 || binary.BigEndian.Uint64(v) != order.StatusRules {
			t.Errorf("status rules mark %x after the sweep, want %d", v, order.StatusRules)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The status sweep at Open commits in batches bounded by the orders it
// rewrites and by those it reads (one transaction held 4.6 GB for 300 000
// stale orders): each stale order is rewritten once, in key order, each
// batch in a transaction of its own; every commit is marked as this
// build's, so the next Open rebuilds nothing; and the orders list by their
// statuses afterwards, with their versions unchanged.
func TestStatusSweepCommitsInBatches(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n             int
		writes, reads int
		stale         func(i int) bool
		want          []int // orders rewritten per transaction
	}{
		{"writes bound", 10, 3, 1000, func(int) bool { return true }, []int{3, 3, 3, 1}},
		{"reads bound", 10, 100, 4, func(int) bool { return true }, []int{4, 4, 2}},
		{"writes bound, exactly", 9, 3, 1000, func(int) bool { return true }, []int{3, 3, 3}},
		{"some stale", 12, 100, 1000, func(i int) bool { return i%3 == 0 }, []int{4}},
		{"none stale", 5, 2, 2, func(int) bool { return false }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, f, versions, keys := staleOrders(t, tc.n, tc.stale)
			defer func(w, r int) { sweepWrites, sweepReads = w, r }(sweepWrites, sweepReads)
			sweepWrites, sweepReads = tc.writes, tc.reads
			var txids []int
			perTx := map[int]int{}
			var swept [][]byte
			onSweptOrder = func(txid int, k []byte) error {
				if perTx[txid] == 0 {
					txids = append(txids, txid)
				}
				perTx[txid]++
				swept = append(swept, slices.Clone(k))
				return nil
			}
			t.Cleanup(func() { onSweptOrder = nil })
			var rebuilt []string
			onRebuild = func(mark []byte) { rebuilt = append(rebuilt, string(mark)) }
			t.Cleanup(func() { onRebuild = nil })

			s, err := Open(path, Options{Clock: f.Clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, id := range txids {
				got = append(got, perTx[id])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("orders rewritten per transaction %v, want %v", got, tc.want)
			}
			if !slices.EqualFunc(swept, keys, bytes.Equal) {
				t.Errorf("rewritten %q, want the stale orders once each, in key order: %q", swept, keys)
			}
			if !slices.Equal(rebuilt, []string{string(keyStatusRules)}) {
				t.Errorf("rebuilt %q, want the status index alone", rebuilt)
			}
			onSweptOrder = func(int, []byte) error { t.Fatal("a second Open swept again"); return nil }
			rebuilt = nil
			checkSwept(t, path, f, versions, len(keys))
			if len(rebuilt) != 0 {
				t.Errorf("the Open after the sweep rebuilt %q (a batch's commit not marked as this build's?)", rebuilt)
			}
		})
	}
}

// The sweep logs its start, its progress and its end, with the orders read
// and rewritten: the store opens only once it is done, and a start silent
// for minutes looks hung. An Open with nothing to sweep says nothing.
func TestStatusSweepLogs(t *testing.T) {
	path, f, _, _ := staleOrders(t, 10, func(i int) bool { return i%2 == 0 })
	defer func(w, r int, d time.Duration) { sweepWrites, sweepReads, sweepEvery = w, r, d }(sweepWrites, sweepReads, sweepEvery)
	sweepWrites, sweepReads, sweepEvery = 100, 4, 0
	var buf bytes.Buffer
	log := timelessLog(&buf)
	for range 2 {
		s, err := Open(path, Options{Clock: f.Clock.Now, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf(`level=INFO msg="bolt: sweeping the orders' statuses to the current status rules; the store opens once done" rules=%[1]d
level=INFO msg="bolt: sweeping the orders' statuses" read=4 updated=2
level=INFO msg="bolt: sweeping the orders' statuses" read=8 updated=4
level=INFO msg="bolt: swept the orders' statuses" rules=%[1]d read=10 updated=5
`, order.StatusRules)
	if buf.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", buf.String(), want)
	}
}

// An Open whose sweep fails after its first batch has committed (a crash,
// here an error of a test hook in the second batch) fails, and leaves the
// file's rules as they were; the next Open sweeps again from the start,
// rewrites only the orders the first did not, and leaves every order right
// with its version unchanged.
func TestStatusSweepResumesAfterAFailedOpen(t *testing.T) {
	path, f, versions, keys := staleOrders(t, 10, func(int) bool { return true })
	defer func(w, r int) { sweepWrites, sweepReads = w, r }(sweepWrites, sweepReads)
	sweepWrites, sweepReads = 4, 1000
	failed := errors.New("the machine stopped")
	first := -1
	var swept [][]byte
	onSweptOrder = func(txid int, k []byte) error {
		if first == -1 {
			first = txid
		}
		if txid != first {
			return failed
		}
		swept = append(swept, slices.Clone(k))
		return nil
	}
	t.Cleanup(func() { onSweptOrder = nil })
	if _, err := Open(path, Options{Clock: f.Clock.Now}); !errors.Is(err, failed) {
		t.Fatalf("an Open whose sweep failed: %v, want the failure", err)
	}
	if !slices.EqualFunc(swept, keys[:4], bytes.Equal) {
		t.Fatalf("the failed Open's first batch rewrote %q, want %q", swept, keys[:4])
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(btx *bbolt.Tx) error {
		if v := btx.Bucket(bInfo).Get(keyStatusRules); binary.BigEndian.Uint64(v) != 1 {
			t.Errorf("status rules mark %x after a failed sweep, want 1", v)
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	var rebuilt []string
	onRebuild = func(mark []byte) { rebuilt = append(rebuilt, string(mark)) }
	t.Cleanup(func() { onRebuild = nil })
	swept = nil
	onSweptOrder = func(_ int, k []byte) error { swept = append(swept, slices.Clone(k)); return nil }
	s, err := Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(swept, keys[4:], bytes.Equal) {
		t.Errorf("the next Open rewrote %q, want the orders the failed one did not: %q", swept, keys[4:])
	}
	if !slices.Equal(rebuilt, []string{string(keyStatusRules)}) {
		t.Errorf("the next Open rebuilt %q, want the status index alone", rebuilt)
	}
	onSweptOrder = nil
	checkSwept(t, path, f, versions, len(keys))
}

// A file made before the settlement transaction id index gets it built when
// opened: paging after a transaction id works, and the consistency check,
// which fails while the index is missing, passes.
func TestSettlementTxIDsIndexedOnOpen(t *testing.T) {
	path, f, s := openFresh(t)
	var err error
	ctx := context.Background()
	var txs []settlement.Transaction
	for i := range 5 {
		txs = append(txs, settlement.Transaction{ID: fmt.Sprintf("tx-%d", i), SettlementID: "s1", Seq: i + 1,
			Type: settlement.KindCapture, Amount: 100, Currency: "SEK"})
	}
	batch := settlement.Batch{Settlement: settlement.Settlement{ID: "s1", Reference: "S-000001", MerchantID: "m1",
		Currency: "SEK", CreatedAt: f.Clock.Now()}, Transactions: txs}
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.SaveSettlement(batch) }); err != nil {
		t.Fatal(err)
	}
	s = reopenWithoutIndex(t, s, path, Options{Clock: f.Clock.Now}, bSettleTxID, keySettleTxIDs)
	defer s.Close()
	err = s.View(ctx, func(tx storage.Tx) error {
		page, next, err := tx.SettlementTransactions("m1", "s1", "tx-1", 2)
		if err != nil {
			return err
		}
		if len(page) != 2 || page[0].ID != "tx-2" || page[1].ID != "tx-3" || next != "tx-3" {
			t.Fatalf("page after tx-1: %+v, next %q", page, next)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A file made before the settlement queue's oldest-first index gets it built
// when opened: the queue reads oldest first, and the consistency check,
// which fails while the index is missing or names a stale place, passes.
func TestSettlementQueueIndexedOnOpen(t *testing.T) {
	path, f, s := openFresh(t)
	var err error
	ctx := context.Background()
	start := f.Clock.Now()
	var items []settlement.Item
	for i, key := range []string{"z", "m", "a"} {
		items = append(items, settlement.Item{Key: key, MerchantID: "m1", Currency: "SEK", LedgerID: key,
			Kind: settlement.KindCapture, Amount: 100, OccurredAt: start.Add(time.Duration(i) * time.Minute)})
	}
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.QueueSettlementItems(items) }); err != nil {
		t.Fatal(err)
	}
	// A stale place is an inconsistency.
	stale := settleQIxKey(start.Add(time.Hour), "m")
	if err := s.db.Update(func(btx *bbolt.Tx) error { return btx.Bucket(bSettleQIx).Put(stale, present) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err == nil {
		t.Fatal("the check passed a queue index naming an item twice")
	}
	s = reopenWithoutIndex(t, s, path, Options{Clock: f.Clock.Now}, bSettleQIx, keySettleQOrder)
	defer s.Close()
	err = s.View(ctx, func(tx storage.Tx) error {
		got, err := tx.PendingSettlementItems(10)
		if err != nil {
			return err
		}
		if len(got) != 3 || got[0].Key != "z" || got[1].Key != "m" || got[2].Key != "a" {
			t.Fatalf("pending after indexing: %+v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIndexesRebuiltAfterAnOlderBuildWrote: after a rollback, an older
// build writes the file without keeping up the indexes it does not know (it
// settles a queued item without removing its queue index entry, queues
// another without one, saves a settlement without transaction id entries).
// Opened by this build again, the file's last commit is not one of this
// build's, so those indexes are rebuilt: the settlement run works, the new
// item is read, pages after a transaction id work, and the file checks.
func TestIndexesRebuiltAfterAnOlderBuildWrote(t *testing.T) {
	path, f, s := openFresh(t)
	var err error
	ctx := context.Background()
	now := f.Clock.Now()
	item := func(key string, at time.Time) settlement.Item {
		return settlement.Item{Key: key, MerchantID: "m1", Currency: "SEK", LedgerID: key, Kind: settlement.KindCapture,
			Amount: 100, OccurredAt: at}
	}
	if err := s.Update(ctx, func(tx storage.Tx) error {
		return tx.QueueSettlementItems([]settlement.Item{item("a", now)})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The older build, as raw bbolt writes of its own.
	writeRaw(t, path, func(btx *bbolt.Tx) error {
		if err := btx.Bucket(bSettleQ).Delete([]byte("a")); err != nil { // settled
			return err
		}
		b, _ := json.Marshal(item("b", now.Add(time.Minute)))
		if err := btx.Bucket(bSettleQ).Put([]byte("b"), b); err != nil {
			return err
		}
		for i := 1; i <= 3; i++ {
			tr, _ := json.Marshal(settlement.Transaction{ID: fmt.Sprintf("old-tx-%d", i), SettlementID: "s-old", Seq: i,
				Type: settlement.KindCapture, Amount: 100, Currency: "SEK"})
			if err := btx.Bucket(bSettleTx).Put(settleTxKey("m1", "s-old", i), tr); err != nil {
				return err
			}
		}
		old := settlement.Settlement{ID: "s-old", Reference: "S-000001", MerchantID: "m1", Currency: "SEK", CreatedAt: now}
		st, _ := json.Marshal(old)
		// The settleix entry every build that saved settlements wrote.
		if err := btx.Bucket(bSettleIx).Put(settleIxKey(&old), present); err != nil {
			return err
		}
		return btx.Bucket(bSettle).Put(key("m1", "s-old"), st)
	})

	s, err = Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("consistency after the older build wrote: %v", err)
	}
	err = s.Update(ctx, func(tx storage.Tx) error {
		items, err := tx.PendingSettlementItems(10)
		if err != nil {
			return err
		}
		if len(items) != 1 || items[0].Key != "b" {
			t.Fatalf("pending %+v, want the item the older build queued", items)
		}
		page, _, err := tx.SettlementTransactions("m1", "s-old", "old-tx-1", 10)
		if err != nil {
			return err
		}
		if len(page) != 2 || page[0].ID != "old-tx-2" {
			t.Fatalf("page after old-tx-1: %+v", page)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reopenWithoutIndex leaves the file as the code before an index left it (no
// index, no mark), checks that Check sees that, and reopens it: the reopened
// store must have built the index and pass Check.
func reopenWithoutIndex(t *testing.T, s *Store, path string, opts Options, index, mark []byte) *Store {
	t.Helper()
	err := s.db.Update(func(btx *bbolt.Tx) error {
		if err := btx.DeleteBucket(index); err != nil {
			return err
		}
		if _, err := btx.CreateBucket(index); err != nil {
			return err
		}
		return btx.Bucket(bInfo).Delete(mark)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err == nil {
		t.Fatalf("the check passed a file without its %s index", index)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		s.Close()
		t.Fatalf("consistency after indexing %s: %v", index, err)
	}
	return s
}

// TestReopenAfterOwnWritesRebuildsNothing: a file this build wrote last
// (commits, a commit that changed nothing, reads, a close; and a crash,
// which keeps the last commit's mark as well) is opened without rebuilding
// any index: every commit marks the file, and Open reads the mark.
func TestReopenAfterOwnWritesRebuildsNothing(t *testing.T) {
	var rebuilt []string
	onRebuild = func(mark []byte) { rebuilt = append(rebuilt, string(mark)) }
	t.Cleanup(func() { onRebuild = nil })
	for _, noSync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "kassa.db")
		f := ordertest.New()
		opts := Options{Clock: f.Clock.Now, NoSync: noSync}
		s, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(rebuilt) == 0 {
			t.Fatal("a new file built no index (the hook is not called)")
		}
		ctx := context.Background()
		o := f.Order(t)
		o.MerchantID = "m1"
		if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx storage.Tx) error { return nil }); err != nil { // nothing to commit
			t.Fatal(err)
		}
		if err := s.View(ctx, func(tx storage.Tx) error { _, err := tx.GetOrder("m1", o.ID); return err }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rebuilt = nil
		s, err = Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if len(rebuilt) != 0 {
			t.Fatalf("NoSync %v: reopening a file this build wrote rebuilt %v", noSync, rebuilt)
		}
		// A mark of another set of indexes is another writer's.
		writeRaw(t, path, func(btx *bbolt.Tx) error {
			if v := btx.Bucket(bInfo).Get(keyLastCommit); len(v) != 16 {
				return fmt.Errorf("mark %x", v)
			}
			return markCommit(btx, openIndexes-1)
		})
		s, err = Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if len(rebuilt) == 0 {
			t.Fatalf("NoSync %v: a file marked by a build with other indexes was not rebuilt", noSync)
		}
		rebuilt = nil
	}
}

// writeRaw writes to the closed store file at path as another build would:
// fn's raw bbolt writes in one transaction, none of this build's marks.
func writeRaw(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(fn)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// markCommit marks btx's commit as a build that keeps indexes indexes
// marks it (lastCommitMark is this build's, with openIndexes).
func markCommit(btx *bbolt.Tx, indexes uint64) error {
	mark := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(btx.ID())), indexes)
	return btx.Bucket(bInfo).Put(keyLastCommit, mark)
}

// openFresh opens a new file in a test directory on the clock of a fresh
// ordertest fixture.
func openFresh(t *testing.T) (string, *ordertest.Fixture, *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kassa.db")
	f := ordertest.New()
	s, err := Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return path, f, s
}

// A file made before the outbox's per-merchant index gets it built when
// opened: pending messages are claimed per merchant again, and the
// consistency check, which fails while the index is missing, passes.
func TestOutboxMerchantIndexBuiltOnOpen(t *testing.T) {
	path, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	err := s.Update(ctx, func(tx storage.Tx) error {
		for i, merchant := range []string{"m1", "m1", "m2"} {
			m := &storage.OutboxMessage{ID: fmt.Sprintf("n%d", i), MerchantID: merchant, Topic: "order.event",
				Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at.Add(time.Duration(i) * time.Second)}
			if err := tx.AddOutbox(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopenWithoutIndex(t, s, path, Options{Clock: f.Clock.Now}, bOutboxMDue, keyOutboxMerchantDue)
	defer s.Close()
	err = s.View(ctx, func(tx storage.Tx) error {
		got, err := tx.PendingOutbox(at.Add(time.Minute), 10, 1)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0].ID != "n0" || got[1].ID != "n2" {
			t.Fatalf("pending after indexing: %+v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A file made before the outbox's done index gets it built when opened: the
// retention sweep then finds the done messages written before it, and
// still leaves the pending ones.
func TestOutboxDoneIndexBuiltOnOpen(t *testing.T) {
	path, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range 3 {
			m := &storage.OutboxMessage{ID: fmt.Sprintf("n%d", i), MerchantID: "m1", Topic: "order.event",
				Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at, Delivered: i != 1}
			if err := tx.AddOutbox(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopenWithoutIndex(t, s, path, Options{Clock: f.Clock.Now}, bOutboxDone, keyOutboxDone)
	defer s.Close()
	var n int
	err = s.Update(ctx, func(tx storage.Tx) error {
		n, err = tx.DeleteDoneOutbox(at.Add(time.Second), 10)
		if err != nil {
			return err
		}
		if _, err := tx.GetOutbox("m1", "n1"); err != nil {
			t.Errorf("the pending message: %v", err)
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("the sweep after indexing removed %d (%v); want 2", n, err)
	}
}

// A file made before the authorization tokens' expiry index gets it built
// when opened: the retention sweep then finds the tokens written before it,
// and still leaves the one not yet past the time it sweeps to.
func TestAuthExpiryIndexBuiltOnOpen(t *testing.T) {
	path, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	putTokens(t, s, at, 0, time.Hour, 2*time.Hour)
	s = reopenWithoutIndex(t, s, path, Options{Clock: f.Clock.Now}, bAuthExp, keyAuthExpiry)
	defer s.Close()
	var n int
	err := s.Update(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.DeleteAuthorizationsExpiredBefore(at.Add(90*time.Minute), 10)
		if err != nil {
			return err
		}
		if _, err := tx.GetAuthorization("m1", "at2"); err != nil {
			t.Errorf("the token expiring later: %v", err)
		}
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("the sweep after indexing removed %d (%v); want 2", n, err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("check after the sweep: %v", err)
	}
}

// One merchant's backlog of pending messages no longer hides another's due
// after it: the time-ordered scan stopped after 100 000 of them, so a
// receiver down long enough for a large merchant kept every other
// merchant's webhooks waiting until that backlog drained; and each claim
// read the whole backlog.
func TestOutboxBacklogHidesNoOtherMerchant(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 001 outbox messages")
	}
	_, f, s := openFresh(t)
	defer s.Close()
	ctx := context.Background()
	at := f.Clock.Now()
	const backlog = 100_001
	err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range backlog {
			m := &storage.OutboxMessage{ID: fmt.Sprintf("a%06d", i), MerchantID: "big", Topic: "order.event",
				Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at}
			if err := tx.AddOutbox(m); err != nil {
				return err
			}
		}
		return tx.AddOutbox(&storage.OutboxMessage{ID: "b0", MerchantID: "small", Topic: "order.event",
			Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at.Add(time.Second)})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx storage.Tx) error {
		got, err := tx.PendingOutbox(at.Add(time.Minute), 10, 2)
		if err != nil {
			return err
		}
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if fmt.Sprint(ids) != "[a000000 a000001 b0]" {
			t.Fatalf("claimed %v; want the backlog's oldest two and the other merchant's", ids)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The build before the authorization tokens' expiry index marked its
// commits with 3 indexes (openIndexes) and kept no authexp entries. A file
// this build wrote, then that build (a rollback), then this build again:
// the last commit is not one of this build's, so authexp is rebuilt, and
// the token the older build put is swept with the others and the file
// checks. Keeping the index's mark across the older build's commit, or
// taking its mark for this build's, left that token out of the sweep for
// good.
func TestAuthExpiryRebuiltAfterTheBuildBeforeItWrote(t *testing.T) {
	path, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	tok := func(id string, expires time.Time) *token.Authorization {
		return &token.Authorization{Token: id, MerchantID: "m1", Country: "SE", Currency: "SEK", CreatedAt: at, ExpiresAt: expires}
	}
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.PutAuthorization(tok("ours", at.Add(time.Hour))) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The build before, as raw bbolt writes of its own: a token without
	// its authexp entry, the commit marked as that build marked it.
	writeRaw(t, path, func(btx *bbolt.Tx) error {
		b, err := storage.EncodeRecord(tok("theirs", at.Add(2*time.Hour)))
		if err != nil {
			return err
		}
		if err := btx.Bucket(bAuth).Put(key("m1", "theirs"), b); err != nil {
			return err
		}
		const indexesBefore = 3
		return markCommit(btx, indexesBefore)
	})

	s, err := Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("consistency after the build before wrote a token: %v", err)
	}
	var n int
	err = s.Update(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.DeleteAuthorizationsExpiredBefore(at.Add(3*time.Hour), 10)
		return err
	})
	if err != nil || n != 2 {
		t.Fatalf("the sweep past both expiries removed %d (%v); want 2, the older build's token too", n, err)
	}
}

// Open rebuilds each index by putting its entries in key order, whatever
// the order of the records they come from: bbolt keeps a new bucket as one
// node until the commit, so a Put in the middle shifts every entry after
// it, and record order (random ids, or ids ascending where the index
// descends) made the rebuild quadratic: 300 000 done notifications took
// tens of minutes to open. Here the notifications' ids descend as their
// times ascend, the pending ones under merchants named against their ids,
// and the tokens' expiries run against their ids.
func TestIndexesRebuiltInKeyOrder(t *testing.T) {
	path, f, s := openFresh(t)
	ctx := context.Background()
	at := f.Clock.Now()
	const n = 200
	err := s.Update(ctx, func(tx storage.Tx) error {
		for i := range n {
			m := &storage.OutboxMessage{ID: fmt.Sprintf("n-%04d", n-i), MerchantID: fmt.Sprintf("m%04d", i), Topic: "order.create",
				Payload: []byte(`{}`), CreatedAt: at.Add(time.Duration(i) * time.Second), NextAttempt: at.Add(time.Duration(i) * time.Second)}
			if i%2 == 0 {
				m.Delivered, m.Attempts = true, 1
			}
			if err := tx.AddOutbox(m); err != nil {
				return err
			}
			a := &token.Authorization{Token: fmt.Sprintf("at-%04d", i), MerchantID: "m1", Country: "SE", Currency: "SEK",
				CreatedAt: at, ExpiresAt: at.Add(time.Duration(n-i) * time.Minute)}
			if err := tx.PutAuthorization(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A commit not of this build: every index is rebuilt.
	writeRaw(t, path, func(btx *bbolt.Tx) error { return btx.Bucket(bInfo).Delete(keyLastCommit) })

	puts := map[string][][]byte{}
	onIndexPut = func(ix, k []byte) { puts[string(ix)] = append(puts[string(ix)], slices.Clone(k)) }
	t.Cleanup(func() { onIndexPut = nil })
	s, err = Open(path, Options{Clock: f.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	onIndexPut = nil
	for ix, want := range map[string]int{string(bOutboxDone): n / 2, string(bOutboxMDue): n / 2, string(bAuthExp): n} {
		keys := puts[ix]
		if len(keys) != want {
			t.Errorf("%s: %d entries put, want %d", ix, len(keys), want)
		}
		for i := 1; i < len(keys); i++ {
			if bytes.Compare(keys[i-1], keys[i]) > 0 {
				t.Errorf("%s: entry %d put after a greater one: the rebuild shifts the node at each put", ix, i)
				break
			}
		}
	}
	if err := s.Check(); err != nil {
		t.Fatalf("consistency after the rebuild: %v", err)
	}
}

// An index rebuilt over records at Open is logged at its start and end
// (at 300 000 records Open is silent for about 10 s otherwise); a new
// file's indexes, built over nothing, and a reopen that rebuilds nothing
// say nothing.
func TestIndexRebuildsLogged(t *testing.T) {
	var buf bytes.Buffer
	log := timelessLog(&buf)
	path := filepath.Join(t.TempDir(), "kassa.db")
	f := ordertest.New()
	opts := Options{Clock: f.Clock.Now, Logger: log}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	putTokens(t, s, f.Clock.Now(), time.Hour, time.Hour, time.Hour)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a new file logged\n%s", buf.String())
	}
	// An older build's commit: every index is rebuilt at the next Open.
	writeRaw(t, path, func(btx *bbolt.Tx) error { return btx.Bucket(bInfo).Put([]byte("older"), []byte("build")) })
	for range 2 {
		if s, err = Open(path, opts); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := `level=INFO msg="bolt: rebuilding an index; the store opens once done" index=authexp from=authtokens
level=INFO msg="bolt: rebuilt an index" index=authexp entries=3
`
	if buf.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", buf.String(), want)
	}
}

// Each index's rebuild is logged when its own records are there, naming
// them: a file holding only sessions, or only done notifications, logs that
// index's rebuild and no other, which a rebuild looking for records in
// another index's bucket would not (it said nothing, or spoke of an index
// over nothing).
func TestIndexRebuildLogNamesItsRecords(t *testing.T) {
	for _, c := range []struct {
		name string
		put  func(tx storage.Tx, at time.Time) error
		want []string // index=… from=… entries=…
	}{
		{"settlement", func(tx storage.Tx, at time.Time) error {
			return tx.SaveSettlement(settlement.Batch{Settlement: settlement.Settlement{ID: "s1", Reference: "S-000001",
				MerchantID: "m1", Currency: "SEK", CreatedAt: at}, Transactions: []settlement.Transaction{{ID: "tx-1",
				SettlementID: "s1", Seq: 1, Type: settlement.KindCapture, Amount: 100, Currency: "SEK"}}})
		}, []string{"settletxid from=settletx entries=1"}},
		{"queue", func(tx storage.Tx, at time.Time) error {
			return tx.QueueSettlementItems([]settlement.Item{{Key: "a", MerchantID: "m1", Currency: "SEK", LedgerID: "a",
				Kind: settlement.KindCapture, Amount: 100, OccurredAt: at}})
		}, []string{"settleqix from=settleq entries=1"}},
		{"outbox", func(tx storage.Tx, at time.Time) error {
			for i, done := range []bool{false, true, true} {
				m := &storage.OutboxMessage{ID: fmt.Sprint("n-", i), MerchantID: "m1", Topic: "order.create",
					Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at, Delivered: done}
				if err := tx.AddOutbox(m); err != nil {
					return err
				}
			}
			return nil
		}, []string{"outboxmdue from=outbox entries=1", "outboxdone from=outbox entries=2"}},
		{"tokens", func(tx storage.Tx, at time.Time) error {
			return tx.PutAuthorization(&token.Authorization{Token: "at0", MerchantID: "m1", Country: "SE", Currency: "SEK",
				CreatedAt: at, ExpiresAt: at.Add(time.Hour)})
		}, []string{"authexp from=authtokens entries=1"}},
		{"session", func(tx storage.Tx, at time.Time) error {
			r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", ExpiresInMinutes: ptr(int64(60)),
				OrderLines: []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}}}
			ss, err := session.New("m1", session.SourceCheckout, r, &ordertest.IDs{}, at, func(id string) string { return "/checkout/" + id })
			if err != nil {
				return err
			}
			return tx.PutSession(ss)
		}, nil}, // entries: as many as the session's kinds
	} {
		t.Run(c.name, func(t *testing.T) {
			path, f, s := openFresh(t)
			if err := s.Update(context.Background(), func(tx storage.Tx) error { return c.put(tx, f.Clock.Now()) }); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			writeRaw(t, path, func(btx *bbolt.Tx) error { return btx.Bucket(bInfo).Put([]byte("older"), []byte("build")) })
			var buf bytes.Buffer
			if s, err := Open(path, Options{Clock: f.Clock.Now, Logger: timelessLog(&buf)}); err != nil {
				t.Fatal(err)
			} else if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var want string
			for _, w := range c.want {
				ix, rest, _ := strings.Cut(w, " from=")
				from, entries, _ := strings.Cut(rest, " ")
				want += `level=INFO msg="bolt: rebuilding an index; the store opens once done" index=` + ix + " from=" + from + "\n" +
					`level=INFO msg="bolt: rebuilt an index" index=` + ix + " " + entries + "\n"
			}
			got := buf.String()
			if c.want == nil {
				// The session index's entries are its kinds of entry, not the sessions.
				want = `level=INFO msg="bolt: rebuilding an index; the store opens once done" index=sessionix from=sessions` + "\n"
				if !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 2 ||
					!strings.Contains(got, `msg="bolt: rebuilt an index" index=sessionix entries=`) {
					t.Fatalf("logged\n%s\nwant the rebuild of sessionix from sessions, alone", got)
				}
				return
			}
			if got != want {
				t.Errorf("logged\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// putTokens stores authorization tokens at0, at1, … of merchant m1, made
// at at, each expiring its duration after it.
func putTokens(t *testing.T, s *Store, at time.Time, expiries ...time.Duration) {
	t.Helper()
	err := s.Update(context.Background(), func(tx storage.Tx) error {
		for i, d := range expiries {
			a := &token.Authorization{Token: fmt.Sprintf("at%d", i), MerchantID: "m1", Country: "SE", Currency: "SEK",
				CreatedAt: at, ExpiresAt: at.Add(d)}
			if err := tx.PutAuthorization(a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// timelessLog logs as text to w without the times, which vary from run to
// run: the time of each line and the took of a sweep or a rebuild.
func timelessLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "took" {
			return slog.Attr{}
		}
		return a
	}}))
}
