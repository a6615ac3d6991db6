// Package session holds checkout sessions and payment sessions: how a
// buyer's approval comes to exist. A merchant opens a session with the order
// lines; the buyer completes the hosted checkout (picks their company and a
// payment method, approves or declines); an approval produces an
// authorization token the merchant turns into an order.
//
// Lifecycle (documented in docs/sessions.md):
//
//	created ──buyer approves──▶ authorized ──order created from its token──▶ completed
//	   │  └──buyer declines / merchant deletes──▶ cancelled
//	   └──expiresAt passes──▶ expired           (authorized ──merchant deletes the session
//	                                              or its token──▶ cancelled)
//
// The package does no I/O; time and ids come from the caller.
package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// State of a session.
type State string

const (
	StateCreated    State = "created"
	StateAuthorized State = "authorized"
	StateCompleted  State = "completed"
	StateCancelled  State = "cancelled"
	StateExpired    State = "expired"
)

var states = []State{StateCreated, StateAuthorized, StateCompleted, StateCancelled, StateExpired}

// States lists every state. Each call returns a new slice, so a caller
// changing it does not change what the package accepts.
func States() []State { return slices.Clone(states) }

// Source tells which API opened the session.
type Source string

const (
	SourceCheckout Source = "checkout" // POST /v1/sessions
	SourcePayment  Source = "payment"  // POST /v1/payment-sessions
)

var sources = []Source{SourceCheckout, SourcePayment}

// Sources lists every source. Each call returns a new slice, so a caller
// changing it does not change what the package accepts.
func Sources() []Source { return slices.Clone(sources) }

// Defaults and limits.
const (
	DefaultTTL       = 24 * time.Hour
	MaxTTLMinutes    = 7 * 24 * 60
	MaxExternalIDLen = 100
	MaxURLLen        = 2000
	MaxDeclineReason = 200
	externalPrefix   = "external:"
	defaultPageSize  = 100
	maxPageSize      = 1000
)

// MerchantURLs are where the buyer is sent after the checkout.
type MerchantURLs struct {
	Confirmation string `json:"confirmation,omitempty"`
	Cancel       string `json:"cancel,omitempty"`
}

// Session is a checkout or payment session.
type Session struct {
	ID                 string               `json:"id"`
	Source             Source               `json:"source"`
	State              State                `json:"state"`
	MerchantID         string               `json:"merchantId"`
	StoreID            string               `json:"storeId"`
	MerchantReference  string               `json:"merchantReference"`
	ExternalSessionID  string               `json:"externalSessionId,omitempty"`
	Country            string               `json:"country"`
	Currency           money.Currency       `json:"currency"`
	Locale             string               `json:"locale"`
	VATMode            money.VATMode        `json:"vatMode"`
	OrderLines         []order.Line         `json:"orderLines"`
	Totals             order.Totals         `json:"totals"`
	Customer           *order.CustomerInput `json:"customer,omitempty"` // the merchant's prefill
	PaymentMethods     []order.PaymentType  `json:"paymentMethods"`     // offered to the buyer
	MerchantURLs       MerchantURLs         `json:"merchantUrls"`
	Metadata           map[string]string    `json:"metadata,omitempty"`
	CheckoutURL        string               `json:"checkoutUrl"`
	Buyer              *order.Customer      `json:"buyer,omitempty"`         // who approved
	PaymentMethod      *order.PaymentMethod `json:"paymentMethod,omitempty"` // what they chose
	AuthorizationToken string               `json:"authorizationToken,omitempty"`
	// AuthorizationExpiresAt is when the approval's token expires: an
	// authorized session whose token expired unused is expired.
	AuthorizationExpiresAt *time.Time `json:"authorizationExpiresAt,omitempty"`
	// CustomerToken is the reusable token made from the approval, when the
	// merchant made one instead of an order (the session is then completed).
	CustomerToken string     `json:"customerToken,omitempty"`
	OrderID       string     `json:"orderId,omitempty"`
	DeclineReason string     `json:"declineReason,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	ExpiresAt     time.Time  `json:"expiresAt"`
	AuthorizedAt  *time.Time `json:"authorizedAt,omitempty"`
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
	CancelledAt   *time.Time `json:"cancelledAt,omitempty"`
}

// StateAt is the state at now: a created session past its expiry is expired.
func (s *Session) StateAt(now time.Time) State {
	switch {
	case s.State == StateCreated && !now.Before(s.ExpiresAt):
		return StateExpired
	case s.State == StateAuthorized && s.AuthorizationExpiresAt != nil && !now.Before(*s.AuthorizationExpiresAt):
		// Its token can no longer make an order.
		return StateExpired
	}
	return s.State
}

// OfferedMethods are the payment methods a country's buyers can choose by default.
func OfferedMethods(country string) []order.PaymentType {
	switch country {
	case "SE", "NO", "FI", "DK":
		return []order.PaymentType{order.PayInvoice, order.PayAdvanceInvoice, order.PayCard}
	default:
		return []order.PaymentType{order.PayInvoice, order.PayCard}
	}
}

// CreateRequest opens a session (both APIs take the same body).
type CreateRequest struct {
	Country           string               `json:"country"`
	Currency          string               `json:"currency"`
	Locale            string               `json:"locale"`
	StoreID           string               `json:"storeId,omitempty"`
	MerchantReference string               `json:"merchantReference,omitempty"`
	ExternalSessionID string               `json:"externalSessionId,omitempty"`
	OrderLines        []order.LineInput    `json:"orderLines"`
	Customer          *order.CustomerInput `json:"customer,omitempty"`
	PaymentMethods    []string             `json:"paymentMethods,omitempty"`
	MerchantURLs      *MerchantURLs        `json:"merchantUrls,omitempty"`
	Metadata          map[string]string    `json:"metadata,omitempty"`
	ExpiresInMinutes  *int64               `json:"expiresInMinutes,omitempty"`
	VatMode           string               `json:"vatMode,omitempty"`
	order.TotalsInput
}

// UpdateRequest changes a created session; nil fields are kept. New lines
// replace the old ones (and totals are checked against them).
type UpdateRequest struct {
	MerchantReference *string `json:"merchantReference,omitempty"`
	// Sent empty, these three differ from left out (lines refused; every
	// method offered again; the metadata cleared), which the idempotency
	// fingerprint must tell; so a server refuses them as null, which a
	// client's nil list or map marshals to and which could mean either.
	OrderLines     []order.LineInput    `json:"orderLines,omitempty" kassa:"nonull,emptydiffers"`
	Customer       *order.CustomerInput `json:"customer,omitempty"`
	PaymentMethods []string             `json:"paymentMethods,omitempty" kassa:"nonull,emptydiffers"`
	MerchantURLs   *MerchantURLs        `json:"merchantUrls,omitempty"`
	Metadata       map[string]string    `json:"metadata,omitempty" kassa:"nonull,emptydiffers"`
	// VatMode cannot change: it may only repeat the session's own, since
	// lines without totals are read in it.
	VatMode *string `json:"vatMode,omitempty"`
	order.TotalsInput
}

func checkText(f *fault.Fields, path, v string, max int) { order.CheckText(f, path, v, max) }

func checkURLs(f *fault.Fields, u *MerchantURLs) {
	if u == nil {
		return
	}
	for name, v := range map[string]string{"merchantUrls.confirmation": u.Confirmation, "merchantUrls.cancel": u.Cancel} {
		if v == "" {
			continue
		}
		// Parsed, not only prefixed: a NUL (which PostgreSQL cannot hold) or
		// a line break would be stored and linked from the checkout page.
		u, err := url.Parse(v)
		if len(v) > MaxURLLen || !(strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://")) ||
			err != nil || u.Host == "" {
			f.Add(name, "must be an http(s) URL of at most %d characters", MaxURLLen)
		}
	}
}

func methods(f *fault.Fields, country string, in []string) []order.PaymentType {
	offered := OfferedMethods(country)
	if len(in) == 0 {
		return offered
	}
	var out []order.PaymentType
	for i, m := range in {
		pt := order.PaymentType(m)
		switch {
		case !slices.Contains(offered, pt):
			f.Add("paymentMethods["+strconv.Itoa(i)+"]", "must be one of %v for %s", offered, country)
		case !slices.Contains(out, pt):
			out = append(out, pt)
		}
	}
	return out
}

// Validate checks the request: a session is opened from its body alone.
func (r *CreateRequest) Validate() error {
	_, _, err := r.draft(order.NoIDs{})
	return err
}

// DependsOn: the totals are compared with the lines' sums, which a stand-in
// in any line or vatMode changes; vatMode decides each line's VAT, and
// country which payment methods are offered.
func (r *CreateRequest) DependsOn(finding, wrongTyped string) bool {
	switch {
	case strings.HasPrefix(finding, "totalOrder"):
		return wrongTyped == "vatMode" || inLines(wrongTyped)
	case inLines(finding) && strings.HasSuffix(finding, ".totalVatAmount"):
		return wrongTyped == "vatMode"
	case strings.HasPrefix(finding, "paymentMethods"):
		return wrongTyped == "country"
	}
	return false
}

// inLines reports whether path lies in a line of orderLines.
func inLines(path string) bool { return strings.HasPrefix(path, "orderLines[") }

// draft checks r and returns the session it opens, without what New gives
// it (id, source, merchant, times), and how long it lasts. Line ids come
// from ids.
func (r *CreateRequest) draft(ids order.IDSource) (*Session, time.Duration, error) {
	var f fault.Fields
	switch {
	case r.Country == "":
		f.Add("country", "is required")
	case !order.ValidCountry(r.Country):
		f.Add("country", "must be an ISO 3166-1 alpha-2 code")
	}
	switch {
	case r.Currency == "":
		f.Add("currency", "is required")
	case !money.Currency(r.Currency).Valid():
		f.Add("currency", "must be an ISO 4217 code")
	}
	switch {
	case r.Locale == "":
		f.Add("locale", "is required")
	case !order.ValidLocale(r.Locale):
		f.Add("locale", "must be a locale such as sv-SE")
	}
	checkText(&f, "storeId", r.StoreID, order.MaxStoreIDLen)
	checkText(&f, "merchantReference", r.MerchantReference, order.MaxReferenceLen)
	checkText(&f, "externalSessionId", r.ExternalSessionID, MaxExternalIDLen)
	if strings.HasPrefix(r.ExternalSessionID, externalPrefix) {
		f.Add("externalSessionId", "must not start with %q", externalPrefix)
	}
	if strings.Contains(r.ExternalSessionID, "/") {
		// It is looked up by path (…/external:{id}), where a slash cannot be.
		f.Add("externalSessionId", "must not contain \"/\"")
	}
	r.Customer.Validate(&f, "customer")
	checkURLs(&f, r.MerchantURLs)
	order.CheckMetadata(&f, r.Metadata)
	ttl := DefaultTTL
	if r.ExpiresInMinutes != nil {
		if *r.ExpiresInMinutes < 1 || *r.ExpiresInMinutes > MaxTTLMinutes {
			f.Add("expiresInMinutes", "must be between 1 and %d", MaxTTLMinutes)
		} else {
			ttl = time.Duration(*r.ExpiresInMinutes) * time.Minute
		}
	}
	mode := money.InclVAT
	if r.VatMode != "" {
		if mode = money.VATMode(r.VatMode); !mode.Valid() {
			f.Add("vatMode", "must be inclVat or exclVat")
			mode = money.InclVAT
		}
	}
	pms := methods(&f, r.Country, r.PaymentMethods)
	lines := linesOf(&f, r.OrderLines, r.TotalsInput, &mode, ids)
	if err := f.Err(); err != nil {
		return nil, 0, err
	}
	s := &Session{
		StoreID: r.StoreID, MerchantReference: r.MerchantReference, ExternalSessionID: r.ExternalSessionID,
		Country: r.Country, Currency: money.Currency(r.Currency), Locale: r.Locale, VATMode: mode,
		OrderLines: lines, Totals: order.SumLines(lines, mode), Customer: r.Customer, PaymentMethods: pms,
		Metadata: r.Metadata,
	}
	if r.MerchantURLs != nil {
		s.MerchantURLs = *r.MerchantURLs
	}
	return s, ttl, nil
}

// New validates r and opens a session at now. checkoutURL makes the hosted
// checkout link of the new session id.
func New(merchantID string, src Source, r *CreateRequest, ids order.IDSource, now time.Time, checkoutURL func(id string) string) (*Session, error) {
	if !slices.Contains(sources, src) {
		return nil, fault.Invalidf("source", "must be one of %v", sources)
	}
	s, ttl, err := r.draft(ids)
	if err != nil {
		return nil, err
	}
	s.ID, s.Source, s.State, s.MerchantID = ids.NewID("session"), src, StateCreated, merchantID
	s.CreatedAt, s.UpdatedAt, s.ExpiresAt = now, now, now.Add(ttl)
	s.CheckoutURL = checkoutURL(s.ID)
	return s, nil
}

// linesOf checks new lines and, given the VAT mode to resolve them in (mode
// not nil), the totals against their sums.
func linesOf(f *fault.Fields, ins []order.LineInput, totals order.TotalsInput, mode *money.VATMode, ids order.IDSource) []order.Line {
	if len(ins) == 0 {
		f.Add("orderLines", "must have at least one line")
		return nil
	}
	if mode == nil {
		order.CheckLines(f, "orderLines", ins, false, nil)
		return nil
	}
	lines := order.BuildLines(f, "orderLines", ins, *mode, ids)
	if f.Len() == 0 {
		order.CheckTotals(f, totals, order.SumLines(lines, *mode), false)
	}
	return lines
}

func (s *Session) requireState(now time.Time, action string, allowed ...State) error {
	st := s.StateAt(now)
	if !slices.Contains(allowed, st) {
		return fault.New(fault.NotAvailable, "session_"+string(st),
			"cannot %s a session that is %s", action, st)
	}
	return nil
}

// Validate checks the request without the session: which payment methods
// are offered, the VAT mode the lines are resolved in and the totals they
// are compared with are the session's, so only the fields' own bounds.
func (r *UpdateRequest) Validate() error {
	var f fault.Fields
	r.check(&f, nil, nil)
	return f.Err()
}

// check records every failure of r: without a session (s nil) those
// Validate names; with one, also those that compare r with it.
func (r *UpdateRequest) check(f *fault.Fields, s *Session, ids order.IDSource) (pms []order.PaymentType, lines []order.Line) {
	if r.MerchantReference != nil {
		checkText(f, "merchantReference", *r.MerchantReference, order.MaxReferenceLen)
	}
	r.Customer.Validate(f, "customer")
	checkURLs(f, r.MerchantURLs)
	order.CheckMetadata(f, r.Metadata)
	var mode *money.VATMode
	// "" is no mode, as on create.
	given := r.VatMode != nil && *r.VatMode != ""
	if given && !money.VATMode(*r.VatMode).Valid() {
		f.Add("vatMode", "must be inclVat or exclVat")
	}
	if s != nil {
		mode = &s.VATMode
		if given && money.VATMode(*r.VatMode).Valid() && money.VATMode(*r.VatMode) != s.VATMode {
			f.Add("vatMode", "is %s for this session and cannot change; create a new session for the other mode", s.VATMode)
		}
		if r.PaymentMethods != nil {
			pms = methods(f, s.Country, r.PaymentMethods)
		}
	}
	switch {
	case r.OrderLines != nil:
		lines = linesOf(f, r.OrderLines, r.TotalsInput, mode, ids)
	case s != nil && (r.TotalOrderAmount != nil || r.TotalOrderVatAmount != nil || r.TotalOrderAmountExclVat != nil):
		order.CheckTotals(f, r.TotalsInput, s.Totals, false)
	}
	if s == nil {
		order.CheckTotalsBounds(f, r.TotalsInput, false)
	}
	return pms, lines
}

// Update changes a created session (not expired).
func (s *Session) Update(r *UpdateRequest, ids order.IDSource, now time.Time) error {
	var f fault.Fields
	pms, lines := r.check(&f, s, ids)
	if err := f.Err(); err != nil {
		return err
	}
	if err := s.requireState(now, "update", StateCreated); err != nil {
		return err
	}
	if r.MerchantReference != nil {
		s.MerchantReference = *r.MerchantReference
	}
	if r.Customer != nil {
		s.Customer = r.Customer
	}
	if r.MerchantURLs != nil {
		s.MerchantURLs = *r.MerchantURLs
	}
	if r.Metadata != nil {
		s.Metadata = r.Metadata
	}
	if pms != nil {
		s.PaymentMethods = pms
	}
	if lines != nil {
		s.OrderLines, s.Totals = lines, order.SumLines(lines, s.VATMode)
	}
	s.UpdatedAt = s.stamp(now)
	return nil
}

// stamp is the time a change made at now is recorded with: never before the
// session's last change. Replicas on one database stamp with their own
// clocks; one behind the replica that made the last change would otherwise
// move updatedAt back (an updatedFrom poll would miss the change) and date a
// step before the one it follows. An order's events keep the same rule.
func (s *Session) stamp(now time.Time) time.Time {
	if now.Before(s.UpdatedAt) {
		return s.UpdatedAt
	}
	return now
}

// Cancel ends a session that is created or authorized (DELETE, or the buyer
// declining). A completed session has an order: cancel the order instead.
func (s *Session) Cancel(reason string, now time.Time) error {
	if err := s.requireState(now, "cancel", StateCreated, StateAuthorized); err != nil {
		return err
	}
	if utf8.RuneCountInString(reason) > MaxDeclineReason {
		reason = string([]rune(reason)[:MaxDeclineReason])
	}
	t := s.stamp(now)
	s.State, s.CancelledAt, s.DeclineReason, s.UpdatedAt = StateCancelled, &t, reason, t
	return nil
}

// Decline is the buyer saying no on the hosted checkout. Only a session
// still awaiting the buyer can be declined: once approved, the approval has
// been announced to the merchant, and only the merchant withdraws it
// (DELETE), so a second post of the page cannot undo it.
func (s *Session) Decline(now time.Time) error {
	if err := s.requireState(now, "decline", StateCreated); err != nil {
		return err
	}
	return s.Cancel("declined by the buyer", now)
}

// Withdraw cancels an authorized session whose authorization token tok the
// merchant deleted: the session would otherwise stay authorized, naming a
// token that can create nothing. It reports whether the session changed.
func (s *Session) Withdraw(tok string, now time.Time) bool {
	if s.AuthorizationToken != tok || s.StateAt(now) != StateAuthorized {
		return false
	}
	return s.Cancel("its authorization token was withdrawn by the merchant", now) == nil
}

// Authorize records the buyer's approval: who they are, the payment method
// they chose (one of those offered) and the authorization token minted for it.
func (s *Session) Authorize(buyer order.Customer, pm order.PaymentMethod, tok string, tokenExpires, now time.Time) error {
	if err := s.requireState(now, "authorize", StateCreated); err != nil {
		return err
	}
	if !slices.Contains(s.PaymentMethods, pm.Type) {
		return fault.Invalidf("paymentMethod", "must be one of %v", s.PaymentMethods)
	}
	t := s.stamp(now)
	b := buyer
	s.State, s.Buyer, s.PaymentMethod, s.AuthorizationToken, s.AuthorizedAt, s.UpdatedAt = StateAuthorized, &b, &pm, tok, &t, t
	if !tokenExpires.IsZero() {
		e := tokenExpires
		s.AuthorizationExpiresAt = &e
	}
	return nil
}

// Complete records the order created from the session's authorization token.
func (s *Session) Complete(orderID string, now time.Time) error { return s.complete(now, orderID, "") }

// CompleteWithCustomerToken records a customer token made from the
// session's authorization token: the approval is used, as by an order.
func (s *Session) CompleteWithCustomerToken(tokenID string, now time.Time) error {
	return s.complete(now, "", tokenID)
}

// complete records what the session's approval became: an order or a
// customer token.
func (s *Session) complete(now time.Time, orderID, customerToken string) error {
	if err := s.requireState(now, "complete", StateAuthorized); err != nil {
		return err
	}
	t := s.stamp(now)
	s.State, s.OrderID, s.CustomerToken, s.CompletedAt, s.UpdatedAt = StateCompleted, orderID, customerToken, &t, t
	return nil
}

// Terms is a digest of what the buyer is asked to approve: country,
// currency, VAT mode, lines and totals. The hosted checkout sends back the
// terms of the page the buyer saw, so that an approval of a page showing
// other terms (the merchant updated the session meanwhile) is refused.
func (s *Session) Terms() string {
	b, _ := json.Marshal(struct {
		Country  string
		Currency money.Currency
		VATMode  money.VATMode
		Lines    []order.Line
		Totals   order.Totals
	}{s.Country, s.Currency, s.VATMode, s.OrderLines, s.Totals})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Record is a session as the API returns it: the stored session, its state
// at the time of reading, and its totals as Money records like an order's.
type Record struct {
	Session
	TotalOrderAmount        money.Record `json:"totalOrderAmount"`
	TotalOrderAmountExclVat money.Record `json:"totalOrderAmountExclVat"`
	TotalOrderVatAmount     money.Record `json:"totalOrderVatAmount"`
}

// View returns the API record of s at now.
func (s *Session) View(now time.Time) Record {
	v := *s
	v.State = s.StateAt(now)
	if v.OrderLines == nil {
		v.OrderLines = []order.Line{}
	}
	return Record{Session: v, TotalOrderAmount: money.New(s.Totals.Gross, s.Currency).Record(),
		TotalOrderAmountExclVat: money.New(s.Totals.Net, s.Currency).Record(),
		TotalOrderVatAmount:     money.New(s.Totals.VAT, s.Currency).Record()}
}

// ExternalID reports whether id names a session by its external id ("external:<id>").
func ExternalID(id string) (string, bool) { return strings.CutPrefix(id, externalPrefix) }
