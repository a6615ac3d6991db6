package order_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// TestVerifyFindsEachBreak: an order captured and partly refunded is sound;
// each damage a stored order can carry is found, and named.
func TestVerifyFindsEachBreak(t *testing.T) {
	sound := func(t *testing.T) *order.Order {
		f := ordertest.New()
		o := f.Order(t, ordertest.DefaultLines()...)
		if _, err := capture.Full(o, &capture.FullRequest{}, f.Env()); err != nil {
			t.Fatal(err)
		}
		if _, err := refund.Full(o, o.Captured[0].ID, &refund.FullRequest{}, f.Env()); err != nil {
			t.Fatal(err)
		}
		if found := o.Verify(); len(found) != 0 {
			t.Fatalf("a sound order: %q", found)
		}
		return o
	}
	for _, c := range []struct {
		name, want string
		damage     func(o *order.Order)
	}{
		{"line total", "quantity × (unitPrice − unitDiscountAmount)", func(o *order.Order) { o.Captured[0].Lines[0].TotalAmount++ }},
		{"refund beyond its capture", "refunded", func(o *order.Order) {
			o.Refunded[0].Lines[0].UnitPrice += 100
			o.Refunded[0].Lines[0].TotalAmount += 100
		}},
		{"refund of nothing", "not a capture", func(o *order.Order) { o.Refunded[0].RefundOf = "nope" }},
		{"authorization passed", "authorized", func(o *order.Order) { o.AuthorizedAmount = 1 }},
		{"ledger in the wrong place", "kept as capture", func(o *order.Order) { o.Captured[0].Kind = order.LedgerRefund }},
		{"event of another order", "refers to order", func(o *order.Order) { o.Events[0].OrderID = "other" }},
		{"updatedAt", "updatedAt", func(o *order.Order) { o.UpdatedAt = o.UpdatedAt.Add(1) }},
		{"invoice due before its issue", "is due before it", func(o *order.Order) {
			o.Captured[0].Issued.Due = o.Captured[0].CreatedAt.UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
		}},
		{"credit note with a due date", "states a due date", func(o *order.Order) { o.Refunded[0].Issued.Due = o.Refunded[0].CreatedAt }},
		{"capture event of another amount", "capture events, for", func(o *order.Order) { event(o, order.EventFullCapture).Amount-- }},
		{"capture event twice", "2 capture events", func(o *order.Order) { o.Events = append(o.Events, *event(o, order.EventFullCapture)) }},
		{"refund event of another amount", "refund events, for", func(o *order.Order) { event(o, order.EventFullRefund).Amount++ }},
		{"capture event on a refund", "capture event of sub-order", func(o *order.Order) { event(o, order.EventFullCapture).LedgerID = o.Refunded[0].ID }},
		{"void without its cancel", "(void: true): 0 cancel events", func(o *order.Order) { o.Captured[0].Status = append(o.Captured[0].Status, order.SubVoid) }},
		{"release not recorded", "cancelledAmount 1", func(o *order.Order) { o.CancelledAmount = 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := sound(t)
			c.damage(o)
			found := o.Verify()
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("found %q, want one naming %q", found, c.want)
			}
		})
	}
}

// event is o's first event of type typ.
func event(o *order.Order, typ order.EventType) *order.Event {
	for i := range o.Events {
		if o.Events[i].Type == typ {
			return &o.Events[i]
		}
	}
	panic("no " + string(typ) + " event")
}
