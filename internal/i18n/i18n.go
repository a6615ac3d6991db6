// Package i18n holds every fixed string kassa shows a buyer (the hosted
// checkout page, invoices, receipts and credit notes), one table per
// language, and how each language writes amounts and dates.
//
// A buyer reads the language of the session's or order's locale (its
// language subtag; "no" and "nn" read Norwegian Bokmål), English for any
// language without a table. The languages are those of the markets whose
// company registries kassa knows (SE, NO, DK, FI: package company).
package i18n

import (
	"fmt"
	"strings"
	"time"

	"github.com/kassahq/kassa/money"
)

// English is the language of a locale without a table, and of documents
// issued before kassa recorded their language.
const English = "en"

// Language is the language kassa writes to a buyer of locale ("sv-SE"):
// the tag of one of its tables. An order's documents record it when they
// are issued, so that a table added later does not change them.
func Language(locale string) string {
	lang, _, _ := strings.Cut(strings.ToLower(locale), "-")
	switch lang {
	case "no", "nn":
		// Norwegian without a written standard, and Nynorsk, whose
		// readers read Bokmål: closer than English.
		return "nb"
	}
	if _, ok := tables[lang]; ok {
		return lang
	}
	return English
}

// For is the table of lang (a Language result); English for an unknown or
// empty one.
func For(lang string) *Texts {
	if t, ok := tables[lang]; ok {
		return t
	}
	return tables[English]
}

// FormatAmount writes minor units of currency c as the language does: "1,234.50"
// in English, "1 234,50" in Swedish.
func (t *Texts) FormatAmount(minor int64, c money.Currency) string {
	return money.New(minor, c).FormattedIn(t.Group, t.Point)
}

// FormatRate writes a VAT rate (2500 = 25 %) as the language writes a
// percentage with two decimals: "25.00" in English, "25,00" in Swedish, as
// a document's VAT column shows it.
func (t *Texts) FormatRate(rate int64) string {
	return money.New(rate, "").FormattedIn(t.Group, t.Point)
}

// RemainingBalance is the description of a line crediting what is left of
// a capture at rate, in the language.
func (t *Texts) RemainingBalance(rate int64) string {
	return fmt.Sprintf(t.RemainingBalanceFmt, t.FormatRate(rate))
}

// FormatDate writes the calendar date of tm (in UTC, as every date kassa derives).
func (t *Texts) FormatDate(tm time.Time) string { return tm.UTC().Format(t.DateLayout) }

// Texts is one language's strings. Every field must be filled for every
// language (TestEveryLanguageIsComplete), except those documented as
// optional.
type Texts struct {
	Tag          string // the HTML lang attribute
	Group, Point string // thousands separator, decimal separator
	DateLayout   string // a time.Format layout
	checkoutTexts
	documentTexts
	PaymentMethods    map[string]string // by order.PaymentType
	SessionStateTitle map[string]string // heading of a checkout that is cancelled or expired, by session state
}

type checkoutTexts struct {
	Checkout, YourOrder, Item, Qty, Total, VATOf string
	CorrectFollowing, FindCompany, CompanyQuery  string
	Search, YourCompany, NoMatch, NoMatchShort   string
	SearchAbove, ContactBilling, FirstName       string
	LastName, Email, Phone, Street, PostalCode   string
	City, PaymentMethod, Approve, Decline        string
	Approved, BackToShop, Placed, NoPurchase     string
	// ThanksFmt takes the buyer's company name and the payment method.
	ThanksFmt, ThanksPlain string

	ChooseCompany, EnterFirstName, EnterLastName, EnterEmail string
	EnterStreet, EnterPostalCode, EnterCity                  string
	ChoosePayment, ChooseOffered                             string
	// BadEmail and BadField are what a field the order validation refused
	// says. Optional: "" shows the validation's own (English) words, as
	// "Check this field: …".
	BadEmail, BadField string
	// SearchRefused replaces what the company search refused with, in
	// the page's script. Optional: "" shows the search's own (English) words.
	SearchRefused string

	TooManySearches, OrderChanged, CreditRefused string
	LinkInvalid, TryLater, Unavailable           string
}

type documentTexts struct {
	Invoice, CreditNote, Receipt, VoidMark string
	// VoidInvoice and RecourseInvoice are sentences: only an invoice is
	// voided or handed back (docs/decisions.md).
	VoidInvoice, RecourseInvoice                                  string
	Order, MerchantReference, Date, Seller, Buyer, BillingAddress string
	// DueDate heads an invoice's due date (order.Issue.Due).
	DueDate string
	// CreditsInvoiceFmt and CreditsReceiptFmt take the credited
	// document's number and date.
	CreditsInvoiceFmt, CreditsReceiptFmt                                           string
	Lines, Description, Quantity, UnitPrice, UnitDiscount, VATRate, VAT, LineTotal string
	InclVAT, ExclVAT, VATBreakdown, Rate, NetHead, GrossHead, DocTotal             string
	PaymentStatus, Invoiced, Credited, Paid, Outstanding, DueToBuyer               string
	Attention                                                                      string // before an address's attention name
	// RemainingBalanceFmt describes a line of a full refund after partial
	// refunds, what is left at one VAT rate (refund.Full): kassa's words on
	// the credit note, not the merchant's. It takes the rate as
	// FormatRate writes it.
	RemainingBalanceFmt string
}

// Languages lists the tags of every table, English first.
func Languages() []string { return []string{English, "sv", "nb", "da", "fi"} }
