package kassa_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/memory"
)

// TestSettlementTransactionsSize: Ledger.SettlementTransactions passed its
// size to the store unchecked, and a size of 0 (what ListNotifications takes
// as its default page) made every store index the page at -1: a panic in
// the embedder's process. It takes 0 as settlement.DefaultPageSize and
// refuses a size outside 1..settlement.MaxPageSize, as ListSettlements does.
func TestSettlementTransactionsSize(t *testing.T) {
	stores := map[string]func(t *testing.T) storage.Store{
		"memory": func(t *testing.T) storage.Store { return memory.New(nil) },
		"bolt": func(t *testing.T) storage.Store {
			st, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ledger := kassa.New(open(t), kassa.Options{})
			call, o := newOrder(ctx, ledger, time.Now(), kassa.MerchantOptions{FeeBasisPoints: 150}) // a capture and its fee
			if _, err := ledger.Capture(ctx, call, o.ID, nil); err != nil {
				t.Fatal(err)
			}
			made, err := ledger.RunSettlements(ctx)
			if err != nil || len(made) != 1 || made[0].TransactionCount != 2 {
				t.Fatalf("settlements %v, %v", made, err)
			}
			id := made[0].ID
			page, err := ledger.SettlementTransactions(ctx, call.MerchantID, id, "", 0)
			if err != nil {
				t.Fatalf("size 0: %v", err)
			}
			if len(page.Transactions) != made[0].TransactionCount || page.NextFromID != "" {
				t.Fatalf("size 0: %d transactions, next %q; want %d, none", len(page.Transactions), page.NextFromID, made[0].TransactionCount)
			}
			page, err = ledger.SettlementTransactions(ctx, call.MerchantID, id, "", 1)
			if err != nil || len(page.Transactions) != 1 || page.NextFromID != page.Transactions[0].ID {
				t.Fatalf("size 1: %+v, %v", page, err)
			}
			for _, size := range []int{-1, settlement.MaxPageSize + 1} {
				_, err := ledger.SettlementTransactions(ctx, call.MerchantID, id, "", size)
				ordertest.WantFault(t, err, fault.Invalid, "validation_failed", "size")
			}
		})
	}
}
