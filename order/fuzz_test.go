package order_test

import (
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// FuzzValidateCreate decodes arbitrary JSON into a CreateRequest and validates
// it: no panic, and either a validation error naming at least one field or
// lines whose amounts and sums respect the spec's bounds.
func FuzzValidateCreate(f *testing.F) {
	for _, s := range []string{
		`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"a","quantity":2,"unitPrice":12500,"vat":2500}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat","orderLines":[{"description":"a","quantity":1,"totalAmount":1000000000,"vat":10000}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv","totalOrderAmount":12500,"totalOrderVatAmount":2500}`,
		`{"country":"SE","currency":"SEK","locale":"sv","orderLines":[{"description":"a","quantity":99999999,"unitPrice":-1000000000,"unitDiscountAmount":1000000000}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv","orderLines":[{"description":"a","quantity":3,"totalAmount":-7,"unitDiscountAmount":-1000000000,"vat":2500,"totalVatAmount":-1}]}`,
		`{"orderLines":[{}],"metadata":{"":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r order.CreateRequest
		if json.Unmarshal(b, &r) != nil {
			return
		}
		for _, fromToken := range []bool{false, true} {
			lines, mode, err := order.ValidateCreate(&r, fromToken, &ordertest.IDs{})
			if err != nil {
				var fe *fault.Error
				if fault.KindOf(err) != fault.Invalid || !asFault(err, &fe) || len(fe.Fields) == 0 {
					t.Fatalf("error %v is not a validation error naming fields", err)
				}
				continue
			}
			if !mode.Valid() || len(lines) == 0 || len(lines) > order.MaxLines {
				t.Fatalf("mode %q, %d lines", mode, len(lines))
			}
			for _, l := range lines {
				if l.Quantity < 1 || l.Quantity > order.MaxQuantity || abs(l.TotalAmount) > order.MaxLineAmount ||
					abs(l.TotalVatAmount) > order.MaxLineAmount || abs(l.UnitPrice) > order.MaxLineAmount || l.Vat < 0 || l.Vat > 10000 {
					t.Fatalf("line out of bounds: %+v", l)
				}
			}
			s := order.SumLines(lines, mode)
			if s.Gross < 0 || s.Gross > order.MaxTotal || s.Gross != s.Net+s.VAT {
				t.Fatalf("sums out of bounds: %+v", s)
			}
		}
	})
}

func asFault(err error, fe **fault.Error) bool {
	e, ok := err.(*fault.Error)
	*fe = e
	return ok
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// FuzzMoneyRequests decodes arbitrary JSON into an edit, a partial capture
// and a partial refund and applies them, in that order, to a real order
// (each also as its full counterpart when full is set): the order's amount
// invariants hold after every step (the rapid machine's check, plus each
// line's VAT against the documented rounding), and every refusal is a fault
// with a code that leaves the order byte-identical.
func FuzzMoneyRequests(f *testing.F) {
	for _, s := range []struct {
		edit, capt, refd string
		full             bool
	}{
		{`{"orderLines":[{"description":"Widget","quantity":2,"unitPrice":10000,"vat":2500},{"description":"x","quantity":1,"unitPrice":100,"vat":2500}],"totalOrderAmount":20100,"totalOrderAmountExclVat":16080,"totalOrderVatAmount":4020}`,
			`{"orderLines":[{"id":"line-1"}],"totalCaptureAmount":20000}`, `{"orderLines":[{"description":"r","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, false},
		{`{}`, `{"orderLines":[{"id":"line-2"},{"id":"line-3"}],"totalCaptureAmount":8780}`, `{"orderLines":[{"description":"r","quantity":3,"unitPrice":1060,"vat":600,"totalVatAmount":180}],"totalRefundAmount":3180,"note":"n"}`, true},
		{`{"orderLines":[{"description":"a","quantity":1,"unitPrice":57560,"vat":2500}],"totalOrderAmount":57560,"totalOrderAmountExclVat":46048,"totalOrderVatAmount":11512}`,
			`{"orderLines":[{"description":"a","quantity":1,"unitPrice":1,"vat":10000,"totalVatAmount":1}],"totalCaptureAmount":1}`, `{"orderLines":[{"description":"a","quantity":1,"unitPrice":1,"vat":10000}],"totalRefundAmount":1}`, true},
		{`[]`, `{"orderLines":[{"description":"c","quantity":2,"unitPrice":-5,"vat":2500},{"id":"line-1"}],"totalCaptureAmount":19990}`, `{"orderLines":[{"description":"r","quantity":1,"unitPrice":-1,"vat":0}],"totalRefundAmount":-1}`, false},
		{`null`, `{"totalCaptureAmount":28780}`, `{"note":"\u0000"}`, true},
	} {
		f.Add([]byte(s.edit), []byte(s.capt), []byte(s.refd), s.full)
	}
	f.Fuzz(func(t *testing.T, edit, capt, refd []byte, full bool) {
		fx := ordertest.New()
		m := &machine{f: fx, o: fx.Order(t), kinds: map[string]order.LedgerKind{}}
		m.check(t)
		step := func(name string, op func() error) {
			before := ordertest.Snapshot(t, m.o)
			err := op()
			if err != nil {
				var fe *fault.Error
				if !asFault(err, &fe) || fe.Code == "" || fault.KindOf(err) == fault.Internal {
					t.Fatalf("%s: refused with %T %v, not a fault with a code", name, err, err)
				}
				if ordertest.Snapshot(t, m.o) != before {
					t.Fatalf("%s: refused (%v) but changed the order", name, err)
				}
				return
			}
			m.check(t)
			checkLineVAT(t, m.o)
		}
		var er order.EditRequest
		if json.Unmarshal(edit, &er) == nil {
			step("edit", func() error { return m.o.Edit(&er, fx.Env()) })
		}
		var pc capture.PartialRequest
		if json.Unmarshal(capt, &pc) == nil {
			step("partial capture", func() error { _, err := capture.Partial(m.o, &pc, fx.Env()); return err })
		}
		var fc capture.FullRequest
		if full && json.Unmarshal(capt, &fc) == nil {
			step("full capture", func() error { _, err := capture.Full(m.o, &fc, fx.Env()); return err })
		}
		for i := range m.o.Captured {
			id := m.o.Captured[i].ID
			var pr refund.PartialRequest
			if json.Unmarshal(refd, &pr) == nil {
				step("partial refund", func() error { _, err := refund.Partial(m.o, id, &pr, fx.Env()); return err })
			}
			var fr refund.FullRequest
			if full && json.Unmarshal(refd, &fr) == nil {
				step("full refund", func() error { _, err := refund.Full(m.o, id, &fr, fx.Env()); return err })
			}
		}
	})
}

// checkLineVAT: every stored line's amounts follow design.md §3: totalAmount
// is quantity × (unitPrice − unitDiscountAmount), and the VAT part is the
// documented rounding at the line's rate (±1 when the merchant sent it),
// of the total's sign and, including VAT, no larger than the total.
func checkLineVAT(t *testing.T, o *order.Order) {
	ledgers := append([]order.Ledger{o.Uncaptured}, o.Captured...)
	ledgers = append(ledgers, o.Refunded...)
	for _, l := range ledgers {
		for _, ln := range l.Lines {
			if ln.TotalAmount != ln.Quantity*(ln.UnitPrice-ln.UnitDiscountAmount) {
				t.Fatalf("ledger %s line %s: total %d is not %d × (%d − %d)", l.ID, ln.ID, ln.TotalAmount, ln.Quantity, ln.UnitPrice, ln.UnitDiscountAmount)
			}
			want := money.LineVAT(ln.TotalAmount, ln.Vat, o.VATMode)
			v := ln.TotalVatAmount
			if d := v - want; d < -1 || d > 1 || (ln.Vat == 0 && v != 0) || (v != 0 && (v < 0) != (ln.TotalAmount < 0)) ||
				(o.VATMode == money.InclVAT && abs(v) > abs(ln.TotalAmount)) {
				t.Fatalf("ledger %s line %s: VAT %d of %d at %d (%s), want %d", l.ID, ln.ID, v, ln.TotalAmount, ln.Vat, o.VATMode, want)
			}
		}
	}
}
