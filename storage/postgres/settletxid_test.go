package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestSettlementPageAfterIDIsLookedUp: a page of a settlement's transactions
// after fromId finds that transaction by an index on its id, not by reading
// the settlement's transactions until it turns up (a page near the end of
// 100 000 took 32 ms, and a walk of all of them the square of that).
func TestSettlementPageAfterIDIsLookedUp(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	s, err := Open(ctx, pgtest.FreshSchema(t), Options{Clock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := settlement.Batch{Settlement: settlement.Settlement{ID: "stl-1", MerchantID: "m1", Currency: money.Currency("SEK"), CreatedAt: at}}
	for i := range 3000 {
		b.Transactions = append(b.Transactions, settlement.Transaction{ID: fmt.Sprintf("tx-%05d", i*7919%3000),
			SettlementID: "stl-1", Seq: i + 1, Type: settlement.KindCapture, Amount: 100, Currency: money.Currency("SEK")})
	}
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.SaveSettlement(b) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE settlement_transactions"); err != nil {
		t.Fatal(err)
	}
	last := b.Transactions[2990]
	err = s.View(ctx, func(tx storage.Tx) error {
		page, _, err := tx.SettlementTransactions("m1", "stl-1", last.ID, 5)
		if err == nil && (len(page) != 5 || page[0].Seq != last.Seq+1) {
			err = fmt.Errorf("after %s (seq %d): %+v", last.ID, last.Seq, page)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plan := explainLines(t, s.pool, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT seq FROM settlement_transactions
		WHERE merchant_id = $1 AND settlement_id = $2 AND id = $3`, "m1", "stl-1", last.ID)
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Rows Removed by Filter") || strings.Contains(text, "Seq Scan") {
		t.Fatalf("the transaction after which a page starts is found by reading others:\n%s", text)
	}
}
