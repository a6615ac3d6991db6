package order

import (
	"time"

	"github.com/kassahq/kassa/money"
)

// ActionRef is an element of availableActions.
type ActionRef struct {
	Type Action `json:"type"`
}

// OutputLine is the spec's OutputOrderLine.
type OutputLine struct {
	Line
	UnitPriceNetDecimal string `json:"unitPriceNetDecimal"`
}

// SubOrder is the spec's SubOrder as returned to merchants.
type SubOrder struct {
	LedgerID          string      `json:"ledgerId"`
	CreatedAt         time.Time   `json:"createdAt"`
	AvailableActions  []ActionRef `json:"availableActions"`
	DocumentMessage   string      `json:"documentMessage"`
	DocumentReference string      `json:"documentReference,omitempty"`
	DocumentURL       string      `json:"documentUrl,omitempty"`
	// FactoringStatus is in the spec, marked for removal; kassa factors
	// nothing, so it is always "".
	FactoringStatus         string       `json:"factoringStatus"`
	Note                    string       `json:"note"`
	OrderLines              []OutputLine `json:"orderLines"`
	Status                  []SubStatus  `json:"status"`
	TotalOrderAmount        money.Record `json:"totalOrderAmount"`
	TotalOrderAmountExclVat money.Record `json:"totalOrderAmountExclVat"`
	TotalOrderVatAmount     money.Record `json:"totalOrderVatAmount"`
}

// EventOut is the spec's OrderEvent.
type EventOut struct {
	ID        string       `json:"id"`
	OrderID   string       `json:"orderId"`
	LedgerID  string       `json:"ledgerId"`
	CreatedAt time.Time    `json:"createdAt"`
	Amount    money.Record `json:"amount"`
	Type      EventType    `json:"type"`
}

// RiskProfile is the spec's riskProfile object.
type RiskProfile struct {
	Tags []RiskTag `json:"tags"`
}

// TokenRef is the spec's token object.
type TokenRef struct {
	TokenID string `json:"tokenId"`
}

// Response is the spec's LedgerOrderResponse.
type Response struct {
	ID                string            `json:"id"`
	MerchantID        string            `json:"merchantId"`
	MerchantReference string            `json:"merchantReference"`
	OrderReference    string            `json:"orderReference"`
	StoreID           string            `json:"storeId"`
	CreatedAt         time.Time         `json:"createdAt"`
	UpdatedAt         time.Time         `json:"updatedAt"`
	ExpiresAt         time.Time         `json:"expiresAt"`
	AuthorizeStatus   string            `json:"authorizeStatus"`
	Status            []Status          `json:"status"`
	PaymentMethod     PaymentMethod     `json:"paymentMethod"`
	Customer          Customer          `json:"customer"`
	Metadata          map[string]string `json:"metadata"`
	OrderAmount       money.Record      `json:"orderAmount"`
	CapturedAmount    money.Record      `json:"capturedAmount"`
	RefundedAmount    money.Record      `json:"refundedAmount"`
	UncapturedAmount  money.Record      `json:"uncapturedAmount"`
	Captured          []SubOrder        `json:"captured"`
	Refunded          []SubOrder        `json:"refunded"`
	Uncaptured        SubOrder          `json:"uncaptured"`
	Events            []EventOut        `json:"events"`
	RiskProfile       RiskProfile       `json:"riskProfile"`
	Token             TokenRef          `json:"token"`
	VatMode           money.VATMode     `json:"vatMode"`
}

// DocumentURLFunc returns the signed link of a sub-order's document, or "".
type DocumentURLFunc func(o *Order, l *Ledger) string

// AuthorizeStatus describes the state of the buyer's authorization.
func (o *Order) AuthorizeStatus() string {
	switch o.Hold {
	case HoldOnHold:
		return "pending"
	case HoldFraudDeny:
		return "denied"
	}
	return "authorized"
}

// Response renders the order as the spec's LedgerOrderResponse at now.
func (o *Order) Response(now time.Time, p Policy, docURL DocumentURLFunc) Response {
	a := o.Amounts()
	m := func(v int64) money.Record { return money.New(v, o.Currency).Record() }
	r := Response{
		ID: o.ID, MerchantID: o.MerchantID, MerchantReference: o.MerchantReference,
		OrderReference: o.OrderReference, StoreID: o.StoreID,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(),
		AuthorizeStatus: o.AuthorizeStatus(), Status: o.Statuses(now),
		PaymentMethod: o.PaymentMethod, Customer: o.Customer, Metadata: o.Metadata,
		OrderAmount: m(a.Order), CapturedAmount: m(a.Captured), RefundedAmount: m(a.Refunded),
		UncapturedAmount: m(a.Uncaptured),
		Captured:         make([]SubOrder, 0, len(o.Captured)),
		Refunded:         make([]SubOrder, 0, len(o.Refunded)),
		Events:           make([]EventOut, 0, len(o.Events)),
		RiskProfile:      RiskProfile{Tags: o.RiskTags},
		Token:            TokenRef{TokenID: o.TokenID},
		VatMode:          o.VATMode,
	}
	if r.Status == nil {
		r.Status = []Status{}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if r.RiskProfile.Tags == nil {
		r.RiskProfile.Tags = []RiskTag{}
	}
	refunds := o.refundsByCapture()
	for i := range o.Captured {
		r.Captured = append(r.Captured, o.subOrder(&o.Captured[i], now, p, docURL, refunds))
	}
	for i := range o.Refunded {
		r.Refunded = append(r.Refunded, o.subOrder(&o.Refunded[i], now, p, docURL, refunds))
	}
	r.Uncaptured = o.subOrder(&o.Uncaptured, now, p, docURL, refunds)
	for _, e := range o.Events {
		r.Events = append(r.Events, EventOut{ID: e.ID, OrderID: e.OrderID, LedgerID: e.LedgerID,
			CreatedAt: e.CreatedAt.UTC(), Amount: m(e.Amount), Type: e.Type})
	}
	return r
}

func (o *Order) subOrder(l *Ledger, now time.Time, p Policy, docURL DocumentURLFunc, refunds map[string]Totals) SubOrder {
	// Only a capture has refunds; for other sub-orders this is zero.
	refunded := refunds[l.ID]
	t := SumLines(l.Lines, o.VATMode)
	s := SubOrder{
		LedgerID: l.ID, CreatedAt: l.CreatedAt.UTC(), AvailableActions: []ActionRef{},
		DocumentMessage: l.DocumentMessage, DocumentReference: l.DocumentReference, Note: l.Note,
		OrderLines: make([]OutputLine, 0, len(l.Lines)), Status: l.Status,
		TotalOrderAmount:        money.New(t.Gross, o.Currency).Record(),
		TotalOrderAmountExclVat: money.New(t.Net, o.Currency).Record(),
		TotalOrderVatAmount:     money.New(t.VAT, o.Currency).Record(),
	}
	if s.Status == nil {
		s.Status = []SubStatus{}
	}
	for _, a := range o.actions(l, now, p, refunded, true) {
		s.AvailableActions = append(s.AvailableActions, ActionRef{Type: a})
	}
	for _, ln := range l.Lines {
		s.OrderLines = append(s.OrderLines, OutputLine{Line: ln,
			UnitPriceNetDecimal: money.UnitPriceNetDecimal(ln.UnitPrice, ln.Vat, o.VATMode)})
	}
	if docURL != nil && l.DocumentReference != "" {
		s.DocumentURL = docURL(o, l)
	}
	return s
}

// SummaryCustomer is the customer object of an order summary.
type SummaryCustomer struct {
	CompanyID   string `json:"companyId,omitempty"`
	CompanyName string `json:"companyName,omitempty"`
	Country     string `json:"country,omitempty"`
	Email       string `json:"email,omitempty"`
	FirstName   string `json:"firstName,omitempty"`
	LastName    string `json:"lastName,omitempty"`
	Phone       string `json:"phone,omitempty"`
	VatID       string `json:"vatId,omitempty"`
	Reference1  string `json:"reference1,omitempty"`
	Reference2  string `json:"reference2,omitempty"`
	SSN         string `json:"ssn,omitempty"`
}

// Summary is an element of the order list (GetOrdersResponse.orders).
type Summary struct {
	ID                    string          `json:"id"`
	MerchantID            string          `json:"merchantId"`
	MerchantReference     string          `json:"merchantReference"`
	OrderReference        string          `json:"orderReference"`
	StoreID               string          `json:"storeId"`
	CreatedAt             time.Time       `json:"createdAt"`
	ExpiresAt             time.Time       `json:"expiresAt"`
	PaymentMethodCategory Category        `json:"paymentMethodCategory"`
	Status                []Status        `json:"status"`
	RiskProfile           RiskProfile     `json:"riskProfile"`
	TotalOrderAmount      money.Record    `json:"totalOrderAmount"`
	Customer              SummaryCustomer `json:"customer"`
}

// Summary derives the list record from the aggregate.
func (o *Order) Summary(now time.Time) Summary {
	c := o.Customer
	s := Summary{
		ID: o.ID, MerchantID: o.MerchantID, MerchantReference: o.MerchantReference,
		OrderReference: o.OrderReference, StoreID: o.StoreID,
		CreatedAt: o.CreatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(),
		PaymentMethodCategory: o.PaymentMethod.Category(), Status: o.Statuses(now),
		RiskProfile:      RiskProfile{Tags: o.RiskTags},
		TotalOrderAmount: money.New(o.Amounts().Order, o.Currency).Record(),
		Customer: SummaryCustomer{CompanyID: c.CompanyID, CompanyName: c.CompanyName, Country: c.Country,
			Email: c.Email, FirstName: c.FirstName, LastName: c.LastName, Phone: c.Phone, VatID: c.VatID,
			Reference1: c.Reference1, Reference2: c.Reference2},
	}
	if s.Status == nil {
		s.Status = []Status{}
	}
	if s.RiskProfile.Tags == nil {
		s.RiskProfile.Tags = []RiskTag{}
	}
	return s
}
