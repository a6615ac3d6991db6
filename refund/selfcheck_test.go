package refund_test

import (
	"strings"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// A refund request's Validate is the part of the refund's checks that needs
// no order: the refund finds what it finds, said the same way, and adds
// what needs the order (a line's arithmetic in its VAT mode, the capture's
// amounts) in line order.
func TestRefundRequestsValidateIsTheRefundsOwnPart(t *testing.T) {
	long := strings.Repeat("n", order.MaxTextLen+1)
	bad := order.LineInput{Quantity: p(1), UnitPrice: p(1)}
	type req interface{ Validate() error }
	for _, tt := range []struct {
		name     string
		req      req
		own, all []string
	}{
		{"partial: nothing sent but a long note", &refund.PartialRequest{Note: &long},
			[]string{"orderLines", "totalRefundAmount", "note"}, []string{"orderLines", "totalRefundAmount", "note"}},
		{"partial: bad lines and total", partial(-1, bad, order.LineInput{Description: ordertest.Ptr("x"), Quantity: p(0), UnitPrice: p(1)}),
			[]string{"totalRefundAmount", "orderLines[0].description", "orderLines[1].quantity"},
			[]string{"totalRefundAmount", "orderLines[0].description", "orderLines[1].quantity"}},
		{"partial: a line's arithmetic needs the order", partial(100, ordertest.LineWithTotals("x", 1, 100, 0, 99, 0), bad),
			[]string{"orderLines[1].description"}, []string{"orderLines[0].totalAmount", "orderLines[1].description"}},
		{"partial: the capture's amounts need the order", partial(30000, ordertest.Line("x", 1, 30000, 2500)),
			nil, []string{"totalRefundAmount"}},
		{"full: long note", &refund.FullRequest{Note: &long}, []string{"note"}, []string{"note"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, o, ledger := captured(t)
			var err error
			switch r := tt.req.(type) {
			case *refund.PartialRequest:
				_, err = refund.Partial(o, ledger, r, f.Env())
			case *refund.FullRequest:
				_, err = refund.Full(o, ledger, r, f.Env())
			}
			ordertest.WantOwnChecks(t, tt.req.Validate(), err, tt.own, tt.all)
		})
	}
}
