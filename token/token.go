// Package token holds the buyer's approvals: authorization tokens (single use,
// expiring, carrying the buyer, the approved payment method and an approved
// amount) and customer tokens (reusable until revoked) from which orders are
// created.
package token

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// Fingerprint is how a log names a token: "{token:FP}", FP the first 12 hex
// digits of its SHA-256. It finds a token's lines without giving the token,
// a credential that with the merchant's creates an order or charges the
// buyer (tokens are random, so the digest does not lead back to one).
func Fingerprint(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "{token:" + hex.EncodeToString(sum[:6]) + "}"
}

// DefaultAuthorizationTTL is how long an authorization token can be used.
const DefaultAuthorizationTTL = 60 * time.Minute

// Authorization is an authorization token: a buyer's completed checkout.
type Authorization struct {
	Token          string              `json:"token"`
	MerchantID     string              `json:"merchantId"`
	Country        string              `json:"country"`
	Currency       money.Currency      `json:"currency"`
	Locale         string              `json:"locale"`
	Buyer          order.Customer      `json:"buyer"`
	PaymentMethod  order.PaymentMethod `json:"paymentMethod"`
	ApprovedAmount int64               `json:"approvedAmount,omitempty"` // 0: none stated, unless ApprovedZero
	// ApprovedZero: the buyer approved an amount of 0 (a session whose total
	// is 0), so the ceiling is 0, where an ApprovedAmount of 0 alone means
	// the token stated none and any order total is the ceiling.
	ApprovedZero bool            `json:"approvedZero,omitempty"`
	RiskTags     []order.RiskTag `json:"riskTags,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
	ExpiresAt    time.Time       `json:"expiresAt"`
	UsedAt       *time.Time      `json:"usedAt,omitempty"`
	UsedFor      string          `json:"usedFor,omitempty"` // "order:<id>" or "customerToken:<id>"
	Deleted      bool            `json:"deleted,omitempty"`
	// Expired is set by the token-expiry job, so the token stays expired
	// even if a sandbox clock is moved back.
	Expired bool `json:"expired,omitempty"`
	// SessionID is the checkout or payment session the buyer approved in, if any.
	SessionID string `json:"sessionId,omitempty"`
}

// MaxTokenLen bounds an authorization token's id.
const MaxTokenLen = 128

// Validate checks a new token, naming every bad field: its id must fit in a
// URL path as it is, and the country, currency, payment method and risk tags
// copied into the orders made from it must be ones an order knows, and its
// approved amount one an order may have. (The
// buyer's details are the embedder's checkout's to check.)
func (a *Authorization) Validate() error {
	var f fault.Fields
	if a.MerchantID == "" {
		f.Add("merchantId", "is required")
	}
	if !validTokenID(a.Token) {
		f.Add("token", "must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_', '~' and '-'", MaxTokenLen)
	}
	if !order.ValidCountry(a.Country) {
		f.Add("country", "must be an ISO 3166-1 alpha-2 country code")
	}
	if !a.Currency.Valid() {
		f.Add("currency", "must be an ISO 4217 currency code kassa supports")
	}
	if p := a.PaymentMethod.Provider; p != order.ProviderService && p != order.ProviderExternal {
		f.Add("paymentMethod.provider", "must be %s or %s", order.ProviderService, order.ProviderExternal)
	}
	if !order.ValidPaymentType(a.PaymentMethod.Type) {
		f.Add("paymentMethod.type", "must be one of %v", order.PaymentTypes())
	}
	// An order's total is at most order.MaxTotal, and an edit may raise an
	// order's authorization up to the approved amount: above the bound, edits
	// after partial captures took an order's amount past it.
	if a.ApprovedAmount < 0 || a.ApprovedAmount > order.MaxTotal {
		f.Add("approvedAmount", "must be between 0 and %d", order.MaxTotal)
	}
	if a.ApprovedZero && a.ApprovedAmount != 0 {
		f.Add("approvedZero", "states an approved amount of 0, but approvedAmount is %d", a.ApprovedAmount)
	}
	for i, tag := range a.RiskTags {
		if !order.ValidRiskTag(tag) {
			f.Add(fmt.Sprintf("riskTags[%d]", i), "must be one of %v", order.RiskTags())
		}
	}
	if !a.ExpiresAt.After(a.CreatedAt) {
		f.Add("expiresAt", "must be after createdAt")
	}
	if a.UsedAt != nil || a.UsedFor != "" || a.Deleted || a.Expired {
		f.Add("usedAt", "a new token is unused, not deleted and not expired")
	}
	return f.Err()
}

func validTokenID(s string) bool {
	if s == "" || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '~', c == '-':
		default:
			return false
		}
	}
	return s != "." && s != ".." // path segments a client would resolve away
}

// Usable reports why the token cannot be used at now, or nil.
func (a *Authorization) Usable(now time.Time) error {
	switch {
	case a.Deleted:
		return fault.NotFoundf("authorization_token_not_found", "authorization token not found")
	case a.UsedAt != nil:
		return fault.New(fault.NotAvailable, "authorization_token_used", "the authorization token was already used (%s)", a.UsedFor)
	case a.Expired || !now.Before(a.ExpiresAt):
		return fault.New(fault.NotAvailable, "authorization_token_expired", "the authorization token expired at %s", a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Consume marks the token used for what; a token is single use.
func (a *Authorization) Consume(now time.Time, what string) error {
	if err := a.Usable(now); err != nil {
		return err
	}
	t := now
	a.UsedAt, a.UsedFor = &t, what
	return nil
}

// Expire records that an unused token has passed its expiry, reporting
// whether it changed anything.
func (a *Authorization) Expire(now time.Time) bool {
	if a.Deleted || a.Expired || a.UsedAt != nil || now.Before(a.ExpiresAt) {
		return false
	}
	a.Expired = true
	return true
}

// Delete withdraws an unused token (DELETE /v1/authorization-tokens/{token}).
func (a *Authorization) Delete(now time.Time) error {
	if a.Deleted {
		return fault.NotFoundf("authorization_token_not_found", "authorization token not found")
	}
	if a.UsedAt != nil {
		// A 204 would read as "withdrawn", but what it made stays.
		return fault.New(fault.NotAvailable, "authorization_token_used", "the authorization token was already used (%s); deleting it would not undo that", a.UsedFor)
	}
	a.Deleted = true
	return nil
}

// Approval converts the token into what an order is created from.
func (a *Authorization) Approval(requireAck bool) order.Authorization {
	return order.Authorization{TokenID: a.Token, Country: a.Country, Currency: a.Currency, Buyer: a.Buyer,
		PaymentMethod: a.PaymentMethod, ApprovedAmount: a.ApprovedAmount, ApprovedZero: a.ApprovedZero, RiskTags: a.RiskTags,
		RequireAck: requireAck}
}

// State of a customer token.
type State string

const (
	StateActive  State = "active"
	StateRevoked State = "revoked"
)

// Account is the masked payment account of a customer token.
type Account struct {
	ExpiryMonth   string `json:"expiryMonth"`
	ExpiryYear    string `json:"expiryYear"`
	MaskedAccount string `json:"maskedAccount"`
}

// Record is the spec's CustomerToken.
type Record struct {
	TokenID        string              `json:"tokenId"`
	State          State               `json:"state"`
	Account        Account             `json:"account"`
	BillingAddress *order.Address      `json:"billingAddress,omitempty"`
	CompanyID      string              `json:"companyId"`
	Country        string              `json:"country"`
	Email          string              `json:"email"`
	FirstName      string              `json:"firstName"`
	LastName       string              `json:"lastName"`
	Phone          string              `json:"phone"`
	Reference1     string              `json:"reference1"`
	Reference2     string              `json:"reference2"`
	MerchantID     string              `json:"merchantId"`
	StoreID        string              `json:"storeId"`
	PaymentMethod  order.PaymentMethod `json:"paymentMethod"`
}

// Customer is a customer token as kassa stores it: the spec's record plus
// what kassa keeps to create orders from it.
type Customer struct {
	Record
	Currency    money.Currency  `json:"currency"`
	Locale      string          `json:"locale"`
	CompanyName string          `json:"companyName,omitempty"`
	RiskTags    []order.RiskTag `json:"riskTags,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	RevokedAt   *time.Time      `json:"revokedAt,omitempty"`
}

// CreateCustomerRequest is the spec's CreateCustomerTokenRequest.
type CreateCustomerRequest struct {
	Country  string               `json:"country"`
	Currency string               `json:"currency"`
	Customer *order.CustomerInput `json:"customer"`
	Locale   string               `json:"locale"`
	StoreID  string               `json:"storeId,omitempty"`
}

// Validate checks every field at once.
func (r *CreateCustomerRequest) Validate() error {
	var f fault.Fields
	if r.Country == "" {
		f.Add("country", "is required")
	} else if !order.ValidCountry(r.Country) {
		f.Add("country", "must be an ISO 3166-1 alpha-2 code")
	}
	if r.Currency == "" {
		f.Add("currency", "is required")
	} else if !money.Currency(r.Currency).Valid() {
		f.Add("currency", "must be an ISO 4217 code")
	}
	if r.Locale == "" {
		f.Add("locale", "is required")
	} else if !order.ValidLocale(r.Locale) {
		f.Add("locale", "must be a locale such as sv-SE")
	}
	if r.Customer == nil {
		f.Add("customer", "is required")
	} else {
		if r.Customer.ShippingAddress != nil {
			f.Add("customer.shippingAddress", "is not part of a customer token")
		}
		r.Customer.Validate(&f, "customer")
	}
	order.CheckText(&f, "storeId", r.StoreID, order.MaxStoreIDLen)
	return f.Err()
}

// NewCustomer turns an unused authorization token into a reusable customer
// token, consuming the authorization.
func NewCustomer(a *Authorization, r *CreateCustomerRequest, id string, now time.Time) (*Customer, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var f fault.Fields
	if r.Country != a.Country {
		f.Add("country", "must be %s, the country the buyer was authorized in", a.Country)
	}
	if money.Currency(r.Currency) != a.Currency {
		f.Add("currency", "must be %s, the currency the buyer was authorized in", a.Currency)
	}
	if r.Customer.CompanyID != "" && a.Buyer.CompanyID != "" && !company.SameNumber(a.Country, r.Customer.CompanyID, a.Buyer.CompanyID) {
		f.Add("customer.companyId", "must be %s, the authorized buyer", a.Buyer.CompanyID)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	if err := a.Consume(now, "customerToken:"+id); err != nil {
		return nil, err
	}
	b := a.Buyer
	pick := func(v, fallback string) string {
		if v != "" {
			return v
		}
		return fallback
	}
	in := r.Customer
	c := &Customer{
		Record: Record{TokenID: id, State: StateActive, MerchantID: a.MerchantID, StoreID: r.StoreID,
			CompanyID: pick(b.CompanyID, in.CompanyID), Country: a.Country, // the authorized buyer's form of its number
			Email: pick(in.Email, b.Email), FirstName: pick(in.FirstName, b.FirstName),
			LastName: pick(in.LastName, b.LastName), Phone: pick(in.Phone, b.Phone),
			Reference1: pick(in.Reference1, b.Reference1), Reference2: pick(in.Reference2, b.Reference2),
			BillingAddress: in.BillingAddress, PaymentMethod: a.PaymentMethod},
		Currency: a.Currency, Locale: r.Locale, CompanyName: b.CompanyName, RiskTags: a.RiskTags,
		CreatedAt: now,
	}
	if c.BillingAddress.Empty() { // as on an order (order.CustomerInput)
		c.BillingAddress = b.BillingAddress
	}
	if a.PaymentMethod.Type == order.PayCard {
		// A card expires in a month: this one three years on, counted in
		// months (now.AddDate(3, 0, 0) takes 29 February to 1 March).
		now := now.UTC()
		c.Account = Account{ExpiryMonth: fmt.Sprintf("%02d", int(now.Month())), ExpiryYear: fmt.Sprintf("%d", now.Year()+3),
			MaskedAccount: "**** **** **** " + lastFour(id)}
	}
	return c, nil
}

// Revoke ends the token's use. Revoking a revoked token changes nothing.
func (c *Customer) Revoke(now time.Time) {
	if c.State == StateRevoked {
		return
	}
	t := now
	c.State, c.RevokedAt = StateRevoked, &t
}

// Approval returns what an order from this customer token is created from.
// A revoked token creates no order.
func (c *Customer) Approval(requireAck bool) (order.Authorization, error) {
	if c.State != StateActive {
		return order.Authorization{}, fault.New(fault.NotAvailable, "customer_token_revoked", "the customer token is revoked")
	}
	return order.Authorization{
		TokenID: c.TokenID, Country: c.Country, Currency: c.Currency, PaymentMethod: c.PaymentMethod,
		RiskTags: c.RiskTags, RequireAck: requireAck,
		Buyer: order.Customer{BillingAddress: c.BillingAddress, CompanyID: c.CompanyID, CompanyName: c.CompanyName,
			Country: c.Country, Email: c.Email, FirstName: c.FirstName, LastName: c.LastName, Phone: c.Phone,
			Reference1: c.Reference1, Reference2: c.Reference2},
	}, nil
}

// lastFour is the sandbox's stand-in for the last four digits of the card:
// taken from the token id, but digits, as a card number's are (an id's tail
// may be hex or short), so a merchant that keeps them as such can.
func lastFour(s string) string {
	s = "0000" + s
	d := []byte(s[len(s)-4:])
	for i, c := range d {
		if c < '0' || c > '9' {
			d[i] = '0' + c%10
		}
	}
	return string(d)
}
