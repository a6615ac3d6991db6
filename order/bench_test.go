package order_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// benchOrder has 20 lines, 5 captures (4 lines each) and 2 refunds.
func benchOrder(b *testing.B) (*ordertest.Fixture, *order.Order) {
	f := ordertest.New()
	var lines []order.LineInput
	for i := 0; i < 20; i++ {
		lines = append(lines, ordertest.Line(fmt.Sprintf("Article %d", i), int64(1+i%3), int64(2000+101*i), []int64{2500, 1200, 600}[i%3]))
	}
	o := f.Order(b, lines...)
	for c := 0; c < 5; c++ {
		var req capture.PartialRequest
		var total int64
		for _, l := range o.Uncaptured.Lines[:4] {
			req.OrderLines = append(req.OrderLines, ordertest.ByID(l.ID))
			total += l.TotalAmount
		}
		req.TotalCaptureAmount = &total
		if _, err := capture.Partial(o, &req, f.Env()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := refund.Full(o, o.Captured[0].ID, nil, f.Env()); err != nil {
		b.Fatal(err)
	}
	if _, err := refund.Partial(o, o.Captured[1].ID, &refund.PartialRequest{
		OrderLines:        []order.LineInput{ordertest.Line("Return", 1, 2000, 2500)},
		TotalRefundAmount: ordertest.Ptr[int64](2000)}, f.Env()); err != nil {
		b.Fatal(err)
	}
	if len(o.Captured) != 5 || len(o.Refunded) != 2 {
		b.Fatalf("%d captures, %d refunds", len(o.Captured), len(o.Refunded))
	}
	return f, o
}

// BenchmarkResponseJSON encodes a rendered LedgerOrderResponse with encoding/json.
func BenchmarkResponseJSON(b *testing.B) {
	f, o := benchOrder(b)
	r := o.Response(f.Clock.Now(), f.Policy, nil)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		buf, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		n = len(buf)
	}
	b.ReportMetric(float64(n), "bytes/response")
}

// BenchmarkResponseBuildJSON renders the response (statuses, actions, sums) and encodes it.
func BenchmarkResponseBuildJSON(b *testing.B) {
	f, o := benchOrder(b)
	now := f.Clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(o.Response(now, f.Policy, nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResponseLineByLine renders an order of n lines captured one line
// at a time, each capture then refunded: n captures and n refunds, the
// largest such order MaxStoredLines allows at n = 1000.
func BenchmarkResponseLineByLine(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			f := ordertest.New()
			lines := make([]order.LineInput, n)
			for i := range lines {
				lines[i] = ordertest.Line(fmt.Sprintf("Article %d", i), 1, int64(1000+i), 2500)
			}
			o := f.Order(b, lines...)
			for len(o.Uncaptured.Lines) > 0 {
				l := o.Uncaptured.Lines[0]
				if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(l.ID)},
					TotalCaptureAmount: ordertest.Ptr(l.TotalAmount)}, f.Env()); err != nil {
					b.Fatal(err)
				}
			}
			for i := range o.Captured {
				if _, err := refund.Full(o, o.Captured[i].ID, nil, f.Env()); err != nil {
					b.Fatal(err)
				}
			}
			now := f.Clock.Now()
			b.ReportAllocs()
			for b.Loop() {
				o.Response(now, f.Policy, nil)
			}
		})
	}
}
