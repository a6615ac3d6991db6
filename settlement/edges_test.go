package settlement

import (
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// The cases below each pin a settlement rule that a hand-made mutation of
// the rule's code left every other test passing.

// TestRefundOneUnitBeyondTheClaim: after a recourse, a refund that goes one
// minor unit past the claim the merchant still holds takes that unit back.
func TestRefundOneUnitBeyondTheClaim(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	amt := int64(10000)
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("x", 1, amt, 2500)},
		TotalCaptureAmount: &amt}, f.Env()); err != nil {
		t.Fatal(err)
	}
	capID := o.Captured[0].ID
	if err := o.RegisterPayment(capID, 6000, f.Env()); err != nil {
		t.Fatal(err)
	}
	if err := o.Recourse(capID, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")}, f.Env()); err != nil {
		t.Fatal(err)
	}
	before := o.Clone()
	r := int64(4001) // the claim is 4000
	if _, err := refund.Partial(o, capID, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("r", 1, r, 2500)},
		TotalRefundAmount: &r}, f.Env()); err != nil {
		t.Fatal(err)
	}
	got := NewItems(before, o)
	if len(got) != 1 || got[0].Kind != KindRefund || got[0].Amount != 1 {
		t.Fatalf("items %+v, want one refund of 1", got)
	}
}

// TestVoidSettledUnderTheCapturesReferences: a void takes back what the
// capture paid, under the references it was paid under, not the order's
// references as edited since.
func TestVoidSettledUnderTheCapturesReferences(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.DefaultLines()...)
	r.Reference, r.SettlementReference = "PO-1", "SR-1"
	o := f.Create(t, r, ordertest.Authorization(0))
	if _, err := capture.Full(o, &capture.FullRequest{}, f.Env()); err != nil {
		t.Fatal(err)
	}
	if err := o.SetReference(&order.ReferenceRequest{Reference: ordertest.Ptr("PO-2"), SettlementReference: ordertest.Ptr("SR-2")}, f.Env()); err != nil {
		t.Fatal(err)
	}
	before := o.Clone()
	if err := o.CancelLedger(o.Captured[0].ID, f.Env()); err != nil {
		t.Fatal(err)
	}
	got := NewItems(before, o)
	if len(got) != 1 || got[0].Kind != kindVoid || got[0].MerchantReference != "PO-1" || got[0].SettlementReference != "SR-1" {
		t.Fatalf("items %+v, want one void under PO-1 / SR-1", got)
	}
}

// TestTransactionSeq: a settlement's transactions are numbered 1, 2, … in
// the order they are listed.
func TestTransactionSeq(t *testing.T) {
	at := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	items := []Item{
		{Key: "c1", MerchantID: "m1", Currency: "SEK", LedgerID: "c1", Kind: KindCapture, Amount: 10000, OccurredAt: at},
		{Key: "r1", MerchantID: "m1", Currency: "SEK", LedgerID: "r1", Kind: KindRefund, Amount: 2500, OccurredAt: at.Add(time.Minute)},
	}
	bs, err := Run(items, testEnv(at))
	if err != nil {
		t.Fatal(err)
	}
	txs := bs[0].Transactions
	if len(txs) != 3 {
		t.Fatalf("%d transactions", len(txs))
	}
	for i, tx := range txs {
		if tx.Seq != i+1 {
			t.Fatalf("transaction %d has seq %d", i, tx.Seq)
		}
	}
}
