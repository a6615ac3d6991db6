package order_test

import (
	"strings"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// EditRequest.Validate is the part of Edit's checks that needs no order (a
// server runs it alone to name every field of a body with a wrong-typed
// one): Edit finds what it finds, said the same way, and what needs the
// order (a line's arithmetic in its VAT mode, the totals against the lines'
// sums) is added in line order.
func TestEditRequestValidateIsEditsOwnPart(t *testing.T) {
	long := strings.Repeat("d", order.MaxTextLen+1)
	bad := order.LineInput{Description: ordertest.Ptr(""), Quantity: ptr(0), UnitPrice: ptr(1)}
	all := []string{"orderLines", "totalOrderAmount", "totalOrderAmountExclVat", "totalOrderVatAmount"}
	for _, tt := range []struct {
		name      string
		req       *order.EditRequest
		own, edit []string
	}{
		{"nothing sent", &order.EditRequest{}, all, all},
		{"bad lines and a total out of bounds", withTotals(editTo(bad, ordertest.Line(long, 1, 1, 0)), -1, 0, 0),
			[]string{"orderLines[0].description", "orderLines[0].quantity", "orderLines[1].description", "totalOrderAmount"},
			[]string{"orderLines[0].description", "orderLines[0].quantity", "orderLines[1].description", "totalOrderAmount"}},
		{"a line's arithmetic needs the order", withTotals(editTo(bad, ordertest.LineWithTotals("x", 1, 100, 0, 99, 0), bad), 100, 100, 0),
			[]string{"orderLines[0].description", "orderLines[0].quantity", "orderLines[2].description", "orderLines[2].quantity"},
			[]string{"orderLines[0].description", "orderLines[0].quantity", "orderLines[1].totalAmount", "orderLines[2].description", "orderLines[2].quantity"}},
		{"the sums need the order", withTotals(editTo(ordertest.Line("x", 1, 100, 0)), 100, 99, 0),
			nil, []string{"totalOrderAmountExclVat"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := ordertest.New()
			o := f.Order(t)
			ordertest.WantOwnChecks(t, tt.req.Validate(), o.Edit(tt.req, f.Env()), tt.own, tt.edit)
		})
	}
}
