package order

import (
	"slices"
	"time"
)

// Status is one value of an order's status array; several may hold at once.
type Status string

const (
	StatusPartiallyCaptured      Status = "partiallyCaptured"
	StatusFullyCaptured          Status = "fullyCaptured"
	StatusPartiallyRefunded      Status = "partiallyRefunded"
	StatusFullyRefunded          Status = "fullyRefunded"
	StatusUncaptured             Status = "uncaptured"
	StatusOnHold                 Status = "onHold"
	StatusReadyForCapture        Status = "readyForCapture"
	StatusFraudDeny              Status = "fraudDeny"
	StatusCancelled              Status = "cancelled"
	StatusUnacknowledged         Status = "unacknowledged"
	StatusExpired                Status = "expired"
	StatusPartiallyPaid          Status = "partiallyPaid"
	StatusFullyPaid              Status = "fullyPaid"
	StatusInvoiceDeliveryFailure Status = "invoiceDeliveryFailure"
)

var allStatuses = []Status{StatusPartiallyCaptured, StatusFullyCaptured, StatusPartiallyRefunded,
	StatusFullyRefunded, StatusUncaptured, StatusOnHold, StatusReadyForCapture, StatusFraudDeny,
	StatusCancelled, StatusUnacknowledged, StatusExpired, StatusPartiallyPaid, StatusFullyPaid,
	StatusInvoiceDeliveryFailure}

// AllStatuses lists every order status in the spec's order. Each call returns
// a new slice, so a caller changing it does not change what the package
// accepts.
func AllStatuses() []Status { return slices.Clone(allStatuses) }

// ValidStatus reports whether s names an order status.
func ValidStatus(s string) bool { return slices.Contains(allStatuses, Status(s)) }

// SubStatus is one value of a sub-order's status array.
type SubStatus string

const (
	SubPartiallyPaid          SubStatus = "partiallyPaid"
	SubFullyPaid              SubStatus = "fullyPaid"
	SubReminder1              SubStatus = "reminder1"
	SubReminder2              SubStatus = "reminder2"
	SubDebtCollection         SubStatus = "debtCollection"
	SubInvoiceDeliveryFailure SubStatus = "invoiceDeliveryFailure"
	SubVoid                   SubStatus = "void"
	SubRecourse               SubStatus = "recourse"
)

// EventType is the kind of an order event.
type EventType string

const (
	EventAcknowledge       EventType = "acknowledge"
	EventAuthorize         EventType = "authorize"
	EventCancel            EventType = "cancel"
	EventCreate            EventType = "create"
	EventEdit              EventType = "edit"
	EventEditCustomer      EventType = "editCustomer"
	EventEditPaymentMethod EventType = "editPaymentMethod"
	EventExtendExpiry      EventType = "extendExpiry"
	EventFullCapture       EventType = "fullCapture"
	EventFullRefund        EventType = "fullRefund"
	EventPaid              EventType = "paid"
	EventPartialCapture    EventType = "partialCapture"
	EventPartialRefund     EventType = "partialRefund"
	EventReadyForCapture   EventType = "readyForCapture"
	EventSetReference      EventType = "setReference"
)

var allEventTypes = []EventType{EventAcknowledge, EventAuthorize, EventCancel, EventCreate, EventEdit,
	EventEditCustomer, EventEditPaymentMethod, EventExtendExpiry, EventFullCapture, EventFullRefund,
	EventPaid, EventPartialCapture, EventPartialRefund, EventReadyForCapture, EventSetReference}

// AllEventTypes lists the 15 event types of the spec. Each call returns a new
// slice, so a caller changing it does not change what the package accepts.
func AllEventTypes() []EventType { return slices.Clone(allEventTypes) }

// Action is an action type offered in a sub-order's availableActions.
type Action string

const (
	ActionCapture              Action = "capture"
	ActionPartialCapture       Action = "partialCapture"
	ActionRefund               Action = "refund"
	ActionPartialRefund        Action = "partialRefund"
	ActionCancel               Action = "cancel"
	ActionEditOrder            Action = "editOrder"
	ActionEditCustomer         Action = "editCustomer"
	ActionEditPaymentMethod    Action = "editPaymentMethod"
	ActionExtendOrderExpiry    Action = "extendOrderExpiry"
	ActionResendOrderInvoice   Action = "resendOrderInvoice"
	ActionVoid                 Action = "void"
	ActionRecourseOrderInvoice Action = "recourseOrderInvoice"
)

// LineType is the type of an order line.
type LineType string

var lineTypes = []LineType{"physical", "service", "digital", "discount", "shippingFee", "giftCard",
	"storeCredit", "surcharge", "autoAdjustment"}

// LineTypes lists the accepted order line types. Each call returns a new
// slice, so a caller changing it does not change what the package accepts.
func LineTypes() []LineType { return slices.Clone(lineTypes) }

func validLineType(t LineType) bool { return slices.Contains(lineTypes, t) }

// Provider of a payment method.
type Provider string

const (
	ProviderService  Provider = "service"
	ProviderExternal Provider = "external"
)

// PaymentType is the type of a selected payment method.
type PaymentType string

const (
	PayInvoice        PaymentType = "invoice"
	PayAdvanceInvoice PaymentType = "advanceInvoice"
	PayPartPayment    PaymentType = "partPayment"
	PayCard           PaymentType = "card"
	PayBankTransfer   PaymentType = "bankTransfer"
	PayPaypal         PaymentType = "paypal"
)

var paymentTypes = []PaymentType{PayInvoice, PayAdvanceInvoice, PayPartPayment, PayCard, PayBankTransfer, PayPaypal}

// PaymentTypes lists every payment method type. Each call returns a new slice,
// so a caller changing it does not change what the package accepts.
func PaymentTypes() []PaymentType { return slices.Clone(paymentTypes) }

// ValidPaymentType reports whether t is a known payment method type.
func ValidPaymentType(t PaymentType) bool { return slices.Contains(paymentTypes, t) }

// PaymentMethod is the spec's SelectedPaymentMethod.
type PaymentMethod struct {
	Provider Provider    `json:"provider"`
	Type     PaymentType `json:"type"`
}

// IsInvoice reports whether the method produces invoices (which can be voided and recoursed).
func (p PaymentMethod) IsInvoice() bool {
	return p.Type == PayInvoice || p.Type == PayAdvanceInvoice || p.Type == PayPartPayment
}

// Category is the order summary's paymentMethodCategory.
type Category string

const (
	CategoryInvoice        Category = "invoice"
	CategoryServiceInvoice Category = "serviceInvoice"
	CategoryAdvanceInvoice Category = "advanceInvoice"
	CategoryCard           Category = "card"
	CategoryDirectBank     Category = "directBank"
)

var categories = []Category{CategoryInvoice, CategoryServiceInvoice, CategoryAdvanceInvoice, CategoryCard, CategoryDirectBank}

// Categories lists every payment method category. Each call returns a new
// slice, so a caller changing it does not change what the package accepts.
func Categories() []Category { return slices.Clone(categories) }

// ValidCategory reports whether c is a known payment method category.
func ValidCategory(c Category) bool { return slices.Contains(categories, c) }

// PaymentTermDays is the days an invoice gives its buyer to pay: the due
// date it states is its issue date plus these (DueDate). The hosted
// checkout offers "Invoice (pay within 30 days)" from this same number
// (internal/i18n), so the two cannot disagree.
const PaymentTermDays = 30

// DueDate is the date an invoice of p issued at issued is due, as midnight
// UTC (document dates are UTC dates), or zero for a capture paid when it was
// made (a receipt), which is not due. An advance invoice is due on its issue
// date: the spec has it paid before the order is ready for capture, and the
// checkout offers it as "pay before delivery", which has no later date to
// name. Every other invoice, which the provider collects afterwards
// (payments, reminders, debt collection), is due PaymentTermDays after it.
func (p PaymentMethod) DueDate(issued time.Time) time.Time {
	if p.PaidAtCapture() {
		return time.Time{}
	}
	if p.Type == PayAdvanceInvoice {
		return utcDate(issued)
	}
	return utcDate(issued).AddDate(0, 0, PaymentTermDays)
}

// PaidAtCapture says a capture is paid when it is made (card, PayPal): its
// document is a receipt, not an invoice the buyer pays afterwards.
func (p PaymentMethod) PaidAtCapture() bool { return p.Category() == CategoryCard }

// Category maps a payment method to its list category.
func (p PaymentMethod) Category() Category {
	switch p.Type {
	case PayAdvanceInvoice:
		return CategoryAdvanceInvoice
	case PayCard, PayPaypal:
		return CategoryCard
	case PayBankTransfer:
		return CategoryDirectBank
	default:
		if p.Provider == ProviderService {
			return CategoryServiceInvoice
		}
		return CategoryInvoice
	}
}

// RiskTag is a tag of an order's risk profile.
type RiskTag string

const (
	RiskUnknown        RiskTag = "unknown"
	RiskCreditDeclined RiskTag = "creditDeclined"
	RiskBlacklisted    RiskTag = "blacklisted"
	RiskPossibleFraud  RiskTag = "possibleFraud"
)

var riskTags = []RiskTag{RiskUnknown, RiskCreditDeclined, RiskBlacklisted, RiskPossibleFraud}

// RiskTags lists every risk tag. Each call returns a new slice, so a caller
// changing it does not change what the package accepts.
func RiskTags() []RiskTag { return slices.Clone(riskTags) }

// ValidRiskTag reports whether t is a known risk tag.
func ValidRiskTag(t RiskTag) bool { return slices.Contains(riskTags, t) }

// Contact is the spec's CompanyContact.
type Contact struct {
	Email     string `json:"email,omitempty"`
	FirstName string `json:"firstName,omitempty"`
	LastName  string `json:"lastName,omitempty"`
	Phone     string `json:"phone,omitempty"`
}

// Address is the spec's CompanyAddress.
type Address struct {
	AttentionName string   `json:"attentionName,omitempty"`
	CareOf        string   `json:"careOf,omitempty"`
	City          string   `json:"city,omitempty"`
	CompanyName   string   `json:"companyName,omitempty"`
	Contact       *Contact `json:"contact,omitempty"`
	Country       string   `json:"country,omitempty"`
	PostalCode    string   `json:"postalCode,omitempty"`
	StreetAddress string   `json:"streetAddress,omitempty"`
}

// InvoiceChannel is where invoices of an order are delivered.
type InvoiceChannel struct {
	Type        string `json:"type,omitempty"`
	Destination string `json:"destination,omitempty"`
	Details     string `json:"details,omitempty"`
	State       string `json:"state,omitempty"`
	// Configurations is always rendered (the spec lists it); nothing sets
	// promoteGln yet, since no request of the spec carries it.
	Configurations InvoiceChannelConfigs `json:"configurations"`
}

// InvoiceChannelConfigs holds channel options.
type InvoiceChannelConfigs struct {
	PromoteGln bool `json:"promoteGln"`
}

// Customer is the spec's LedgerCustomerData: the buyer of an order.
type Customer struct {
	BillingAddress  *Address        `json:"billingAddress,omitempty"`
	ShippingAddress *Address        `json:"shippingAddress,omitempty"`
	CompanyID       string          `json:"companyId,omitempty"`
	CompanyName     string          `json:"companyName,omitempty"`
	Country         string          `json:"country,omitempty"`
	Email           string          `json:"email,omitempty"`
	FirstName       string          `json:"firstName,omitempty"`
	LastName        string          `json:"lastName,omitempty"`
	Phone           string          `json:"phone,omitempty"`
	Reference1      string          `json:"reference1,omitempty"`
	Reference2      string          `json:"reference2,omitempty"`
	VatID           string          `json:"vatId,omitempty"`
	PaymentMethod   *PaymentMethod  `json:"paymentMethod,omitempty"`
	InvoiceChannel  *InvoiceChannel `json:"invoiceChannel,omitempty"`
}
