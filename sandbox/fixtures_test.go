package sandbox

import (
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

var (
	now        = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	locales    = map[string]string{"SE": "sv-SE", "NO": "nb-NO", "FI": "fi-FI", "DK": "da-DK"}
	currencies = map[string]string{"SE": "SEK", "NO": "NOK", "FI": "EUR", "DK": "DKK"}
)

func request(country, companyID string) *TokenRequest {
	return &TokenRequest{Country: country, Currency: currencies[country], Locale: locales[country],
		Customer: &order.CustomerInput{CompanyID: companyID}}
}

// TestFixtureDecisions pins what each documented buyer's checkout yields
// on invoice, the method whose credit the fixtures decide.
func TestFixtureDecisions(t *testing.T) {
	want := map[Outcome]struct {
		pm   order.PaymentType
		tags []order.RiskTag
	}{
		Approved:           {order.PayInvoice, nil},
		AdvanceInvoiceOnly: {order.PayAdvanceInvoice, []order.RiskTag{order.RiskCreditDeclined}},
		PossibleFraud:      {order.PayInvoice, []order.RiskTag{order.RiskPossibleFraud}},
		Blacklisted:        {order.PayInvoice, []order.RiskTag{order.RiskBlacklisted}},
	}
	for _, fx := range Fixtures() {
		a, err := Mint(request(fx.Country, fx.CompanyID), "m1", "tok", now, time.Hour)
		if fx.Outcome == CreditDeclined {
			if !fault.Is(err, fault.Declined) || a != nil {
				t.Errorf("%s %s: %v, want declined", fx.Country, fx.CompanyID, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", fx.Country, fx.CompanyID, err)
		}
		w := want[fx.Outcome]
		if a.PaymentMethod != (order.PaymentMethod{Provider: order.ProviderService, Type: w.pm}) ||
			!slices.Equal(a.RiskTags, w.tags) || a.Buyer.CompanyName != fx.CompanyName || a.Buyer.Country != fx.Country {
			t.Errorf("%s %s (%s): token %+v", fx.Country, fx.CompanyID, fx.Outcome, a)
		}
	}
	// A fixture's number is its country's: the same digits elsewhere are
	// another company, approved as any unknown one.
	if _, ok := Lookup("NO", "5560000019"); ok {
		t.Error("a Swedish fixture found in Norway")
	}
	a, err := Mint(request("NO", "5560000019"), "m1", "tok", now, time.Hour)
	if err != nil || a.RiskTags != nil || a.Buyer.CompanyName != "" {
		t.Errorf("unknown Norwegian company: %+v, %v", a, err)
	}
}

// TestMintToken: the token lasts ttl and carries the approved amount, which
// must be a positive amount an order can have: an amount of 0 would leave the
// token with no ceiling at all.
func TestMintToken(t *testing.T) {
	r := request("SE", "5560000001")
	r.Amount = new(int64)
	for _, amount := range []int64{1, 12345, order.MaxTotal} {
		*r.Amount = amount
		a, err := Mint(r, "m1", "tok", now, time.Hour)
		if err != nil {
			t.Fatalf("amount %d: %v", amount, err)
		}
		if a.ApprovedAmount != amount || a.ApprovedZero || !a.ExpiresAt.Equal(now.Add(time.Hour)) || !a.CreatedAt.Equal(now) ||
			a.Token != "tok" || a.MerchantID != "m1" {
			t.Fatalf("amount %d: token %+v", amount, a)
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("amount %d: minted token invalid: %v", amount, err)
		}
	}
	bad := func(edit func(r *TokenRequest), field string) {
		t.Helper()
		r := request("SE", "5560000001")
		edit(r)
		_, err := Mint(r, "m1", "tok", now, time.Hour)
		fe, ok := err.(*fault.Error)
		if !ok || !slices.ContainsFunc(fe.Fields, func(f fault.FieldError) bool { return f.Field == field }) {
			t.Errorf("want a finding on %s, got %v", field, err)
		}
	}
	for _, amount := range []int64{0, -1, order.MaxTotal + 1} {
		bad(func(r *TokenRequest) { r.Amount = &amount }, "amount")
	}
	bad(func(r *TokenRequest) { r.Currency = "KRONA" }, "currency")
	bad(func(r *TokenRequest) { r.Country = "XX" }, "country")
	bad(func(r *TokenRequest) { r.Locale = "swedish" }, "locale")
	bad(func(r *TokenRequest) { r.Customer.Email = "not-an-address" }, "customer.email")
	bad(func(r *TokenRequest) {
		r.PaymentMethod = &struct {
			Type string `json:"type"`
		}{Type: "bitcoin"}
	}, "paymentMethod.type")
}

// A payment method left empty is invoice; the buyer's addresses are kept.
func TestMintDefaultsAndBuyer(t *testing.T) {
	r := request("SE", "5560000001")
	r.PaymentMethod = &struct {
		Type string `json:"type"`
	}{}
	r.Customer.ShippingAddress = &order.Address{City: "Malmö"}
	a, err := Mint(r, "m1", "tok", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if a.PaymentMethod.Type != order.PayInvoice || a.Buyer.ShippingAddress == nil || a.Buyer.ShippingAddress.City != "Malmö" {
		t.Fatalf("token %+v", a)
	}
}
