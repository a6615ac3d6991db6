package storagetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
)

// Start is when the suite's first order is created: 2025-03-10 09:30 UTC.
// A function, not a variable: a test that changed it would move the times
// of every other test in its binary.
func Start() time.Time { return time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC) }

// Now is the time every store under test must give its transactions: two
// days after Start, so that no suite order has reached its expiry date and
// statuses do not depend on when the suite runs.
func Now() time.Time { return Start().Add(48 * time.Hour) }

// Clock returns Now; hand it to the store under test as its clock.
func Clock() time.Time { return Now() }

// ids mints "<kind>-<n>", so that every run builds the same orders.
type ids struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *ids) NewID(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[kind]++
	return fmt.Sprintf("%s-%04d", kind, s.n[kind])
}

// seq numbers documents of the orders the suite builds outside any store.
type seq struct {
	mu sync.Mutex
	n  map[string]int64
}

func (s *seq) Next(series string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int64{}
	}
	s.n[series]++
	return s.n[series], nil
}

func ptr[T any](v T) *T { return &v }

func line(desc string, quantity, unitPrice, vat int64) order.LineInput {
	return order.LineInput{Description: ptr(desc), Quantity: ptr(quantity), UnitPrice: ptr(unitPrice), Vat: ptr(vat), Type: "physical"}
}

// builder creates orders through the real domain rules. Safe for concurrent use.
type builder struct {
	ids *ids
	seq *seq
}

func newBuilder() *builder { return &builder{ids: &ids{}, seq: &seq{}} }

func (b *builder) env(at time.Time) order.Env {
	return order.Env{Now: at, IDs: b.ids, Docs: b.seq, Policy: order.DefaultPolicy()}
}

// Shapes of the orders make builds, chosen by i % len(shapes).
var shapes = []string{"uncaptured", "cancelled", "partiallyCaptured", "fullyCaptured", "fullyRefunded",
	"partiallyRefunded", "expired", "onHold"}

// Payment methods by i % 5, covering every list category.
var methods = []order.PaymentMethod{
	{Provider: order.ProviderService, Type: order.PayInvoice},        // serviceInvoice
	{Provider: order.ProviderService, Type: order.PayCard},           // card
	{Provider: order.ProviderExternal, Type: order.PayInvoice},       // invoice
	{Provider: order.ProviderService, Type: order.PayAdvanceInvoice}, // advanceInvoice
	{Provider: order.ProviderService, Type: order.PayBankTransfer},   // directBank
}

// make builds order i of merchant created at: store "store-<i%3>",
// merchant reference "ref-<i%5>", payment method methods[i%5] and state
// shapes[i%8]. Shapes and methods cycle at different rates, so combinations
// vary.
func (b *builder) make(t testing.TB, merchant string, i int, at time.Time) *order.Order {
	t.Helper()
	return b.makeLines(t, merchant, i, at, 0)
}

// makeLines is make with extra order lines after the first two, to build
// larger orders.
func (b *builder) makeLines(t testing.TB, merchant string, i int, at time.Time, extra int) *order.Order {
	t.Helper()
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{line("tiles", 2, 10000, 2500), line("grout", 1, 5000, 2500)},
		StoreID:    fmt.Sprint("store-", i%3), Reference: fmt.Sprint("ref-", i%5)}
	for n := range extra {
		req.OrderLines = append(req.OrderLines, line(fmt.Sprint("spacer ", n), 1, 100, 2500))
	}
	auth := order.Authorization{TokenID: "tok", Country: "SE", Currency: "SEK",
		Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB", Country: "SE"},
		PaymentMethod: methods[i%len(methods)]}
	shape := shapes[i%len(shapes)]
	if shape == "onHold" {
		auth.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	}
	env := b.env(at)
	lines, mode, err := order.ValidateCreate(req, false, b.ids)
	if err != nil {
		t.Fatal(err)
	}
	o, err := order.Create(merchant, req, lines, mode, auth, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.Unacknowledged && shape != "uncaptured" {
		if err := o.Acknowledge(env); err != nil {
			t.Fatal(err)
		}
	}
	switch shape {
	case "cancelled":
		err = o.Cancel(env)
	case "partiallyCaptured":
		_, err = capture.Partial(o, &capture.PartialRequest{
			OrderLines:         []order.LineInput{{ID: ptr(o.Uncaptured.Lines[0].ID)}},
			TotalCaptureAmount: ptr(int64(20000))}, env)
	case "fullyCaptured":
		_, err = capture.Full(o, nil, env)
	case "fullyRefunded":
		if _, err = capture.Full(o, nil, env); err == nil {
			_, err = refund.Full(o, o.Captured[0].ID, nil, env)
		}
	case "partiallyRefunded":
		if _, err = capture.Full(o, nil, env); err == nil {
			_, err = refund.Partial(o, o.Captured[0].ID, &refund.PartialRequest{
				OrderLines: []order.LineInput{line("goodwill", 1, 1000, 2500)}, TotalRefundAmount: ptr(int64(1000))}, env)
		}
	case "expired":
		if !o.MarkExpired(b.env(o.ExpiresAt)) {
			t.Fatalf("order %d did not expire", i)
		}
	}
	if err != nil {
		t.Fatalf("order %d (%s): %v", i, shape, err)
	}
	return o
}
