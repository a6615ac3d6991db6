package capture_test

import (
	"fmt"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

func fiftyLineOrder(b *testing.B) (*ordertest.Fixture, *order.Order) {
	f := ordertest.New()
	var lines []order.LineInput
	for i := 0; i < 50; i++ {
		lines = append(lines, ordertest.Line(fmt.Sprintf("Article %d", i), int64(1+i%4), int64(1000+37*i), []int64{2500, 1200, 600, 0}[i%4]))
	}
	return f, f.Order(b, lines...)
}

// BenchmarkPartialCapture50Lines captures 10 of the 50 lines of an order by id
// (on a fresh copy each time; BenchmarkClone50Lines is that copy's share).
func BenchmarkPartialCapture50Lines(b *testing.B) {
	f, o := fiftyLineOrder(b)
	var req capture.PartialRequest
	var total int64
	for i := 0; i < 50; i += 5 {
		l := o.Uncaptured.Lines[i]
		req.OrderLines = append(req.OrderLines, ordertest.ByID(l.ID))
		total += l.TotalAmount
	}
	req.TotalCaptureAmount = &total
	env := f.Env()
	b.ReportAllocs()
	for b.Loop() {
		c := o.Clone()
		if _, err := capture.Partial(c, &req, env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClone50Lines(b *testing.B) {
	_, o := fiftyLineOrder(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = o.Clone()
	}
}

// BenchmarkFullCapture50Lines captures all 50 lines at once.
func BenchmarkFullCapture50Lines(b *testing.B) {
	f, o := fiftyLineOrder(b)
	env := f.Env()
	b.ReportAllocs()
	for b.Loop() {
		c := o.Clone()
		if _, err := capture.Full(c, nil, env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatuses50Captures computes the statuses of a 50-line order
// captured one line at a time with 10 refunds, none paid: the shape of the
// PostgreSQL scale run, whose every write and list row computes them.
func BenchmarkStatuses50Captures(b *testing.B) {
	f, o := fiftyLineOrder(b)
	env := f.Env()
	for i := 0; i < 50; i++ {
		l := o.Uncaptured.Lines[0]
		req := capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(l.ID)}, TotalCaptureAmount: &l.TotalAmount}
		c, err := capture.Partial(o, &req, env)
		if err != nil {
			b.Fatal(err)
		}
		if i%5 == 0 {
			if _, err := refund.Full(o, c.ID, &refund.FullRequest{}, env); err != nil {
				b.Fatal(err)
			}
		}
	}
	now := f.Clock.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = o.Statuses(now)
	}
}
