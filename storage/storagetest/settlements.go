package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
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
		var all []string
		q := settlement.Query{Size: 1}
		for {
			page, next, err := tx.ListSettlements("m1", q)
			if err != nil {
				return err
			}
			for _, p := range page {
				all = append(all, p.Reference)
			}
			if next == "" {
				break
			}
			q.FromID = next
		}
		if !slices.Equal(all, []string{"S-000003", "S-000002", "S-000001"}) {
			t.Fatalf("list %v", all)
		}
		q = settlement.Query{Size: 10, StoreIDs: []string{"b"}}
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
