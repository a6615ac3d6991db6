package capture_test

import (
	"slices"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// A capture is an invoice: it is held to the bounds of an order's own
// totals, VAT of 0 or more and no more than the amount including VAT,
// however its lines were picked (with id or without).
func TestCaptureVATWithinItsGross(t *testing.T) {
	mixed := func(t *testing.T) (*ordertest.Fixture, *order.Order) {
		f := ordertest.New()
		// 10 000 at 25 % (VAT 2 000), 10 000 at 0 %, a discount of 2 000 at
		// 25 % (VAT −400): the order's VAT is 1 600, within its bounds.
		d := ordertest.Line("Discount", 1, -2000, 2500)
		d.Type = "discount"
		return f, f.Order(t, ordertest.Line("Goods 25", 1, 10000, 2500), ordertest.Line("Goods 0", 1, 10000, 0), d)
	}
	tests := []struct {
		name string
		run  func(o *order.Order, env order.Env) error
	}{
		{"without id, negative VAT", func(o *order.Order, env order.Env) error {
			// The discount at 25 % captured apart from its goods, with a 0 % line: gross 0, VAT −400.
			_, err := capture.Partial(o, partial(0, ordertest.Line("Discount", 1, -2000, 2500), ordertest.Line("Goods 0", 1, 2000, 0)), env)
			return err
		}},
		{"without id, VAT above the gross", func(o *order.Order, env order.Env) error {
			// Gross 100 = net −100 + VAT 200.
			_, err := capture.Partial(o, partial(100, ordertest.Line("Goods 25", 1, 1000, 2500), ordertest.Line("Credit 0", 1, -900, 0)), env)
			return err
		}},
		{"by id, negative VAT", func(o *order.Order, env order.Env) error {
			_, err := capture.Partial(o, partial(8000, ordertest.ByID("line-2"), ordertest.ByID("line-3")), env)
			return err
		}},
		{"full with lines by id, negative VAT", func(o *order.Order, env order.Env) error {
			_, err := capture.Full(o, &capture.FullRequest{OrderLines: []order.LineInput{ordertest.ByID("line-2"), ordertest.ByID("line-3")}}, env)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, o := mixed(t)
			before := snapshot(t, o)
			wantFault(t, tt.run(o, f.Env()), fault.Invalid, "capture_vat_out_of_bounds", "orderLines")
			if snapshot(t, o) != before || f.Seq.Last(order.SeriesInvoice) != 0 {
				t.Fatal("refused capture changed the order or took a number")
			}
		})
	}

	// The goods at 25 % captured by id leave a remainder of VAT −400: its
	// full capture is neither offered nor taken; with the discount, the
	// goods at 0 % stay capturable.
	f, o := mixed(t)
	if _, err := capture.Partial(o, partial(10000, ordertest.ByID("line-1")), f.Env()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.Actions(&o.Uncaptured, f.Clock.Now(), f.Policy), order.ActionCapture) {
		t.Fatalf("capture offered on a remainder of negative VAT: %+v", order.SumLines(o.Uncaptured.Lines, o.VATMode))
	}
	_, err := capture.Full(o, nil, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	// Together with goods at 25 % the discount is a valid invoice.
	f, o = mixed(t)
	if _, err := capture.Partial(o, partial(8000, ordertest.ByID("line-1"), ordertest.ByID("line-3")), f.Env()); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Full(o, nil, f.Env()); err != nil {
		t.Fatal(err)
	}
}

// Once captures without id have used the whole authorization, nothing more
// can be captured until an edit: the order is not readyForCapture, and
// offers no capture.
func TestAuthorizationUsedUpIsNotReadyForCapture(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Goods", 2, 5000, 2500))
	if _, err := capture.Partial(o, partial(5000, ordertest.Line("Goods", 1, 5000, 2500)), f.Env()); err != nil {
		t.Fatal(err)
	}
	if !o.HasStatus(order.StatusReadyForCapture, f.Clock.Now()) {
		t.Fatal("half the authorization left, but not readyForCapture")
	}
	if _, err := capture.Partial(o, partial(5000, ordertest.Line("Goods", 1, 5000, 2500)), f.Env()); err != nil {
		t.Fatal(err)
	}
	if o.RemainingAuthorization() != 0 {
		t.Fatalf("remaining %d", o.RemainingAuthorization())
	}
	if got := o.Statuses(f.Clock.Now()); slices.Contains(got, order.StatusReadyForCapture) {
		t.Fatalf("statuses %v with the authorization used up", got)
	}
	for _, a := range o.Actions(&o.Uncaptured, f.Clock.Now(), f.Policy) {
		if a == order.ActionCapture || a == order.ActionPartialCapture {
			t.Fatalf("offers %s with the authorization used up", a)
		}
	}
	// An edit to a remainder of 0 makes it capturable again: it closes the order.
	zero := ordertest.Line("Goods (invoiced)", 1, 0, 2500)
	if err := o.Edit(&order.EditRequest{OrderLines: []order.LineInput{zero}, TotalsInput: order.TotalsInput{
		TotalOrderAmount: p(0), TotalOrderAmountExclVat: p(0), TotalOrderVatAmount: p(0)}}, f.Env()); err != nil {
		t.Fatal(err)
	}
	if !o.HasStatus(order.StatusReadyForCapture, f.Clock.Now()) {
		t.Fatalf("statuses %v after an edit to 0", o.Statuses(f.Clock.Now()))
	}
}
