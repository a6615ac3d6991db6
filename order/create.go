package order

import (
	"fmt"
	"unicode/utf8"

	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
)

// Metadata limits (the spec states none).
const (
	MaxMetadataKeys     = 50
	MaxMetadataKeyLen   = 40
	MaxMetadataValueLen = 500
	MaxStoreIDLen       = 100
)

// CreateRequest is the spec's CreateOrderRequest; with FromCustomerToken it
// is the CustomerTokenOrderRequest (no locale or customer, a shippingAddress).
// VatMode is a kassa extension: "inclVat" (default) or "exclVat".
type CreateRequest struct {
	Country             string            `json:"country"`
	Currency            string            `json:"currency"`
	Locale              string            `json:"locale,omitempty"`
	AutoCapture         *AutoCapture      `json:"autoCapture,omitempty"`
	Customer            *CustomerInput    `json:"customer,omitempty"`
	ShippingAddress     *Address          `json:"shippingAddress,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	OrderLines          []LineInput       `json:"orderLines,omitempty"`
	Reference           string            `json:"reference,omitempty"`
	SettlementReference string            `json:"settlementReference,omitempty"`
	StoreID             string            `json:"storeId,omitempty"`
	VatMode             string            `json:"vatMode,omitempty"`
	TotalsInput
}

// Authorization is what a buyer's token approved. The token package derives it.
type Authorization struct {
	TokenID       string
	Country       string
	Currency      money.Currency
	Buyer         Customer
	PaymentMethod PaymentMethod
	// ApprovedAmount is the ceiling in minor units; 0 means the token stated
	// none and the order's own total becomes the ceiling, unless
	// ApprovedZero says the buyer approved 0.
	ApprovedAmount int64
	ApprovedZero   bool
	RiskTags       []RiskTag
	// RequireAck is the merchant's setting that every order starts unacknowledged.
	RequireAck bool
}

// ValidateCreate checks a create request on its own (without the token) and
// returns the resolved lines. fromCustomerToken selects the
// CustomerTokenOrderRequest shape.
func ValidateCreate(r *CreateRequest, fromCustomerToken bool, ids IDSource) ([]Line, money.VATMode, error) {
	var f fault.Fields
	if r.Country == "" {
		f.Add("country", "is required")
	} else if !ValidCountry(r.Country) {
		f.Add("country", "must be an ISO 3166-1 alpha-2 code")
	}
	if r.Currency == "" {
		f.Add("currency", "is required")
	} else if !money.Currency(r.Currency).Valid() {
		f.Add("currency", "must be an ISO 4217 code")
	}
	switch {
	case fromCustomerToken && r.Locale != "":
		if !ValidLocale(r.Locale) {
			f.Add("locale", "must be a locale such as sv-SE")
		}
	case fromCustomerToken:
	case r.Locale == "":
		f.Add("locale", "is required")
	case !ValidLocale(r.Locale):
		f.Add("locale", "must be a locale such as sv-SE")
	}
	if fromCustomerToken && r.Customer != nil {
		f.Add("customer", "is not accepted on an order from a customer token")
	}
	if !fromCustomerToken && r.ShippingAddress != nil {
		f.Add("shippingAddress", "is accepted only on an order from a customer token; use customer.shippingAddress")
	}
	if ac := r.AutoCapture; ac != nil && (ac.DelayMinutes < 0 || ac.DelayMinutes > 10080) {
		f.Add("autoCapture.delayMinutes", "must be between 0 and 10080")
	}
	r.Customer.Validate(&f, "customer")
	ValidateAddress(&f, "shippingAddress", r.ShippingAddress)
	CheckMetadata(&f, r.Metadata)
	checkText(&f, "reference", r.Reference, MaxReferenceLen)
	checkText(&f, "settlementReference", r.SettlementReference, MaxReferenceLen)
	checkText(&f, "storeId", r.StoreID, MaxStoreIDLen)
	mode := money.InclVAT
	if r.VatMode != "" {
		mode = money.VATMode(r.VatMode)
		if !mode.Valid() {
			f.Add("vatMode", "must be inclVat or exclVat")
			mode = money.InclVAT
		}
	}
	var lines []Line
	if len(r.OrderLines) > 0 {
		if len(r.OrderLines) > MaxLines {
			f.Add("orderLines", "must have at most %d lines", MaxLines)
		} else {
			lines = BuildLines(&f, "orderLines", r.OrderLines, mode, ids)
			if f.Len() == 0 {
				CheckTotals(&f, r.TotalsInput, SumLines(lines, mode), false)
			}
		}
	} else {
		lines = totalsOnlyLine(&f, r.TotalsInput, mode, ids)
	}
	if err := f.Err(); err != nil {
		return nil, "", err
	}
	return lines, mode, nil
}

// totalsOnlyLine stands in for omitted orderLines: the spec makes them
// optional, so an order may be created from its totals alone, as one line.
func totalsOnlyLine(f *fault.Fields, t TotalsInput, mode money.VATMode, ids IDSource) []Line {
	if t.TotalOrderAmount == nil {
		f.Add("orderLines", "are required when totalOrderAmount is omitted")
		return nil
	}
	gross := *t.TotalOrderAmount
	before := f.Len()
	checkAmount(f, "totalOrderAmount", t.TotalOrderAmount, 0, MaxTotal)
	checkAmount(f, "totalOrderVatAmount", t.TotalOrderVatAmount, 0, MaxTotal)
	checkAmount(f, "totalOrderAmountExclVat", t.TotalOrderAmountExclVat, 0, MaxTotal)
	if f.Len() > before {
		return nil
	}
	var vat int64
	switch {
	case t.TotalOrderVatAmount != nil:
		vat = *t.TotalOrderVatAmount
	case t.TotalOrderAmountExclVat != nil:
		// The amount and the amount without VAT say what the VAT is; read
		// as 0, a buyer's VAT would be refused as a mismatch.
		if *t.TotalOrderAmountExclVat > gross {
			f.Add("totalOrderAmountExclVat", "must not exceed totalOrderAmount")
			return nil
		}
		vat = gross - *t.TotalOrderAmountExclVat
	}
	if vat > gross {
		f.Add("totalOrderVatAmount", "must not exceed totalOrderAmount")
		return nil
	}
	if t.TotalOrderAmountExclVat != nil && *t.TotalOrderAmountExclVat != gross-vat {
		f.Add("totalOrderAmountExclVat", "must equal totalOrderAmount − totalOrderVatAmount = %d", gross-vat)
		return nil
	}
	total := gross
	if mode == money.ExclVAT {
		total = gross - vat
	}
	rate, ok := impliedRate(gross-vat, vat, total, mode)
	if !ok {
		f.Add("totalOrderVatAmount", "must be at most the amount without VAT (VAT at 100 %%): %d", gross/2)
		return nil
	}
	return []Line{{ID: ids.NewID(KindLine), Description: "Order total", Quantity: 1,
		TotalAmount: total, TotalVatAmount: vat, UnitPrice: total, Vat: rate}}
}

// impliedRate is the VAT rate of the one line that stands for the totals:
// a rate that gives vat on total within the ±1 any sent line may differ by,
// so that the line obeys the rules of a line sent back on edit and its net
// unit price is right; when none does (totals of lines at several rates), the
// nearest rate. ok is false when vat is more than 100 % of net.
func impliedRate(net, vat, total int64, mode money.VATMode) (rate int64, ok bool) {
	if vat == 0 {
		return 0, true
	}
	if vat > net {
		return 0, false
	}
	// Never 0 for VAT that is not: a line at rate 0 must carry no VAT.
	nearest := min(max(money.DivRound(vat*money.RateDenominator, net), 1), money.MaxRate)
	for _, r := range []int64{nearest, nearest - 1, nearest + 1} {
		if d := money.LineVAT(total, r, mode) - vat; r >= 1 && r <= money.MaxRate && d >= -1 && d <= 1 {
			return r, true
		}
	}
	return nearest, true
}

// Create builds a new order for merchantID from a validated request and the
// buyer's authorization. It appends the create event (with the order amount)
// and, when the order can be captured at once, readyForCapture (zero amount).
func Create(merchantID string, r *CreateRequest, lines []Line, mode money.VATMode, auth Authorization, env Env) (*Order, error) {
	gross := SumLines(lines, mode).Gross
	var f fault.Fields
	if r.Country != auth.Country {
		f.Add("country", "must be %s, the country the buyer was authorized in", auth.Country)
	}
	if money.Currency(r.Currency) != auth.Currency {
		f.Add("currency", "must be %s, the currency the buyer was authorized in", auth.Currency)
	}
	if r.Customer != nil && r.Customer.CompanyID != "" && auth.Buyer.CompanyID != "" && !company.SameNumber(auth.Country, r.Customer.CompanyID, auth.Buyer.CompanyID) {
		f.Add("customer.companyId", "must be %s, the authorized buyer", auth.Buyer.CompanyID)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	approved := auth.ApprovedAmount
	if approved == 0 && !auth.ApprovedZero {
		approved = gross
	}
	if gross > approved {
		return nil, fault.InvalidCode("authorization_exceeded", "totalOrderAmount",
			"the order amount %d exceeds the %d the buyer's authorization approved", gross, approved)
	}
	o := &Order{
		ID:                  env.IDs.NewID(KindOrder),
		MerchantID:          merchantID,
		MerchantReference:   r.Reference,
		OrderReference:      env.IDs.NewID(KindOrderRef),
		SettlementReference: r.SettlementReference,
		StoreID:             r.StoreID,
		Country:             r.Country,
		Locale:              r.Locale,
		Currency:            auth.Currency,
		VATMode:             mode,
		CreatedAt:           env.Now,
		UpdatedAt:           env.Now,
		ExpiresAt:           env.Now.Add(env.Policy.ExpiryPeriod),
		PaymentMethod:       auth.PaymentMethod,
		Customer:            auth.Buyer.clone(),
		Metadata:            cloneMap(r.Metadata),
		RiskTags:            append([]RiskTag{}, auth.RiskTags...),
		TokenID:             auth.TokenID,
		ApprovedAmount:      approved,
		AuthorizedAmount:    gross,
		Unacknowledged:      auth.RequireAck || auth.PaymentMethod.Type == PayAdvanceInvoice,
		Captured:            []Ledger{},
		Refunded:            []Ledger{},
	}
	if r.AutoCapture != nil {
		ac := *r.AutoCapture
		o.AutoCapture = &ac
	}
	r.Customer.mergeInto(&o.Customer)
	if auth.Buyer.CompanyID != "" {
		// The authorized buyer named in another form of its number (checked
		// above) keeps the number it was authorized by: the merchant's
		// spelling would otherwise be the buyer's on the order's documents
		// and notifications, and differ between one buyer's orders.
		o.Customer.CompanyID = auth.Buyer.CompanyID
	}
	if r.ShippingAddress != nil {
		o.Customer.ShippingAddress = r.ShippingAddress.clone()
	}
	pm := o.PaymentMethod
	o.Customer.PaymentMethod = &pm
	for _, t := range auth.RiskTags {
		switch t {
		case RiskPossibleFraud:
			o.Hold = HoldOnHold
		case RiskBlacklisted:
			o.Hold = HoldFraudDeny
		}
	}
	o.Uncaptured = o.NewLedger(LedgerUncaptured, lines, env)
	o.AppendEvent(EventCreate, o.Uncaptured.ID, gross, env)
	o.maybeReady(env)
	return o, nil
}

// maybeReady appends readyForCapture the first time the order can be captured.
func (o *Order) maybeReady(env Env) {
	if !o.ReadyEmitted && o.captureBlocked(env.Now) == "" {
		o.ReadyEmitted = true
		o.AppendEvent(EventReadyForCapture, o.Uncaptured.ID, 0, env)
	}
}

// String is a short description for logs.
func (o *Order) String() string { return fmt.Sprintf("order %s (%s)", o.ID, o.MerchantID) }

// CheckMetadata bounds a metadata map (orders and sessions). Keys are text
// the stores keep too, so NUL, invalid UTF-8 and the characters CheckText
// refuses are refused in them as in values.
func CheckMetadata(f *fault.Fields, m map[string]string) {
	if len(m) > MaxMetadataKeys {
		f.Add("metadata", "must have at most %d keys", MaxMetadataKeys)
	}
	for k, v := range m {
		switch {
		case !Storable(k):
			f.Add("metadata", "keys must be valid UTF-8 without NUL characters")
		case hasHiddenControl(k):
			f.Add("metadata", "keys must not hold control characters (other than tab, line feed and carriage return) or bidirectional overrides")
		case k == "" || utf8.RuneCountInString(k) > MaxMetadataKeyLen:
			f.Add("metadata", "keys must be 1 to %d characters", MaxMetadataKeyLen)
		}
		checkText(f, "metadata."+k, v, MaxMetadataValueLen)
	}
}
