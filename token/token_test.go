package token_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/token"
)

func wantFault(t *testing.T, err error, kind fault.Kind, code string, fields ...string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != kind || fe.Code != code {
		t.Fatalf("error = %v, want %s/%s", err, kind, code)
	}
	var got []string
	for _, f := range fe.Fields {
		got = append(got, f.Field)
	}
	if fields != nil && !slices.Equal(got, fields) {
		t.Fatalf("fields = %q, want %q", got, fields)
	}
}

var t0 = ordertest.Start()

func auth() *token.Authorization {
	return &token.Authorization{Token: "auth-1", MerchantID: "m1", Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB", Email: "ap@buyer.example"},
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayCard}, ApprovedAmount: 50000,
		CreatedAt: t0, ExpiresAt: t0.Add(token.DefaultAuthorizationTTL)}
}

func TestAuthorizationSingleUse(t *testing.T) {
	a := auth()
	if err := a.Usable(t0); err != nil {
		t.Fatal(err)
	}
	if err := a.Consume(t0.Add(time.Minute), "order:o1"); err != nil {
		t.Fatal(err)
	}
	if a.UsedAt == nil || !a.UsedAt.Equal(t0.Add(time.Minute)) || a.UsedFor != "order:o1" {
		t.Fatalf("token %+v", a)
	}
	wantFault(t, a.Consume(t0.Add(2*time.Minute), "order:o2"), fault.NotAvailable, "authorization_token_used")
	if a.UsedFor != "order:o1" {
		t.Fatal("second use overwrote the first")
	}
}

func TestAuthorizationExpiry(t *testing.T) {
	a := auth()
	if err := a.Usable(t0.Add(token.DefaultAuthorizationTTL - time.Nanosecond)); err != nil {
		t.Fatalf("usable just before expiry: %v", err)
	}
	wantFault(t, a.Consume(t0.Add(token.DefaultAuthorizationTTL), "order:o1"), fault.NotAvailable, "authorization_token_expired")
	if a.UsedAt != nil {
		t.Fatal("expired token consumed")
	}
}

func TestExpireJobMarksOnlyUnusedExpiredTokens(t *testing.T) {
	end := t0.Add(token.DefaultAuthorizationTTL)
	a := auth()
	if a.Expire(end.Add(-time.Nanosecond)) || a.Expired {
		t.Fatal("expired before its time")
	}
	if !a.Expire(end) || !a.Expired || a.Expire(end) {
		t.Fatal("expire at the time, once")
	}
	// The mark holds even when the clock goes back (sandbox test clock).
	wantFault(t, a.Usable(t0), fault.NotAvailable, "authorization_token_expired")
	used := auth()
	if err := used.Consume(t0, "order:o1"); err != nil {
		t.Fatal(err)
	}
	if used.Expire(end) || used.Expired {
		t.Fatal("a used token is not expired")
	}
	deleted := auth()
	_ = deleted.Delete(t0)
	if deleted.Expire(end) {
		t.Fatal("a deleted token is not expired")
	}
}

func TestAuthorizationDelete(t *testing.T) {
	a := auth()
	if err := a.Delete(t0); err != nil {
		t.Fatal(err)
	}
	wantFault(t, a.Consume(t0, "order:o1"), fault.NotFound, "authorization_token_not_found")
	wantFault(t, a.Delete(t0), fault.NotFound, "authorization_token_not_found")
}

func TestUsedAuthorizationCannotBeDeleted(t *testing.T) {
	a := auth()
	if err := a.Consume(t0, "order:o1"); err != nil {
		t.Fatal(err)
	}
	wantFault(t, a.Delete(t0), fault.NotAvailable, "authorization_token_used")
	if a.Deleted {
		t.Fatal("a used token was marked deleted")
	}
}

func TestApprovalCarriesTheCeiling(t *testing.T) {
	ap := auth().Approval(true)
	if ap.ApprovedAmount != 50000 || ap.TokenID != "auth-1" || !ap.RequireAck || ap.Buyer.CompanyID != "5560000001" {
		t.Fatalf("approval %+v", ap)
	}
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("Big", 1, 50001, 2500))
	lines, mode, err := order.ValidateCreate(r, false, f.IDs)
	if err != nil {
		t.Fatal(err)
	}
	_, err = order.Create("m1", r, lines, mode, ap, f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
}

func customerRequest() *token.CreateCustomerRequest {
	return &token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Customer: &order.CustomerInput{Reference1: "R1"}}
}

func TestCustomerToken(t *testing.T) {
	a := auth()
	c, err := token.NewCustomer(a, customerRequest(), "ctok-12345", t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != token.StateActive || c.CompanyID != "5560000001" || c.Email != "ap@buyer.example" || c.Reference1 != "R1" ||
		c.Account.MaskedAccount != "**** **** **** 2345" || c.Account.ExpiryYear != "2028" || c.Account.ExpiryMonth != "03" {
		t.Fatalf("customer token %+v", c)
	}
	if a.UsedFor != "customerToken:ctok-12345" {
		t.Fatalf("authorization not consumed: %+v", a)
	}
	// The authorization cannot be used again.
	_, err = token.NewCustomer(a, customerRequest(), "ctok-2", t0)
	wantFault(t, err, fault.NotAvailable, "authorization_token_used")

	// Reusable while active.
	f := ordertest.New()
	for i := 0; i < 2; i++ {
		ap, err := c.Approval(false)
		if err != nil {
			t.Fatal(err)
		}
		r := &order.CreateRequest{Country: "SE", Currency: "SEK", OrderLines: ordertest.DefaultLines()}
		lines, mode, err := order.ValidateCreate(r, true, f.IDs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := order.Create("m1", r, lines, mode, ap, f.Env()); err != nil {
			t.Fatal(err)
		}
	}
	if f.IDs.Count(order.KindOrder) != 2 {
		t.Fatal("two orders expected")
	}

	// Revoked: no order.
	c.Revoke(t0.Add(time.Hour))
	c.Revoke(t0.Add(2 * time.Hour))
	if c.State != token.StateRevoked || !c.RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("revoked %+v", c)
	}
	if c.Record.State != token.StateRevoked {
		t.Fatal("record state")
	}
	ap, err := c.Approval(false)
	wantFault(t, err, fault.NotAvailable, "customer_token_revoked")
	if ap.TokenID != "" {
		t.Fatal("revoked token gave an approval")
	}
}

func TestCustomerTokenValidation(t *testing.T) {
	r := &token.CreateCustomerRequest{Country: "XX", Currency: "KRONA",
		Customer: &order.CustomerInput{ShippingAddress: &order.Address{}, Email: "x"}}
	wantFault(t, r.Validate(), fault.Invalid, "validation_failed", "country", "currency", "locale",
		"customer.shippingAddress", "customer.email")
	wantFault(t, (&token.CreateCustomerRequest{}).Validate(), fault.Invalid, "validation_failed", "country", "currency", "locale", "customer")

	a := auth()
	r = customerRequest()
	r.Country, r.Currency = "NO", "NOK"
	r.Customer.CompanyID = "other"
	_, err := token.NewCustomer(a, r, "ctok-1", t0)
	wantFault(t, err, fault.Invalid, "validation_failed", "country", "currency", "customer.companyId")
	if a.UsedAt != nil {
		t.Fatal("refused request consumed the authorization")
	}
	expired := auth()
	_, err = token.NewCustomer(expired, customerRequest(), "ctok-1", t0.Add(2*time.Hour))
	wantFault(t, err, fault.NotAvailable, "authorization_token_expired")
}

// TestCustomerTokenStoreIDIsCheckedText: storeId is refused with a NUL or
// invalid UTF-8, as on every other request that takes it.
func TestCustomerTokenStoreIDIsCheckedText(t *testing.T) {
	for _, id := range []string{"x\x00", "\xff", strings.Repeat("s", order.MaxStoreIDLen+1)} {
		r := &token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", StoreID: id}
		err := r.Validate()
		var fe *fault.Error
		if !errors.As(err, &fe) || !slices.ContainsFunc(fe.Fields, func(f fault.FieldError) bool { return f.Field == "storeId" }) {
			t.Errorf("storeId %q: %v, want a finding on storeId", id, err)
		}
	}
}

func TestAuthorizationValidate(t *testing.T) {
	if err := auth().Validate(); err != nil {
		t.Fatalf("a good token: %v", err)
	}
	used := t0
	for _, tt := range []struct {
		name   string
		edit   func(*token.Authorization)
		fields []string
	}{
		{"no merchant", func(a *token.Authorization) { a.MerchantID = "" }, []string{"merchantId"}},
		{"no token", func(a *token.Authorization) { a.Token = "" }, []string{"token"}},
		{"token with a slash", func(a *token.Authorization) { a.Token = "a/b" }, []string{"token"}},
		{"token with NUL", func(a *token.Authorization) { a.Token = "a\x00" }, []string{"token"}},
		{"dot segment", func(a *token.Authorization) { a.Token = ".." }, []string{"token"}},
		{"token too long", func(a *token.Authorization) { a.Token = strings.Repeat("a", token.MaxTokenLen+1) }, []string{"token"}},
		{"longest token", func(a *token.Authorization) { a.Token = strings.Repeat("a", token.MaxTokenLen) }, nil},
		{"unknown payment type", func(a *token.Authorization) { a.PaymentMethod.Type = "bitcoin" }, []string{"paymentMethod.type"}},
		{"no payment method", func(a *token.Authorization) { a.PaymentMethod = order.PaymentMethod{} },
			[]string{"paymentMethod.provider", "paymentMethod.type"}},
		{"unknown risk tag", func(a *token.Authorization) { a.RiskTags = []order.RiskTag{order.RiskUnknown, "odd"} }, []string{"riskTags[1]"}},
		{"bad country and currency", func(a *token.Authorization) { a.Country, a.Currency = "XX", "ABC" }, []string{"country", "currency"}},
		{"negative approved amount", func(a *token.Authorization) { a.ApprovedAmount = -1 }, []string{"approvedAmount"}},
		// An order's total is at most order.MaxTotal, and so is what it may
		// be edited up to: a ceiling above it let edits after partial
		// captures take an order's amount to three times the bound.
		{"approved amount above an order's", func(a *token.Authorization) { a.ApprovedAmount = order.MaxTotal + 1 }, []string{"approvedAmount"}},
		{"approved amount at an order's bound", func(a *token.Authorization) { a.ApprovedAmount = order.MaxTotal }, nil},
		{"zero approved with an amount", func(a *token.Authorization) { a.ApprovedZero = true }, []string{"approvedZero"}},
		{"expires at creation", func(a *token.Authorization) { a.ExpiresAt = a.CreatedAt }, []string{"expiresAt"}},
		{"already used", func(a *token.Authorization) { a.UsedAt, a.UsedFor = &used, "order:o1" }, []string{"usedAt"}},
		{"already deleted", func(a *token.Authorization) { a.Deleted = true }, []string{"usedAt"}},
		{"already expired", func(a *token.Authorization) { a.Expired = true }, []string{"usedAt"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := auth()
			tt.edit(a)
			err := a.Validate()
			if tt.fields == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantFault(t, err, fault.Invalid, "validation_failed", tt.fields...)
		})
	}
}

// A masked card account ends in four digits, as a card number does, whatever
// the token id it is made from (server ids are UUIDs, whose tail is hex).
func TestMaskedAccountEndsInDigits(t *testing.T) {
	for _, id := range []string{"b84a05ee-b1a3-4b53-9ec6-dfee0edb47a6", "ffff", "ab", "ctok-12345"} {
		c, err := token.NewCustomer(auth(), customerRequest(), id, t0)
		if err != nil {
			t.Fatal(err)
		}
		m := c.Account.MaskedAccount
		tail, ok := strings.CutPrefix(m, "**** **** **** ")
		if !ok || len(tail) != 4 || strings.Trim(tail, "0123456789") != "" {
			t.Errorf("token %q: maskedAccount %q, want \"**** **** **** \" and four digits", id, m)
		}
	}
}

// A token whose buyer approved 0 (a session totalling 0) has a ceiling of 0:
// its approval must say so, or the order it makes may be for any amount.
func TestApprovalCarriesAZeroCeiling(t *testing.T) {
	a := auth()
	a.ApprovedAmount, a.ApprovedZero = 0, true
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	ap := a.Approval(false)
	if !ap.ApprovedZero || ap.ApprovedAmount != 0 {
		t.Fatalf("approval %+v, want a ceiling of 0", ap)
	}
	f := ordertest.New()
	r := ordertest.CreateRequest(ordertest.Line("Small", 1, 100, 2500))
	lines, mode, err := order.ValidateCreate(r, false, f.IDs)
	if err != nil {
		t.Fatal(err)
	}
	_, err = order.Create("m1", r, lines, mode, ap, f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
}

// An order from a customer token is made for the buyer the authorization
// approved: its risk tags (a blacklisted buyer's orders are fraudDeny) and
// its company number in the form it was authorized in, whatever form the
// merchant sent.
func TestCustomerTokenKeepsTheAuthorizedBuyer(t *testing.T) {
	a := auth()
	a.RiskTags = []order.RiskTag{order.RiskBlacklisted}
	r := customerRequest()
	r.Customer.CompanyID = "556000-0001"
	c, err := token.NewCustomer(a, r, "ctok-1", t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.CompanyID != "5560000001" || c.Currency != "SEK" || c.CompanyName != "Buyer AB" {
		t.Fatalf("customer token %+v", c)
	}
	ap, err := c.Approval(false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ap.RiskTags, []order.RiskTag{order.RiskBlacklisted}) || ap.Buyer.CompanyID != "5560000001" ||
		ap.Currency != "SEK" || ap.Country != "SE" || ap.PaymentMethod != a.PaymentMethod {
		t.Fatalf("approval %+v", ap)
	}
}

// The authorization's risk tags go into the order made from it: a
// blacklisted buyer's order is fraudDeny, a possible fraud's onHold.
func TestApprovalCarriesTheRiskTags(t *testing.T) {
	a := auth()
	a.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	if ap := a.Approval(false); !slices.Equal(ap.RiskTags, a.RiskTags) || ap.PaymentMethod != a.PaymentMethod ||
		ap.Currency != "SEK" || ap.Country != "SE" {
		t.Fatalf("approval %+v", ap)
	}
}

// A customer token takes what the merchant sent and falls back to what the
// buyer gave at checkout; the masked account ends in the id's own digits.
func TestCustomerTokenPrefersTheMerchantsDetails(t *testing.T) {
	a := auth()
	a.Buyer.BillingAddress = &order.Address{City: "Lund"}
	r := customerRequest()
	r.Customer.Email = "merchant@buyer.example"
	c, err := token.NewCustomer(a, r, "ctok-19999", t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Email != "merchant@buyer.example" || c.BillingAddress == nil || c.BillingAddress.City != "Lund" ||
		c.Account.MaskedAccount != "**** **** **** 9999" {
		t.Fatalf("customer token %+v", c)
	}
}

// TestCardExpiryIsThreeYearsOnByMonth: a card's expiry is a month and a
// year, three years on from the month the token was made in. Reckoned as
// the date three years on, a token made on 29 February (2028 is a leap year,
// 2031 is not) got a card expiring in March. The month is reckoned in UTC.
func TestCardExpiryIsThreeYearsOnByMonth(t *testing.T) {
	for _, c := range []struct {
		now         time.Time
		month, year string
	}{
		{time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), "02", "2031"},
		{time.Date(2028, 2, 28, 23, 59, 59, 0, time.UTC), "02", "2031"},
		{time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), "03", "2031"},
		{time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC), "12", "2029"},
		{time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC), "01", "2030"},
		// The month is UTC's, whatever zone the clock is read in (the
		// ledger's clock is the process's, in TZ).
		{time.Date(2029, 1, 1, 10, 0, 0, 0, time.FixedZone("LINT", 14*3600)), "12", "2031"},
		{time.Date(2028, 2, 29, 20, 0, 0, 0, time.FixedZone("EST", -5*3600)), "03", "2031"},
	} {
		a := auth()
		a.CreatedAt, a.ExpiresAt = c.now, c.now.Add(token.DefaultAuthorizationTTL)
		tok, err := token.NewCustomer(a, customerRequest(), "ctok-12345", c.now)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Account.ExpiryMonth != c.month || tok.Account.ExpiryYear != c.year {
			t.Errorf("made %s: card expires %s/%s, want %s/%s", c.now.Format(time.RFC3339), tok.Account.ExpiryMonth, tok.Account.ExpiryYear, c.month, c.year)
		}
	}
}
