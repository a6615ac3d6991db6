package order

import (
	"time"

	"github.com/kassahq/kassa/fault"
)

// Every operation below checks availableActions (through Require) and all of
// its input before it changes the order, so a refused operation leaves the
// order exactly as it was.

// EditRequest is the spec's EditLedgerOrderRequest.
type EditRequest struct {
	OrderLines []LineInput `json:"orderLines"`
	TotalsInput
}

// Validate checks the request without the order: that there are lines,
// each line's own fields, and that every total is sent and within bounds.
// What the lines sum to depends on the order's VAT mode and is left to Edit.
func (r *EditRequest) Validate() error {
	var f fault.Fields
	r.check(&f, nil, nil)
	return f.Err()
}

// check records every failure of r: without an order (o nil) those Validate
// names; with one, each line that passed its own checks is also resolved in
// the order's VAT mode and the totals are compared with the lines' sums.
func (r *EditRequest) check(f *fault.Fields, o *Order, ids IDSource) (lines []Line) {
	if r.OrderLines == nil {
		f.Add("orderLines", "is required")
	} else if len(r.OrderLines) == 0 {
		f.Add("orderLines", "must have at least one line; cancel the order to release it")
	}
	if o == nil {
		CheckLines(f, "orderLines", r.OrderLines, false, nil)
	} else {
		lines = BuildLines(f, "orderLines", r.OrderLines, o.VATMode, ids)
	}
	if o != nil && f.Len() == 0 {
		CheckTotals(f, r.TotalsInput, SumLines(lines, o.VATMode), true)
	} else {
		// Without the order, or with lines that cannot be summed, still name
		// every missing or out-of-bounds total.
		CheckTotalsBounds(f, r.TotalsInput, true)
	}
	return lines
}

// Edit replaces the lines of the uncaptured sub-order. The new authorized
// amount is what has been captured plus the new remainder; it may fall, or
// rise up to what the buyer's authorization approved (then an authorize
// event records the re-authorization, unless the order is on hold: its
// approval does). Appends edit with the new remainder.
func (o *Order) Edit(r *EditRequest, env Env) error {
	var f fault.Fields
	lines := r.check(&f, o, env.IDs)
	if err := f.Err(); err != nil {
		return err
	}
	if _, err := o.Require(o.Uncaptured.ID, ActionEditOrder, env); err != nil {
		return err
	}
	gross := SumLines(lines, o.VATMode).Gross
	newAuth := o.Amounts().Consumed + gross
	if newAuth > o.ApprovedAmount {
		return fault.InvalidCode("authorization_exceeded", "totalOrderAmount",
			"captured %d plus the edited remainder %d exceeds the %d the buyer's authorization approved%s",
			o.Amounts().Consumed, gross, o.ApprovedAmount, RoundingHint(lines, o.VATMode, newAuth-o.ApprovedAmount))
	}
	// The order's amount (captured and left) is at most what it authorizes,
	// which is held to an order's bound whatever the approval: a token put
	// before its approved amount was bounded (token.Authorization.Validate)
	// may approve more, and edits after partial captures took the order's
	// amount up to that. Checked after the approval, so that an edit past
	// both is refused as authorization_exceeded, as it was before the bound.
	if newAuth > MaxTotal {
		return fault.Invalidf("totalOrderAmount", "captured %d plus the edited remainder %d is %d, more than an order may total (%d)",
			o.Amounts().Consumed, gross, newAuth, MaxTotal)
	}
	raised := newAuth > o.AuthorizedAmount
	o.AuthorizedAmount = newAuth
	o.Uncaptured.Lines = lines
	o.AppendEvent(EventEdit, o.Uncaptured.ID, gross, env)
	// On hold the buyer's authorization is still pending: the review's
	// approval authorizes the amount as edited, and a denial must not
	// follow an authorize the merchant was already told of.
	if raised && o.Hold != HoldOnHold {
		o.AppendEvent(EventAuthorize, o.Uncaptured.ID, newAuth, env)
	}
	return nil
}

// Cancel releases what is uncaptured. An order with nothing captured becomes
// cancelled; captured sub-orders are untouched. Appends cancel with the
// released amount.
func (o *Order) Cancel(env Env) error {
	if _, err := o.Require(o.Uncaptured.ID, ActionCancel, env); err != nil {
		return err
	}
	gross := SumLines(o.Uncaptured.Lines, o.VATMode).Gross
	o.Cancelled = true
	o.CancelledAmount += gross
	o.Uncaptured.Lines = []Line{}
	o.AppendEvent(EventCancel, o.Uncaptured.ID, gross, env)
	return nil
}

// CancelLedger cancels a sub-order: the uncaptured one releases its remainder
// (as Cancel); a captured invoice that offers void is voided, and its amount
// leaves capturedAmount. Appends cancel with the amount.
func (o *Order) CancelLedger(ledgerID string, env Env) error {
	if ledgerID == o.Uncaptured.ID {
		return o.Cancel(env)
	}
	l, err := o.Require(ledgerID, ActionVoid, env)
	if err != nil {
		return err
	}
	l.setStatus(SubVoid, true)
	o.AppendEvent(EventCancel, l.ID, SumLines(l.Lines, o.VATMode).Gross, env)
	return nil
}

// Acknowledge confirms an unacknowledged order. For advanceInvoice this is
// what makes capture possible (spec rule 1).
func (o *Order) Acknowledge(env Env) error {
	switch {
	case !o.Unacknowledged:
		return fault.NotAvailablef("order %s is not awaiting acknowledgement", o.ID)
	case o.Closed(env.Now):
		return fault.NotAvailablef("order %s is %s: it no longer awaits acknowledgement", o.ID, o.closedAs(env.Now))
	}
	o.Unacknowledged = false
	o.AppendEvent(EventAcknowledge, o.Uncaptured.ID, 0, env)
	o.maybeReady(env)
	return nil
}

// ExtendExpiry moves expiresAt to the end of the UTC day that lies one expiry
// period from now, never earlier than it was and never past the cap after
// creation. Calling it twice on one day yields the same date; the event is
// appended only when the date moves.
func (o *Order) ExtendExpiry(env Env) error {
	if _, err := o.Require(o.Uncaptured.ID, ActionExtendOrderExpiry, env); err != nil {
		return err
	}
	next := endOfDay(env.Now.Add(env.Policy.ExpiryPeriod))
	if limit := o.ExpiryCap(env.Policy); next.After(limit) {
		next = limit
	}
	if next.After(o.ExpiresAt) {
		o.ExpiresAt = next
		o.AppendEvent(EventExtendExpiry, o.Uncaptured.ID, 0, env)
	}
	return nil
}

func endOfDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 23, 59, 59, 0, time.UTC)
}

// EditCustomer changes the buyer's contact and delivery details. Appends
// editCustomer with amount zero (spec).
func (o *Order) EditCustomer(r *EditCustomerRequest, env Env) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if ic := r.InvoiceChannel; ic != nil && ic.Type == "" && (o.Customer.InvoiceChannel == nil || o.Customer.InvoiceChannel.Type == "") {
		// The first edit of the channel enables it: without a type it
		// would be an enabled channel that delivers nowhere.
		return fault.Invalidf("invoiceChannel.type", "is required to set up the order's invoice channel: one of %v", channelTypes)
	}
	if _, err := o.Require(o.Uncaptured.ID, ActionEditCustomer, env); err != nil {
		return err
	}
	r.apply(&o.Customer)
	o.AppendEvent(EventEditCustomer, o.Uncaptured.ID, 0, env)
	return nil
}

// EditPaymentMethodRequest is the spec's EditPaymentMethodRequest.
type EditPaymentMethodRequest struct {
	PaymentMethod *PaymentMethod `json:"paymentMethod"`
}

// Validate accepts only provider service with type advanceInvoice (spec).
func (r *EditPaymentMethodRequest) Validate() error {
	var f fault.Fields
	if r.PaymentMethod == nil {
		f.Add("paymentMethod", "is required")
		return f.Err()
	}
	if r.PaymentMethod.Provider != ProviderService {
		f.Add("paymentMethod.provider", "must be service")
	}
	if r.PaymentMethod.Type != PayAdvanceInvoice {
		f.Add("paymentMethod.type", "must be advanceInvoice")
	}
	return f.Err()
}

// EditPaymentMethod switches an uncaptured order to advance invoice. Because
// spec rule 1 forbids capturing advanceInvoice before acknowledgement, the
// order becomes unacknowledged again.
func (o *Order) EditPaymentMethod(r *EditPaymentMethodRequest, env Env) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if _, err := o.Require(o.Uncaptured.ID, ActionEditPaymentMethod, env); err != nil {
		return err
	}
	o.PaymentMethod = *r.PaymentMethod
	pm := o.PaymentMethod
	o.Customer.PaymentMethod = &pm
	o.Unacknowledged = true
	o.ReadyEmitted = false
	o.AppendEvent(EventEditPaymentMethod, o.Uncaptured.ID, 0, env)
	return nil
}

// ReferenceRequest is kassa's body for POST /v1/orders/{id}/reference (the
// spec leaves it unshaped): the merchant's own reference, and optionally the
// settlement reference, each at most 50 characters as at creation.
type ReferenceRequest struct {
	Reference           *string `json:"reference"`
	SettlementReference *string `json:"settlementReference,omitempty"`
}

// Validate checks the request.
func (r *ReferenceRequest) Validate() error {
	var f fault.Fields
	if r.Reference == nil {
		f.Add("reference", "is required")
	} else {
		checkText(&f, "reference", *r.Reference, MaxReferenceLen)
	}
	if r.SettlementReference != nil {
		checkText(&f, "settlementReference", *r.SettlementReference, MaxReferenceLen)
	}
	return f.Err()
}

// SetReference sets the merchant reference. It has no action type in the
// spec, so it is refused only for an order denied for fraud. Appends setReference.
func (o *Order) SetReference(r *ReferenceRequest, env Env) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if o.Hold == HoldFraudDeny {
		return fault.NotAvailablef("order %s was denied for fraud", o.ID)
	}
	o.MerchantReference = *r.Reference
	if r.SettlementReference != nil {
		o.SettlementReference = *r.SettlementReference
	}
	o.AppendEvent(EventSetReference, o.Uncaptured.ID, 0, env)
	return nil
}

// Resend records that the document of a sub-order is to be sent again. The
// spec has no event type for it; the caller queues the delivery.
func (o *Order) Resend(ledgerID string, env Env) (*Ledger, error) {
	l, err := o.Require(ledgerID, ActionResendOrderInvoice, env)
	if err != nil {
		return nil, err
	}
	l.Resent++
	return l, nil
}

// RecourseRequest is kassa's body for POST /v1/orders/{id}/recourse/{ledgerId}
// (unshaped in the spec): why the merchant takes the invoice back.
type RecourseRequest struct {
	Reason *string `json:"reason"`
}

// Validate checks the request.
func (r *RecourseRequest) Validate() error {
	var f fault.Fields
	switch {
	case r.Reason == nil:
		f.Add("reason", "is required")
	case *r.Reason == "":
		f.Add("reason", "must not be empty")
	default:
		checkText(&f, "reason", *r.Reason, MaxTextLen)
	}
	return f.Err()
}

// Recourse hands an unpaid invoice back to the merchant: the sub-order gets
// status recourse and can no longer be voided, and records the claim handed
// back, which the next settlement takes back from the merchant (it was paid
// the capture in full). There is no event type for it.
func (o *Order) Recourse(ledgerID string, r *RecourseRequest, env Env) error {
	if err := r.Validate(); err != nil {
		return err
	}
	l, err := o.Require(ledgerID, ActionRecourseOrderInvoice, env)
	if err != nil {
		return err
	}
	l.Recourse = *r.Reason
	l.RecourseClaim = o.Outstanding(l) // > 0: Require offers recourse only then
	l.RecoursedAt = o.eventTime(env.Now)
	l.setStatus(SubRecourse, true)
	return nil
}

// liveCapture finds a capture ledger that is not void.
func (o *Order) liveCapture(ledgerID string) (*Ledger, error) {
	l := o.Ledger(ledgerID)
	if l == nil {
		return nil, fault.NotFoundf("ledger_not_found", "order %s has no sub-order %s", o.ID, ledgerID)
	}
	if l.Kind != LedgerCapture || l.Void() {
		return nil, fault.NotAvailablef("sub-order %s is not a live capture", ledgerID)
	}
	return l, nil
}

// owed refuses what only a capture the provider collects from the buyer
// afterwards takes (a payment, a reminder): on one paid when it was made,
// and on one handed back to the merchant (recourse), which the provider no
// longer collects: the buyer pays the merchant, and what the recourse took
// back from the merchant's settlement stays what it was.
func (o *Order) owed(l *Ledger) error {
	if o.PaymentMethod.PaidAtCapture() {
		return fault.NotAvailablef("sub-order %s was paid by %s when it was captured: nothing is owed on it", l.ID, o.PaymentMethod.Type)
	}
	if l.Recourse != "" {
		return fault.NotAvailablef("sub-order %s was handed back to the merchant (recourse): the merchant collects it", l.ID)
	}
	return nil
}

// Outstanding is what the buyer still owes on a capture.
func (o *Order) Outstanding(l *Ledger) int64 {
	return o.Refundable(l).Gross - l.Paid
}

// ClaimLeft is what the merchant still holds of the claim a recourse handed
// back on capture l: the claim less the refunds since, never below 0. As
// payments stop at the recourse, that is what is outstanding. 0 on a
// capture not recoursed, or recoursed before kassa recorded the claim.
func (o *Order) ClaimLeft(l *Ledger) int64 {
	if l.RecourseClaim <= 0 {
		return 0
	}
	return max(0, o.Outstanding(l))
}

// RegisterPayment records the buyer paying amount on a capture (buyer side,
// used by the sandbox and by payment reconciliation). Appends paid.
func (o *Order) RegisterPayment(ledgerID string, amount int64, env Env) error {
	l, err := o.liveCapture(ledgerID)
	if err != nil {
		return err
	}
	if err := o.owed(l); err != nil {
		return err
	}
	due := o.Outstanding(l)
	if amount <= 0 || amount > due {
		return fault.Invalidf("amount", "must be between 1 and the outstanding %d", due)
	}
	l.Paid += amount
	o.RefreshPaid(l)
	o.AppendEvent(EventPaid, l.ID, amount, env)
	return nil
}

// RefreshPaid sets a capture's paid status from what was paid and what is
// still owed, after a payment or after a refund lowered the claim: an
// invoice paid in part whose remainder was then refunded is fully paid, the
// same as when the refund came first.
func (o *Order) RefreshPaid(l *Ledger) {
	if l.Paid <= 0 {
		return
	}
	full := o.Outstanding(l) <= 0
	l.setStatus(SubFullyPaid, full)
	l.setStatus(SubPartiallyPaid, !full)
	if full {
		l.setStatus(SubReminder1, false)
		l.setStatus(SubReminder2, false)
		l.setStatus(SubDebtCollection, false)
	}
}

// MarkLedger sets a buyer-side status on a capture: reminder1, reminder2,
// debtCollection or invoiceDeliveryFailure. Reminders need something
// outstanding that the provider still collects.
func (o *Order) MarkLedger(ledgerID string, s SubStatus, env Env) error {
	l, err := o.liveCapture(ledgerID)
	if err != nil {
		return err
	}
	switch s {
	case SubReminder1, SubReminder2, SubDebtCollection:
		if err := o.owed(l); err != nil {
			return err
		}
		if o.Outstanding(l) <= 0 {
			return fault.NotAvailablef("sub-order %s has nothing outstanding", ledgerID)
		}
	case SubInvoiceDeliveryFailure:
	default:
		return fault.Invalidf("status", "must be reminder1, reminder2, debtCollection or invoiceDeliveryFailure")
	}
	l.setStatus(s, true)
	return nil
}

// ResolveHold ends a risk review: approve releases the hold (and the order
// becomes ready for capture); deny marks the order fraudDeny. The review
// ends with a cancelled or expired order: approving one would authorize
// (event, notification, authorizeStatus) an order no longer to be paid.
func (o *Order) ResolveHold(approve bool, env Env) error {
	if o.Hold != HoldOnHold {
		return fault.NotAvailablef("order %s is not on hold", o.ID)
	}
	if o.Cancelled {
		return fault.NotAvailablef("order %s is cancelled: its risk review ended with it", o.ID)
	}
	if o.Expired(env.Now) {
		return fault.NotAvailablef("order %s has expired: its risk review ended with it", o.ID)
	}
	if approve {
		o.Hold = HoldNone
		o.AppendEvent(EventAuthorize, o.Uncaptured.ID, o.AuthorizedAmount, env)
		o.maybeReady(env)
		return nil
	}
	o.Hold = HoldFraudDeny
	return nil
}

// MarkExpired records that the order's expiry has passed (the expiry job's
// step). It reports whether anything changed.
func (o *Order) MarkExpired(env Env) bool {
	if o.ExpiredMarked || len(o.Uncaptured.Lines) == 0 || o.Cancelled || env.Now.Before(o.ExpiresAt) {
		return false
	}
	o.ExpiredMarked = true
	return true
}
