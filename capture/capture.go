// Package capture turns uncaptured order lines into captured sub-orders: full
// capture of the remainder and partial capture by lines, exactly as the
// spec's transition table describes, each with an invoice number from the
// merchant's gapless document sequence.
package capture

import (
	"fmt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// PartialRequest is the spec's PartialCaptureRequest.
type PartialRequest struct {
	OrderLines         []order.LineInput `json:"orderLines"`
	TotalCaptureAmount *int64            `json:"totalCaptureAmount"`
}

// FullRequest is the spec's FullCaptureRequest; both fields are optional.
// Omitted orderLines select every remaining line, so a server refuses them
// as null (kassa:"nonull"): an empty selection must not capture the order;
// and sent empty they differ from omitted (kassa:"emptydiffers", for the
// idempotency fingerprint).
type FullRequest struct {
	OrderLines         []order.LineInput `json:"orderLines,omitempty" kassa:"nonull,emptydiffers"`
	TotalCaptureAmount *int64            `json:"totalCaptureAmount,omitempty"`
}

// selection is what a capture request picked: the lines to capture and the
// ids of uncaptured lines they move out of the remainder.
type selection struct {
	lines []order.Line
	moved map[string]bool
}

// selectLines checks request lines on their own and, given the order (o not
// nil), resolves them against its uncaptured sub-order. A line with id names
// a whole uncaptured line, which moves to the capture; a line without id is
// captured as sent and leaves the remainder unchanged.
func selectLines(f *fault.Fields, o *order.Order, ins []order.LineInput, env order.Env) selection {
	sel := selection{moved: map[string]bool{}}
	if o == nil {
		order.CheckLines(f, "orderLines", ins, true, nil)
		return sel
	}
	byID := make(map[string]order.Line, len(o.Uncaptured.Lines))
	for _, l := range o.Uncaptured.Lines {
		byID[l.ID] = l
	}
	order.CheckLines(f, "orderLines", ins, true, func(path string, in order.LineInput) {
		if in.ID == nil {
			if l, ok := order.ResolveLine(f, path, in, o.VATMode); ok {
				l.ID = env.IDs.NewID(order.KindLine)
				sel.lines = append(sel.lines, l)
			}
			return
		}
		id := *in.ID
		stored, ok := byID[id]
		switch {
		case !ok:
			f.Add(path+".id", "does not name an uncaptured line of this order")
			return
		case sel.moved[id]:
			f.Add(path+".id", "names line %s a second time", id)
			return
		}
		before := f.Len()
		if in.Quantity != nil && *in.Quantity != stored.Quantity {
			f.Add(path+".quantity", "must be the uncaptured quantity %d; to capture part of a line, send it without id and then edit the order", stored.Quantity)
		}
		sameNumber(f, path, "totalAmount", in.TotalAmount, stored.TotalAmount)
		sameNumber(f, path, "unitPrice", in.UnitPrice, stored.UnitPrice)
		sameNumber(f, path, "totalVatAmount", in.TotalVatAmount, stored.TotalVatAmount)
		// The rest of the line is invoiced as stored too: a field sent with
		// another value would be silently ignored, so it is refused.
		if in.Vat != nil && *in.Vat != stored.Vat {
			f.Add(path+".vat", "must be the uncaptured line's vat %d; to invoice at another rate, edit the order first", stored.Vat)
		}
		sameNumber(f, path, "unitDiscountAmount", in.UnitDiscountAmount, stored.UnitDiscountAmount)
		if in.Description != nil && *in.Description != stored.Description {
			f.Add(path+".description", "must be the uncaptured line's description %q", stored.Description)
		}
		sameText(f, path+".reference", in.Reference, stored.Reference)
		sameText(f, path+".type", in.Type, string(stored.Type))
		if f.Len() == before {
			sel.moved[id] = true
			sel.lines = append(sel.lines, stored)
		}
	})
	return sel
}

// sameNumber refuses a number field of a line named by id that was sent
// with another value than the stored line's.
func sameNumber(f *fault.Fields, path, name string, sent *int64, stored int64) {
	if sent != nil && *sent != stored {
		f.Add(path+"."+name, "must be the uncaptured line's %s %d", name, stored)
	}
}

// sameText refuses an optional text field sent with another value than
// the stored line's.
func sameText(f *fault.Fields, path, sent, stored string) {
	switch {
	case sent == "" || sent == stored:
	case stored == "":
		f.Add(path, "must be left out: the uncaptured line has none")
	default:
		f.Add(path, "must be the uncaptured line's %q", stored)
	}
}

func checkSum(lines []order.Line, total *int64) error {
	if total == nil {
		return nil
	}
	var sum int64
	for _, l := range lines {
		sum += l.TotalAmount
	}
	if *total != sum {
		return fault.InvalidCode("capture_amount_mismatch", "totalCaptureAmount",
			"must equal the sum of the totalAmount of the lines, %d, got %d", sum, *total)
	}
	return nil
}

func checkTotalBounds(f *fault.Fields, total *int64, required bool) {
	switch {
	case total == nil && required:
		f.Add("totalCaptureAmount", "is required")
	case total != nil && (*total < 0 || *total > order.MaxTotal):
		f.Add("totalCaptureAmount", "must be between 0 and %d", order.MaxTotal)
	}
}

// Validate checks the request without the order: that there are lines,
// each line's own fields, and that the total is sent and within bounds.
func (r *PartialRequest) Validate() error {
	var f fault.Fields
	r.check(&f, nil, order.Env{})
	return f.Err()
}

// check records every failure of r: without an order (o nil) those
// Validate names; with one, the lines are also resolved against it.
func (r *PartialRequest) check(f *fault.Fields, o *order.Order, env order.Env) selection {
	if len(r.OrderLines) == 0 {
		f.Add("orderLines", "must have at least one line")
	}
	checkTotalBounds(f, r.TotalCaptureAmount, true)
	return selectLines(f, o, r.OrderLines, env)
}

// Partial captures the given lines. Lines with id leave the uncaptured
// sub-order; lines without id are captured and leave it unchanged. The sum of
// the lines' totalAmount must equal totalCaptureAmount, and the sum captured
// may never pass the authorized amount. Appends partialCapture with the
// captured amount and returns the new sub-order.
func Partial(o *order.Order, r *PartialRequest, env order.Env) (*order.Ledger, error) {
	// Availability first: the lines are checked against the uncaptured
	// sub-order, which a cancelled or expired order no longer offers.
	if _, err := o.Require(o.Uncaptured.ID, order.ActionPartialCapture, env); err != nil {
		return nil, err
	}
	var f fault.Fields
	sel := r.check(&f, o, env)
	if err := f.Err(); err != nil {
		return nil, err
	}
	if err := checkSum(sel.lines, r.TotalCaptureAmount); err != nil {
		return nil, err
	}
	return apply(o, sel, order.EventPartialCapture, false, env)
}

// Validate checks the request without the order: the total's bounds and,
// when lines are sent, that there is one and each line's own fields.
func (r *FullRequest) Validate() error {
	var f fault.Fields
	r.check(&f, nil, order.Env{})
	return f.Err()
}

// check records every failure of r: without an order (o nil) those
// Validate names; with one, the lines are also resolved against it, and
// no lines select every remaining one.
func (r *FullRequest) check(f *fault.Fields, o *order.Order, env order.Env) selection {
	checkTotalBounds(f, r.TotalCaptureAmount, false)
	switch {
	case r.OrderLines != nil && len(r.OrderLines) == 0:
		// "these lines: none" is not "every line": a merchant whose selection
		// came out empty must not capture the whole order by it.
		f.Add("orderLines", "must have at least one line; omit orderLines to capture every remaining line")
	case len(r.OrderLines) > 0:
		return selectLines(f, o, r.OrderLines, env)
	case o != nil:
		sel := selection{lines: append([]order.Line(nil), o.Uncaptured.Lines...), moved: map[string]bool{}}
		for _, l := range o.Uncaptured.Lines {
			sel.moved[l.ID] = true
		}
		return sel
	}
	return selection{}
}

// Full captures every remaining uncaptured line, or, when lines are given,
// exactly those lines as the final capture of the order: whatever then remains
// uncaptured is released (and a cancel event records the released amount).
// Appends fullCapture with the captured amount.
func Full(o *order.Order, r *FullRequest, env order.Env) (*order.Ledger, error) {
	if r == nil {
		r = &FullRequest{}
	}
	if _, err := o.Require(o.Uncaptured.ID, order.ActionCapture, env); err != nil {
		return nil, err
	}
	var f fault.Fields
	sel := r.check(&f, o, env)
	if err := f.Err(); err != nil {
		return nil, err
	}
	if err := checkSum(sel.lines, r.TotalCaptureAmount); err != nil {
		return nil, err
	}
	return apply(o, sel, order.EventFullCapture, true, env)
}

func apply(o *order.Order, sel selection, ev order.EventType, final bool, env order.Env) (*order.Ledger, error) {
	sum := order.SumLines(sel.lines, o.VATMode)
	gross := sum.Gross
	if gross < 0 {
		return nil, fault.InvalidCode("capture_amount_negative", "orderLines", "the captured lines sum to %d including VAT; a capture cannot be negative", gross)
	}
	// The invoice's VAT is held to the bounds of an order's totals: lines
	// without id can take a discount apart from its goods, or mix rates,
	// into an invoice of negative VAT or of VAT above its gross.
	if !sum.VATWithin() {
		return nil, fault.InvalidCode("capture_vat_out_of_bounds", "orderLines",
			"the captured lines sum to %d including VAT, of which %d is VAT; an invoice's VAT must be between 0 and its amount including VAT: capture a discount together with the goods it discounts, at their rate", gross, sum.VAT)
	}
	if remaining := o.RemainingAuthorization(); gross > remaining {
		return nil, fault.InvalidCode("capture_exceeds_authorization", "totalCaptureAmount",
			"capturing %d would pass the authorized amount; %d remains%s", gross, remaining, order.RoundingHint(sel.lines, o.VATMode, gross-remaining))
	}
	n, err := env.NextDocument(order.SeriesInvoice, "invoice")
	if err != nil {
		return nil, err
	}
	l := o.NewLedger(order.LedgerCapture, sel.lines, env)
	l.DocumentSeq = n
	l.DocumentReference = fmt.Sprintf("INV-%08d", n)
	o.Issue(&l, env)
	var keep []order.Line
	for _, u := range o.Uncaptured.Lines {
		if !sel.moved[u.ID] {
			keep = append(keep, u)
		}
	}
	if keep == nil {
		keep = []order.Line{}
	}
	released, releases := int64(0), final && len(keep) > 0
	if releases {
		released = order.SumLines(keep, o.VATMode).Gross
		keep = []order.Line{}
	}
	o.Uncaptured.Lines = keep
	o.Captured = append(o.Captured, l)
	o.AppendEvent(ev, l.ID, gross, env)
	// Recorded whenever lines are released, as Cancel does, also when they
	// sum to 0 (an item and its rebate): the event says lines left the order.
	if releases {
		o.CancelledAmount += released
		o.AppendEvent(order.EventCancel, o.Uncaptured.ID, released, env)
	}
	return &o.Captured[len(o.Captured)-1], nil
}
