// Package sandbox holds the deterministic buyer fixtures of kassa's sandbox,
// the B2B counterpart of test cards: documented company ids per country whose
// authorization is approved, declined for credit, approved only for advance
// invoice, or tagged with a risk tag, so that a merchant can exercise every
// branch of an integration. It also validates the sandbox's token requests.
package sandbox

import (
	"slices"
	"time"

	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/token"
)

// Outcome is what a fixture buyer's checkout results in.
type Outcome string

const (
	Approved           Outcome = "approved"
	CreditDeclined     Outcome = "creditDeclined"
	AdvanceInvoiceOnly Outcome = "advanceInvoiceOnly"
	PossibleFraud      Outcome = "possibleFraud"
	Blacklisted        Outcome = "blacklisted"
)

// Fixture is one documented sandbox buyer.
type Fixture struct {
	Country     string  `json:"country"`
	CompanyID   string  `json:"companyId"`
	CompanyName string  `json:"companyName"`
	Outcome     Outcome `json:"outcome"`
	Description string  `json:"description"`
}

var fixtures = []Fixture{
	{"SE", "5560000001", "Approved Byggvaror AB", Approved, "approved for every payment method"},
	{"SE", "5560000019", "Nekad Kredit AB", CreditDeclined, "declined for credit on invoice and part payment (402); card, advance invoice, bank transfer and PayPal approved"},
	{"SE", "5560000027", "Förskott Handel AB", AdvanceInvoiceOnly, "approved only for advanceInvoice; order starts unacknowledged"},
	{"SE", "5560000035", "Granskas Logistik AB", PossibleFraud, "approved with risk tag possibleFraud; order starts onHold"},
	{"SE", "5560000043", "Spärrad Import AB", Blacklisted, "approved with risk tag blacklisted; order is fraudDeny"},
	{"NO", "910000001", "Godkjent Bygg AS", Approved, "approved for every payment method"},
	{"NO", "910000002", "Avslått Kreditt AS", CreditDeclined, "declined for credit on invoice and part payment (402); card, advance invoice, bank transfer and PayPal approved"},
	{"NO", "910000003", "Forskudd Handel AS", AdvanceInvoiceOnly, "approved only for advanceInvoice"},
	{"NO", "910000004", "Mistenkt Frakt AS", PossibleFraud, "risk tag possibleFraud; order onHold"},
	{"NO", "910000005", "Svartelistet Import AS", Blacklisted, "risk tag blacklisted; order fraudDeny"},
	{"FI", "1000001-1", "Hyväksytty Rakennus Oy", Approved, "approved for every payment method"},
	{"FI", "1000002-2", "Hylätty Luotto Oy", CreditDeclined, "declined for credit on invoice and part payment (402); card, advance invoice, bank transfer and PayPal approved"},
	{"FI", "1000003-3", "Ennakko Kauppa Oy", AdvanceInvoiceOnly, "approved only for advanceInvoice"},
	{"FI", "1000004-4", "Epäilty Kuljetus Oy", PossibleFraud, "risk tag possibleFraud; order onHold"},
	{"FI", "1000005-5", "Mustalistattu Tuonti Oy", Blacklisted, "risk tag blacklisted; order fraudDeny"},
	{"DK", "10000001", "Godkendt Byg ApS", Approved, "approved for every payment method"},
	{"DK", "10000002", "Afvist Kredit ApS", CreditDeclined, "declined for credit on invoice and part payment (402); card, advance invoice, bank transfer and PayPal approved"},
	{"DK", "10000003", "Forudbetaling Handel ApS", AdvanceInvoiceOnly, "approved only for advanceInvoice"},
	{"DK", "10000004", "Mistænkt Fragt ApS", PossibleFraud, "risk tag possibleFraud; order onHold"},
	{"DK", "10000005", "Sortlistet Import ApS", Blacklisted, "risk tag blacklisted; order fraudDeny"},
}

// Fixtures lists every sandbox buyer. Any other company id is approved.
// Each call returns a new slice, so a caller changing it does not change
// which buyers the sandbox declines or flags.
func Fixtures() []Fixture { return slices.Clone(fixtures) }

// Lookup finds the fixture of a company in a country; separators in the
// registration number do not matter.
func Lookup(country, companyID string) (Fixture, bool) {
	i := slices.IndexFunc(fixtures, func(f Fixture) bool {
		return f.Country == country && company.SameNumber(country, f.CompanyID, companyID)
	})
	if i < 0 {
		return Fixture{}, false
	}
	return fixtures[i], true
}

// TokenRequest is the body of POST /sandbox/v1/authorization-tokens: a buyer
// who completed checkout.
type TokenRequest struct {
	Country       string               `json:"country"`
	Currency      string               `json:"currency"`
	Locale        string               `json:"locale"`
	Customer      *order.CustomerInput `json:"customer,omitempty"`
	PaymentMethod *struct {
		Type string `json:"type"`
	} `json:"paymentMethod,omitempty"`
	Amount *int64 `json:"amount,omitempty"`
}

// TokenResponse answers a minted token.
type TokenResponse struct {
	AuthorizationToken string    `json:"authorizationToken"`
	ExpiresAt          time.Time `json:"expiresAt"`
}

// Mint validates r and returns the authorization token the buyer's checkout
// produced, or a Declined error for a buyer declined for credit.
func Mint(r *TokenRequest, merchantID, tok string, now time.Time, ttl time.Duration) (*token.Authorization, error) {
	var f fault.Fields
	if !order.ValidCountry(r.Country) {
		f.Add("country", "must be an ISO 3166-1 alpha-2 code")
	}
	if !money.Currency(r.Currency).Valid() {
		f.Add("currency", "must be an ISO 4217 code")
	}
	if !order.ValidLocale(r.Locale) {
		f.Add("locale", "must be a locale such as sv-SE")
	}
	r.Customer.Validate(&f, "customer")
	pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}
	if r.PaymentMethod != nil && r.PaymentMethod.Type != "" {
		if !order.ValidPaymentType(order.PaymentType(r.PaymentMethod.Type)) {
			f.Add("paymentMethod.type", "must be one of %v", order.PaymentTypes())
		}
		pm.Type = order.PaymentType(r.PaymentMethod.Type)
	}
	if r.Amount != nil && (*r.Amount < 1 || *r.Amount > order.MaxTotal) {
		f.Add("amount", "must be between 1 and %d", order.MaxTotal)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	a := &token.Authorization{Token: tok, MerchantID: merchantID, Country: r.Country,
		Currency: money.Currency(r.Currency), Locale: r.Locale, PaymentMethod: pm,
		CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if r.Amount != nil {
		a.ApprovedAmount = *r.Amount
	}
	if c := r.Customer; c != nil {
		a.Buyer = order.Customer{BillingAddress: c.BillingAddress, ShippingAddress: c.ShippingAddress,
			CompanyID: c.CompanyID, Country: c.Country, Email: c.Email, FirstName: c.FirstName,
			LastName: c.LastName, Phone: c.Phone, Reference1: c.Reference1, Reference2: c.Reference2}
	}
	if a.Buyer.Country == "" {
		a.Buyer.Country = r.Country
	}
	fx, known := Lookup(r.Country, a.Buyer.CompanyID)
	if known {
		a.Buyer.CompanyName = fx.CompanyName
	}
	switch fx.Outcome {
	case CreditDeclined:
		if pm.Type == order.PayCard || pm.Type == order.PayAdvanceInvoice || pm.Type == order.PayBankTransfer || pm.Type == order.PayPaypal {
			break // paid before delivery: no credit to decline
		}
		return nil, fault.New(fault.Declined, "credit_declined", "the buyer %s was declined for credit", fx.CompanyID)
	case AdvanceInvoiceOnly:
		a.PaymentMethod = order.PaymentMethod{Provider: order.ProviderService, Type: order.PayAdvanceInvoice}
		a.RiskTags = []order.RiskTag{order.RiskCreditDeclined}
	case PossibleFraud:
		a.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	case Blacklisted:
		a.RiskTags = []order.RiskTag{order.RiskBlacklisted}
	}
	return a, nil
}
