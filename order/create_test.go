package order_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

var ptr = ordertest.Ptr[int64]

func TestCreateAppendsCreateThenReadyForCapture(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	equal(t, "ids", []string{o.ID, o.OrderReference, o.Uncaptured.ID}, []string{"order-1", "orderref-1", "ledger-1"})
	equal(t, "events", eventTypes(o), []order.EventType{order.EventCreate, order.EventReadyForCapture})
	equal(t, "create amount", o.Events[0].Amount, int64(28780))
	equal(t, "readyForCapture amount", o.Events[1].Amount, int64(0))
	for _, e := range o.Events {
		equal(t, "event order", e.OrderID, "order-1")
		equal(t, "event ledger", e.LedgerID, "ledger-1")
		equal(t, "event time", e.CreatedAt, ordertest.Start())
	}
	equal(t, "updatedAt", o.UpdatedAt, o.Events[len(o.Events)-1].CreatedAt)
	equal(t, "expiresAt", o.ExpiresAt, ordertest.Start().Add(28*24*time.Hour))
	equal(t, "authorized", o.AuthorizedAmount, int64(28780))
	equal(t, "approved", o.ApprovedAmount, int64(2*28780))
	equal(t, "amounts", o.Amounts(), order.Amounts{Order: 28780, Uncaptured: 28780})
	equal(t, "statuses", o.Statuses(f.Clock.Now()), []order.Status{order.StatusUncaptured, order.StatusReadyForCapture})
	equal(t, "actions", actions(o, &o.Uncaptured, f), []order.Action{order.ActionCapture, order.ActionPartialCapture,
		order.ActionCancel, order.ActionEditOrder, order.ActionEditCustomer, order.ActionEditPaymentMethod,
		order.ActionExtendOrderExpiry})
	equal(t, "lines", o.Uncaptured.Lines, []order.Line{
		{ID: "line-1", Description: "Widget", Quantity: 2, TotalAmount: 20000, TotalVatAmount: 4000, Type: "physical", UnitPrice: 10000, Vat: 2500},
		{ID: "line-2", Description: "Food", Quantity: 1, TotalAmount: 5600, TotalVatAmount: 600, Type: "physical", UnitPrice: 5600, Vat: 1200},
		{ID: "line-3", Description: "Book", Quantity: 3, TotalAmount: 3180, TotalVatAmount: 180, Type: "physical", UnitPrice: 1060, Vat: 600},
	})
	equal(t, "customer", o.Customer.CompanyID, "5560000001")
	equal(t, "customer payment method", *o.Customer.PaymentMethod, o.PaymentMethod)
}

func TestCreateAdvanceInvoiceWaitsForAcknowledgement(t *testing.T) {
	f := ordertest.New()
	auth := ordertest.Authorization(0)
	auth.PaymentMethod.Type = order.PayAdvanceInvoice
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), auth)
	now := f.Clock.Now()
	equal(t, "events", eventTypes(o), []order.EventType{order.EventCreate})
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusUnacknowledged})
	equal(t, "actions", actions(o, &o.Uncaptured, f), []order.Action{order.ActionCancel, order.ActionEditOrder,
		order.ActionEditCustomer, order.ActionExtendOrderExpiry})
	_, err := o.Require(o.Uncaptured.ID, order.ActionCapture, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if !strings.Contains(err.Error(), "acknowledged") {
		t.Errorf("refusal does not say why: %v", err)
	}

	at := f.Clock.Advance(time.Minute)
	if err := o.Acknowledge(f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "events", eventTypes(o), []order.EventType{order.EventCreate, order.EventAcknowledge, order.EventReadyForCapture})
	equal(t, "updatedAt", o.UpdatedAt, at)
	equal(t, "statuses", o.Statuses(at), []order.Status{order.StatusUncaptured, order.StatusReadyForCapture})
	before := snapshot(t, o)
	wantFault(t, o.Acknowledge(f.Env()), fault.NotAvailable, "action_not_available")
	equal(t, "order after refused acknowledge", snapshot(t, o), before)
}

func TestCreateRequireAckForOtherMethodsStillCaptures(t *testing.T) {
	f := ordertest.New()
	auth := ordertest.Authorization(0)
	auth.RequireAck = true
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), auth)
	// Spec rule 1: other payment methods may be captured before acknowledgement.
	equal(t, "statuses", o.Statuses(f.Clock.Now()), []order.Status{order.StatusUncaptured, order.StatusUnacknowledged, order.StatusReadyForCapture})
	if _, err := o.Require(o.Uncaptured.ID, order.ActionCapture, f.Env()); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(r *order.CreateRequest, a *order.Authorization)
		code   string
		fields []string
	}{
		{"above approved", func(r *order.CreateRequest, a *order.Authorization) { a.ApprovedAmount = 28779 },
			"authorization_exceeded", []string{"totalOrderAmount"}},
		{"other country and currency", func(r *order.CreateRequest, a *order.Authorization) { a.Country, a.Currency = "NO", "NOK" },
			"validation_failed", []string{"country", "currency"}},
		{"other buyer", func(r *order.CreateRequest, a *order.Authorization) {
			r.Customer = &order.CustomerInput{CompanyID: "999"}
		}, "validation_failed", []string{"customer.companyId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ordertest.New()
			r := ordertest.CreateRequest(ordertest.DefaultLines()...)
			a := ordertest.Authorization(0)
			tt.mod(r, &a)
			lines, mode, err := order.ValidateCreate(r, false, f.IDs)
			if err != nil {
				t.Fatal(err)
			}
			o, err := order.Create("m", r, lines, mode, a, f.Env())
			if o != nil {
				t.Fatalf("order created: %+v", o)
			}
			wantFault(t, err, fault.Invalid, tt.code, tt.fields...)
		})
	}
	// At exactly the approved amount it is accepted.
	f := ordertest.New()
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), ordertest.Authorization(28780))
	equal(t, "approved", o.ApprovedAmount, int64(28780))
}

func TestValidateCreateNamesEveryField(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	r := &order.CreateRequest{
		Country: "Sweden", Currency: "sek",
		AutoCapture: &order.AutoCapture{Enabled: true, DelayMinutes: 10081},
		Customer: &order.CustomerInput{
			BillingAddress: &order.Address{PostalCode: long(11), City: long(51)},
			Email:          "not-an-email", FirstName: long(201),
		},
		ShippingAddress:     &order.Address{},
		Reference:           long(51),
		SettlementReference: long(50), // at the limit: fine
		VatMode:             "gross",
		OrderLines: []order.LineInput{
			ordertest.Line("ok", 1, 100, 2500),
			{Quantity: ptr(0), UnitPrice: ptr(1)},
			{Description: ordertest.Ptr("d"), Quantity: ptr(100_000_000), UnitPrice: ptr(1), Vat: ptr(10001)},
			{Description: ordertest.Ptr(long(201)), Quantity: ptr(1), Type: "bogus", Reference: long(201)},
			{Description: ordertest.Ptr("d"), Quantity: ptr(1), UnitPrice: ptr(1_000_000_001),
				TotalAmount: ptr(-1_000_000_001), TotalVatAmount: ptr(1_000_000_001), UnitDiscountAmount: ptr(-1_000_000_001)},
			{ID: ordertest.Ptr("line-9"), Description: ordertest.Ptr(""), Quantity: ptr(1), UnitPrice: ptr(1)},
		},
	}
	_, _, err := order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed",
		"country", "currency", "locale", "shippingAddress", "autoCapture.delayMinutes",
		"customer.billingAddress.city", "customer.billingAddress.postalCode",
		"customer.email", "customer.firstName",
		"reference", "vatMode",
		"orderLines[1].description", "orderLines[1].quantity",
		"orderLines[2].quantity", "orderLines[2].vat",
		"orderLines[3].description", "orderLines[3].reference", "orderLines[3].type", "orderLines[3].unitPrice",
		"orderLines[4].totalAmount", "orderLines[4].totalVatAmount", "orderLines[4].unitDiscountAmount", "orderLines[4].unitPrice",
		"orderLines[5].description",
	)
}

// TestMetadataKeysAreCheckedText: a metadata key is kept like any text, so
// NUL and invalid UTF-8 are refused in keys as in values.
func TestMetadataKeysAreCheckedText(t *testing.T) {
	for _, key := range []string{"k\x00", "\xff", ""} {
		var f fault.Fields
		order.CheckMetadata(&f, map[string]string{key: "v"})
		wantFault(t, f.Err(), fault.Invalid, "validation_failed", "metadata")
	}
	var f fault.Fields
	order.CheckMetadata(&f, map[string]string{"k": "v\x00"})
	wantFault(t, f.Err(), fault.Invalid, "validation_failed", "metadata.k")
	f = fault.Fields{}
	if order.CheckMetadata(&f, map[string]string{"ordre-nummer": "Ærø 7"}); f.Err() != nil {
		t.Fatalf("plain metadata refused: %v", f.Err())
	}
}

func TestValidateCreateCustomerTokenShape(t *testing.T) {
	r := &order.CreateRequest{Country: "SE", Currency: "SEK", Customer: &order.CustomerInput{},
		OrderLines: ordertest.DefaultLines()}
	_, _, err := order.ValidateCreate(r, true, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "customer")
	r.Customer = nil
	r.ShippingAddress = &order.Address{City: "Lund"}
	if _, _, err := order.ValidateCreate(r, true, &ordertest.IDs{}); err != nil {
		t.Fatalf("customer-token order without locale refused: %v", err)
	}
	r.Locale = "sv_SE"
	_, _, err = order.ValidateCreate(r, true, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "locale")
}

func TestLineArithmetic(t *testing.T) {
	type want struct {
		total, vat, unit, gross, net int64
	}
	tests := []struct {
		name   string
		mode   string
		line   order.LineInput
		want   want
		fields []string
	}{
		{"inclVat computed", "", ordertest.Line("a", 2, 12500, 2500), want{25000, 5000, 12500, 25000, 20000}, nil},
		{"exclVat computed", "exclVat", ordertest.Line("a", 2, 10000, 2500), want{20000, 5000, 10000, 25000, 20000}, nil},
		{"exclVat rounds half away", "exclVat", ordertest.Line("a", 1, 2, 2500), want{2, 1, 2, 3, 2}, nil},
		{"inclVat odd rounding", "inclVat", ordertest.Line("a", 1, 999, 1200), want{999, 107, 999, 999, 892}, nil},
		{"discount", "", func() order.LineInput {
			l := ordertest.Line("a", 2, 1000, 2500)
			l.UnitDiscountAmount = ptr(100)
			return l
		}(), want{1800, 360, 1000, 1800, 1440}, nil},
		{"vat +1 tolerated and kept", "", ordertest.LineWithTotals("a", 2, 12500, 2500, 25000, 5001), want{25000, 5001, 12500, 25000, 19999}, nil},
		{"vat −1 tolerated and kept", "", ordertest.LineWithTotals("a", 2, 12500, 2500, 25000, 4999), want{25000, 4999, 12500, 25000, 20001}, nil},
		{"vat +2 refused", "", ordertest.LineWithTotals("a", 2, 12500, 2500, 25000, 5002), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"vat −2 refused", "", ordertest.LineWithTotals("a", 2, 12500, 2500, 25000, 4998), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"vat without rate refused", "", ordertest.LineWithTotals("a", 1, 100, 0, 100, 1), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"vat of the wrong sign", "", ordertest.LineWithTotals("a", 1, -1, 2500, -1, 1), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"vat on a zero line (exclVat)", "exclVat", ordertest.LineWithTotals("a", 1, 0, 2500, 0, 1), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"vat on a zero line (inclVat)", "", ordertest.LineWithTotals("a", 1, 0, 2500, 0, -1), want{}, []string{"orderLines[0].totalVatAmount"}},
		{"negative line", "", ordertest.Line("a", 1, -12500, 2500), want{-12500, -2500, -12500, -12500, -10000}, nil},
		{"total mismatch", "", ordertest.LineWithTotals("a", 2, 12500, 2500, 25001, 5000), want{}, []string{"orderLines[0].totalAmount"}},
		{"total overflow", "", ordertest.Line("a", 99_999_999, 1_000_000_000, 2500), want{}, []string{"orderLines[0].totalAmount"}},
		{"unit price derived", "", order.LineInput{Description: ordertest.Ptr("a"), Quantity: ptr(3), TotalAmount: ptr(3750), Vat: ptr(2500)},
			want{3750, 750, 1250, 3750, 3000}, nil},
		{"unit price not whole", "", order.LineInput{Description: ordertest.Ptr("a"), Quantity: ptr(3), TotalAmount: ptr(3751), Vat: ptr(2500)},
			want{}, []string{"orderLines[0].unitPrice"}},
		{"zero rate", "", ordertest.Line("a", 4, 250, 0), want{1000, 0, 250, 1000, 1000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ordertest.CreateRequest(tt.line)
			r.VatMode = tt.mode
			if tt.want.gross < 0 { // a negative line alone would make the order negative
				r.OrderLines = append(r.OrderLines, ordertest.Line("b", 1, 20000, 2500))
			}
			lines, mode, err := order.ValidateCreate(r, false, &ordertest.IDs{})
			if tt.fields != nil {
				wantFault(t, err, fault.Invalid, "validation_failed", tt.fields...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := lines[0]
			got := want{l.TotalAmount, l.TotalVatAmount, l.UnitPrice, l.Gross(mode), l.Net(mode)}
			equal(t, "line", got, tt.want)
		})
	}
}

func TestOrderTotals(t *testing.T) {
	lines := ordertest.DefaultLines() // gross 28780, net 24000, vat 4780
	tests := []struct {
		name             string
		gross, net, vat  *int64
		fields           []string
		wantGross, wantN int64
	}{
		{"omitted: computed", nil, nil, nil, nil, 28780, 24000},
		{"all correct", ptr(28780), ptr(24000), ptr(4780), nil, 28780, 24000},
		{"gross off by one", ptr(28781), ptr(24000), ptr(4780), []string{"totalOrderAmount"}, 0, 0},
		{"net wrong", ptr(28780), ptr(24001), ptr(4780), []string{"totalOrderAmountExclVat"}, 0, 0},
		{"vat wrong", nil, nil, ptr(4781), []string{"totalOrderVatAmount"}, 0, 0},
		{"all wrong", ptr(1), ptr(2), ptr(3), []string{"totalOrderAmount", "totalOrderAmountExclVat", "totalOrderVatAmount"}, 0, 0},
		{"out of bounds", ptr(-1), ptr(1_000_000_001), nil, []string{"totalOrderAmount", "totalOrderAmountExclVat"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ordertest.CreateRequest(lines...)
			r.TotalOrderAmount, r.TotalOrderAmountExclVat, r.TotalOrderVatAmount = tt.gross, tt.net, tt.vat
			ls, mode, err := order.ValidateCreate(r, false, &ordertest.IDs{})
			if tt.fields != nil {
				wantFault(t, err, fault.Invalid, "validation_failed", tt.fields...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := order.SumLines(ls, mode)
			equal(t, "sums", [3]int64{s.Gross, s.Net, s.VAT}, [3]int64{tt.wantGross, tt.wantN, tt.wantGross - tt.wantN})
		})
	}

	// Lines summing below zero with totals omitted name totalOrderAmount.
	r := ordertest.CreateRequest(ordertest.Line("refund", 1, -100, 0))
	_, _, err := order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmount", "totalOrderAmountExclVat")

	// Lines whose VAT sums below zero (a discount at 25 % on goods at 0 %) are
	// refused with totals omitted, as edit refuses them: the spec bounds every
	// order total at 0 or more, and the response would show a negative one.
	r = ordertest.CreateRequest(ordertest.Line("books", 1, 1000, 0), ordertest.Line("discount", 1, -125, 2500))
	_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderVatAmount")
	er := &order.EditRequest{OrderLines: r.OrderLines}
	er.TotalOrderAmount, er.TotalOrderAmountExclVat, er.TotalOrderVatAmount = ptr(875), ptr(900), ptr(0)
	fx := ordertest.New()
	o := fx.Order(t, ordertest.DefaultLines()...)
	wantFault(t, o.Edit(er, fx.Env()), fault.Invalid, "validation_failed", "totalOrderVatAmount")

	// exclVat totals: gross includes VAT.
	r = ordertest.CreateRequest(ordertest.Line("a", 2, 10000, 2500))
	r.VatMode = "exclVat"
	r.TotalOrderAmount, r.TotalOrderAmountExclVat, r.TotalOrderVatAmount = ptr(25000), ptr(20000), ptr(5000)
	if _, _, err := order.ValidateCreate(r, false, &ordertest.IDs{}); err != nil {
		t.Fatalf("exclVat totals refused: %v", err)
	}
}

func TestCreateFromTotalsOnly(t *testing.T) {
	r := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv",
		TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(12500), TotalOrderVatAmount: ptr(2500), TotalOrderAmountExclVat: ptr(10000)}}
	lines, mode, err := order.ValidateCreate(r, false, &ordertest.IDs{})
	if err != nil {
		t.Fatal(err)
	}
	s := order.SumLines(lines, mode)
	equal(t, "sums", [3]int64{s.Gross, s.Net, s.VAT}, [3]int64{12500, 10000, 2500})
	equal(t, "the line's rate", lines[0].Vat, int64(2500))

	// The line obeys the rules of a line sent back (rate and VAT within ±1),
	// in either VAT mode; totals of a mixed basket get the nearest rate.
	for _, tt := range []struct {
		mode            string
		gross, vat, net int64
		rate            int64
		netUnit         string
	}{
		{"", 1000, 200, 800, 2500, "8.0000"},
		{"exclVat", 1000, 200, 800, 2500, "8.0000"},
		{"", 11200, 1200, 10000, 1200, "100.0000"},
		{"", 1, 0, 1, 0, "0.0100"},
		{"", 100, 50, 50, 10000, "0.5000"},
		{"", 1000000, 150000, 850000, 1765, ""}, // 25 % and 12 % lines: no one rate gives 150 000 exactly
		{"", 20002, 1, 20001, 1, "200.0000"},    // a VAT this small rounds to rate 0, which must carry none
		{"", 1000000, 10, 999990, 1, ""},
		{"exclVat", 3, 1, 2, 5000, "0.0200"},
	} {
		r := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv", VatMode: tt.mode,
			TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(tt.gross), TotalOrderVatAmount: ptr(tt.vat)}}
		lines, mode, err := order.ValidateCreate(r, false, &ordertest.IDs{})
		if err != nil {
			t.Fatalf("%+v: %v", tt, err)
		}
		s := order.SumLines(lines, mode)
		l := lines[0]
		if s.Gross != tt.gross || s.VAT != tt.vat || s.Net != tt.net || l.Vat != tt.rate {
			t.Fatalf("%+v: sums %+v, rate %d", tt, s, l.Vat)
		}
		if tt.netUnit == "" {
			continue
		}
		if got := money.UnitPriceNetDecimal(l.UnitPrice, l.Vat, mode); got != tt.netUnit {
			t.Fatalf("%+v: net unit price %s", tt, got)
		}
		back := order.LineInput{Description: &l.Description, Quantity: &l.Quantity, UnitPrice: &l.UnitPrice,
			Vat: &l.Vat, TotalAmount: &l.TotalAmount, TotalVatAmount: &l.TotalVatAmount}
		r = &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv", VatMode: tt.mode, OrderLines: []order.LineInput{back}}
		if _, _, err := order.ValidateCreate(r, false, &ordertest.IDs{}); err != nil {
			t.Fatalf("%+v: the line sent back is refused: %v", tt, err)
		}
	}
	for _, over := range [][2]int64{{1000, 600}, {1001, 501}, {3, 2}} { // VAT above the amount without it
		r.TotalOrderAmount, r.TotalOrderVatAmount, r.TotalOrderAmountExclVat = ptr(over[0]), ptr(over[1]), nil
		_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
		wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderVatAmount")
	}
	r.TotalOrderAmount, r.TotalOrderVatAmount, r.TotalOrderAmountExclVat = ptr(12500), ptr(2500), ptr(10000)

	r.TotalOrderAmountExclVat = ptr(10001)
	_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmountExclVat")
	r.TotalOrderAmountExclVat, r.TotalOrderVatAmount = nil, ptr(12501)
	_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderVatAmount")
	r.TotalOrderAmount = nil
	_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "orderLines")

	// Of the three totals, two say the third: the VAT left out is the
	// amount less the amount without VAT, not 0.
	r.TotalOrderAmount, r.TotalOrderAmountExclVat, r.TotalOrderVatAmount = ptr(12500), ptr(10000), nil
	if lines, mode, err = order.ValidateCreate(r, false, &ordertest.IDs{}); err != nil {
		t.Fatalf("VAT left out of the totals: %v", err)
	}
	s = order.SumLines(lines, mode)
	equal(t, "sums, VAT left out", [3]int64{s.Gross, s.Net, s.VAT}, [3]int64{12500, 10000, 2500})
	r.TotalOrderAmountExclVat = ptr(12501)
	_, _, err = order.ValidateCreate(r, false, &ordertest.IDs{})
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmountExclVat")
}

func TestResponseMoneyAndLines(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	r := o.Response(f.Clock.Now(), f.Policy, nil)
	equal(t, "orderAmount", r.OrderAmount, money.Record{Amount: "287.80", Currency: "SEK", Formatted: "287.80",
		FormattedWithCurrency: "SEK 287.80", MinorUnits: 28780})
	equal(t, "uncaptured net", r.Uncaptured.TotalOrderAmountExclVat.MinorUnits, int64(24000))
	equal(t, "uncaptured vat", r.Uncaptured.TotalOrderVatAmount.MinorUnits, int64(4780))
	equal(t, "unitPriceNetDecimal", []string{r.Uncaptured.OrderLines[0].UnitPriceNetDecimal,
		r.Uncaptured.OrderLines[1].UnitPriceNetDecimal, r.Uncaptured.OrderLines[2].UnitPriceNetDecimal},
		[]string{"80.0000", "50.0000", "10.0000"})
	equal(t, "captured", len(r.Captured), 0)
	equal(t, "authorizeStatus", r.AuthorizeStatus, "authorized")
}

// TestCreateLaysCustomerDataOverTheBuyer: the merchant's customer data
// (OrderCustomerData) replaces the authorized buyer's field by field; a
// field left empty, and a billingAddress with no field, leave the buyer's
// (docs/decisions.md), and the authorized company keeps the number it was
// authorized by.
func TestCreateLaysCustomerDataOverTheBuyer(t *testing.T) {
	buyerAddr := &order.Address{CompanyName: "Buyer AB", StreetAddress: "Storgatan 1", PostalCode: "11122", City: "Stockholm", Country: "SE"}
	merchantAddr := func() *order.Address {
		return &order.Address{CompanyName: "Buyer AB", StreetAddress: "Lilla gatan 2", PostalCode: "41101", City: "Göteborg",
			Country: "SE", Contact: &order.Contact{Email: "ap@buyer.example", FirstName: "Ada"}}
	}
	ship := &order.Address{StreetAddress: "Lager 3", PostalCode: "55111", City: "Jönköping", Country: "SE"}
	buyer := func() order.Customer {
		a := *buyerAddr
		return order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB", Country: "SE", Email: "ap@buyer.example",
			BillingAddress: &a}
	}
	for _, tc := range []struct {
		name string
		in   *order.CustomerInput
		want func(c *order.Customer)
	}{
		{"none", nil, func(*order.Customer) {}},
		{"empty", &order.CustomerInput{}, func(*order.Customer) {}},
		{"every field", &order.CustomerInput{BillingAddress: merchantAddr(), ShippingAddress: ship, Email: "inv@buyer.example",
			FirstName: "Ada", LastName: "Lund", Phone: "+46701234567", Reference1: "PO-1", Reference2: "cost centre 7"},
			func(c *order.Customer) {
				s := *ship
				c.BillingAddress, c.ShippingAddress = merchantAddr(), &s
				c.Email, c.FirstName, c.LastName, c.Phone, c.Reference1, c.Reference2 = "inv@buyer.example", "Ada", "Lund", "+46701234567", "PO-1", "cost centre 7"
			}},
		{"billing address with no field", &order.CustomerInput{BillingAddress: &order.Address{Contact: &order.Contact{}}, Phone: "+46701234567"},
			func(c *order.Customer) { c.Phone = "+46701234567" }},
		{"the authorized company in another form", &order.CustomerInput{CompanyID: "556000-0001"}, func(*order.Customer) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ordertest.New()
			auth := ordertest.Authorization(0)
			auth.Buyer = buyer()
			r := ordertest.CreateRequest(ordertest.DefaultLines()...)
			r.Customer = tc.in
			o := f.Create(t, r, auth)
			want := buyer()
			tc.want(&want)
			pm := o.PaymentMethod
			want.PaymentMethod = &pm
			equal(t, "customer", o.Customer, want)
			if tc.in != nil && tc.in.BillingAddress != nil && !tc.in.BillingAddress.Empty() {
				// The order holds its own copy: the request's address changed
				// afterwards (a caller reusing it) changes no stored order.
				tc.in.BillingAddress.City = "Malmö"
				tc.in.BillingAddress.Contact.FirstName = "Eve"
				equal(t, "billing city", o.Customer.BillingAddress.City, "Göteborg")
				equal(t, "billing contact", o.Customer.BillingAddress.Contact.FirstName, "Ada")
			}
		})
	}
}
