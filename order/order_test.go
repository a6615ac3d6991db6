package order

import (
	"testing"

	"github.com/kassahq/kassa/fault"
)

func TestCheckSize(t *testing.T) {
	lines := func(n int) []Line { return make([]Line, n) }
	for _, tc := range []struct {
		name          string
		events, lines int
		ok            bool
	}{
		{"empty", 0, 0, true},
		{"at both limits", MaxEvents, MaxStoredLines, true},
		{"one event over", MaxEvents + 1, 1, false},
		{"one line over", 1, MaxStoredLines + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Lines spread over the three kinds of sub-order: all are counted.
			third := tc.lines / 3
			o := &Order{ID: "o", Events: make([]Event, tc.events), Uncaptured: Ledger{Lines: lines(tc.lines - 2*third)},
				Captured: []Ledger{{Lines: lines(third)}}, Refunded: []Ledger{{Lines: lines(third)}}}
			err := o.CheckSize()
			if (err == nil) != tc.ok || (err != nil && (fault.KindOf(err) != fault.NotAvailable || fault.CodeOf(err) != "order_size_limit")) {
				t.Fatalf("CheckSize with %d events and %d lines: %v", tc.events, tc.lines, err)
			}
		})
	}
}

// TestCheckSizeLeavesPaymentsOut: the buyer's payments, never refused, do
// not use up the events the merchant's own changes may add.
func TestCheckSizeLeavesPaymentsOut(t *testing.T) {
	o := &Order{ID: "o", Events: make([]Event, MaxEvents+11)}
	for i := range 11 {
		o.Events[i].Type = EventPaid
	}
	if err := o.CheckSize(); err != nil {
		t.Fatalf("%d events of which 11 payments: %v", len(o.Events), err)
	}
	o.Events[0].Type = EventSetReference
	if err := o.CheckSize(); fault.CodeOf(err) != "order_size_limit" {
		t.Fatalf("%d events of which 10 payments, one over: %v", len(o.Events), err)
	}
}
