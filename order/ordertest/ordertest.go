// Package ordertest holds deterministic helpers for tests of the order, capture
// and refund rules and of everything built on them: a counting IDSource, a
// per-series Sequencer, a settable Clock, and builders for valid requests and
// orders. It does no I/O and is imported by tests only.
package ordertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// IDs is an order.IDSource that mints "<kind>-<n>" with a counter per kind,
// so that every output of a test is reproducible. It is safe for concurrent use.
type IDs struct {
	mu        sync.Mutex
	n, atMark map[string]int
}

// Mark remembers how many ids of each kind were minted, and Rewind sets the
// counters back to it: the ids a rolled-back run drew are drawn again by the
// run that follows it, so that a function a store runs twice can be compared
// with one run.
func (s *IDs) Mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.atMark = maps.Clone(s.n)
}

// Rewind sets the counters back to the last Mark.
func (s *IDs) Rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = maps.Clone(s.atMark)
}

// NewID implements order.IDSource.
func (s *IDs) NewID(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[kind]++
	return fmt.Sprintf("%s-%d", kind, s.n[kind])
}

// Count reports how many ids of kind were minted.
func (s *IDs) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[kind]
}

// Seq is an order.Sequencer with one gapless counter per series, starting at 1.
// When Fail is set, Next returns it instead of a number.
type Seq struct {
	mu   sync.Mutex
	n    map[string]int64
	Fail error
}

// Next implements order.Sequencer.
func (s *Seq) Next(series string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		return 0, s.Fail
	}
	if s.n == nil {
		s.n = map[string]int64{}
	}
	s.n[series]++
	return s.n[series], nil
}

// Last reports the last number handed out in series (0 when none).
func (s *Seq) Last(series string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[series]
}

// Start is the time a Clock starts at unless told otherwise: 2025-03-10 09:30 UTC.
// A function, not a variable: a test that changed it would move the times
// of every other test in its binary.
func Start() time.Time { return time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC) }

// Clock is a settable clock.
type Clock struct {
	T time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return c.T }

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.T = c.T.Add(d)
	return c.T
}

// Fixture bundles the deterministic sources an order.Env is made of.
type Fixture struct {
	IDs    *IDs
	Seq    *Seq
	Clock  *Clock
	Policy order.Policy
}

// New returns a fixture at Start with the default policy.
func New() *Fixture {
	return &Fixture{IDs: &IDs{}, Seq: &Seq{}, Clock: &Clock{T: Start()}, Policy: order.DefaultPolicy()}
}

// Env returns an order.Env at the clock's current time.
func (f *Fixture) Env() order.Env {
	return order.Env{Now: f.Clock.Now(), IDs: f.IDs, Docs: f.Seq, Policy: f.Policy}
}

// Ptr returns a pointer to v, for the optional fields of requests.
func Ptr[T any](v T) *T { return &v }

// Line is an order line of quantity × unitPrice at vat (2500 = 25 %), with
// description desc, leaving totals to be computed.
func Line(desc string, quantity, unitPrice, vat int64) order.LineInput {
	return order.LineInput{Description: Ptr(desc), Quantity: Ptr(quantity), UnitPrice: Ptr(unitPrice),
		Vat: Ptr(vat), Type: "physical"}
}

// LineWithTotals is Line with totalAmount and totalVatAmount sent as given.
func LineWithTotals(desc string, quantity, unitPrice, vat, total, totalVat int64) order.LineInput {
	l := Line(desc, quantity, unitPrice, vat)
	l.TotalAmount, l.TotalVatAmount = Ptr(total), Ptr(totalVat)
	return l
}

// ByID refers to an uncaptured line by id only (the OrderLineWithId shape).
func ByID(id string) order.LineInput { return order.LineInput{ID: Ptr(id)} }

// ByIDFull refers to uncaptured line l by id and repeats its fields.
func ByIDFull(l order.Line) order.LineInput {
	in := l.Input()
	in.ID = Ptr(l.ID)
	return in
}

// CreateRequest is a valid SE/SEK request with lines; totals are left to be computed.
func CreateRequest(lines ...order.LineInput) *order.CreateRequest {
	return &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: lines,
		Reference: "merchant-ref-1"}
}

// DefaultLines are three lines at 25 %, 12 % and 6 % VAT: 2 × 100.00, 1 × 56.00
// and 3 × 10.60, 287.80 SEK in all.
func DefaultLines() []order.LineInput {
	return []order.LineInput{
		Line("Widget", 2, 10000, 2500),
		Line("Food", 1, 5600, 1200),
		Line("Book", 3, 1060, 600),
	}
}

// Authorization is an approval for an SE/SEK invoice buyer with approved as
// its ceiling (0: the order total is the ceiling).
func Authorization(approved int64) order.Authorization {
	return order.Authorization{TokenID: "tok-1", Country: "SE", Currency: "SEK",
		Buyer: order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB", Country: "SE",
			Email: "ap@buyer.example"},
		PaymentMethod:  order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		ApprovedAmount: approved}
}

// Create validates r and creates an order from it with auth, failing tb on error.
func (f *Fixture) Create(tb TB, r *order.CreateRequest, auth order.Authorization) *order.Order {
	tb.Helper()
	lines, mode, err := order.ValidateCreate(r, false, f.IDs)
	if err != nil {
		tb.Fatalf("ordertest: ValidateCreate: %v", err)
	}
	o, err := order.Create("merchant-1", r, lines, mode, auth, f.Env())
	if err != nil {
		tb.Fatalf("ordertest: Create: %v", err)
	}
	return o
}

// Order creates a valid invoice order of lines (DefaultLines when none) whose
// authorization approves twice its total.
func (f *Fixture) Order(tb TB, lines ...order.LineInput) *order.Order {
	tb.Helper()
	if len(lines) == 0 {
		lines = DefaultLines()
	}
	r := CreateRequest(lines...)
	probe, mode, err := order.ValidateCreate(CreateRequest(lines...), false, &IDs{})
	if err != nil {
		tb.Fatalf("ordertest: ValidateCreate: %v", err)
	}
	return f.Create(tb, r, Authorization(2*order.SumLines(probe, mode).Gross))
}

// TB is the part of testing.TB the builders use, so that rapid's *T works too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Money is minor units of SEK.
func Money(minor int64) money.Money { return money.New(minor, "SEK") }

// Snapshot is the stored form of o, to prove that a refused operation left it untouched.
func Snapshot(tb TB, o *order.Order) string {
	tb.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatalf("ordertest: snapshot: %v", err)
	}
	return string(b)
}

// WantFault checks that err is a *fault.Error of kind and code and, when
// fields are given, that it names exactly those fields in that order.
func WantFault(tb TB, err error, kind fault.Kind, code string, fields ...string) {
	tb.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) {
		tb.Fatalf("error = %v, want a fault of kind %s", err, kind)
	}
	if fe.Kind != kind || fe.Code != code {
		tb.Fatalf("error kind/code = %s/%s, want %s/%s (%v)", fe.Kind, fe.Code, kind, code, err)
	}
	if fields == nil {
		return
	}
	if got := FieldsOf(err); !slices.Equal(got, fields) {
		tb.Fatalf("error fields = %q, want %q\n(%v)", got, fields, err)
	}
}

// FieldsOf lists, in order, the fields a fault names (none for nil or an
// error that is no fault).
func FieldsOf(err error) []string {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return nil
	}
	var out []string
	for _, f := range fe.Fields {
		out = append(out, f.Field)
	}
	return out
}

// WantOwnChecks compares a request's Validate (own) with the operation that
// takes it (whole): each must name its fields in that order, and where they
// name the same ones they must say the same, the operation running the very
// checks Validate runs before it compares the request with its resource.
func WantOwnChecks(tb TB, own, whole error, ownFields, wholeFields []string) {
	tb.Helper()
	if got := FieldsOf(own); !slices.Equal(got, ownFields) {
		tb.Fatalf("Validate names %q, want %q\n(%v)", got, ownFields, own)
	}
	if got := FieldsOf(whole); !slices.Equal(got, wholeFields) {
		tb.Fatalf("the operation names %q, want %q\n(%v)", got, wholeFields, whole)
	}
	if slices.Equal(ownFields, wholeFields) && fmt.Sprint(own) != fmt.Sprint(whole) {
		tb.Fatalf("Validate and the operation differ:\n%v\n%v", own, whole)
	}
}

// DrawCreate draws a valid create request for property tests: a VAT mode,
// 1 to 6 lines of 1 to maxQty units at 0 to maxUnit and 0, 6, 12 or 25 %
// VAT, and sometimes a discount line. It returns the request with its
// validated lines and mode.
func DrawCreate(t *rapid.T, ids order.IDSource, maxQty, maxUnit int64) (*order.CreateRequest, []order.Line, money.VATMode) {
	mode := rapid.SampledFrom([]string{"", "inclVat", "exclVat"}).Draw(t, "vatMode")
	n := rapid.IntRange(1, 6).Draw(t, "lines")
	var ins []order.LineInput
	var positive int64
	for i := 0; i < n; i++ {
		q := rapid.Int64Range(1, maxQty).Draw(t, "qty")
		u := rapid.Int64Range(0, maxUnit).Draw(t, "unit")
		positive += q * u
		ins = append(ins, Line(fmt.Sprintf("item %d", i), q, u, rapid.SampledFrom([]int64{0, 600, 1200, 2500}).Draw(t, "vat")))
	}
	if positive >= 4 && rapid.Bool().Draw(t, "discount") {
		d := Line("discount", 1, -rapid.Int64Range(1, positive/2).Draw(t, "discountAmount"), 2500)
		d.Type = "discount"
		ins = append(ins, d)
	}
	r := CreateRequest(ins...)
	r.VatMode = mode
	lines, m, err := order.ValidateCreate(r, false, ids)
	if err != nil && len(ins) > n {
		// The discount's VAT outweighed the lines' (order totals are 0 or
		// more): the same discount at 0 % keeps the lines' VAT whole.
		ins[n].Vat = Ptr(int64(0))
		lines, m, err = order.ValidateCreate(r, false, ids)
	}
	if err != nil {
		t.Fatalf("generated create refused: %v", err)
	}
	return r, lines, m
}
