package capture_test

import (
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// A capture request's Validate is the part of the capture's checks that
// needs no order: the capture finds what it finds, said the same way, and
// adds what needs the uncaptured lines in line order.
func TestCaptureRequestsValidateIsTheCapturesOwnPart(t *testing.T) {
	bad := order.LineInput{Description: ordertest.Ptr(""), Quantity: p(1), UnitPrice: p(1)}
	type req interface{ Validate() error }
	for _, tt := range []struct {
		name     string
		req      req
		own, all []string
	}{
		{"partial: nothing sent", &capture.PartialRequest{}, []string{"orderLines", "totalCaptureAmount"}, []string{"orderLines", "totalCaptureAmount"}},
		{"partial: bad line and total", partial(-1, bad, ordertest.ByID("")),
			[]string{"totalCaptureAmount", "orderLines[0].description", "orderLines[1].id"},
			[]string{"totalCaptureAmount", "orderLines[0].description", "orderLines[1].id"}},
		{"partial: ids need the order", partial(100, ordertest.ByID("line-9"), bad, ordertest.ByID("line-1"), ordertest.ByID("line-1")),
			[]string{"orderLines[1].description"},
			[]string{"orderLines[0].id", "orderLines[1].description", "orderLines[3].id"}},
		{"full: no lines", &capture.FullRequest{OrderLines: []order.LineInput{}, TotalCaptureAmount: p(-1)},
			[]string{"totalCaptureAmount", "orderLines"}, []string{"totalCaptureAmount", "orderLines"}},
		{"full: bad line and an unknown id", &capture.FullRequest{OrderLines: []order.LineInput{ordertest.ByID("line-9"), bad}},
			[]string{"orderLines[1].description"}, []string{"orderLines[0].id", "orderLines[1].description"}},
		{"full: the sum needs the order", &capture.FullRequest{TotalCaptureAmount: p(1)}, nil, []string{"totalCaptureAmount"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := ordertest.New()
			o := f.Order(t)
			var err error
			switch r := tt.req.(type) {
			case *capture.PartialRequest:
				_, err = capture.Partial(o, r, f.Env())
			case *capture.FullRequest:
				_, err = capture.Full(o, r, f.Env())
			}
			ordertest.WantOwnChecks(t, tt.req.Validate(), err, tt.own, tt.all)
		})
	}
}
