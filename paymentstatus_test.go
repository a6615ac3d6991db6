package kassa_test

import (
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// The payment status follows what happened to the money first: an order
// awaiting acknowledgement is "pending" only while nothing else settled it.
func TestPaymentStatusOf(t *testing.T) {
	unacknowledged := func(f *ordertest.Fixture) *order.Order {
		o := f.Order(t)
		o.Unacknowledged = true // a merchant that requires acknowledgement
		return o
	}
	onHold := func(f *ordertest.Fixture) *order.Order {
		o := f.Order(t)
		o.Hold = order.HoldOnHold // held for risk review at creation
		return o
	}
	captureAll := func(f *ordertest.Fixture, o *order.Order) *order.Ledger {
		c, err := capture.Full(o, nil, f.Env())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	captureFirstLine := func(f *ordertest.Fixture, o *order.Order) *order.Ledger {
		first := o.Uncaptured.Lines[0]
		c, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{{ID: &first.ID}},
			TotalCaptureAmount: &first.TotalAmount}, f.Env())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pay := func(f *ordertest.Fixture, o *order.Order, c *order.Ledger, amount int64) {
		if err := o.RegisterPayment(c.ID, amount, f.Env()); err != nil {
			t.Fatal(err)
		}
	}
	refundAll := func(f *ordertest.Fixture, o *order.Order, c *order.Ledger) {
		if _, err := refund.Full(o, c.ID, &refund.FullRequest{}, f.Env()); err != nil {
			t.Fatal(err)
		}
	}
	refundWidget := func(f *ordertest.Fixture, o *order.Order, c *order.Ledger) {
		widget := ordertest.Line("Widget", 1, 10000, 2500)
		if _, err := refund.Partial(o, c.ID, &refund.PartialRequest{OrderLines: []order.LineInput{widget},
			TotalRefundAmount: widget.UnitPrice}, f.Env()); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		make func(*ordertest.Fixture) *order.Order
		want string
	}{
		{"authorized", func(f *ordertest.Fixture) *order.Order { return f.Order(t) }, "authorized"},
		{"awaiting acknowledgement, capturable", unacknowledged, "authorized"},
		{"advance invoice awaiting acknowledgement", func(f *ordertest.Fixture) *order.Order {
			o := unacknowledged(f)
			o.PaymentMethod.Type = order.PayAdvanceInvoice
			return o
		}, "pending"},
		{"captured and paid before acknowledgement", func(f *ordertest.Fixture) *order.Order {
			o := unacknowledged(f)
			pay(f, o, captureAll(f, o), o.Amounts().Captured)
			return o
		}, "paid"},
		{"captured before acknowledgement", func(f *ordertest.Fixture) *order.Order {
			o := unacknowledged(f)
			captureAll(f, o)
			return o
		}, "captured"},
		{"cancelled before acknowledgement", func(f *ordertest.Fixture) *order.Order {
			o := unacknowledged(f)
			if err := o.Cancel(f.Env()); err != nil {
				t.Fatal(err)
			}
			return o
		}, "cancelled"},
		{"expired before acknowledgement", func(f *ordertest.Fixture) *order.Order {
			o := unacknowledged(f)
			f.Clock.Advance(29 * 24 * time.Hour)
			return o
		}, "expired"},
		{"paid, with the other invoice refunded in full before payment", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			paid := captureFirstLine(f, o)
			refundAll(f, o, captureAll(f, o))
			pay(f, o, paid, o.Outstanding(paid))
			return o
		}, "paid"},
		{"denied after review", func(f *ordertest.Fixture) *order.Order {
			o := onHold(f)
			if err := o.ResolveHold(false, f.Env()); err != nil {
				t.Fatal(err)
			}
			return o
		}, "denied"},
		{"one line captured", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			captureFirstLine(f, o)
			return o
		}, "partiallyCaptured"},
		{"captured, refunded in part", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			refundWidget(f, o, captureAll(f, o))
			return o
		}, "partiallyRefunded"},
		{"captured, refunded in full", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			refundAll(f, o, captureAll(f, o))
			return o
		}, "refunded"},
		{"one line captured, the rest cancelled, refunded in full", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			c := captureFirstLine(f, o)
			if err := o.Cancel(f.Env()); err != nil {
				t.Fatal(err)
			}
			refundAll(f, o, c)
			return o
		}, "refunded"},
		{"paid in part", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			pay(f, o, captureAll(f, o), 1)
			return o
		}, "partiallyPaid"},
		{"paid in part, then refunded in part", func(f *ordertest.Fixture) *order.Order {
			o := f.Order(t)
			c := captureAll(f, o)
			pay(f, o, c, 1)
			refundWidget(f, o, c)
			return o
		}, "partiallyPaid"},
		{"on hold", onHold, "pending"},
		{"cancelled while on hold", func(f *ordertest.Fixture) *order.Order {
			o := onHold(f)
			if err := o.Cancel(f.Env()); err != nil {
				t.Fatal(err)
			}
			return o
		}, "cancelled"},
		{"expired while on hold", func(f *ordertest.Fixture) *order.Order {
			o := onHold(f)
			f.Clock.Advance(29 * 24 * time.Hour)
			return o
		}, "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ordertest.New()
			o := tt.make(f)
			if got := kassa.PaymentStatusOf(o, f.Clock.Now()); got.Status != tt.want {
				t.Fatalf("payment status %q (%s), want %q; statuses %v", got.Status, got.Note, tt.want, o.Statuses(f.Clock.Now()))
			}
		})
	}
}
