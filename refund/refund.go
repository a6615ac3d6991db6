// Package refund credits captured sub-orders: a full refund of what remains
// refundable on a capture, or a partial refund by lines with an optional
// internal note. A capture's refunded total never exceeds what it captured;
// each refund gets a credit-note number from the merchant's gapless sequence.
package refund

import (
	"fmt"
	"slices"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// PartialRequest is the spec's PartialRefundRequest.
type PartialRequest struct {
	OrderLines        []order.LineInput `json:"orderLines"`
	TotalRefundAmount *int64            `json:"totalRefundAmount"`
	Note              *string           `json:"note,omitempty"`
}

// FullRequest is kassa's body for POST /v1/orders/{id}/refund/{ledgerId}
// (unshaped in the spec, and optional): an internal note.
type FullRequest struct {
	Note *string `json:"note,omitempty"`
}

func checkNote(f *fault.Fields, note *string) {
	if note != nil {
		// As every other text: no NUL (PostgreSQL cannot hold it, and a
		// document or export would carry it), valid UTF-8, at most 200.
		order.CheckText(f, "note", *note, order.MaxTextLen)
	}
}

func noteOf(note *string) string {
	if note == nil {
		return ""
	}
	return *note
}

// Validate checks the request without the order: that there are lines,
// each line's own fields, the note, and that the total is sent and within
// bounds.
func (r *PartialRequest) Validate() error {
	var f fault.Fields
	r.check(&f, nil, nil)
	return f.Err()
}

// check records every failure of r: without an order (o nil) those
// Validate names; with one, each line that passed its own checks is also
// resolved in the order's VAT mode.
func (r *PartialRequest) check(f *fault.Fields, o *order.Order, ids order.IDSource) (lines []order.Line) {
	if len(r.OrderLines) == 0 {
		f.Add("orderLines", "must have at least one line")
	}
	switch {
	case r.TotalRefundAmount == nil:
		f.Add("totalRefundAmount", "is required")
	case *r.TotalRefundAmount < 0 || *r.TotalRefundAmount > order.MaxTotal:
		f.Add("totalRefundAmount", "must be between 0 and %d", order.MaxTotal)
	}
	checkNote(f, r.Note)
	if o == nil {
		order.CheckLines(f, "orderLines", r.OrderLines, false, nil)
		return nil
	}
	return order.BuildLines(f, "orderLines", r.OrderLines, o.VATMode, ids)
}

// Partial refunds the given lines of capture ledgerID. The sum of the lines'
// totalAmount must equal totalRefundAmount, and the refund may not pass what
// remains refundable on that capture. Appends partialRefund.
func Partial(o *order.Order, ledgerID string, r *PartialRequest, env order.Env) (*order.Ledger, error) {
	var f fault.Fields
	lines := r.check(&f, o, env.IDs)
	if err := f.Err(); err != nil {
		return nil, err
	}
	var sum int64
	for _, l := range lines {
		sum += l.TotalAmount
	}
	if sum != *r.TotalRefundAmount {
		return nil, fault.InvalidCode("refund_amount_mismatch", "totalRefundAmount",
			"must equal the sum of the totalAmount of the lines, %d, got %d", sum, *r.TotalRefundAmount)
	}
	if _, err := o.Require(ledgerID, order.ActionPartialRefund, env); err != nil {
		return nil, err
	}
	return apply(o, ledgerID, lines, noteOf(r.Note), order.EventPartialRefund, env)
}

// Validate checks the note, the only field.
func (r *FullRequest) Validate() error {
	var f fault.Fields
	checkNote(&f, r.Note)
	return f.Err()
}

// Full refunds everything still refundable on capture ledgerID. When nothing
// was refunded before, the refund repeats the captured lines; after partial
// refunds it is one line per VAT rate holding what remains at that rate, so
// that the credit note's VAT breakdown stays exact. Appends fullRefund.
func Full(o *order.Order, ledgerID string, r *FullRequest, env order.Env) (*order.Ledger, error) {
	if r == nil {
		r = &FullRequest{}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	c, err := o.Require(ledgerID, order.ActionRefund, env)
	if err != nil {
		return nil, err
	}
	return apply(o, ledgerID, remainder(o, c, env), noteOf(r.Note), order.EventFullRefund, env)
}

func remainder(o *order.Order, c *order.Ledger, env order.Env) []order.Line {
	if o.RefundedOf(c.ID) == 0 {
		lines := slices.Clone(c.Lines)
		for i := range lines {
			lines[i].ID = env.IDs.NewID(order.KindLine)
		}
		return lines
	}
	left := leftByRate(o, c)
	// The lines are kassa's words on the credit note: in its language.
	t := i18n.For(env.DocumentLanguage(o))
	var lines []order.Line
	for _, rate := range left.rates() {
		s := left[rate]
		if s.total == 0 && s.vat == 0 {
			continue
		}
		lines = append(lines, order.Line{
			ID:          env.IDs.NewID(order.KindLine),
			Description: t.RemainingBalance(rate),
			Quantity:    1, UnitPrice: s.total, TotalAmount: s.total, TotalVatAmount: s.vat, Vat: rate,
		})
	}
	return lines
}

// rateSums are the sums of lines' totalAmount and VAT per VAT rate.
type rateSums map[int64]*struct{ total, vat int64 }

func (m rateSums) add(ls []order.Line, sign int64) {
	for _, l := range ls {
		s := m[l.Vat]
		if s == nil {
			s = &struct{ total, vat int64 }{}
			m[l.Vat] = s
		}
		s.total += sign * l.TotalAmount
		s.vat += sign * l.TotalVatAmount
	}
}

func (m rateSums) rates() []int64 {
	rates := make([]int64, 0, len(m))
	for r := range m {
		rates = append(rates, r)
	}
	slices.Sort(rates)
	return rates
}

// leftByRate is what capture c invoiced, less what its refunds credited, per VAT rate.
func leftByRate(o *order.Order, c *order.Ledger) rateSums {
	m := rateSums{}
	m.add(c.Lines, 1)
	for i := range o.Refunded {
		if o.Refunded[i].RefundOf == c.ID {
			m.add(o.Refunded[i].Lines, -1)
		}
	}
	return m
}

// closesAtEveryRate checks a refund of all that is left of capture c: it is
// the capture's last (no refund can follow, a refund being positive), so at
// each VAT rate it must credit what is left, or the difference stays
// invoiced, or credited twice, for good. Per-line rounding makes one unseen:
// 2 × 0.03 at 12 % invoices 0.01 of VAT, and each unit refunded on its own
// credits 0.00; lines at two rates can round the two ways and net to the
// right total while each rate is off. The full refund credits exactly what
// is left, and the ±1 of a line's totalVatAmount reaches it too.
func closesAtEveryRate(o *order.Order, c *order.Ledger, lines []order.Line) error {
	off := leftByRate(o, c) // what is left, less what the refund credits
	off.add(lines, -1)
	for _, r := range off.rates() {
		if d := off[r]; d.total != 0 || d.vat != 0 {
			return fault.InvalidCode("refund_vat_mismatch", "orderLines",
				"the refund credits all that is left on %s, so at %s %% VAT it must credit exactly the totalAmount and VAT left there; it would leave %d and VAT %d (below 0: credited twice): refund it in full, or send a line's totalVatAmount up to 1 off its computed VAT",
				c.ID, money.New(r, "").Amount(), d.total, d.vat)
		}
	}
	return nil
}

func apply(o *order.Order, ledgerID string, lines []order.Line, note string, ev order.EventType, env order.Env) (*order.Ledger, error) {
	asked := order.SumLines(lines, o.VATMode)
	gross := asked.Gross
	c := o.Ledger(ledgerID)
	left := o.Refundable(c)
	if gross <= 0 {
		return nil, fault.InvalidCode("refund_amount_invalid", "totalRefundAmount",
			"the refund must be positive including VAT, got %d", gross)
	}
	if gross > left.Gross {
		return nil, fault.InvalidCode("refund_exceeds_captured", "totalRefundAmount",
			"refunding %d would pass what remains refundable on %s, %d%s", gross, ledgerID, left.Gross,
			order.RoundingHint(lines, o.VATMode, gross-left.Gross))
	}
	// A credit note must not return VAT that was never invoiced (a refund at
	// 25 % of a capture at 0 %), which the gross bound alone lets through. A
	// refund at a rate the capture did not have (goodwill at 0 %) stays
	// allowed within both bounds.
	if asked.VAT < min(0, left.VAT) || asked.VAT > max(0, left.VAT) {
		return nil, fault.InvalidCode("refund_exceeds_captured", "orderLines",
			"the refund gives back %d of VAT, but the capture has %d of VAT left to credit", asked.VAT, left.VAT)
	}
	// Nor may it credit more VAT than its own amount including VAT, as no
	// invoice may hold (capture_vat_out_of_bounds): lines at two rates would
	// credit VAT at one while charging net back at the other. The refund of
	// all that is left is exempt: it must credit what is left as it is
	// (closesAtEveryRate), which a goodwill refund at a lower rate can have
	// made VAT over a negative net. Negative VAT is bounded above, by what
	// the capture invoiced.
	if ev == order.EventPartialRefund && gross < left.Gross && asked.Net < 0 {
		return nil, fault.InvalidCode("refund_vat_out_of_bounds", "orderLines",
			"the refund gives back %d including VAT, of which %d is VAT; a credit note's VAT must not exceed its amount including VAT", gross, asked.VAT)
	}
	// The full refund's lines (remainder) close every rate by construction.
	if ev == order.EventPartialRefund && gross == left.Gross {
		if err := closesAtEveryRate(o, c, lines); err != nil {
			return nil, err
		}
	}
	n, err := env.NextDocument(order.SeriesCreditNote, "credit note")
	if err != nil {
		return nil, err
	}
	l := o.NewLedger(order.LedgerRefund, lines, env)
	l.RefundOf = ledgerID
	l.Note = note
	l.DocumentSeq = n
	l.DocumentReference = fmt.Sprintf("CN-%08d", n)
	o.Issue(&l, env)
	o.Refunded = append(o.Refunded, l)
	o.RefreshPaid(c)
	o.AppendEvent(ev, l.ID, gross, env)
	return &o.Refunded[len(o.Refunded)-1], nil
}
