package refund_test

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// perRate is gross, net and VAT of lines, per VAT rate.
func perRate(lines []order.Line, mode money.VATMode) map[int64]order.Totals {
	m := map[int64]order.Totals{}
	for _, l := range lines {
		t := m[l.Vat]
		t.Gross += l.Gross(mode)
		t.Net += l.Net(mode)
		t.VAT += l.TotalVatAmount
		m[l.Vat] = t
	}
	return m
}

// An order of lines at mixed rates, split into captures by line and then
// credited by partial refunds of some units of those lines and a final full
// refund, must invoice exactly what was ordered and credit exactly what was
// invoiced, to the minor unit, per capture and per VAT rate: however each
// document rounded its own lines' VAT, the parts add up to the whole.
func TestPropertySplitsAddUpPerRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mode := rapid.SampledFrom([]money.VATMode{money.InclVAT, money.ExclVAT}).Draw(t, "mode")
		rates := rapid.SampledFrom([]int64{0, 1, 600, 1200, 2500, 2550, 9999, 10000}).Draw(t, "rateSet")
		n := rapid.IntRange(1, 8).Draw(t, "lines")
		var ins []order.LineInput
		for i := range n {
			rate := rapid.SampledFrom([]int64{0, rates, 2500, rapid.Int64Range(0, money.MaxRate).Draw(t, "rate")}).Draw(t, "pick")
			unit := rapid.Int64Range(1, 300_000).Draw(t, "unit")
			if i > 0 && rapid.IntRange(0, 3).Draw(t, "discount") == 0 {
				// A discount at the rate of a line before it.
				unit, rate = -rapid.Int64Range(1, *ins[0].UnitPrice).Draw(t, "off"), *ins[0].Vat
			}
			ins = append(ins, ordertest.Line(fmt.Sprint("line ", i), rapid.Int64Range(1, 7).Draw(t, "qty"), unit, rate))
		}
		f := ordertest.New()
		r := ordertest.CreateRequest(ins...)
		r.VatMode = string(mode)
		lines, m, err := order.ValidateCreate(r, false, f.IDs)
		if err != nil {
			t.Skip(err) // totals out of bounds
		}
		o, err := order.Create("merchant-1", r, lines, m, ordertest.Authorization(0), f.Env())
		if err != nil {
			t.Fatal(err)
		}
		ordered := order.SumLines(o.Uncaptured.Lines, mode)

		// Capture by line, in random groups, the last group by full capture.
		for len(o.Uncaptured.Lines) > 0 {
			left := o.Uncaptured.Lines
			k := rapid.IntRange(1, len(left)).Draw(t, "group")
			// A group that would leave a rest no capture can take (below
			// zero, or VAT outside its gross: a discount without its goods)
			// is taken with the rest, as a merchant would, by full capture.
			rest := order.SumLines(left[k:], mode)
			stuck := rest.Gross < 0 || !rest.VATWithin()
			if k == len(left) && rapid.Bool().Draw(t, "full") || stuck {
				if _, err := capture.Full(o, nil, f.Env()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			var sel []order.LineInput
			var sum int64
			for _, l := range left[:k] {
				sel = append(sel, ordertest.ByID(l.ID))
				sum += l.TotalAmount
			}
			if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: sel, TotalCaptureAmount: &sum}, f.Env()); err != nil {
				// A group without the goods its discount is on can pass
				// the authorization, sum below zero or hold VAT outside its
				// gross: take the rest whole.
				if _, err := capture.Full(o, nil, f.Env()); err != nil {
					t.Fatal(err)
				}
			}
		}
		var invoiced order.Totals
		for _, c := range o.Captured {
			s := order.SumLines(c.Lines, mode)
			invoiced = order.Totals{Gross: invoiced.Gross + s.Gross, Net: invoiced.Net + s.Net, VAT: invoiced.VAT + s.VAT}
		}
		if invoiced.Gross != ordered.Gross || invoiced.Net != ordered.Net || invoiced.VAT != ordered.VAT {
			t.Fatalf("invoiced %+v, ordered %+v", invoiced, ordered)
		}

		// Credit some units of some lines of each capture, then the rest.
		for ci := range o.Captured {
			c := o.Captured[ci]
			if order.SumLines(c.Lines, mode).Gross == 0 {
				continue // nothing to credit (a discount as large as its goods)
			}
			// Units of each line still to credit: a merchant gives back
			// what was delivered, never more of a line than it had.
			units := make([]int64, len(c.Lines))
			for i, l := range c.Lines {
				units[i] = l.Quantity
			}
			for range rapid.IntRange(0, 4).Draw(t, "partials") {
				if o.Refundable(&o.Captured[ci]).Gross <= 0 {
					break
				}
				i := rapid.IntRange(0, len(c.Lines)-1).Draw(t, "line")
				l := c.Lines[i]
				if units[i] == 0 || l.UnitPrice < 0 {
					continue
				}
				q := rapid.Int64Range(1, units[i]).Draw(t, "units")
				total := q * l.UnitPrice
				_, err := refund.Partial(o, c.ID, partial(total, ordertest.Line("part of "+l.Description, q, l.UnitPrice, l.Vat)), f.Env())
				var fe *fault.Error
				switch {
				case err == nil:
					units[i] -= q
				case !(errors.As(err, &fe) && (fe.Code == "refund_exceeds_captured" || fe.Code == "refund_vat_mismatch" || fe.Code == "refund_amount_invalid")):
					t.Fatal(err)
				}
			}
			if o.Refundable(&o.Captured[ci]).Gross > 0 {
				if _, err := refund.Full(o, c.ID, nil, f.Env()); err != nil {
					t.Fatal(err)
				}
			}
			inv := perRate(c.Lines, mode)
			cred := map[int64]order.Totals{}
			for _, rf := range o.Refunded {
				if rf.RefundOf != c.ID {
					continue
				}
				s := order.SumLines(rf.Lines, mode)
				// Captures hold their VAT within their gross (a discount
				// is not invoiced without its goods), and so do their credit
				// notes.
				if s.Gross <= 0 || s.VAT < 0 {
					t.Fatalf("credit note %s: gross %d, VAT %d", rf.DocumentReference, s.Gross, s.VAT)
				}
				for rate, t2 := range perRate(rf.Lines, mode) {
					x := cred[rate]
					cred[rate] = order.Totals{Gross: x.Gross + t2.Gross, Net: x.Net + t2.Net, VAT: x.VAT + t2.VAT}
				}
			}
			for rate := range cred {
				if _, ok := inv[rate]; !ok {
					inv[rate] = order.Totals{}
				}
			}
			for rate, want := range inv {
				if got := cred[rate]; got.Gross != want.Gross || got.Net != want.Net || got.VAT != want.VAT {
					t.Fatalf("capture %s at rate %d: credited %+v, invoiced %+v", c.DocumentReference, rate, got, want)
				}
			}
		}
	})
}
