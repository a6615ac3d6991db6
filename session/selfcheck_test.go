package session

import (
	"strings"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// A session body's Validate is the part of opening or updating a session
// that needs no session: the operation finds what it finds, said the same
// way. Opening needs nothing else; an update compares the body with the
// session (its country's payment methods, its VAT mode, its totals).
func TestRequestsValidateIsTheOperationsOwnPart(t *testing.T) {
	long := strings.Repeat("r", order.MaxReferenceLen+1)
	bad := order.LineInput{Description: ordertest.Ptr(""), Quantity: ordertest.Ptr[int64](1), UnitPrice: ordertest.Ptr[int64](1)}
	create := func(edit func(r *CreateRequest)) *CreateRequest { r := newReq(); edit(r); return r }
	for _, tt := range []struct {
		name     string
		req      interface{ Validate() error }
		own, all []string
	}{
		{"create: valid", newReq(), nil, nil},
		{"create: fields and lines", create(func(r *CreateRequest) {
			r.Locale, r.PaymentMethods, r.OrderLines[1] = "sweden", []string{"paypal"}, bad
		}), []string{"locale", "paymentMethods[0]", "orderLines[1].description"}, []string{"locale", "paymentMethods[0]", "orderLines[1].description"}},
		{"create: totals", create(func(r *CreateRequest) { r.TotalOrderVatAmount = ordertest.Ptr[int64](1) }),
			[]string{"totalOrderVatAmount"}, []string{"totalOrderVatAmount"}},
		{"update: fields, lines and a total out of bounds", &UpdateRequest{MerchantReference: &long,
			OrderLines: []order.LineInput{ordertest.Line("x", 1, 100, 0), bad}, TotalsInput: order.TotalsInput{TotalOrderAmount: ordertest.Ptr[int64](-1)}},
			// The session compares the totals with the lines only when
			// nothing else is wrong; on its own the bound is known.
			[]string{"merchantReference", "orderLines[1].description", "totalOrderAmount"}, []string{"merchantReference", "orderLines[1].description"}},
		{"update: what needs the session", &UpdateRequest{PaymentMethods: []string{"paypal"},
			OrderLines: []order.LineInput{ordertest.LineWithTotals("x", 1, 100, 0, 99, 0)}},
			nil, []string{"paymentMethods[0]", "orderLines[0].totalAmount"}},
		{"update: totals against the session's", &UpdateRequest{TotalsInput: order.TotalsInput{TotalOrderAmount: ordertest.Ptr[int64](1)}},
			nil, []string{"totalOrderAmount"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch r := tt.req.(type) {
			case *CreateRequest:
				_, err = New("m1", SourceCheckout, r, &ordertest.IDs{}, t0, func(string) string { return "" })
			case *UpdateRequest:
				err = open(t, newReq()).Update(r, &ordertest.IDs{}, t0)
			}
			ordertest.WantOwnChecks(t, tt.req.Validate(), err, tt.own, tt.all)
		})
	}
}

// A server leaves out a finding that may only describe the zero standing in
// for a wrong-typed field; DependsOn names those of a create body.
func TestCreateRequestDependsOn(t *testing.T) {
	r := &CreateRequest{}
	for _, tt := range []struct {
		finding, wrongTyped string
		want                bool
	}{
		{"totalOrderAmount", "orderLines[0].unitDiscountAmount", true},
		{"totalOrderVatAmount", "vatMode", true},
		{"totalOrderAmount", "metadata.a", false},
		{"totalOrderAmount", "totalOrderVatAmount", false},
		{"orderLines[1].totalVatAmount", "vatMode", true},
		{"orderLines[1].description", "vatMode", false},
		{"orderLines[1].totalVatAmount", "orderLines[0].vat", false},
		{"paymentMethods[0]", "country", true},
		{"paymentMethods[0]", "locale", false},
		{"locale", "country", false},
	} {
		if got := r.DependsOn(tt.finding, tt.wrongTyped); got != tt.want {
			t.Errorf("DependsOn(%q, %q) = %v, want %v", tt.finding, tt.wrongTyped, got, tt.want)
		}
	}
}
