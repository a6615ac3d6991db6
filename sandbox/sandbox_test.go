package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// A merchant picks a test buyer from GET /sandbox/v1/fixtures by its
// description, so a declined-for-credit buyer's must name every method that
// is still approved, as the README's table does.
func TestCreditDeclinedDescriptionNamesTheApprovedMethods(t *testing.T) {
	words := map[order.PaymentType]string{order.PayInvoice: "invoice", order.PayAdvanceInvoice: "advance invoice",
		order.PayPartPayment: "part payment", order.PayCard: "card", order.PayBankTransfer: "bank transfer",
		order.PayPaypal: "PayPal"}
	locales := map[string]string{"SE": "sv-SE", "NO": "nb-NO", "FI": "fi-FI", "DK": "da-DK"}
	currencies := map[string]string{"SE": "SEK", "NO": "NOK", "FI": "EUR", "DK": "DKK"}
	for _, fx := range Fixtures() {
		if fx.Outcome != CreditDeclined {
			continue
		}
		declinedPart, approvedPart, ok := strings.Cut(fx.Description, "; ")
		if !ok {
			t.Fatalf("%s: description %q has no approved part", fx.CompanyID, fx.Description)
		}
		for _, pt := range order.PaymentTypes() {
			r := &TokenRequest{Country: fx.Country, Currency: currencies[fx.Country], Locale: locales[fx.Country],
				Customer: &order.CustomerInput{CompanyID: fx.CompanyID}}
			r.PaymentMethod = &struct {
				Type string `json:"type"`
			}{Type: string(pt)}
			_, err := Mint(r, "m", "tok", time.Unix(0, 0), time.Hour)
			w := words[pt]
			switch {
			case err == nil && !strings.Contains(approvedPart, w):
				t.Errorf("%s: %s is approved but the description %q does not say so", fx.CompanyID, pt, fx.Description)
			case err != nil && fault.CodeOf(err) != "credit_declined":
				t.Fatalf("%s %s: %v", fx.CompanyID, pt, err)
			case err != nil && !strings.Contains(declinedPart, w):
				t.Errorf("%s: %s is declined but the description %q does not say so", fx.CompanyID, pt, fx.Description)
			}
		}
	}
}
