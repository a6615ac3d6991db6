package refund_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

var p = ordertest.Ptr[int64]

func wantFault(t testing.TB, err error, kind fault.Kind, code string, fields ...string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v, want a fault of kind %s", err, kind)
	}
	if fe.Kind != kind || fe.Code != code {
		t.Fatalf("error kind/code = %s/%s, want %s/%s (%v)", fe.Kind, fe.Code, kind, code, err)
	}
	var got []string
	for _, f := range fe.Fields {
		got = append(got, f.Field)
	}
	if fields != nil && !slices.Equal(got, fields) {
		t.Fatalf("error fields = %q, want %q (%v)", got, fields, err)
	}
}

// captured returns an order whose line-1 (2 × 100.00 at 25 %) was captured, and that capture's id.
func captured(t *testing.T) (*ordertest.Fixture, *order.Order, string) {
	f := ordertest.New()
	o := f.Order(t)
	l, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID("line-1")},
		TotalCaptureAmount: p(20000)}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	return f, o, l.ID
}

func partial(total int64, lines ...order.LineInput) *refund.PartialRequest {
	return &refund.PartialRequest{OrderLines: lines, TotalRefundAmount: p(total)}
}

// A refund line copied from Get order carries its id; refund lines are
// described, not picked, so the id is ignored like any key that names no
// field of the spec's OrderLine, and the credit note's line gets its own.
func TestPartialRefundIgnoresALineID(t *testing.T) {
	f, o, ledger := captured(t)
	copied := o.Ledger(ledger).Lines[0].ID
	l, err := refund.Partial(o, ledger, partial(100, order.LineInput{ID: &copied, Description: ordertest.Ptr("x"), Quantity: p(1), UnitPrice: p(100)}), f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Lines) != 1 || l.Lines[0].ID == copied || l.Lines[0].TotalAmount != 100 {
		t.Fatalf("refund lines %+v: want one line of 100 with an id of its own (not %s)", l.Lines, copied)
	}
}

func TestPartialRefundRefusals(t *testing.T) {
	long := strings.Repeat("n", 201)
	nul := "damaged\x00"
	tests := []struct {
		name   string
		ledger string
		req    *refund.PartialRequest
		kind   fault.Kind
		code   string
		fields []string
	}{
		{"over-refund", "ledger-2", partial(20001, ordertest.Line("Widget", 1, 20001, 2500)), fault.Invalid, "refund_exceeds_captured", []string{"totalRefundAmount"}},
		{"amount mismatch", "ledger-2", partial(10001, ordertest.Line("Widget", 1, 10000, 2500)), fault.Invalid, "refund_amount_mismatch", []string{"totalRefundAmount"}},
		{"zero", "ledger-2", partial(0, ordertest.Line("Nothing", 1, 0, 0)), fault.Invalid, "refund_amount_invalid", []string{"totalRefundAmount"}},
		{"no lines, no total, long note", "ledger-2", &refund.PartialRequest{Note: &long}, fault.Invalid, "validation_failed", []string{"orderLines", "totalRefundAmount", "note"}},
		{"note with NUL", "ledger-2", &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("Widget", 1, 10000, 2500)}, TotalRefundAmount: p(10000), Note: &nul}, fault.Invalid, "validation_failed", []string{"note"}},
		{"uncaptured ledger", "ledger-1", partial(100, ordertest.Line("x", 1, 100, 0)), fault.NotAvailable, "action_not_available", nil},
		{"unknown ledger", "ledger-9", partial(100, ordertest.Line("x", 1, 100, 0)), fault.NotFound, "ledger_not_found", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, o, _ := captured(t)
			before := snapshot(t, o)
			l, err := refund.Partial(o, tt.ledger, tt.req, f.Env())
			if l != nil {
				t.Fatalf("refunded %+v", l)
			}
			wantFault(t, err, tt.kind, tt.code, tt.fields...)
			if snapshot(t, o) != before || f.Seq.Last(order.SeriesCreditNote) != 0 {
				t.Fatal("refused refund changed the order or took a number")
			}
		})
	}
}

func TestRefunds(t *testing.T) {
	f, o, cid := captured(t)
	note := "damaged"
	r1, err := refund.Partial(o, cid, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("Widget", 1, 10000, 2500)},
		TotalRefundAmount: p(10000), Note: &note}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if r1.RefundOf != cid || r1.Note != "damaged" || r1.DocumentReference != "CN-00000001" || r1.DocumentSeq != 1 {
		t.Fatalf("refund %+v", r1)
	}
	last := o.Events[len(o.Events)-1]
	if last.Type != order.EventPartialRefund || last.Amount != 10000 || last.LedgerID != r1.ID || o.UpdatedAt != last.CreatedAt {
		t.Fatalf("event %+v", last)
	}
	now := f.Clock.Now()
	if got := o.Statuses(now); !slices.Equal(got, []order.Status{order.StatusUncaptured, order.StatusPartiallyCaptured,
		order.StatusPartiallyRefunded, order.StatusReadyForCapture}) {
		t.Fatalf("statuses %v", got)
	}
	// A refunded invoice is no longer voidable.
	wantFault(t, o.CancelLedger(cid, f.Env()), fault.NotAvailable, "action_not_available")
	// Over-refund of what remains.
	_, err = refund.Partial(o, cid, partial(10001, ordertest.Line("Widget", 1, 10001, 2500)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_exceeds_captured", "totalRefundAmount")

	// Full refund of the rest: one line per VAT rate, exactly the remainder.
	r2, err := refund.Full(o, cid, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	s := order.SumLines(r2.Lines, o.VATMode)
	if s.Gross != 10000 || s.VAT != 2000 || len(r2.Lines) != 1 || r2.Lines[0].Vat != 2500 || r2.DocumentReference != "CN-00000002" || r2.DocumentSeq != 2 {
		t.Fatalf("full refund %+v sums %+v", r2, s)
	}
	if got := o.RefundedOf(cid); got != 20000 {
		t.Fatalf("refunded of capture %d", got)
	}
	last = o.Events[len(o.Events)-1]
	if last.Type != order.EventFullRefund || last.Amount != 10000 {
		t.Fatalf("event %+v", last)
	}
	if a := o.Amounts(); a.Refunded != 20000 || a.Captured != 20000 {
		t.Fatalf("amounts %+v", a)
	}
	// Everything captured is refunded, but lines remain uncaptured: not fully refunded.
	if !o.HasStatus(order.StatusPartiallyRefunded, f.Clock.Now()) || o.HasStatus(order.StatusFullyRefunded, f.Clock.Now()) {
		t.Fatalf("statuses %v", o.Statuses(f.Clock.Now()))
	}
	before := snapshot(t, o)
	_, err = refund.Full(o, cid, nil, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	_, err = refund.Partial(o, cid, partial(1, ordertest.Line("x", 1, 1, 0)), f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	_, err = refund.Full(o, r2.ID, nil, f.Env()) // a refund cannot be refunded
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if snapshot(t, o) != before {
		t.Fatal("changed")
	}
}

func TestFullRefundRepeatsCapturedLines(t *testing.T) {
	f, o, cid := captured(t)
	note := strings.Repeat("n", 200)
	r, err := refund.Full(o, cid, &refund.FullRequest{Note: &note}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	c := o.Ledger(cid)
	if len(r.Lines) != 1 || r.Lines[0].ID == c.Lines[0].ID || r.Lines[0].TotalAmount != 20000 || r.Lines[0].Quantity != 2 || r.Note != note {
		t.Fatalf("refund lines %+v", r.Lines)
	}
	note += "x"
	_, o2, cid2 := captured(t)
	_, err = refund.Full(o2, cid2, &refund.FullRequest{Note: &note}, f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "note")
}

// After partial refunds at rates the capture did not have, the full refund
// still credits exactly what remains, gross and VAT.
func TestFullRefundAfterMixedRates(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	c, err := capture.Full(o, nil, f.Env()) // 28780 gross, 4780 VAT
	if err != nil {
		t.Fatal(err)
	}
	cid := c.ID
	if _, err := refund.Partial(o, cid, partial(1000, ordertest.Line("goodwill", 1, 1000, 0)), f.Env()); err != nil {
		t.Fatal(err)
	}
	if _, err := refund.Partial(o, cid, partial(5600, ordertest.Line("Food", 1, 5600, 1200)), f.Env()); err != nil {
		t.Fatal(err)
	}
	r, err := refund.Full(o, cid, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	s := order.SumLines(r.Lines, o.VATMode)
	if s.Gross != 28780-1000-5600 || s.VAT != 4780-600 {
		t.Fatalf("remainder %+v", s)
	}
	for _, l := range r.Lines {
		// One unit per rate: its unit price is the line's total.
		if l.Quantity != 1 || l.UnitPrice != l.TotalAmount {
			t.Fatalf("remainder line %+v", l)
		}
	}
	var total, vat int64
	for _, rl := range o.Refunded {
		ss := order.SumLines(rl.Lines, o.VATMode)
		total, vat = total+ss.Gross, vat+ss.VAT
	}
	if total != 28780 || vat != 4780 {
		t.Fatalf("refunded %d VAT %d", total, vat)
	}
}

var snapshot = ordertest.Snapshot

// A credit note may not give back VAT the capture never invoiced; goodwill
// at 0 % on a capture at 25 % stays allowed (TestFullRefundAfterMixedRates).
func TestRefundGivesBackNoVATThatWasNotInvoiced(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("zero-rated", 1, 10000, 0))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	before := ordertest.Snapshot(t, o)
	_, err = refund.Partial(o, c.ID, partial(6000, ordertest.Line("r", 1, 6000, 2500)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_exceeds_captured", "orderLines")
	if ordertest.Snapshot(t, o) != before {
		t.Fatal("a refused refund changed the order")
	}
	if _, err := refund.Partial(o, c.ID, partial(6000, ordertest.Line("r", 1, 6000, 0)), f.Env()); err != nil {
		t.Fatalf("a refund at the invoiced rate: %v", err)
	}
}

// TestPaidStatusDoesNotDependOnOrder: an invoice paid in part whose
// remainder is then refunded is fully paid, as it is when the refund comes
// before the payment.
func TestPaidStatusDoesNotDependOnOrder(t *testing.T) {
	statuses := func(payFirst bool) []order.SubStatus {
		f, o, id := captured(t) // 20000 at 25 %
		pay := func() {
			if err := o.RegisterPayment(id, 15000, f.Env()); err != nil {
				t.Fatal(err)
			}
		}
		if payFirst {
			pay()
		}
		if _, err := refund.Partial(o, id, partial(5000, ordertest.Line("Widget", 1, 5000, 2500)), f.Env()); err != nil {
			t.Fatal(err)
		}
		if !payFirst {
			pay()
		}
		if got := o.Outstanding(o.Ledger(id)); got != 0 {
			t.Fatalf("outstanding %d after paying 15000 of 20000 and refunding 5000", got)
		}
		return o.Ledger(id).Status
	}
	for _, payFirst := range []bool{true, false} {
		if got := statuses(payFirst); !slices.Equal(got, []order.SubStatus{order.SubFullyPaid}) {
			t.Errorf("pay first %v: statuses %v, want [fullyPaid]", payFirst, got)
		}
	}
}

// TestSplitRefundRoundingRefusalNamesTheTolerance: in exclVat, refunding a
// captured 2 × 1002 at 25 % (2 505 with VAT) one unit at a time rounds each
// unit's VAT up to 1 253, so the second unit passes what is left by 1. The
// refusal names the ±1 VAT tolerance, as capture's and edit's do, and
// following it refunds the rest exactly.
func TestSplitRefundRoundingRefusalNamesTheTolerance(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("a", 2, 1002, 2500))
	r.VatMode = "exclVat"
	o := f.Create(t, r, ordertest.Authorization(2505))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refund.Partial(o, c.ID, partial(1002, ordertest.Line("a", 1, 1002, 2500)), f.Env()); err != nil {
		t.Fatal(err)
	}
	const hint = "totalVatAmount may be sent 1 lower"
	second := partial(1002, ordertest.Line("a", 1, 1002, 2500))
	_, err = refund.Partial(o.Clone(), c.ID, second, f.Env())
	wantFault(t, err, fault.Invalid, "refund_exceeds_captured", "totalRefundAmount")
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("refund refusal %q does not name the tolerance", err)
	}
	second.OrderLines[0].TotalVatAmount = p(250)
	if _, err := refund.Partial(o, c.ID, second, f.Env()); err != nil {
		t.Fatalf("following the hint: %v", err)
	}
	if left := o.Refundable(o.Ledger(c.ID)); left.Gross != 0 {
		t.Fatalf("%d left refundable, want none", left.Gross)
	}
	// A refusal by more than rounding says nothing about it.
	_, err = refund.Partial(o.Clone(), c.ID, partial(5, ordertest.Line("b", 1, 5, 0)), f.Env())
	if err == nil || strings.Contains(err.Error(), hint) {
		t.Fatalf("refusal %v", err)
	}
}

// A partial refund that credits all that is left of a capture is its last,
// so it must credit the VAT left too: 2 × 0.03 at 12 % invoices 0.01 of VAT
// and each unit on its own computes 0.00, which once left the 0.01 invoiced
// and never credited, with no refund able to follow.
func TestLastPartialRefundCreditsTheVATLeft(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Screw", 2, 3, 1200))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if v := order.SumLines(c.Lines, o.VATMode).VAT; v != 1 {
		t.Fatalf("invoiced VAT %d, want 1", v)
	}
	cid := c.ID
	if _, err := refund.Partial(o, cid, partial(3, ordertest.Line("Screw", 1, 3, 1200)), f.Env()); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, o)
	_, err = refund.Partial(o, cid, partial(3, ordertest.Line("Screw", 1, 3, 1200)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_vat_mismatch", "orderLines")
	if snapshot(t, o) != before {
		t.Fatal("a refused refund changed the order")
	}
	if _, err := refund.Partial(o, cid, partial(3, ordertest.LineWithTotals("Screw", 1, 3, 1200, 3, 1)), f.Env()); err != nil {
		t.Fatalf("the last unit with its VAT stated 1 off: %v", err)
	}
	var vat int64
	for _, rl := range o.Refunded {
		vat += order.SumLines(rl.Lines, o.VATMode).VAT
	}
	if vat != 1 {
		t.Fatalf("credited VAT %d, invoiced 1", vat)
	}
}

// Lines at two rates can round opposite ways and credit the right VAT in
// all while each rate is off by one; the last refund must match each rate.
func TestLastPartialRefundCreditsEachRate(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("A", 2, 153, 2500), ordertest.Line("B", 2, 533526, 13))
	r.VatMode = "exclVat"
	o := f.Create(t, r, ordertest.Authorization(0))
	c, err := capture.Full(o, nil, f.Env()) // VAT 77 (76.5) at 25 %, 1387 (1387.17) at 0.13 %
	if err != nil {
		t.Fatal(err)
	}
	cid := c.ID
	for _, in := range []order.LineInput{ordertest.Line("A", 1, 153, 2500), ordertest.Line("B", 1, 533526, 13), ordertest.Line("B", 1, 533526, 13)} {
		if _, err := refund.Partial(o, cid, partial(*in.Quantity**in.UnitPrice, in), f.Env()); err != nil {
			t.Fatal(err)
		}
	}
	// 38 (38.25) at 25 % and 2 × 694 (693.58) at 0.13 %: the one A left
	// would credit 38 of the 39 left at 25 %, the total VAT coming out right.
	_, err = refund.Partial(o, cid, partial(153, ordertest.Line("A", 1, 153, 2500)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_vat_mismatch", "orderLines")
	if _, err := refund.Full(o, cid, nil, f.Env()); err != nil {
		t.Fatal(err)
	}
	if l := o.Refunded[len(o.Refunded)-1].Lines; len(l) != 2 || l[0].Vat != 13 || l[0].TotalAmount != 0 || l[0].TotalVatAmount != -1 ||
		l[1].Vat != 2500 || l[1].TotalAmount != 153 || l[1].TotalVatAmount != 39 {
		t.Fatalf("full refund lines %+v", l)
	}
}

// The last minor unit of a capture can only be refunded by closing every
// rate (TestLastPartialRefundCreditsEachRate). In exclVat a goodwill refund
// at 0 % can leave that unit as VAT 2 over a net of -1: a partial refund of
// it needs a totalRefundAmount of -1, below the spec's bound, so only the
// full refund can return it, and partialRefund must not be offered.
func TestLastUnitWithNegativeNetOffersOnlyTheFullRefund(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("thing", 1, 8, 2500))
	r.VatMode = "exclVat"
	o := f.Create(t, r, ordertest.Authorization(0))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refund.Partial(o, c.ID, partial(9, ordertest.Line("goodwill", 1, 9, 0)), f.Env()); err != nil {
		t.Fatal(err)
	}
	if left := o.Refundable(c); left.Gross != 1 || left.Sum != -1 {
		t.Fatalf("left %+v, want a gross of 1 over a net of -1", left)
	}
	acts := o.Actions(c, f.Clock.Now(), f.Policy)
	if slices.Contains(acts, order.ActionPartialRefund) || !slices.Contains(acts, order.ActionRefund) {
		t.Fatalf("actions %v, want refund without partialRefund", acts)
	}
	// What partialRefund would have promised: no body closes every rate.
	_, err = refund.Partial(o, c.ID, partial(1, ordertest.Line("last", 1, 1, 0)), f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if _, err := refund.Full(o, c.ID, nil, f.Env()); err != nil {
		t.Fatalf("full refund of the last unit: %v", err)
	}
}

// A credit note is held to the bounds an invoice is: lines of a partial
// refund at different rates must not credit more VAT than the refund's own
// amount including VAT (crediting VAT at 25 % while charging back net at
// 0 % moves the capture from one rate to another).
func TestPartialRefundVATWithinItsGross(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Goods 25", 1, 10000, 2500), ordertest.Line("Goods 0", 1, 10000, 0))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	before := ordertest.Snapshot(t, o)
	// Gross 100 = net −900 + VAT 1 000.
	_, err = refund.Partial(o, c.ID, partial(100, ordertest.Line("Goods 25", 1, 5000, 2500), ordertest.Line("Goods 0", 1, -4900, 0)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_vat_out_of_bounds", "orderLines")
	if ordertest.Snapshot(t, o) != before || f.Seq.Last(order.SeriesCreditNote) != 0 {
		t.Fatal("a refused refund changed the order or took a number")
	}
	// Lines at two rates whose VAT stays within the refund's gross are fine.
	if _, err := refund.Partial(o, c.ID, partial(5100, ordertest.Line("Goods 25", 1, 5000, 2500), ordertest.Line("Goods 0", 1, 100, 0)), f.Env()); err != nil {
		t.Fatal(err)
	}
}

// totalRefundAmount is bounded by 0..MaxTotal inclusive, before the order
// is read.
func TestRefundTotalBounds(t *testing.T) {
	line := ordertest.Line("x", 1, 100, 0)
	for _, tt := range []struct {
		total int64
		ok    bool
	}{{-1, false}, {0, true}, {order.MaxTotal, true}, {order.MaxTotal + 1, false}} {
		err := partial(tt.total, line).Validate()
		if tt.ok && err != nil {
			t.Errorf("total %d: %v", tt.total, err)
		}
		if !tt.ok {
			wantFault(t, err, fault.Invalid, "validation_failed", "totalRefundAmount")
		}
	}
}

// A credit note may not charge VAT back either: a positive refund whose
// lines net to negative VAT is refused, though its gross and net are fine.
func TestRefundCreditsNoNegativeVAT(t *testing.T) {
	f, o, cid := captured(t) // 20000 at 25 %, VAT 4000
	before := snapshot(t, o)
	// 200 at 0 % and −100 at 25 % (VAT −20): gross 100, VAT −20, net 120.
	_, err := refund.Partial(o, cid, partial(100, ordertest.Line("Goods 0", 1, 200, 0), ordertest.Line("Credit 25", 1, -100, 2500)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_exceeds_captured", "orderLines")
	if snapshot(t, o) != before || f.Seq.Last(order.SeriesCreditNote) != 0 {
		t.Fatal("a refused refund changed the order or took a number")
	}
}

// The bound on a partial refund's VAT is exact: VAT one above its gross
// (a net of −1) is refused.
func TestPartialRefundNetOfMinusOne(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Goods 25", 1, 10000, 2500), ordertest.Line("Goods 0", 1, 10000, 0))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	// 10 at 25 % (VAT 2) and −9 at 0 %: gross 1, VAT 2, net −1.
	_, err = refund.Partial(o, c.ID, partial(1, ordertest.Line("Goods 25", 1, 10, 2500), ordertest.Line("Goods 0", 1, -9, 0)), f.Env())
	wantFault(t, err, fault.Invalid, "refund_vat_out_of_bounds", "orderLines")
}

// The refund of all that is left is exempt from that bound: after goodwill
// at 0 %, what is left can be VAT over a negative net, and a partial refund
// that closes every rate credits it as it is.
func TestClosingPartialRefundMayHaveANegativeNet(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Goods 25", 1, 100, 2500))
	c, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refund.Partial(o, c.ID, partial(90, ordertest.Line("goodwill", 1, 90, 0)), f.Env()); err != nil {
		t.Fatal(err)
	}
	// Left: 100 at 25 % (VAT 20) and −90 at 0 %: gross 10, VAT 20, net −10.
	r, err := refund.Partial(o, c.ID, partial(10, ordertest.Line("Goods 25", 1, 100, 2500), ordertest.Line("goodwill", 1, -90, 0)), f.Env())
	if err != nil {
		t.Fatalf("closing refund: %v", err)
	}
	if s := order.SumLines(r.Lines, o.VATMode); s.Gross != 10 || s.VAT != 20 {
		t.Fatalf("closing refund sums %+v", s)
	}
	if left := o.Refundable(c); left != (order.Totals{}) {
		t.Fatalf("left %+v after the closing refund", left)
	}
}
