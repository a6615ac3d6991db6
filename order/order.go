// Package order holds the Order aggregate of kassa: its lines, sub-orders
// (ledgers), amounts, statuses, events and the rules of every operation that
// manages an order after creation.
//
// The package does no I/O. Time, identifiers and document numbers come from
// an Env the caller supplies, so that every rule is deterministic under test.
// Captures and refunds live in their own packages (capture, refund) and use
// the exported building blocks here; availableActions are computed in one
// place (Actions) and every operation checks them before it changes anything.
package order

import (
	"slices"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
)

// Identifier kinds asked of an IDSource.
const (
	KindOrder    = "order"
	KindOrderRef = "orderref"
	KindLedger   = "ledger"
	KindLine     = "line"
	KindEvent    = "event"
)

// IDSource mints unique identifiers of a kind. Production uses random UUIDs;
// tests use a counter so that outputs are reproducible.
type IDSource interface {
	NewID(kind string) string
}

// NoIDs stands in for an IDSource when a request is only checked, not
// carried out: nothing it builds is kept.
type NoIDs struct{}

func (NoIDs) NewID(string) string { return "" }

// Sequencer hands out gapless, increasing numbers per series for one merchant.
// The store implements it inside the transaction of the operation, so a
// rolled-back operation leaves no gap.
type Sequencer interface {
	Next(series string) (int64, error)
}

// Document series.
const (
	SeriesInvoice    = "invoice"
	SeriesCreditNote = "creditNote"
)

// Policy holds the configurable periods of the order rules.
type Policy struct {
	ExpiryPeriod time.Duration // from creation to expiry; default 28 days
	MaxExpiry    time.Duration // latest expiry after creation; default 180 days
}

// DefaultPolicy is the policy of design.md §3. It is a function, not a
// variable, so that no importer can change the default of every instance.
func DefaultPolicy() Policy {
	return Policy{ExpiryPeriod: 28 * 24 * time.Hour, MaxExpiry: 180 * 24 * time.Hour}
}

// Env is what an operation needs from outside: the transaction's single now,
// identifiers, document numbers and policy.
type Env struct {
	Now    time.Time
	IDs    IDSource
	Docs   Sequencer
	Policy Policy
	// Supplier is the merchant's name, which the documents issued in the
	// operation state as the seller's.
	Supplier string
	// Language is the language a document of an order of locale is
	// written in (the server's pages know which they have); nil records
	// none, which renders as English.
	Language func(locale string) string
}

// DocumentLanguage is the language a document of o issued now is written
// in (Language; "" without one, which renders as English): what Issue
// records, and what kassa's own words on the document are written in.
func (env Env) DocumentLanguage(o *Order) string {
	if env.Language == nil {
		return ""
	}
	return env.Language(o.Locale)
}

// NextDocument takes the next number of a document series (what for names
// the document in an error). A store's failure keeps its kind: one that
// cannot be reached is unavailable (retry), not an internal error.
func (e Env) NextDocument(series, what string) (int64, error) {
	if e.Docs == nil {
		return 0, fault.Internalf(nil, "a %s needs a document sequence", what)
	}
	n, err := e.Docs.Next(series)
	if err != nil && fault.KindOf(err) == fault.Internal {
		return 0, fault.Internalf(err, "allocate %s number", what)
	}
	return n, err
}

// LedgerKind tells what a sub-order stands for.
type LedgerKind string

const (
	LedgerUncaptured LedgerKind = "uncaptured"
	LedgerCapture    LedgerKind = "capture"
	LedgerRefund     LedgerKind = "refund"
)

// Ledger is a sub-order: the uncaptured remainder, one capture, or one refund.
type Ledger struct {
	ID                string      `json:"ledgerId"`
	Kind              LedgerKind  `json:"kind"`
	CreatedAt         time.Time   `json:"createdAt"`
	Lines             []Line      `json:"orderLines"`
	Status            []SubStatus `json:"status"`
	DocumentReference string      `json:"documentReference,omitempty"`
	DocumentMessage   string      `json:"documentMessage,omitempty"`
	Note              string      `json:"note"`
	RefundOf          string      `json:"refundOf,omitempty"` // refund ledgers: the capture refunded
	Paid              int64       `json:"paid,omitempty"`     // captures: amount the buyer paid
	Resent            int         `json:"resent,omitempty"`   // times the document was resent
	Recourse          string      `json:"recourse,omitempty"` // recourse reason, when recoursed
	// RecourseClaim is what a recourse handed back to the merchant (captured
	// − refunded − paid then, always > 0), and RecoursedAt when: the
	// settlement takes the claim back from the merchant, and later refunds
	// are set against it (settlement.NewItems). Both are zero on captures
	// recoursed before kassa settled recourses: no claim was taken back
	// from those, so their refunds settle in full, as they always did.
	RecourseClaim int64     `json:"recourseClaim,omitempty"`
	RecoursedAt   time.Time `json:"recoursedAt,omitzero"`
	DocumentSeq   int64     `json:"documentSeq,omitempty"`
	// Issued is what the sub-order's document showed of its order when it
	// was issued. Nil on the uncaptured sub-order, and on documents issued
	// before kassa kept it (those render from the order, as they always did).
	Issued *Issue `json:"issued,omitempty"`
}

// Issue holds what an invoice or credit note shows of its order, as it was
// when the document was issued: an issued document is an accounting record,
// and a later edit of the order (set reference, edit customer) must not
// rewrite it, nor what a resend sends.
type Issue struct {
	// Supplier is the merchant's name: an invoice must name its supplier
	// (VAT directive art. 226), and the one it was issued under. "" when
	// the merchant has none, and on documents issued before kassa kept it.
	Supplier          string `json:"supplier,omitempty"`
	MerchantReference string `json:"merchantReference"`
	BuyerName         string `json:"buyerName,omitempty"`
	BuyerID           string `json:"buyerId,omitempty"`
	// BuyerAddress is the buyer's billing address: an invoice must state
	// the customer's address (VAT directive art. 226), and the one on
	// record at issue, not one edited in later. Nil when the order had none,
	// and on documents issued before kassa kept it.
	BuyerAddress *Address `json:"buyerAddress,omitempty"`
	// SettlementReference is not shown on the document. A void or recourse
	// of the capture is settled under it, the key the capture was paid out
	// under, not the order's at the reversal. Nil on documents issued
	// before kassa kept it.
	SettlementReference *string `json:"settlementReference,omitempty"`
	// Language is the language the document is written in, the order's
	// locale's when it was issued (Env.Language): recorded, so that a
	// language kassa learns later does not rewrite it. "" on documents
	// issued before kassa kept it, which are English.
	Language string `json:"language,omitempty"`
	// Due is the date an invoice is due (midnight UTC of that day): its
	// issue date plus the term it was issued under (PaymentMethod.DueDate),
	// recorded, so that a later change of the term does not move it. Zero
	// on a receipt and a credit note, which are not due, and on invoices
	// issued before kassa kept it, which state none, as they were issued.
	Due time.Time `json:"due,omitzero"`
}

// Issue records on l, a capture or refund just given its document number,
// what its document shows of o now, issued by env's supplier in env's
// language for o, and, on an invoice, when it is due.
func (o *Order) Issue(l *Ledger, env Env) {
	is := o.CurrentIssue()
	is.Supplier = env.Supplier
	is.Language = env.DocumentLanguage(o)
	if l.Kind == LedgerCapture {
		is.Due = o.PaymentMethod.DueDate(l.CreatedAt)
	}
	l.Issued = &is
}

// CurrentIssue is what a document issued now would show of o.
func (o *Order) CurrentIssue() Issue {
	sr := o.SettlementReference
	return Issue{MerchantReference: o.MerchantReference, BuyerName: o.Customer.CompanyName, BuyerID: o.Customer.CompanyID,
		BuyerAddress: o.Customer.BillingAddress.clone(), SettlementReference: &sr}
}

// HasStatus reports whether s is among the ledger's statuses.
func (l *Ledger) HasStatus(s SubStatus) bool { return slices.Contains(l.Status, s) }

func (l *Ledger) setStatus(s SubStatus, on bool) {
	i := slices.Index(l.Status, s)
	switch {
	case on && i < 0:
		l.Status = append(l.Status, s)
	case !on && i >= 0:
		l.Status = slices.Delete(l.Status, i, i+1)
	}
}

// Void reports whether a capture ledger was voided.
func (l *Ledger) Void() bool { return l.HasStatus(SubVoid) }

// Event is one entry of an order's append-only event log.
type Event struct {
	ID        string    `json:"id"`
	OrderID   string    `json:"orderId"`
	LedgerID  string    `json:"ledgerId"`
	CreatedAt time.Time `json:"createdAt"`
	Amount    int64     `json:"amount"`
	Type      EventType `json:"type"`
}

// AutoCapture is the spec's AutoCapture setting.
type AutoCapture struct {
	Enabled      bool  `json:"enabled"`
	DelayMinutes int64 `json:"delayMinutes"`
}

// Hold is a risk hold on an order.
type Hold string

const (
	HoldNone      Hold = ""
	HoldOnHold    Hold = "onHold"
	HoldFraudDeny Hold = "fraudDeny"
)

// Order is the aggregate. Its exported fields are its stored form; the
// response shapes of the spec are derived by Response and Summary.
type Order struct {
	ID                  string            `json:"id"`
	MerchantID          string            `json:"merchantId"`
	MerchantReference   string            `json:"merchantReference"`
	OrderReference      string            `json:"orderReference"`
	SettlementReference string            `json:"settlementReference,omitempty"`
	StoreID             string            `json:"storeId"`
	Country             string            `json:"country"`
	Locale              string            `json:"locale,omitempty"`
	Currency            money.Currency    `json:"currency"`
	VATMode             money.VATMode     `json:"vatMode"`
	CreatedAt           time.Time         `json:"createdAt"`
	UpdatedAt           time.Time         `json:"updatedAt"`
	ExpiresAt           time.Time         `json:"expiresAt"`
	PaymentMethod       PaymentMethod     `json:"paymentMethod"`
	Customer            Customer          `json:"customer"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	RiskTags            []RiskTag         `json:"riskTags"`
	TokenID             string            `json:"tokenId"`
	AutoCapture         *AutoCapture      `json:"autoCapture,omitempty"`

	// ApprovedAmount is the most the buyer's authorization allows; an edit may
	// raise AuthorizedAmount up to it and never beyond.
	ApprovedAmount   int64 `json:"approvedAmount"`
	AuthorizedAmount int64 `json:"authorizedAmount"`
	Unacknowledged   bool  `json:"unacknowledged,omitempty"`
	ReadyEmitted     bool  `json:"readyEmitted,omitempty"` // readyForCapture event appended
	Hold             Hold  `json:"hold,omitempty"`
	Cancelled        bool  `json:"cancelled,omitempty"`
	CancelledAmount  int64 `json:"cancelledAmount,omitempty"`
	ExpiredMarked    bool  `json:"expiredMarked,omitempty"` // set by the expiry job

	Uncaptured Ledger   `json:"uncaptured"`
	Captured   []Ledger `json:"captured"`
	Refunded   []Ledger `json:"refunded"`
	Events     []Event  `json:"events"`

	// Version is the optimistic-concurrency version kept by the store.
	Version int64 `json:"version"`
}

// Amounts are the money figures of an order, all in minor units including VAT.
type Amounts struct {
	Order      int64 // Captured + Uncaptured
	Captured   int64 // captures not voided
	Refunded   int64
	Uncaptured int64
	Consumed   int64 // every capture, voided or not: what the authorization has been used for
}

// Amounts computes the order's figures from its ledgers.
func (o *Order) Amounts() Amounts {
	var a Amounts
	for i := range o.Captured {
		g := SumLines(o.Captured[i].Lines, o.VATMode).Gross
		a.Consumed += g
		if !o.Captured[i].Void() {
			a.Captured += g
		}
	}
	for i := range o.Refunded {
		a.Refunded += SumLines(o.Refunded[i].Lines, o.VATMode).Gross
	}
	a.Uncaptured = SumLines(o.Uncaptured.Lines, o.VATMode).Gross
	a.Order = a.Captured + a.Uncaptured
	return a
}

// RefundedOf is what has been refunded against capture ledger id.
func (o *Order) RefundedOf(id string) int64 { return o.refundsOf(id).Gross }

// Refundable is what capture l still holds after its refunds: the gross a
// refund may give back, and the VAT it may credit.
func (o *Order) Refundable(l *Ledger) Totals {
	return SumLines(l.Lines, o.VATMode).minus(o.refundsOf(l.ID))
}

// refundsOf sums the refunds of capture id.
func (o *Order) refundsOf(id string) Totals {
	var t Totals
	for i := range o.Refunded {
		if o.Refunded[i].RefundOf == id {
			t = t.plus(SumLines(o.Refunded[i].Lines, o.VATMode))
		}
	}
	return t
}

func (t Totals) plus(u Totals) Totals {
	return Totals{Gross: t.Gross + u.Gross, Net: t.Net + u.Net, VAT: t.VAT + u.VAT, Sum: t.Sum + u.Sum}
}

func (t Totals) minus(u Totals) Totals {
	return Totals{Gross: t.Gross - u.Gross, Net: t.Net - u.Net, VAT: t.VAT - u.VAT, Sum: t.Sum - u.Sum}
}

// Ledger finds a sub-order by id.
func (o *Order) Ledger(id string) *Ledger {
	if o.Uncaptured.ID == id {
		return &o.Uncaptured
	}
	for i := range o.Captured {
		if o.Captured[i].ID == id {
			return &o.Captured[i]
		}
	}
	for i := range o.Refunded {
		if o.Refunded[i].ID == id {
			return &o.Refunded[i]
		}
	}
	return nil
}

// HasDocument reports whether a sub-order of o has a document (invoice or
// credit note), which its response links to.
func (o *Order) HasDocument() bool {
	if o.Uncaptured.DocumentReference != "" {
		return true
	}
	for _, subs := range [][]Ledger{o.Captured, o.Refunded} {
		for i := range subs {
			if subs[i].DocumentReference != "" {
				return true
			}
		}
	}
	return false
}

// Expired reports whether the expiry date has passed while something is
// still uncaptured (a closed order cannot expire).
func (o *Order) Expired(now time.Time) bool {
	return len(o.Uncaptured.Lines) > 0 && !o.Cancelled && (o.ExpiredMarked || !now.Before(o.ExpiresAt))
}

// Closed reports whether nothing about the order can move any more: it was
// cancelled (nothing uncaptured, nothing captured that stands), or it expired
// with nothing captured.
func (o *Order) Closed(now time.Time) bool {
	return o.liveCaptures() == 0 && (len(o.Uncaptured.Lines) == 0 || o.Expired(now))
}

func (o *Order) closedAs(now time.Time) string {
	if o.Expired(now) {
		return "expired"
	}
	return "cancelled"
}

func (o *Order) liveCaptures() int {
	n := 0
	for i := range o.Captured {
		if !o.Captured[i].Void() {
			n++
		}
	}
	return n
}

// captureBlocked reports why captures are not possible now, or "".
func (o *Order) captureBlocked(now time.Time) string {
	switch {
	case o.Cancelled:
		return "the order is cancelled"
	case len(o.Uncaptured.Lines) == 0:
		return "nothing is left uncaptured"
	case o.Expired(now):
		return "the order has expired"
	case o.Hold == HoldOnHold:
		return "the order is on hold for risk review"
	case o.Hold == HoldFraudDeny:
		return "the order was denied for fraud"
	case o.Unacknowledged && o.PaymentMethod.Type == PayAdvanceInvoice:
		return "an advanceInvoice order must be acknowledged before capture"
	}
	return ""
}

// open reports whether the uncaptured remainder can still be managed.
func (o *Order) open(now time.Time) bool {
	return !o.Cancelled && len(o.Uncaptured.Lines) > 0 && !o.Expired(now) && o.Hold != HoldFraudDeny
}

// alive reports whether the order still has anything to manage: a live
// capture, whose documents are still to come, or lines that may still be
// captured. An expired order with nothing captured is closed (Closed).
func (o *Order) alive(now time.Time) bool {
	return o.Hold != HoldFraudDeny && !o.Closed(now)
}

// RemainingAuthorization is what may still be captured.
func (o *Order) RemainingAuthorization() int64 {
	return o.AuthorizedAmount - o.Amounts().Consumed
}

// ExpiryCap is the latest date expiry may be extended to.
func (o *Order) ExpiryCap(p Policy) time.Time { return o.CreatedAt.Add(p.MaxExpiry) }

// Actions computes the availableActions of ledger l at now. It is the one place
// that decides what is offered; every operation checks it through Require.
func (o *Order) Actions(l *Ledger, now time.Time, p Policy) []Action {
	var refunded Totals
	if l.Kind == LedgerCapture {
		refunded = o.refundsOf(l.ID)
	}
	return o.actions(l, now, p, refunded, true)
}

// refundsByCapture sums the refunds of each capture, keyed by capture id, so
// that a response reads each refund once: looked up per capture, an order
// captured and refunded line by line costs the square of its lines.
func (o *Order) refundsByCapture() map[string]Totals {
	m := make(map[string]Totals, len(o.Refunded))
	for i := range o.Refunded {
		id := o.Refunded[i].RefundOf
		m[id] = m[id].plus(SumLines(o.Refunded[i].Lines, o.VATMode))
	}
	return m
}

// actions is Actions given what has been refunded of l when it is a
// capture (a response sums them for every capture at once,
// refundsByCapture). Without sized it leaves the size limit out, so that
// Require can tell a refusal for size from one for state.
func (o *Order) actions(l *Ledger, now time.Time, p Policy, refunded Totals, sized bool) []Action {
	// The order's size, counted once for the checks below (a walk of its
	// events and lines), and only where they are made.
	var events, stored int
	if sized && l.Kind == LedgerUncaptured {
		events, stored = o.sizedEvents(), o.storedLines()
	}
	fits := func(e, n int) bool { return !sized || events+e <= MaxEvents && stored+n <= MaxStoredLines }
	var acts []Action
	switch l.Kind {
	case LedgerUncaptured:
		if o.open(now) {
			// Each operation below appends an event; those that add lines
			// are offered only while the size limit lets some request add
			// them (CheckSize). Refunds, cancels and voids are never bounded.
			if o.captureBlocked(now) == "" && fits(1, 0) {
				remaining := o.RemainingAuthorization()
				if o.capturable(l.Lines, remaining) {
					acts = append(acts, ActionCapture) // moves the lines it captures
				}
				// A line without id adds a line; one by id moves it.
				if remaining > 0 && (fits(1, 1) || o.lineFits(l, remaining)) {
					acts = append(acts, ActionPartialCapture)
				}
			}
		}
		// Releasing what is left stays possible after expiry or a fraud
		// denial: the merchant must be able to close such an order.
		if !o.Cancelled && len(l.Lines) > 0 {
			acts = append(acts, ActionCancel)
		}
		if o.open(now) && fits(1, 1-len(l.Lines)) { // an edit to one line
			acts = append(acts, ActionEditOrder)
		}
		if o.alive(now) && fits(1, 0) {
			acts = append(acts, ActionEditCustomer)
		}
		if o.open(now) && len(o.Captured) == 0 && o.PaymentMethod.Type != PayAdvanceInvoice && fits(1, 0) {
			acts = append(acts, ActionEditPaymentMethod)
		}
		// Not even one that would leave the date as it is (and append
		// nothing): what it would do depends on the day, and a response
		// depends on time only through expiry (ordercache).
		if o.open(now) && o.ExpiresAt.Before(o.ExpiryCap(p)) && fits(1, 0) {
			acts = append(acts, ActionExtendOrderExpiry)
		}
	case LedgerCapture:
		if l.Void() {
			return nil
		}
		all := SumLines(l.Lines, o.VATMode)
		captured := all.Gross
		left := captured - refunded.Gross // Refundable(l).Gross; captured − RefundedOf(l.ID)
		if left > 0 {
			acts = append(acts, ActionRefund)
		}
		// A partial refund of the last minor unit credits all that is left,
		// so it must close every VAT rate, and its totalRefundAmount is then
		// the totalAmount left: in exclVat a goodwill refund at a lower rate
		// can have made that negative, below the spec's bound of 0, and only
		// the full refund can close the capture.
		if left > 1 || (left == 1 && all.Sum-refunded.Sum >= 0) {
			acts = append(acts, ActionPartialRefund)
		}
		acts = append(acts, ActionResendOrderInvoice)
		if o.PaymentMethod.IsInvoice() && left == captured && l.Paid == 0 && l.Recourse == "" {
			acts = append(acts, ActionVoid)
		}
		// Recourse hands an unpaid claim back to the merchant: there must be one.
		if o.PaymentMethod.IsInvoice() && !l.HasStatus(SubFullyPaid) && l.Recourse == "" && left-l.Paid > 0 {
			acts = append(acts, ActionRecourseOrderInvoice)
		}
	case LedgerRefund:
		acts = append(acts, ActionResendOrderInvoice)
	}
	return acts
}

// lineFits reports whether some line of the uncaptured sub-order l can be
// captured on its own by id: it adds no line to the order.
func (o *Order) lineFits(l *Ledger, remaining int64) bool {
	for i := range l.Lines {
		if o.capturable(l.Lines[i:i+1], remaining) {
			return true
		}
	}
	return false
}

// capturable reports whether lines can be captured as one invoice within
// remaining: what the capture package refuses (a negative amount, VAT
// outside Totals.VATWithin, more than the authorization left) is not
// offered.
func (o *Order) capturable(lines []Line, remaining int64) bool {
	t := SumLines(lines, o.VATMode)
	return t.Gross >= 0 && t.Gross <= remaining && t.VATWithin()
}

// authorizationAllowsCapture reports whether some capture fits remaining,
// what is left of the authorization: any line without id while some
// remains, or else the whole remainder (of 0). Captures without id leave the
// remainder as it was, so they can use the authorization up with lines still
// uncaptured; until an edit, such an order cannot be captured and is not
// readyForCapture.
func (o *Order) authorizationAllowsCapture(remaining int64) bool {
	return remaining > 0 || o.capturable(o.Uncaptured.Lines, remaining)
}

// Require finds ledger id and checks that action is offered on it now.
func (o *Order) Require(ledgerID string, action Action, env Env) (*Ledger, error) {
	l := o.Ledger(ledgerID)
	if l == nil {
		return nil, fault.NotFoundf("ledger_not_found", "order %s has no sub-order %s", o.ID, ledgerID)
	}
	if !slices.Contains(o.Actions(l, env.Now, env.Policy), action) {
		if l.Kind == LedgerUncaptured && slices.Contains(o.actions(l, env.Now, env.Policy, Totals{}, false), action) {
			// Offered but for the size limit: refused as CheckSize would
			// refuse it, not as a state the order is not in.
			return nil, fault.New(fault.NotAvailable, "order_size_limit",
				"%s would take order %s past its limit of %d events (payments aside) and %d lines: it holds %d events and %d lines; refunds, cancels and voids are still taken",
				action, o.ID, MaxEvents, MaxStoredLines, o.sizedEvents(), o.storedLines())
		}
		reason := o.captureBlocked(env.Now)
		if reason == "" || (action != ActionCapture && action != ActionPartialCapture) {
			reason = "its state does not offer it"
		}
		return nil, fault.NotAvailablef("%s is not available on sub-order %s: %s", action, ledgerID, reason)
	}
	return l, nil
}

// StatusRules numbers the rules of Statuses. Stores index the statuses an
// order had when written, so a change of the rules that can change a stored
// order's statuses must raise it: each store then rewrites the status
// index of its orders once (see storage/bolt and storage/postgres).
// 2: a capture that owes nothing and was never paid no longer keeps an order
// from fullyPaid. 3: an order whose authorization captures without id used
// up is no longer readyForCapture.
const StatusRules = 3

// Statuses computes the order's status array at now.
func (o *Order) Statuses(now time.Time) []Status {
	var s []Status
	a := o.Amounts()
	hasUncap := len(o.Uncaptured.Lines) > 0
	live := o.liveCaptures()
	if !hasUncap && live == 0 {
		s = append(s, StatusCancelled)
	}
	if hasUncap {
		s = append(s, StatusUncaptured)
		if o.Expired(now) {
			s = append(s, StatusExpired)
		}
	}
	if live > 0 {
		if hasUncap {
			s = append(s, StatusPartiallyCaptured)
		} else {
			s = append(s, StatusFullyCaptured)
		}
	}
	if a.Refunded > 0 {
		// fullyRefunded means every line went to a credit note: nothing may
		// be left uncaptured either.
		if a.Refunded >= a.Captured && !hasUncap {
			s = append(s, StatusFullyRefunded)
		} else {
			s = append(s, StatusPartiallyRefunded)
		}
	}
	switch o.Hold {
	case HoldOnHold:
		s = append(s, StatusOnHold)
	case HoldFraudDeny:
		s = append(s, StatusFraudDeny)
	}
	// Kept on a closed order too: it states a fact (never acknowledged), and a
	// stored status index (bolt's meta, PostgreSQL's statuses column) keeps it.
	if o.Unacknowledged {
		s = append(s, StatusUnacknowledged)
	}
	// RemainingAuthorization, from the amounts summed above: it would sum
	// every sub-order's lines again, on each status computation (each
	// render, each stored status index).
	if o.captureBlocked(now) == "" && o.authorizationAllowsCapture(o.AuthorizedAmount-a.Consumed) {
		s = append(s, StatusReadyForCapture)
	}
	paidAny, failure := false, false
	for i := range o.Captured {
		l := &o.Captured[i]
		if l.Void() {
			continue
		}
		if l.Paid > 0 {
			paidAny = true
		}
		if l.HasStatus(SubInvoiceDeliveryFailure) {
			failure = true
		}
	}
	if paidAny { // only then is what is owed worth summing
		if o.owesNothing() {
			s = append(s, StatusFullyPaid)
		} else {
			s = append(s, StatusPartiallyPaid)
		}
	}
	if failure {
		s = append(s, StatusInvoiceDeliveryFailure)
	}
	return s
}

// owesNothing reports whether every live capture is paid up. A capture that
// never asked for money (a zero invoice, or one refunded in full before any
// payment) has nothing left to pay: it does not keep the order from being
// paid in full.
func (o *Order) owesNothing() bool {
	for i := range o.Captured {
		l := &o.Captured[i]
		if l.Void() || l.HasStatus(SubFullyPaid) {
			continue
		}
		if l.Paid > 0 || o.Outstanding(l) > 0 {
			return false
		}
	}
	return true
}

// HasStatus reports whether the order has status st at now.
func (o *Order) HasStatus(st Status, now time.Time) bool { return slices.Contains(o.Statuses(now), st) }

// eventTime keeps the event log ordered even if the clock is set back (the
// sandbox test clock can be): an event is never older than the one before it.
func (o *Order) eventTime(now time.Time) time.Time {
	if now.Before(o.UpdatedAt) {
		return o.UpdatedAt
	}
	return now
}

// AppendEvent adds an event and moves updatedAt to it.
func (o *Order) AppendEvent(t EventType, ledgerID string, amount int64, env Env) Event {
	e := Event{ID: env.IDs.NewID(KindEvent), OrderID: o.ID, LedgerID: ledgerID,
		CreatedAt: o.eventTime(env.Now), Amount: amount, Type: t}
	o.Events = append(o.Events, e)
	o.UpdatedAt = e.CreatedAt
	return e
}

// NewLedger creates a sub-order of kind with lines, stamped now.
func (o *Order) NewLedger(kind LedgerKind, lines []Line, env Env) Ledger {
	return Ledger{ID: env.IDs.NewID(KindLedger), Kind: kind, CreatedAt: o.eventTime(env.Now),
		Lines: lines, Status: []SubStatus{}}
}

// Clone returns a deep copy, so that a failed operation can be discarded
// without having touched the caller's order.
func (o *Order) Clone() *Order {
	c := *o
	c.Metadata = cloneMap(o.Metadata)
	c.RiskTags = slices.Clone(o.RiskTags)
	c.Uncaptured = o.Uncaptured.clone()
	c.Captured = cloneLedgers(o.Captured)
	c.Refunded = cloneLedgers(o.Refunded)
	c.Events = slices.Clone(o.Events)
	c.Customer = o.Customer.clone()
	c.PaymentMethod = o.PaymentMethod
	if o.AutoCapture != nil {
		ac := *o.AutoCapture
		c.AutoCapture = &ac
	}
	return &c
}

func (l Ledger) clone() Ledger {
	l.Lines = slices.Clone(l.Lines)
	l.Status = slices.Clone(l.Status)
	if l.Issued != nil {
		is := *l.Issued
		if is.SettlementReference != nil {
			sr := *is.SettlementReference
			is.SettlementReference = &sr
		}
		is.BuyerAddress = is.BuyerAddress.clone()
		l.Issued = &is
	}
	return l
}

func cloneLedgers(ls []Ledger) []Ledger {
	if ls == nil {
		return nil
	}
	out := make([]Ledger, len(ls))
	for i := range ls {
		out[i] = ls[i].clone()
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (c Customer) clone() Customer {
	c.BillingAddress = c.BillingAddress.clone()
	c.ShippingAddress = c.ShippingAddress.clone()
	if c.PaymentMethod != nil {
		pm := *c.PaymentMethod
		c.PaymentMethod = &pm
	}
	if c.InvoiceChannel != nil {
		ic := *c.InvoiceChannel
		c.InvoiceChannel = &ic
	}
	return c
}

func (a *Address) clone() *Address {
	if a == nil {
		return nil
	}
	c := *a
	if a.Contact != nil {
		ct := *a.Contact
		c.Contact = &ct
	}
	return &c
}

// Growth limits of one order. Every change appends an event, and captures and
// refunds add sub-orders with lines; the whole order is stored and served with
// each change, so a client looping on an operation (a zero-amount capture of
// new lines, a reference set again and again) would otherwise grow it without
// end. The limits sit far above what a real order reaches: a 1,000-line order
// captured and refunded line by line holds about 3,000 lines and 2,000 events.
const (
	MaxEvents      = 5000
	MaxStoredLines = 5000
)

// CheckSize refuses an order grown past MaxEvents events or MaxStoredLines
// lines over all its sub-orders. The buyer's payments are not counted: they
// are never refused, and counting them would let a buyer paying in many
// parts stop the merchant from capturing what is left of the order.
func (o *Order) CheckSize() error {
	events, lines := o.sizedEvents(), o.storedLines()
	if events > MaxEvents || lines > MaxStoredLines {
		return fault.New(fault.NotAvailable, "order_size_limit",
			"order %s would hold %d events (payments aside) and %d lines, over the limit of %d events and %d lines; refunds, cancels and voids are still taken",
			o.ID, events, lines, MaxEvents, MaxStoredLines)
	}
	return nil
}

// sizedEvents counts the events the size limit bounds: all but the buyer's
// payments.
func (o *Order) sizedEvents() int {
	n := 0
	for i := range o.Events {
		if o.Events[i].Type != EventPaid {
			n++
		}
	}
	return n
}

func (o *Order) storedLines() int {
	lines := len(o.Uncaptured.Lines)
	for _, l := range o.Captured {
		lines += len(l.Lines)
	}
	for _, l := range o.Refunded {
		lines += len(l.Lines)
	}
	return lines
}
