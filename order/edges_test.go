package order_test

import (
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// The cases below each pin a money rule that a hand-made mutation of the
// rule's code left every other test passing.

// TestLineBoundsAndDerivedUnit pins the line rules at their edges: the
// derived unit price adds the discount back, a rate is never negative, a
// line at rate 0 carries no VAT of either sign, and the line total and a
// derived unit price are bounded to the unit.
func TestLineBoundsAndDerivedUnit(t *testing.T) {
	withDisc := func(l order.LineInput, disc int64) order.LineInput {
		l.UnitDiscountAmount = ptr(disc)
		return l
	}
	derived := func(q, total, disc int64) order.LineInput {
		return order.LineInput{Description: ordertest.Ptr("a"), Quantity: ptr(q), TotalAmount: ptr(total),
			UnitDiscountAmount: ptr(disc), Vat: ptr(2500)}
	}
	t.Run("unit price derived with a discount", func(t *testing.T) {
		// 3 × (1250 − 100) = 3450: the unit price is 1250, not 1050.
		lines, _, err := order.ValidateCreate(ordertest.CreateRequest(derived(3, 3450, 100)), false, &ordertest.IDs{})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "unitPrice", lines[0].UnitPrice, int64(1250))
		equal(t, "unitDiscountAmount", lines[0].UnitDiscountAmount, int64(100))
	})
	for _, tt := range []struct {
		name  string
		lines []order.LineInput
		field string
	}{
		{"negative rate", []order.LineInput{ordertest.Line("a", 1, 100, -2500)}, "orderLines[0].vat"},
		{"negative VAT at rate 0", []order.LineInput{ordertest.LineWithTotals("a", 1, -100, 0, -100, -1),
			ordertest.Line("b", 1, 1000, 0)}, "orderLines[0].totalVatAmount"},
		{"total one over the bound", []order.LineInput{withDisc(ordertest.Line("a", 1, order.MaxLineAmount, 0), -1)}, "orderLines[0].totalAmount"},
		{"derived unit price over the bound", []order.LineInput{derived(1, order.MaxLineAmount, order.MaxLineAmount)}, "orderLines[0].unitPrice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := order.ValidateCreate(ordertest.CreateRequest(tt.lines...), false, &ordertest.IDs{})
			wantFault(t, err, fault.Invalid, "validation_failed", tt.field)
		})
	}
}

// TestPaymentBounds pins RegisterPayment to 1..outstanding, and a payment
// of all that is outstanding to fullyPaid; a paid invoice is no longer
// offered void (it would take back money the buyer paid).
func TestPaymentBounds(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t) // 28780
	c, err := capture.Full(o, &capture.FullRequest{}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	id := c.ID
	for _, amount := range []int64{0, -1, 28781} {
		before := snapshot(t, o)
		wantFault(t, o.RegisterPayment(id, amount, f.Env()), fault.Invalid, "validation_failed", "amount")
		equal(t, "order after refused payment", snapshot(t, o), before)
	}
	if err := o.RegisterPayment(id, 100, f.Env()); err != nil {
		t.Fatal(err)
	}
	l := o.Ledger(id)
	equal(t, "statuses after part", l.Status, []order.SubStatus{order.SubPartiallyPaid})
	for _, a := range actions(o, l, f) {
		if a == order.ActionVoid {
			t.Fatalf("void offered on a capture paid in part: %v", actions(o, l, f))
		}
	}
	if err := o.RegisterPayment(id, 28680, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "statuses after all", l.Status, []order.SubStatus{order.SubFullyPaid})
	equal(t, "outstanding", o.Outstanding(l), int64(0))
}

// TestEventAmounts pins the amounts events carry where the other tests
// leave them open: an edit after a capture carries the new remainder (not
// the new authorization), an edit that does not raise the authorization
// appends no authorize, and a void carries the capture's gross.
func TestEventAmounts(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("a", 1, 10000, 2500), ordertest.Line("b", 1, 20000, 2500)) // 30000, approved 60000
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(o.Uncaptured.Lines[0].ID)},
		TotalCaptureAmount: ptr(10000)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	// The remainder 20000 edited to 20000 again: authorized stays 30000.
	n := len(o.Events)
	if err := o.Edit(withTotals(editTo(ordertest.Line("c", 1, 20000, 2500)), 20000, 16000, 4000), f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "events", eventTypes(o)[n:], []order.EventType{order.EventEdit})
	equal(t, "edit amount", o.Events[n].Amount, int64(20000))
	equal(t, "authorized", o.AuthorizedAmount, int64(30000))

	capID := o.Captured[0].ID
	if err := o.CancelLedger(capID, f.Env()); err != nil {
		t.Fatal(err)
	}
	last := o.Events[len(o.Events)-1]
	equal(t, "void event", []any{last.Type, last.LedgerID, last.Amount}, []any{order.EventCancel, capID, int64(10000)})
}

// TestApprovedZero pins an authorization that approved 0: an order above
// it is refused, not given its own total as the ceiling.
func TestApprovedZero(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("a", 1, 100, 0))
	lines, mode, err := order.ValidateCreate(r, false, f.IDs)
	if err != nil {
		t.Fatal(err)
	}
	auth := ordertest.Authorization(0)
	auth.ApprovedZero = true
	_, err = order.Create("merchant-1", r, lines, mode, auth, f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
}

// TestVoidDoesNotFreeAuthorization: a voided capture keeps what it used of
// the authorization (design.md §3: consumed counts every capture), so what
// may still be captured is authorized − consumed, not authorized −
// captured; and a refund credits no more VAT than its capture has left.
func TestVoidDoesNotFreeAuthorization(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("a", 1, 10000, 2500), ordertest.Line("b", 1, 20000, 2500)) // 30000, approved 60000
	c, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(o.Uncaptured.Lines[0].ID)},
		TotalCaptureAmount: ptr(10000)}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if err := o.CancelLedger(c.ID, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "remaining authorization", o.RemainingAuthorization(), int64(20000))
	before := snapshot(t, o)
	_, err = capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("extra", 1, 20001, 0)},
		TotalCaptureAmount: ptr(20001)}, f.Env())
	if fault.CodeOf(err) != "capture_exceeds_authorization" {
		t.Fatalf("a capture of 20001 with 20000 of the authorization left: %v, want capture_exceeds_authorization", err)
	}
	equal(t, "order after refused capture", snapshot(t, o), before)
}

func TestRefundableVAT(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("a", 1, 10000, 2500)) // VAT 2000
	c, err := capture.Full(o, &capture.FullRequest{}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refund.Partial(o, c.ID, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("r", 1, 5000, 2500)},
		TotalRefundAmount: ptr(5000)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	got := o.Refundable(o.Ledger(c.ID))
	equal(t, "refundable", []int64{got.Gross, got.Net, got.VAT}, []int64{5000, 4000, 1000})
}
