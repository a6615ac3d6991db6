package order

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Verify lists what in o breaks an invariant every operation keeps (design.md
// §3), one finding per break; none for a sound order. It looks at the order
// as stored, not at its history: its sub-orders are where they belong, with
// ids used once; every line's total is quantity × (unitPrice −
// unitDiscountAmount) within the line bounds; every refund is of a capture
// and no capture is refunded beyond what it captured; what the captures used
// stays within the authorization, and that within what was approved; what is
// refunded does not pass what is captured, nor is anything uncaptured below
// zero; no invoice or credit note states negative VAT; no invoice is due
// before its issue date, and no credit note is due at all; the event log refers to
// this order and its sub-orders, in time order, ids used once, and updatedAt
// is its last event's time; it records each capture, refund and void once,
// for its amount, and what the order released (cancelledAmount) by the
// cancels of its uncaptured sub-order. The property test of the order rules holds every
// state it reaches to it; kassa store check holds every stored order to it.
func (o *Order) Verify() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	ledgers := map[string]LedgerKind{}
	place := func(l *Ledger, want LedgerKind) {
		if l.Kind != want {
			add("sub-order %s is kept as %s but is a %s", l.ID, want, l.Kind)
		}
		if _, dup := ledgers[l.ID]; dup {
			add("sub-order id %s is used twice", l.ID)
		}
		ledgers[l.ID] = l.Kind
		for _, ln := range l.Lines {
			if want := ln.Quantity * (ln.UnitPrice - ln.UnitDiscountAmount); ln.TotalAmount != want {
				add("line %s of sub-order %s: totalAmount %d, quantity × (unitPrice − unitDiscountAmount) %d", ln.ID, l.ID, ln.TotalAmount, want)
			}
			if ln.TotalAmount < -MaxLineAmount || ln.TotalAmount > MaxLineAmount {
				add("line %s of sub-order %s: totalAmount %d outside ±%d", ln.ID, l.ID, ln.TotalAmount, MaxLineAmount)
			}
		}
	}
	place(&o.Uncaptured, LedgerUncaptured)
	for i := range o.Captured {
		place(&o.Captured[i], LedgerCapture)
	}
	for i := range o.Refunded {
		place(&o.Refunded[i], LedgerRefund)
	}

	// What the events record, per sub-order: every build has appended one
	// capture or refund event for the sub-order's amount including VAT, a
	// cancel for it when it voids a capture, and a cancel for what a cancel
	// or a final capture releases of the uncaptured sub-order, adding the
	// same to cancelledAmount.
	type recorded struct {
		events int
		amount int64
	}
	captures, refunds, cancels := map[string]recorded{}, map[string]recorded{}, map[string]recorded{}
	for _, e := range o.Events {
		var m map[string]recorded
		switch e.Type {
		case EventPartialCapture, EventFullCapture:
			m = captures
		case EventPartialRefund, EventFullRefund:
			m = refunds
		case EventCancel:
			m = cancels
		default:
			continue
		}
		r := m[e.LedgerID]
		m[e.LedgerID] = recorded{r.events + 1, r.amount + e.Amount}
	}
	for _, c := range []struct {
		name string
		m    map[string]recorded
		kind LedgerKind
	}{{"capture", captures, LedgerCapture}, {"refund", refunds, LedgerRefund}} {
		for _, id := range slices.Sorted(maps.Keys(c.m)) {
			if k, ok := ledgers[id]; ok && k != c.kind { // an unknown id is named below
				add("%s event of sub-order %s, a %s", c.name, id, k)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cancels)) {
		if ledgers[id] == LedgerRefund {
			add("cancel event of refund %s", id)
		}
	}
	if r := cancels[o.Uncaptured.ID]; r.amount != o.CancelledAmount {
		add("cancelledAmount %d, but the cancels of the uncaptured sub-order release %d", o.CancelledAmount, r.amount)
	}

	a := o.Amounts()
	for i := range o.Captured {
		c := &o.Captured[i]
		sum := SumLines(c.Lines, o.VATMode)
		if r := captures[c.ID]; r != (recorded{1, sum.Gross}) {
			add("capture %s of %d: %d capture events, for %d", c.ID, sum.Gross, r.events, r.amount)
		}
		want := recorded{}
		if c.Void() {
			want = recorded{1, sum.Gross}
		}
		if r := cancels[c.ID]; r != want {
			add("capture %s of %d (void: %t): %d cancel events, for %d", c.ID, sum.Gross, c.Void(), r.events, r.amount)
		}
		if rf := o.RefundedOf(c.ID); rf < 0 || rf > sum.Gross {
			add("capture %s: refunded %d of %d", c.ID, rf, sum.Gross)
		}
		if !sum.VATWithin() {
			add("capture %s invoices VAT %d over a net of %d", c.ID, sum.VAT, sum.Net)
		}
		if is := c.Issued; is != nil && !is.Due.IsZero() && is.Due.Before(utcDate(c.CreatedAt)) {
			add("capture %s issued %s is due before it, on %s", c.ID, c.CreatedAt.UTC().Format("2006-01-02"), is.Due.Format("2006-01-02"))
		}
	}
	for i := range o.Refunded {
		r := &o.Refunded[i]
		if gross, rec := SumLines(r.Lines, o.VATMode).Gross, refunds[r.ID]; rec != (recorded{1, gross}) {
			add("refund %s of %d: %d refund events, for %d", r.ID, gross, rec.events, rec.amount)
		}
		if ledgers[r.RefundOf] != LedgerCapture {
			add("refund %s is of %q, not a capture of the order", r.ID, r.RefundOf)
		}
		if vat := SumLines(r.Lines, o.VATMode).VAT; vat < 0 {
			add("refund %s credits VAT %d", r.ID, vat)
		}
		if r.Issued != nil && !r.Issued.Due.IsZero() {
			add("refund %s: its credit note states a due date", r.ID)
		}
	}
	if a.Consumed > o.AuthorizedAmount || o.AuthorizedAmount > o.ApprovedAmount {
		add("captures used %d, authorized %d, approved %d", a.Consumed, o.AuthorizedAmount, o.ApprovedAmount)
	}
	if a.Refunded > a.Captured {
		add("refunded %d, captured %d", a.Refunded, a.Captured)
	}
	if a.Uncaptured < 0 {
		add("uncaptured %d", a.Uncaptured)
	}

	events := map[string]bool{}
	for i, e := range o.Events {
		if events[e.ID] {
			add("event id %s is used twice", e.ID)
		}
		events[e.ID] = true
		if _, ok := ledgers[e.LedgerID]; e.OrderID != o.ID || !ok {
			add("event %s refers to order %s, sub-order %s", e.ID, e.OrderID, e.LedgerID)
		}
		if i > 0 && e.CreatedAt.Before(o.Events[i-1].CreatedAt) {
			add("event %s is older than the event before it", e.ID)
		}
	}
	if n := len(o.Events); n == 0 {
		add("no events")
	} else if last := o.Events[n-1].CreatedAt; !o.UpdatedAt.Equal(last) {
		add("updatedAt %s, last event at %s", o.UpdatedAt.Format("2006-01-02T15:04:05.999999999Z07:00"), last.Format("2006-01-02T15:04:05.999999999Z07:00"))
	}
	return out
}

// utcDate is midnight UTC of t's UTC date: the date documents state.
func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
