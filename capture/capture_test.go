package capture_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

var p = ordertest.Ptr[int64]

func partial(total int64, lines ...order.LineInput) *capture.PartialRequest {
	return &capture.PartialRequest{OrderLines: lines, TotalCaptureAmount: p(total)}
}

func TestPartialRefusals(t *testing.T) {
	line3 := order.LineInput{ID: ordertest.Ptr("line-3"), Quantity: p(2)}
	tests := []struct {
		name   string
		req    *capture.PartialRequest
		kind   fault.Kind
		code   string
		fields []string
	}{
		{"amount mismatch", partial(20001, ordertest.ByID("line-1")), fault.Invalid, "capture_amount_mismatch", []string{"totalCaptureAmount"}},
		{"amount mismatch, no id", partial(99, ordertest.Line("x", 1, 100, 0)), fault.Invalid, "capture_amount_mismatch", []string{"totalCaptureAmount"}},
		{"total missing", &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID("line-1")}}, fault.Invalid, "validation_failed", []string{"totalCaptureAmount"}},
		{"no lines", partial(0), fault.Invalid, "validation_failed", []string{"orderLines"}},
		{"total out of bounds", partial(-1, ordertest.ByID("line-1")), fault.Invalid, "validation_failed", []string{"totalCaptureAmount"}},
		{"unknown id", partial(100, ordertest.ByID("line-9")), fault.Invalid, "validation_failed", []string{"orderLines[0].id"}},
		{"empty id", partial(100, ordertest.ByID("")), fault.Invalid, "validation_failed", []string{"orderLines[0].id"}},
		{"same id twice", partial(40000, ordertest.ByID("line-1"), ordertest.ByID("line-1")), fault.Invalid, "validation_failed", []string{"orderLines[1].id"}},
		{"part of an identified line", partial(2120, line3), fault.Invalid, "validation_failed", []string{"orderLines[0].quantity"}},
		{"identified line with other amounts", partial(1, order.LineInput{ID: ordertest.Ptr("line-2"), TotalAmount: p(1), UnitPrice: p(1), TotalVatAmount: p(0)}),
			fault.Invalid, "validation_failed", []string{"orderLines[0].totalAmount", "orderLines[0].unitPrice", "orderLines[0].totalVatAmount"}},
		{"identified line at another rate", partial(5600, order.LineInput{ID: ordertest.Ptr("line-2"), Vat: p(0)}),
			fault.Invalid, "validation_failed", []string{"orderLines[0].vat"}},
		{"identified line with other text", partial(5600, order.LineInput{ID: ordertest.Ptr("line-2"), Description: ordertest.Ptr("Export"),
			Reference: "SKU-1", Type: "service", UnitDiscountAmount: p(1)}),
			fault.Invalid, "validation_failed", []string{"orderLines[0].unitDiscountAmount", "orderLines[0].description", "orderLines[0].reference", "orderLines[0].type"}},
		{"invalid new line", partial(0, order.LineInput{Description: ordertest.Ptr("x"), Quantity: p(0), UnitPrice: p(1)}, ordertest.ByID("line-1")),
			fault.Invalid, "validation_failed", []string{"orderLines[0].quantity"}},
		{"negative capture", partial(-100, ordertest.Line("credit", 1, -100, 0)), fault.Invalid, "validation_failed", []string{"totalCaptureAmount"}},
		{"beyond the authorization", partial(28781, ordertest.Line("x", 1, 28781, 0)), fault.Invalid, "capture_exceeds_authorization", []string{"totalCaptureAmount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ordertest.New()
			o := f.Order(t)
			before := snapshot(t, o)
			l, err := capture.Partial(o, tt.req, f.Env())
			if l != nil {
				t.Fatalf("captured %+v", l)
			}
			wantFault(t, err, tt.kind, tt.code, tt.fields...)
			if snapshot(t, o) != before {
				t.Fatal("refused capture changed the order")
			}
			if f.Seq.Last(order.SeriesInvoice) != 0 {
				t.Fatal("refused capture took an invoice number")
			}
		})
	}
}

func TestNegativeLinesCaptureOnlyWithinAPositiveTotal(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Item", 1, 10000, 2500), ordertest.Line("Rebate", 1, -2000, 2500))
	_, err := capture.Partial(o, partial(-2000, ordertest.ByID("line-2")), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "totalCaptureAmount") // out of 0..1e9
	_, err = capture.Partial(o, partial(10000, ordertest.ByID("line-1")), f.Env())
	wantFault(t, err, fault.Invalid, "capture_exceeds_authorization", "totalCaptureAmount") // 8000 authorized
	l, err := capture.Partial(o, partial(8000, ordertest.ByID("line-1"), ordertest.ByID("line-2")), f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if got := order.SumLines(l.Lines, o.VATMode); got.Gross != 8000 || got.VAT != 1600 || got.Net != 6400 {
		t.Fatalf("capture sums %+v", got)
	}
	if a := o.Amounts(); a != (order.Amounts{Order: 8000, Captured: 8000, Consumed: 8000}) {
		t.Fatalf("amounts %+v", a)
	}
}

func TestCaptureStateRefusals(t *testing.T) {
	ops := map[string]func(o *order.Order, env order.Env) error{
		"partial with id": func(o *order.Order, env order.Env) error {
			_, err := capture.Partial(o, partial(20000, ordertest.ByID("line-1")), env)
			return err
		},
		"partial without id": func(o *order.Order, env order.Env) error {
			_, err := capture.Partial(o, partial(100, ordertest.Line("x", 1, 100, 0)), env)
			return err
		},
		"full": func(o *order.Order, env order.Env) error {
			_, err := capture.Full(o, nil, env)
			return err
		},
		"full with lines": func(o *order.Order, env order.Env) error {
			_, err := capture.Full(o, &capture.FullRequest{OrderLines: []order.LineInput{ordertest.ByID("line-1")}}, env)
			return err
		},
	}
	states := map[string]func(t *testing.T, f *ordertest.Fixture) *order.Order{
		"cancelled": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			if err := o.Cancel(f.Env()); err != nil {
				t.Fatal(err)
			}
			return o
		},
		"expired": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			f.Clock.Advance(28 * 24 * time.Hour)
			return o
		},
		"expired and marked, clock back": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			f.Clock.Advance(29 * 24 * time.Hour)
			o.MarkExpired(f.Env())
			f.Clock.T = ordertest.Start().Add(time.Hour)
			return o
		},
		"advanceInvoice unacknowledged": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			a := ordertest.Authorization(0)
			a.PaymentMethod.Type = order.PayAdvanceInvoice
			return f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), a)
		},
		"on hold": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			a := ordertest.Authorization(0)
			a.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
			return f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), a)
		},
		"fully captured": func(t *testing.T, f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			if _, err := capture.Full(o, nil, f.Env()); err != nil {
				t.Fatal(err)
			}
			return o
		},
	}
	for sname, state := range states {
		for oname, op := range ops {
			t.Run(sname+"/"+oname, func(t *testing.T) {
				f := ordertest.New()
				o := state(t, f)
				before := snapshot(t, o)
				seq := f.Seq.Last(order.SeriesInvoice)
				wantFault(t, op(o, f.Env()), fault.NotAvailable, "action_not_available")
				if snapshot(t, o) != before || f.Seq.Last(order.SeriesInvoice) != seq {
					t.Fatal("refused capture changed the order or took a number")
				}
			})
		}
	}
}

func TestAdvanceInvoiceCaptureAfterAcknowledgement(t *testing.T) {
	f := ordertest.New()
	a := ordertest.Authorization(0)
	a.PaymentMethod.Type = order.PayAdvanceInvoice
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), a)
	_, err := capture.Partial(o, partial(20000, ordertest.ByID("line-1")), f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if err := o.Acknowledge(f.Env()); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Partial(o, partial(20000, ordertest.ByID("line-1")), f.Env()); err != nil {
		t.Fatalf("capture after acknowledgement: %v", err)
	}
}

func TestFull(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	f.Clock.Advance(time.Minute)
	wrong := &capture.FullRequest{TotalCaptureAmount: p(28779)}
	_, err := capture.Full(o, wrong, f.Env())
	wantFault(t, err, fault.Invalid, "capture_amount_mismatch", "totalCaptureAmount")
	l, err := capture.Full(o, &capture.FullRequest{TotalCaptureAmount: p(28780)}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Lines) != 3 || l.DocumentReference != "INV-00000001" || l.DocumentSeq != 1 {
		t.Fatalf("capture %+v", l)
	}
	a := o.Amounts()
	if a != (order.Amounts{Order: 28780, Captured: 28780, Consumed: 28780}) {
		t.Fatalf("amounts %+v", a)
	}
	last := o.Events[len(o.Events)-1]
	if last.Type != order.EventFullCapture || last.Amount != 28780 || last.LedgerID != l.ID || o.UpdatedAt != last.CreatedAt {
		t.Fatalf("event %+v", last)
	}
	if got := o.Statuses(f.Clock.Now()); !slices.Equal(got, []order.Status{order.StatusFullyCaptured}) {
		t.Fatalf("statuses %v", got)
	}
	// A second full capture is refused: no double capture.
	before := snapshot(t, o)
	_, err = capture.Full(o, nil, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if snapshot(t, o) != before {
		t.Fatal("changed")
	}
}

func TestFullWithLinesReleasesTheRest(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	l, err := capture.Full(o, &capture.FullRequest{OrderLines: []order.LineInput{ordertest.ByID("line-2")}, TotalCaptureAmount: p(5600)}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Lines) != 1 || l.Lines[0].ID != "line-2" {
		t.Fatalf("lines %+v", l.Lines)
	}
	types := []order.EventType{}
	for _, e := range o.Events[2:] {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, []order.EventType{order.EventFullCapture, order.EventCancel}) {
		t.Fatalf("events %v", types)
	}
	if o.Events[3].Amount != 23180 || o.CancelledAmount != 23180 {
		t.Fatalf("released %d / %d", o.Events[3].Amount, o.CancelledAmount)
	}
	if a := o.Amounts(); a != (order.Amounts{Order: 5600, Captured: 5600, Consumed: 5600}) {
		t.Fatalf("amounts %+v", a)
	}
}

// Lines released by a final capture are recorded by a cancel event even when
// their amounts sum to 0 (an item and its rebate), as a cancel of such lines
// is: the event tells a reader that lines left the order, not only money.
func TestFullWithLinesRecordsAReleaseOfZero(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Item", 1, 10000, 2500), ordertest.Line("Part", 1, 2000, 2500), ordertest.Line("Rebate", 1, -2000, 2500))
	if _, err := capture.Full(o, &capture.FullRequest{OrderLines: []order.LineInput{ordertest.ByID("line-1")}, TotalCaptureAmount: p(10000)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	last := o.Events[len(o.Events)-1]
	if last.Type != order.EventCancel || last.Amount != 0 || o.CancelledAmount != 0 || len(o.Uncaptured.Lines) != 0 {
		t.Fatalf("last event %+v, cancelled %d, uncaptured %d lines", last, o.CancelledAmount, len(o.Uncaptured.Lines))
	}
	// Nothing left to release: no cancel event.
	g := ordertest.New()
	q := g.Order(t)
	if _, err := capture.Full(q, nil, g.Env()); err != nil {
		t.Fatal(err)
	}
	if last := q.Events[len(q.Events)-1]; last.Type != order.EventFullCapture {
		t.Fatalf("last event %+v after capturing everything", last)
	}
}

// After a capture without id, the remainder can exceed what the authorization
// has left: full capture is then not offered and refused.
func TestFullCaptureNotOfferedBeyondAuthorization(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	if _, err := capture.Partial(o, partial(1060, ordertest.Line("Book", 1, 1060, 600)), f.Env()); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, o)
	_, err := capture.Full(o, nil, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	_, err = capture.Partial(o, partial(28780, ordertest.ByID("line-1"), ordertest.ByID("line-2"), ordertest.ByID("line-3")), f.Env())
	wantFault(t, err, fault.Invalid, "capture_exceeds_authorization", "totalCaptureAmount")
	if snapshot(t, o) != before {
		t.Fatal("changed")
	}
	if a := o.Amounts(); a.Consumed > o.AuthorizedAmount {
		t.Fatalf("consumed %d > authorized %d", a.Consumed, o.AuthorizedAmount)
	}
}

func TestSequencerFailureChangesNothing(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	f.Seq.Fail = errors.New("disk on fire")
	before := snapshot(t, o)
	_, err := capture.Full(o, nil, f.Env())
	wantFault(t, err, fault.Internal, "internal")
	if snapshot(t, o) != before {
		t.Fatal("changed")
	}
}

func TestCaptureLedgerOperations(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	c1, err := capture.Partial(o, partial(20000, ordertest.ByID("line-1")), f.Env())
	if err != nil {
		t.Fatal(err)
	}
	id1 := c1.ID
	c2, err := capture.Partial(o, partial(5600, ordertest.ByID("line-2")), f.Env())
	if err != nil {
		t.Fatal(err)
	}
	id2 := c2.ID

	// Void the first invoice: its amount leaves capturedAmount, still consumed.
	if err := o.CancelLedger(id1, f.Env()); err != nil {
		t.Fatal(err)
	}
	if a := o.Amounts(); a != (order.Amounts{Order: 8780, Captured: 5600, Uncaptured: 3180, Consumed: 25600}) {
		t.Fatalf("amounts after void %+v", a)
	}
	last := o.Events[len(o.Events)-1]
	if last.Type != order.EventCancel || last.Amount != 20000 || last.LedgerID != id1 {
		t.Fatalf("void event %+v", last)
	}
	if acts := o.Actions(o.Ledger(id1), f.Clock.Now(), f.Policy); len(acts) != 0 {
		t.Fatalf("void ledger offers %v", acts)
	}
	before := snapshot(t, o)
	wantFault(t, o.CancelLedger(id1, f.Env()), fault.NotAvailable, "action_not_available")
	_, err = o.Resend(id1, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	wantFault(t, o.RegisterPayment(id1, 1, f.Env()), fault.NotAvailable, "action_not_available")
	if snapshot(t, o) != before {
		t.Fatal("refused ops on a void ledger changed the order")
	}

	// Pay the second in part, then a reminder, then in full.
	wantFault(t, o.RegisterPayment(id2, 5601, f.Env()), fault.Invalid, "validation_failed", "amount")
	wantFault(t, o.RegisterPayment(id2, 0, f.Env()), fault.Invalid, "validation_failed", "amount")
	if err := o.RegisterPayment(id2, 600, f.Env()); err != nil {
		t.Fatal(err)
	}
	if err := o.MarkLedger(id2, order.SubReminder1, f.Env()); err != nil {
		t.Fatal(err)
	}
	wantFault(t, o.MarkLedger(id2, order.SubVoid, f.Env()), fault.Invalid, "validation_failed", "status")
	l2 := o.Ledger(id2)
	if !slices.Equal(l2.Status, []order.SubStatus{order.SubPartiallyPaid, order.SubReminder1}) {
		t.Fatalf("status %v", l2.Status)
	}
	if !o.HasStatus(order.StatusPartiallyPaid, f.Clock.Now()) {
		t.Fatal("order not partiallyPaid")
	}
	// Paid in part: no longer voidable.
	wantFault(t, o.CancelLedger(id2, f.Env()), fault.NotAvailable, "action_not_available")
	if err := o.RegisterPayment(id2, 5000, f.Env()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l2.Status, []order.SubStatus{order.SubFullyPaid}) {
		t.Fatalf("status %v", l2.Status)
	}
	if !o.HasStatus(order.StatusFullyPaid, f.Clock.Now()) {
		t.Fatalf("statuses %v", o.Statuses(f.Clock.Now()))
	}
	wantFault(t, o.MarkLedger(id2, order.SubReminder2, f.Env()), fault.NotAvailable, "action_not_available")
	last = o.Events[len(o.Events)-1]
	if last.Type != order.EventPaid || last.Amount != 5000 {
		t.Fatalf("paid event %+v", last)
	}
	// Fully paid: no recourse; resend is offered and counted.
	wantFault(t, o.Recourse(id2, &order.RecourseRequest{Reason: ordertest.Ptr("x")}, f.Env()), fault.NotAvailable, "action_not_available")
	if l, err := o.Resend(id2, f.Env()); err != nil || l.Resent != 1 {
		t.Fatalf("resend %v %v", l, err)
	}

	// Recourse of a fresh capture: then it cannot be voided.
	c3, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	id3 := c3.ID
	wantFault(t, o.Recourse(id3, &order.RecourseRequest{}, f.Env()), fault.Invalid, "validation_failed", "reason")
	if err := o.Recourse(id3, &order.RecourseRequest{Reason: ordertest.Ptr("buyer disputes")}, f.Env()); err != nil {
		t.Fatal(err)
	}
	if !o.Ledger(id3).HasStatus(order.SubRecourse) {
		t.Fatal("no recourse status")
	}
	wantFault(t, o.CancelLedger(id3, f.Env()), fault.NotAvailable, "action_not_available")
	if err := o.MarkLedger(id3, order.SubInvoiceDeliveryFailure, f.Env()); err != nil {
		t.Fatal(err)
	}
	if !o.HasStatus(order.StatusInvoiceDeliveryFailure, f.Clock.Now()) {
		t.Fatal("no invoiceDeliveryFailure")
	}
	_, err = o.Resend("ledger-99", f.Env())
	wantFault(t, err, fault.NotFound, "ledger_not_found")
}

func TestCardOrderOffersNoVoidOrRecourse(t *testing.T) {
	f := ordertest.New()
	a := ordertest.Authorization(0)
	a.PaymentMethod = order.PaymentMethod{Provider: order.ProviderExternal, Type: order.PayCard}
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), a)
	l, err := capture.Full(o, nil, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	got := o.Actions(l, f.Clock.Now(), f.Policy)
	if !slices.Equal(got, []order.Action{order.ActionRefund, order.ActionPartialRefund, order.ActionResendOrderInvoice}) {
		t.Fatalf("actions %v", got)
	}
}

var (
	snapshot  = ordertest.Snapshot
	wantFault = ordertest.WantFault
)

// In exclVat a line's VAT is rounded per line, so splitting 2 × 1002 at 25 %
// (VAT 501, 2 505 authorized) into single units rounds each to 1 253: the
// second unit passes the authorization by 1. The merchant can absorb that with
// the ±1 VAT tolerance, and the refusal must say so rather than leave a
// one-öre puzzle.
func TestSplitLineRoundingRefusalNamesTheTolerance(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("a", 2, 1002, 2500))
	r.VatMode = "exclVat"
	o := f.Create(t, r, ordertest.Authorization(2505))
	if _, err := capture.Partial(o, partial(1002, ordertest.Line("a", 1, 1002, 2500)), f.Env()); err != nil {
		t.Fatal(err)
	}
	const hint = "totalVatAmount may be sent 1 lower"

	second := partial(1002, ordertest.Line("a", 1, 1002, 2500))
	_, err := capture.Partial(o.Clone(), second, f.Env())
	wantFault(t, err, fault.Invalid, "capture_exceeds_authorization", "totalCaptureAmount")
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("capture refusal %q does not name the tolerance", err)
	}
	er := &order.EditRequest{OrderLines: []order.LineInput{ordertest.Line("a", 1, 1002, 2500)}}
	er.TotalOrderAmount, er.TotalOrderAmountExclVat, er.TotalOrderVatAmount = p(1253), p(1002), p(251)
	err = o.Clone().Edit(er, f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("edit refusal %q does not name the tolerance", err)
	}

	// Following the hint captures the rest exactly.
	second.OrderLines[0].TotalVatAmount = p(250)
	if _, err := capture.Partial(o, second, f.Env()); err != nil {
		t.Fatal(err)
	}
	if a := o.Amounts(); a.Captured != 2505 || o.RemainingAuthorization() != 0 {
		t.Fatalf("amounts %+v, %d authorization left, want 2505 captured and none left", a, o.RemainingAuthorization())
	}

	// A refusal by more than rounding says nothing about it.
	_, err = capture.Partial(o.Clone(), partial(5, ordertest.Line("b", 1, 5, 0)), f.Env())
	if err == nil || strings.Contains(err.Error(), hint) {
		t.Fatalf("refusal %v", err)
	}
}

// An empty selection is refused, not read as "every line": the spec captures
// all remaining lines only when the body is omitted.
func TestFullWithEmptyLinesIsRefused(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	before := snapshot(t, o)
	l, err := capture.Full(o, &capture.FullRequest{OrderLines: []order.LineInput{}}, f.Env())
	if l != nil {
		t.Fatalf("captured %+v", l)
	}
	wantFault(t, err, fault.Invalid, "validation_failed", "orderLines")
	if after := snapshot(t, o); after != before {
		t.Fatalf("the order changed:\n%s\n%s", before, after)
	}
}

// totalCaptureAmount is bounded by 0..MaxTotal inclusive, before the order
// is read.
func TestCaptureTotalBounds(t *testing.T) {
	line := []order.LineInput{ordertest.Line("x", 1, 100, 0)}
	for _, tt := range []struct {
		total int64
		ok    bool
	}{{-1, false}, {0, true}, {order.MaxTotal, true}, {order.MaxTotal + 1, false}} {
		for _, r := range []interface{ Validate() error }{
			&capture.PartialRequest{OrderLines: line, TotalCaptureAmount: p(tt.total)},
			&capture.FullRequest{TotalCaptureAmount: p(tt.total)},
		} {
			err := r.Validate()
			if tt.ok && err != nil {
				t.Errorf("%T total %d: %v", r, tt.total, err)
			}
			if !tt.ok {
				wantFault(t, err, fault.Invalid, "validation_failed", "totalCaptureAmount")
			}
		}
	}
}

// In exclVat a capture whose totalAmount sums to 0 can still sum below zero
// including VAT; it is refused as negative, not only as VAT out of bounds.
func TestCaptureBelowZeroIncludingVAT(t *testing.T) {
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("thing", 1, 8, 2500))
	r.VatMode = "exclVat"
	o := f.Create(t, r, ordertest.Authorization(0))
	before := snapshot(t, o)
	// 4 at 0 % and −4 at 25 % (VAT −1): gross −1.
	_, err := capture.Partial(o, partial(0, ordertest.Line("Goods 0", 1, 4, 0), ordertest.Line("Credit 25", 1, -4, 2500)), f.Env())
	wantFault(t, err, fault.Invalid, "capture_amount_negative", "orderLines")
	if snapshot(t, o) != before || f.Seq.Last(order.SeriesInvoice) != 0 {
		t.Fatal("refused capture changed the order or took a number")
	}
}

// atLineLimit pads o with a capture of zero lines up to the order's line
// limit (order.MaxStoredLines), as a merchant looping on captures of new
// free lines would.
func atLineLimit(o *order.Order) {
	n := order.MaxStoredLines - len(o.Uncaptured.Lines)
	for _, c := range o.Captured {
		n -= len(c.Lines)
	}
	o.Captured = append(o.Captured, order.Ledger{ID: "padding", Kind: order.LedgerCapture, Lines: make([]order.Line, n)})
}

// TestPartialCaptureAtTheLineLimit: an order holding as many lines as it
// may offers partialCapture only while one of its uncaptured lines can be
// captured alone by id, which moves the line and adds none; a capture of a
// new line is then past the limit.
func TestPartialCaptureAtTheLineLimit(t *testing.T) {
	t.Run("a line fits", func(t *testing.T) {
		f := ordertest.New()
		o := f.Order(t)
		atLineLimit(o)
		if err := o.CheckSize(); err != nil {
			t.Fatalf("padded order: %v", err)
		}
		acts := o.Actions(&o.Uncaptured, f.Clock.Now(), f.Policy)
		if !slices.Contains(acts, order.ActionPartialCapture) || !slices.Contains(acts, order.ActionCapture) {
			t.Fatalf("actions at the line limit %v, want capture and partialCapture", acts)
		}
		c, err := capture.Partial(o, partial(5600, ordertest.ByID("line-2")), f.Env())
		if err != nil {
			t.Fatal(err)
		}
		if err := o.CheckSize(); err != nil {
			t.Fatalf("a capture by id moved a line and still passed the limit: %v", err)
		}
		if got := order.SumLines(c.Lines, o.VATMode).Gross; got != 5600 || o.RemainingAuthorization() != 28780-5600 {
			t.Fatalf("captured %d, %d left of the authorization", got, o.RemainingAuthorization())
		}
		if _, err := capture.Partial(o, partial(100, ordertest.Line("Fee", 1, 100, 2500)), f.Env()); err != nil {
			t.Fatal(err)
		}
		wantFault(t, o.CheckSize(), fault.NotAvailable, "order_size_limit")
	})
	t.Run("no line fits", func(t *testing.T) {
		f := ordertest.New()
		o := f.Order(t)
		// A capture of a new line leaves 3 000 of the authorization: less
		// than any uncaptured line (20 000, 5 600, 3 180).
		if _, err := capture.Partial(o, partial(25780, ordertest.Line("Deposit", 1, 25780, 0)), f.Env()); err != nil {
			t.Fatal(err)
		}
		acts := o.Actions(&o.Uncaptured, f.Clock.Now(), f.Policy)
		if !slices.Contains(acts, order.ActionPartialCapture) {
			t.Fatalf("actions below the limit %v, want partialCapture (of a new line)", acts)
		}
		atLineLimit(o)
		acts = o.Actions(&o.Uncaptured, f.Clock.Now(), f.Policy)
		if slices.Contains(acts, order.ActionPartialCapture) || slices.Contains(acts, order.ActionCapture) {
			t.Fatalf("actions at the line limit %v: no capture fits it", acts)
		}
		before := snapshot(t, o)
		_, err := capture.Partial(o, partial(3000, ordertest.Line("Rest", 1, 3000, 0)), f.Env())
		wantFault(t, err, fault.NotAvailable, "order_size_limit")
		if snapshot(t, o) != before {
			t.Fatal("changed")
		}
	})
}
