package kassa_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// chunkedReads is a store whose read transactions record the largest page
// of settlement transactions asked for.
type chunkedReads struct {
	storage.Store
	largest int
}

type sizeTx struct {
	storage.Tx
	s *chunkedReads
}

func (s *chunkedReads) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.View(ctx, func(tx storage.Tx) error { return fn(sizeTx{tx, s}) })
}

func (t sizeTx) SettlementTransactions(merchantID, id, fromID string, size int) ([]settlement.Transaction, string, error) {
	t.s.largest = max(t.s.largest, size)
	return t.Tx.SettlementTransactions(merchantID, id, fromID, size)
}

// TestExportReadsASettlementInChunks: the CSV export of a large settlement
// reads its transactions a chunk at a time, not all at once (100 000
// decoded transactions and their JSON were about 190 MB per export under
// way), and the file is the same as one written from all of them.
func TestExportReadsASettlementInChunks(t *testing.T) {
	kassa.SetExportChunk(t, 7)
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	st := &chunkedReads{Store: memory.New(func() time.Time { return now })}
	l := kassa.New(st, kassa.Options{})
	ctx := context.Background()
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	m := creds.MerchantID
	err = st.Update(ctx, func(tx storage.Tx) error {
		var items []settlement.Item
		for i := range 30 {
			kind := settlement.KindCapture
			if i%4 == 3 {
				kind = settlement.KindRefund
			}
			items = append(items, settlement.Item{Key: fmt.Sprintf("l-%02d", i), MerchantID: m, StoreID: "s", Currency: money.Currency("SEK"),
				OrderID: fmt.Sprintf("o-%02d", i), LedgerID: fmt.Sprintf("l-%02d", i), Kind: kind, Amount: int64(1000 + i),
				MerchantReference: "=ref", OccurredAt: now.Add(time.Duration(i-60) * time.Minute)})
		}
		return tx.QueueSettlementItems(items)
	})
	if err != nil {
		t.Fatal(err)
	}
	made, err := l.RunSettlements(ctx)
	if err != nil || len(made) != 1 {
		t.Fatalf("settlements: %v %v", made, err)
	}
	s := made[0]
	var all []settlement.Transaction
	err = st.Store.View(ctx, func(tx storage.Tx) error {
		all, _, err = tx.SettlementTransactions(m, s.ID, "", 1000)
		return err
	})
	if err != nil || len(all) < 30 {
		t.Fatalf("%d transactions, %v", len(all), err)
	}
	var want, got bytes.Buffer
	if err := settlement.WriteCSV(&want, &s, all); err != nil {
		t.Fatal(err)
	}
	if err := l.ExportSettlement(ctx, m, s.ID, &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("export:\n%s\nwant:\n%s", got.String(), want.String())
	}
	if st.largest > 7 {
		t.Fatalf("the export read %d transactions in one read transaction; the chunk is 7", st.largest)
	}
}
