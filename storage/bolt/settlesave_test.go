package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// A settlement's transaction ids are random, and bbolt splits a leaf only at
// commit: ids put in their own order all went into one growing node, each
// put shifting the entries after it, so saving a settlement of 100 000
// transactions held the writer (every mutation) for 7 s. The id index must
// be written in key order; the journal records the order of the puts.
func TestSaveSettlementPutsTheIDIndexInKeyOrder(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "kassa.db"), Options{NoSync: true, Clock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := settlement.Batch{Settlement: settlement.Settlement{ID: "stl-1", MerchantID: "m1", Currency: money.Currency("SEK"), CreatedAt: at}}
	for i := range 500 {
		// ids in an order that is not theirs: a hash-like spread.
		b.Transactions = append(b.Transactions, settlement.Transaction{ID: fmt.Sprintf("tx-%04d", i*7919%500),
			SettlementID: "stl-1", Seq: i + 1, Type: settlement.KindCapture, Amount: 100, Currency: money.Currency("SEK")})
	}
	var puts [][]byte
	err = s.Update(context.Background(), func(stx storage.Tx) error {
		if err := stx.SaveSettlement(b); err != nil {
			return err
		}
		for _, u := range stx.(*tx).journal {
			if bytes.Equal(u.bucket, bSettleTxID) {
				puts = append(puts, u.key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(puts) != len(b.Transactions) {
		t.Fatalf("%d id index entries written for %d transactions", len(puts), len(b.Transactions))
	}
	for i := 1; i < len(puts); i++ {
		if bytes.Compare(puts[i-1], puts[i]) >= 0 {
			t.Fatalf("id index entry %d (%q) was put after %q", i, puts[i], puts[i-1])
		}
	}
	// Every id still finds its place.
	err = s.View(context.Background(), func(stx storage.Tx) error {
		for _, tr := range []settlement.Transaction{b.Transactions[0], b.Transactions[250], b.Transactions[498]} {
			page, _, err := stx.SettlementTransactions("m1", "stl-1", tr.ID, 1)
			if err != nil {
				return err
			}
			if len(page) != 1 || page[0].Seq != tr.Seq+1 {
				return fmt.Errorf("after %s (seq %d): %+v", tr.ID, tr.Seq, page)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
