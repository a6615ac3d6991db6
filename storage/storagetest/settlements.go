package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

func testSettlements(t *testing.T, s storage.Store) {
	item := func(key, merchant, store string, kind settlement.Kind, amount int64) settlement.Item {
		return settlement.Item{Key: key, MerchantID: merchant, StoreID: store, Currency: "SEK", OrderID: "o-" + key,
			LedgerID: key, Kind: kind, Amount: amount, OccurredAt: Start()}
	}
	update(t, s, func(tx storage.Tx) error {
		return tx.QueueSettlementItems([]settlement.Item{item("c1", "m1", "a", settlement.KindCapture, 10000),
			item("r1", "m1", "a", settlement.KindRefund, 2000), item("c2", "m1", "b", settlement.KindCapture, 500),
			item("c3", "m2", "a", settlement.KindCapture, 700)})
	})
	var pending []settlement.Item
	view(t, s, func(tx storage.Tx) error {
		var err error
		pending, err = tx.PendingSettlementItems(100)
		return err
	})
	if len(pending) != 4 || pending[0].Key != "c1" || pending[3].Key != "r1" || pending[0].Amount != 10000 {
		t.Fatalf("pending %+v", pending)
	}
	refs := map[string]int64{}
	ids := &ids{}
	run := func(at time.Time) []settlement.Batch {
		var out []settlement.Batch
		update(t, s, func(tx storage.Tx) error {
			items, err := tx.PendingSettlementItems(1000)
			if err != nil {
				return err
			}
			bs, err := settlement.Run(items, settlement.Env{Now: at, IDs: ids,
				Fees:      func(string) settlement.FeePolicy { return settlement.FeePolicy{BasisPoints: 100} },
				Reference: func(m string) (int64, error) { refs[m]++; return refs[m], nil }})
			if err != nil {
				return err
			}
			for _, b := range bs {
				if err := tx.SaveSettlement(b); err != nil {
					return err
				}
			}
			out = bs
			return nil
		})
		return out
	}
	first := run(Now())
	if len(first) != 3 {
		t.Fatalf("%d settlements", len(first))
	}
	// Saving the same batch again is refused: its items are no longer pending.
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.SaveSettlement(first[0]) })
	wantKind(t, err, fault.Conflict)
	if again := run(Now().Add(time.Hour)); len(again) != 0 {
		t.Fatalf("a second run settled %d more", len(again))
	}
	// A failed run leaves the queue as it was.
	update(t, s, func(tx storage.Tx) error {
		return tx.QueueSettlementItems([]settlement.Item{item("c4", "m1", "a", settlement.KindCapture, 900)})
	})
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx storage.Tx) error {
		items, _ := tx.PendingSettlementItems(10)
		if err := tx.SaveSettlement(settlement.Batch{Keys: []string{items[0].Key}}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	later := run(Now().Add(2 * time.Hour))
	if len(later) != 1 || later[0].Settlement.Gross != 900 {
		t.Fatalf("after a failed run: %+v", later)
	}
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetSettlement("m1", first[0].Settlement.ID)
		if err != nil || got.Net != first[0].Settlement.Net || got.Reference != first[0].Settlement.Reference {
			t.Fatalf("get %+v %v", got, err)
		}
		_, err = tx.GetSettlement("m2", first[0].Settlement.ID)
		wantKind(t, err, fault.NotFound)
		pages, err := settlementPages(tx, "m1", settlement.Query{Size: 1})
		if err != nil {
			return err
		}
		var all []string
		for _, page := range pages {
			for _, p := range page {
				all = append(all, p.Reference)
			}
		}
		if !slices.Equal(all, []string{"S-000003", "S-000002", "S-000001"}) {
			t.Fatalf("list %v", all)
		}
		q := settlement.Query{Size: 10, StoreIDs: []string{"b"}}
		if page, _, _ := tx.ListSettlements("m1", q); len(page) != 1 || page[0].StoreID != "b" {
			t.Fatalf("store filter %v", page)
		}
		var seqs []int
		from := ""
		for {
			txs, next, err := tx.SettlementTransactions("m1", first[0].Settlement.ID, from, 1)
			if err != nil {
				return err
			}
			for _, tr := range txs {
				seqs = append(seqs, tr.Seq)
			}
			if next == "" {
				break
			}
			from = next
		}
		if fmt.Sprint(seqs) != "[1 2 3]" {
			t.Fatalf("transactions %v", seqs)
		}
		txs, next, err := tx.SettlementTransactions("m1", first[0].Settlement.ID, "", 10)
		if err != nil || len(txs) != 3 || next != "" {
			t.Fatalf("one page of all: %d, next %q, %v", len(txs), next, err)
		}
		rest, next, err := tx.SettlementTransactions("m1", first[0].Settlement.ID, txs[0].ID, 10)
		if err != nil || len(rest) != 2 || rest[0].Seq != 2 || rest[1].Seq != 3 || next != "" {
			t.Fatalf("after the first: %+v, next %q, %v", rest, next, err)
		}
		if end, next, err := tx.SettlementTransactions("m1", first[0].Settlement.ID, txs[2].ID, 10); err != nil || len(end) != 0 || next != "" {
			t.Fatalf("after the last: %+v, next %q, %v", end, next, err)
		}
		// A transaction of another settlement of the same merchant is no
		// position in this one.
		other, _, err := tx.SettlementTransactions("m1", first[1].Settlement.ID, "", 1)
		if err != nil || len(other) != 1 {
			t.Fatalf("other settlement: %+v, %v", other, err)
		}
		_, _, err = tx.SettlementTransactions("m1", first[0].Settlement.ID, other[0].ID, 10)
		wantKind(t, err, fault.Invalid)
		_, _, err = tx.SettlementTransactions("m1", first[0].Settlement.ID, "no-such-tx", 10)
		wantKind(t, err, fault.Invalid)
		_, _, err = tx.SettlementTransactions("m2", first[0].Settlement.ID, "", 10)
		wantKind(t, err, fault.NotFound)
		return nil
	})
}

// testSettlementOrder: the queue is read oldest first by OccurredAt, ties by
// key, whatever order the keys sort in, so that a run reading only part of
// a large queue takes the oldest items and none waits forever behind keys
// that sort early. An item queued again under its key with another time
// moves to its new place instead of appearing twice.
func testSettlementOrder(t *testing.T, s storage.Store) {
	item := func(key string, at time.Time) settlement.Item {
		return settlement.Item{Key: key, MerchantID: "m1", StoreID: "a", Currency: "SEK", OrderID: "o-" + key,
			LedgerID: key, Kind: settlement.KindCapture, Amount: 100, OccurredAt: at}
	}
	// Keys sort opposite to time; two share a time; one is a nanosecond
	// after another; one is given in another zone than the rest.
	zone := time.FixedZone("CEST", 2*60*60)
	update(t, s, func(tx storage.Tx) error {
		return tx.QueueSettlementItems([]settlement.Item{
			item("a-new", Start().Add(2*time.Hour)),
			item("a-nano", Start().Add(time.Hour+time.Nanosecond)),
			item("m-mid", Start().Add(time.Hour)),
			item("b-tie", Start().Add(time.Hour)),
			item("q-zone", Start().Add(30*time.Minute).In(zone)),
			item("z-old", Start()),
		})
	})
	pending := func(limit int) []string {
		var keys []string
		view(t, s, func(tx storage.Tx) error {
			items, err := tx.PendingSettlementItems(limit)
			for _, it := range items {
				keys = append(keys, it.Key)
			}
			return err
		})
		return keys
	}
	want := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("pending %v, want %v", got, want)
		}
	}
	want(pending(100), "z-old", "q-zone", "b-tie", "m-mid", "a-nano", "a-new")
	want(pending(2), "z-old", "q-zone")

	update(t, s, func(tx storage.Tx) error {
		return tx.QueueSettlementItems([]settlement.Item{item("z-old", Start().Add(3*time.Hour))})
	})
	want(pending(100), "q-zone", "b-tie", "m-mid", "a-nano", "a-new", "z-old")
	want(pending(3), "q-zone", "b-tie", "m-mid")

	update(t, s, func(tx storage.Tx) error {
		return tx.SaveSettlement(settlement.Batch{Keys: []string{"q-zone", "b-tie"}})
	})
	want(pending(100), "m-mid", "a-nano", "a-new", "z-old")
	want(pending(1), "m-mid")
}

// testQueuedSettlementItems: the queued items of the keys asked for, whole,
// the keys not queued (never, or settled since) left out; in a View as in an
// Update.
func testQueuedSettlementItems(t *testing.T, s storage.Store) {
	at := Start().Add(90 * time.Minute)
	capture := settlement.Item{Key: "l1", MerchantID: "m1", StoreID: "a", Currency: "SEK", OrderID: "o1",
		LedgerID: "l1", Kind: settlement.KindCapture, Amount: 1000, DocumentReference: "INV-1",
		MerchantReference: "mref", SettlementReference: "sref", OccurredAt: Start()}
	others := []settlement.Item{capture,
		{Key: "l2", MerchantID: "m1", StoreID: "a", Currency: "SEK", OrderID: "o2", LedgerID: "l2",
			Kind: settlement.KindCapture, Amount: 2000, OccurredAt: Start()},
		{Key: "l3", MerchantID: "m1", StoreID: "a", Currency: "SEK", OrderID: "o3", LedgerID: "l3",
			Kind: settlement.KindCapture, Amount: 3000, OccurredAt: Start()}}
	update(t, s, func(tx storage.Tx) error { return tx.QueueSettlementItems(others) })
	// A void, queued by the operation that voided l1: its key is the one
	// settlement.MissingVoids names.
	void := capture
	void.OccurredAt = at
	update(t, s, func(tx storage.Tx) error {
		voids, err := tx.QueuedSettlementItems(settlement.MissingVoids([]settlement.Item{capture}))
		if err != nil || len(voids) != 0 {
			t.Fatalf("voids before l1 was voided: %+v %v", voids, err)
		}
		o := &order.Order{ID: "o1", MerchantID: "m1", StoreID: "a", Currency: "SEK", UpdatedAt: at,
			Captured: []order.Ledger{{ID: "l1", Kind: order.LedgerCapture, Status: []order.SubStatus{order.SubVoid}}}}
		items := settlement.NewItems(&order.Order{Captured: []order.Ledger{{ID: "l1", Kind: order.LedgerCapture}}}, o)
		if len(items) != 1 {
			t.Fatalf("items of the void: %+v", items)
		}
		void = items[0]
		return tx.QueueSettlementItems(items)
	})
	get := func(keys ...string) map[string]settlement.Item {
		got := map[string]settlement.Item{}
		view(t, s, func(tx storage.Tx) error {
			items, err := tx.QueuedSettlementItems(keys)
			for _, it := range items {
				if _, twice := got[it.Key]; twice {
					t.Errorf("%s returned twice", it.Key)
				}
				got[it.Key] = it
			}
			return err
		})
		return got
	}
	got := get(settlement.MissingVoids(others)...)
	if len(got) != 1 || !got[void.Key].OccurredAt.Equal(at) || got[void.Key].LedgerID != "l1" || got[void.Key].Amount != void.Amount {
		t.Fatalf("voids of l1, l2, l3: %+v; want the void of l1 at %v", got, at)
	}
	got = get("l3", "nope", "l1", "")
	if len(got) != 2 || got["l3"].Amount != 3000 || got["l1"].DocumentReference != "INV-1" ||
		got["l1"].SettlementReference != "sref" || !got["l1"].OccurredAt.Equal(Start()) {
		t.Fatalf("l3, l1 and two keys not queued: %+v", got)
	}
	if got := get(); len(got) != 0 {
		t.Fatalf("no keys: %+v", got)
	}
	update(t, s, func(tx storage.Tx) error {
		if err := tx.SaveSettlement(settlement.Batch{Keys: []string{"l1", void.Key}}); err != nil {
			return err
		}
		items, err := tx.QueuedSettlementItems([]string{"l1", void.Key, "l2"})
		if err != nil || len(items) != 1 || items[0].Key != "l2" {
			t.Fatalf("after l1 and its void were settled, in the same transaction: %+v %v", items, err)
		}
		return nil
	})
	if got := get("l1", void.Key, "l2"); len(got) != 1 || got["l2"].Amount != 2000 {
		t.Fatalf("after l1 and its void were settled: %+v", got)
	}
}
