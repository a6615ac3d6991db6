package session

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

func newReq() *CreateRequest {
	return &CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", MerchantReference: "PO-1",
		OrderLines: []order.LineInput{ordertest.Line("Tiles", 2, 12500, 2500), ordertest.Line("Delivery", 1, 5000, 2500)}}
}

func open(t testing.TB, r *CreateRequest) *Session {
	s, err := New("m1", SourceCheckout, r, &ordertest.IDs{}, t0, func(id string) string { return "https://k/checkout/" + id })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNew(t *testing.T) {
	s := open(t, newReq())
	if s.State != StateCreated || s.Totals.Gross != 30000 || s.Totals.VAT != 6000 || s.Totals.Net != 24000 ||
		s.CheckoutURL != "https://k/checkout/session-1" || !s.ExpiresAt.Equal(t0.Add(DefaultTTL)) ||
		!slices.Equal(s.PaymentMethods, OfferedMethods("SE")) {
		t.Fatalf("%+v", s)
	}
	bad := newReq()
	bad.Country, bad.Currency, bad.Locale = "", "XXX", "sweden"
	bad.OrderLines[1].Quantity = ordertest.Ptr(int64(0))
	bad.PaymentMethods = []string{"invoice", "paypal"}
	bad.ExpiresInMinutes = ordertest.Ptr(int64(0))
	bad.ExternalSessionID = "external:x"
	bad.MerchantURLs = &MerchantURLs{Confirmation: "ftp://x"}
	_, err := New("m1", SourceCheckout, bad, &ordertest.IDs{}, t0, func(string) string { return "" })
	var fe *fault.Error
	if !fault.Is(err, fault.Invalid) {
		t.Fatalf("err %v", err)
	}
	fe = err.(*fault.Error)
	var fields []string
	for _, f := range fe.Fields {
		fields = append(fields, f.Field)
	}
	want := []string{"country", "currency", "locale", "externalSessionId", "merchantUrls.confirmation", "expiresInMinutes", "paymentMethods[1]", "orderLines[1].quantity"}
	if !slices.Equal(fields, want) {
		t.Fatalf("fields %v, want %v", fields, want)
	}
	sum := newReq()
	sum.TotalOrderAmount = ordertest.Ptr(int64(29999))
	if _, err := New("m1", SourceCheckout, sum, &ordertest.IDs{}, t0, func(string) string { return "" }); !fault.Is(err, fault.Invalid) {
		t.Fatalf("totals mismatch accepted: %v", err)
	}
}

func TestLifecycleRefusals(t *testing.T) {
	pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}
	buyer := order.Customer{CompanyID: "5560000001"}
	cases := []struct {
		name  string
		setup func(s *Session) time.Time
		op    func(s *Session, now time.Time) error
		code  string
	}{
		{"update completed", func(s *Session) time.Time {
			s.Authorize(buyer, pm, "at1", time.Time{}, t0)
			s.Complete("o1", t0)
			return t0
		}, func(s *Session, now time.Time) error {
			return s.Update(&UpdateRequest{MerchantReference: ordertest.Ptr("x")}, &ordertest.IDs{}, now)
		}, "session_completed"},
		{"authorize expired", func(s *Session) time.Time { return s.ExpiresAt }, func(s *Session, now time.Time) error {
			return s.Authorize(buyer, pm, "at1", time.Time{}, now)
		}, "session_expired"},
		{"authorize twice", func(s *Session) time.Time { s.Authorize(buyer, pm, "at1", time.Time{}, t0); return t0 }, func(s *Session, now time.Time) error {
			return s.Authorize(buyer, pm, "at2", time.Time{}, now)
		}, "session_authorized"},
		{"complete created", func(*Session) time.Time { return t0 }, func(s *Session, now time.Time) error { return s.Complete("o1", now) }, "session_created"},
		{"cancel completed", func(s *Session) time.Time {
			s.Authorize(buyer, pm, "at1", time.Time{}, t0)
			s.Complete("o1", t0)
			return t0
		}, func(s *Session, now time.Time) error { return s.Cancel("", now) }, "session_completed"},
		{"cancel cancelled", func(s *Session) time.Time { s.Cancel("", t0); return t0 }, func(s *Session, now time.Time) error { return s.Cancel("", now) }, "session_cancelled"},
		{"update expired", func(s *Session) time.Time { return s.ExpiresAt.Add(time.Minute) }, func(s *Session, now time.Time) error {
			return s.Update(&UpdateRequest{MerchantReference: ordertest.Ptr("x")}, &ordertest.IDs{}, now)
		}, "session_expired"},
	}
	for _, c := range cases {
		s := open(t, newReq())
		now := c.setup(s)
		before := *s
		err := c.op(s, now)
		if fault.KindOf(err) != fault.NotAvailable || fault.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		if s.State != before.State || s.UpdatedAt != before.UpdatedAt {
			t.Errorf("%s: refused operation changed the session", c.name)
		}
	}
	s := open(t, newReq())
	if err := s.Authorize(buyer, order.PaymentMethod{Type: order.PayPaypal}, "at", time.Time{}, t0); !fault.Is(err, fault.Invalid) {
		t.Errorf("unoffered method: %v", err)
	}
}

// TestApprovalEndsWithItsToken: an authorized session whose token expired
// unused is expired (no order can come of it any more), and one whose token
// became a customer token is completed.
func TestApprovalEndsWithItsToken(t *testing.T) {
	pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}
	buyer := order.Customer{CompanyID: "5560000001"}
	s := open(t, newReq())
	if err := s.Authorize(buyer, pm, "at1", t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if st := s.StateAt(t0.Add(59 * time.Minute)); st != StateAuthorized {
		t.Fatalf("before the token expires: %s", st)
	}
	later := t0.Add(time.Hour)
	if st := s.StateAt(later); st != StateExpired {
		t.Fatalf("when the token expires: %s, want expired", st)
	}
	if err := s.Cancel("x", later); fault.CodeOf(err) != "session_expired" {
		t.Fatalf("cancel after the token expired: %v", err)
	}
	if err := s.Complete("o1", later); fault.CodeOf(err) != "session_expired" {
		t.Fatalf("complete after the token expired: %v", err)
	}

	c := open(t, newReq())
	if err := c.Authorize(buyer, pm, "at2", t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteWithCustomerToken("ct1", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if st := c.StateAt(t0.Add(2 * time.Hour)); st != StateCompleted || c.CustomerToken != "ct1" {
		t.Fatalf("after the customer token: %s %q", st, c.CustomerToken)
	}
	if err := c.Cancel("x", t0.Add(2*time.Minute)); fault.CodeOf(err) != "session_completed" {
		t.Fatalf("cancel after the customer token: %v", err)
	}
}

func TestQuery(t *testing.T) {
	var all []*Session
	for i := 0; i < 10; i++ {
		r := newReq()
		r.StoreID = []string{"a", "b"}[i%2]
		r.MerchantReference = "PO-" + string(rune('0'+i))
		s, _ := New("m1", []Source{SourceCheckout, SourcePayment}[i%2], r, &ordertest.IDs{}, t0.Add(time.Duration(i)*time.Minute), func(string) string { return "" })
		s.ID = "s" + string(rune('0'+i))
		all = append([]*Session{s}, all...) // newest first
	}
	all[0].Cancel("", t0.Add(time.Hour))
	q := Query{StoreIDs: []string{"b"}, Size: 2}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	page, next := q.Page(all, t0.Add(time.Hour), nil)
	if len(page) != 2 || page[0].ID != "s9" || page[1].ID != "s7" || next != "s7" {
		t.Fatalf("page %v next %q", ids(page), next)
	}
	q.FromID = next
	page, _ = q.Page(all, t0.Add(time.Hour), nil)
	if ids(page) != "s5,s3" {
		t.Fatalf("second page %v", ids(page))
	}
	q2 := Query{States: []State{StateCancelled}}
	q2.Validate()
	if p, _ := q2.Page(all, t0.Add(time.Hour), nil); ids(p) != "s9" {
		t.Fatalf("state filter %v", ids(p))
	}
	q3 := Query{Q: "po-4", CreatedFrom: t0}
	q3.Validate()
	if p, _ := q3.Page(all, t0, nil); ids(p) != "s4" {
		t.Fatalf("q %v", ids(p))
	}
	q4 := Query{States: []State{StateExpired}}
	q4.Validate()
	if p, _ := q4.Page(all, t0.Add(48*time.Hour), nil); len(p) != 9 {
		t.Fatalf("expired %d", len(p))
	}
	bad := Query{States: []State{"x"}, Sources: []Source{"y"}, Size: 1001}
	if err := bad.Validate(); err == nil || len(err.(*fault.Error).Fields) != 3 {
		t.Fatalf("bad query: %v", err)
	}
}

func ids(ss []*Session) string {
	var out []byte
	for i, s := range ss {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, s.ID...)
	}
	return string(out)
}

// allowed lists every transition of the documented lifecycle.
var allowed = map[[2]State]bool{
	{StateCreated, StateAuthorized}: true, {StateCreated, StateCancelled}: true, {StateCreated, StateExpired}: true,
	{StateAuthorized, StateCompleted}: true, {StateAuthorized, StateCancelled}: true,
}

// opFrom lists the states each operation of TestLifecycleProperty may
// succeed from (nil: any, the clock).
var opFrom = [...][]State{
	1: {StateCreated}, 2: {StateCreated}, 3: {StateAuthorized}, 4: {StateCreated, StateAuthorized},
	5: {StateCreated}, 6: {StateCreated},
}

// TestLifecycleProperty runs random operations and checks after every step
// that the state moved only along the documented lifecycle, that a refused
// operation changed nothing, and that the record agrees with its state.
func TestLifecycleProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := &ordertest.IDs{}
		s, err := New("m1", SourcePayment, newReq(), ids, t0, func(id string) string { return "u/" + id })
		if err != nil {
			rt.Fatal(err)
		}
		now := t0
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			before := *s
			prev := s.StateAt(now)
			var err error
			op := rapid.IntRange(0, 6).Draw(rt, "op")
			switch op {
			case 0:
				now = now.Add(time.Duration(rapid.IntRange(0, 30*60).Draw(rt, "minutes")) * time.Minute)
			case 1:
				q := rapid.Int64Range(1, 5).Draw(rt, "qty")
				err = s.Update(&UpdateRequest{OrderLines: []order.LineInput{ordertest.Line("x", q, 1000, 2500)}}, ids, now)
			case 2:
				pm := rapid.SampledFrom([]order.PaymentType{order.PayInvoice, order.PayCard, order.PayPaypal}).Draw(rt, "pm")
				err = s.Authorize(order.Customer{CompanyID: "1"}, order.PaymentMethod{Provider: order.ProviderService, Type: pm}, "at", time.Time{}, now)
			case 3:
				err = s.Complete("o1", now)
			case 4:
				err = s.Cancel("declined", now)
			case 5:
				err = s.Update(&UpdateRequest{MerchantReference: ordertest.Ptr("r")}, ids, now)
			case 6:
				err = s.Decline(now)
			}
			cur := s.StateAt(now)
			// What the buyer approved is fixed: only a session awaiting the
			// buyer is updated or declined; only an approved one completed.
			if from := opFrom[op]; err == nil && from != nil && !slices.Contains(from, prev) {
				rt.Fatalf("op %d accepted on a session that was %s", op, prev)
			}
			if err != nil {
				if s.State != before.State || s.UpdatedAt != before.UpdatedAt || s.Totals != before.Totals {
					rt.Fatalf("refused operation changed the session: %v", err)
				}
			}
			if cur != prev && !allowed[[2]State{prev, cur}] {
				rt.Fatalf("transition %s → %s", prev, cur)
			}
			if s.Totals != order.SumLines(s.OrderLines, s.VATMode) {
				rt.Fatalf("totals %+v disagree with lines", s.Totals)
			}
			switch cur {
			case StateAuthorized:
				if s.AuthorizationToken == "" || s.Buyer == nil || s.PaymentMethod == nil || s.AuthorizedAt == nil {
					rt.Fatalf("authorized without approval: %+v", s)
				}
			case StateCompleted:
				if s.OrderID == "" || s.AuthorizationToken == "" || s.CompletedAt == nil {
					rt.Fatalf("completed without order: %+v", s)
				}
			case StateCancelled:
				if s.CancelledAt == nil {
					rt.Fatal("cancelled without time")
				}
			}
			if s.UpdatedAt.Before(s.CreatedAt) {
				rt.Fatal("updatedAt before createdAt")
			}
		}
	})
}

// TestUpdateKeepsTheVATMode: lines sent without totals are read in the
// session's VAT mode, so an update that names another mode is refused,
// naming vatMode, instead of being taken in the old mode without a word
// (unit prices meant net read as gross). The session's own mode is
// accepted.
func TestUpdateKeepsTheVATMode(t *testing.T) {
	s := open(t, newReq())
	before := s.Totals
	err := s.Update(&UpdateRequest{VatMode: ordertest.Ptr("exclVat"),
		OrderLines: []order.LineInput{ordertest.Line("Tiles", 2, 10000, 2500)}}, &ordertest.IDs{}, t0)
	if fe, ok := err.(*fault.Error); !ok || fe.Kind != fault.Invalid || len(fe.Fields) != 1 || fe.Fields[0].Field != "vatMode" {
		t.Fatalf("another VAT mode: %v, want invalid naming vatMode", err)
	}
	if s.Totals != before {
		t.Fatalf("a refused update changed the totals: %+v", s.Totals)
	}
	if err := s.Update(&UpdateRequest{VatMode: ordertest.Ptr("inclVat"), MerchantReference: ordertest.Ptr("PO-2")}, &ordertest.IDs{}, t0); err != nil {
		t.Fatalf("the session's own mode: %v", err)
	}
	if err := s.Update(&UpdateRequest{VatMode: ordertest.Ptr(""), MerchantReference: ordertest.Ptr("PO-3")}, &ordertest.IDs{}, t0); err != nil {
		t.Fatalf("an empty vatMode, as create takes it: %v", err)
	}
}

// TestTimesNeverGoBackwards: replicas on one database each stamp a change
// with their own clock. A change made by one whose clock is behind the
// replica that made the last one is stamped at the last change's time, as
// an order's events are: updatedAt never goes backwards (an updatedFrom
// poll would miss the change) and authorizedAt, completedAt and cancelledAt
// are never before the session was created or the step before them.
func TestTimesNeverGoBackwards(t *testing.T) {
	lag := t0.Add(-time.Hour) // a replica an hour behind the one that made the session
	pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}

	s := open(t, newReq())
	if err := s.Update(&UpdateRequest{MerchantReference: ordertest.Ptr("PO-2")}, &ordertest.IDs{}, lag); err != nil {
		t.Fatal(err)
	}
	if !s.UpdatedAt.Equal(t0) {
		t.Fatalf("updated at %s, before it was created at %s", s.UpdatedAt, t0)
	}
	if err := s.Authorize(order.Customer{}, pm, "tok", time.Time{}, lag); err != nil {
		t.Fatal(err)
	}
	if !s.AuthorizedAt.Equal(t0) || !s.UpdatedAt.Equal(t0) {
		t.Fatalf("authorized at %s, updated at %s, created at %s", s.AuthorizedAt, s.UpdatedAt, t0)
	}
	later := t0.Add(time.Minute)
	s2 := open(t, newReq())
	if err := s2.Authorize(order.Customer{}, pm, "tok", time.Time{}, later); err != nil {
		t.Fatal(err)
	}
	if err := s2.Complete("order-1", lag); err != nil {
		t.Fatal(err)
	}
	if !s2.CompletedAt.Equal(later) || !s2.UpdatedAt.Equal(later) {
		t.Fatalf("completed at %s, updated at %s, authorized at %s", s2.CompletedAt, s2.UpdatedAt, later)
	}
	s3 := open(t, newReq())
	if err := s3.Cancel("no", lag); err != nil {
		t.Fatal(err)
	}
	if !s3.CancelledAt.Equal(t0) || !s3.UpdatedAt.Equal(t0) {
		t.Fatalf("cancelled at %s, updated at %s, created at %s", s3.CancelledAt, s3.UpdatedAt, t0)
	}
	// A clock that is ahead moves them forward as before.
	if err := s.Complete("order-2", later); err != nil || !s.CompletedAt.Equal(later) || !s.UpdatedAt.Equal(later) {
		t.Fatalf("completed at %v, updated at %s: %v", s.CompletedAt, s.UpdatedAt, err)
	}
}

// TestVATModeMustBeOneOfTwo: a vatMode other than inclVat and exclVat is
// refused on create and on update, naming vatMode, and the refused update
// leaves the session as it was.
func TestVATModeMustBeOneOfTwo(t *testing.T) {
	r := newReq()
	r.VatMode = "gross"
	_, err := New("m1", SourceCheckout, r, &ordertest.IDs{}, t0, func(id string) string { return "https://k/checkout/" + id })
	ordertest.WantFault(t, err, fault.Invalid, "validation_failed", "vatMode")
	s := open(t, newReq())
	before := *s
	err = s.Update(&UpdateRequest{VatMode: ordertest.Ptr("gross"), MerchantReference: ordertest.Ptr("PO-2")}, &ordertest.IDs{}, t0)
	ordertest.WantFault(t, err, fault.Invalid, "validation_failed", "vatMode")
	err = (&UpdateRequest{VatMode: ordertest.Ptr("gross")}).Validate()
	ordertest.WantFault(t, err, fault.Invalid, "validation_failed", "vatMode")
	if s.MerchantReference != before.MerchantReference || s.VATMode != before.VATMode || !s.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused update changed the session: %+v", s)
	}
}

// TestUpdateReplacesMerchantURLs: merchantUrls sent on an update replace
// the session's; left out, they stay.
func TestUpdateReplacesMerchantURLs(t *testing.T) {
	r := newReq()
	first := MerchantURLs{Confirmation: "https://shop.example/ok", Cancel: "https://shop.example/cancel"}
	r.MerchantURLs = &first
	s := open(t, r)
	if err := s.Update(&UpdateRequest{MerchantReference: ordertest.Ptr("PO-2")}, &ordertest.IDs{}, t0); err != nil {
		t.Fatal(err)
	}
	if s.MerchantURLs != first {
		t.Fatalf("an update without merchantUrls changed them: %+v", s.MerchantURLs)
	}
	urls := MerchantURLs{Confirmation: "https://shop.example/thanks"}
	if err := s.Update(&UpdateRequest{MerchantURLs: &urls}, &ordertest.IDs{}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s.MerchantURLs != urls {
		t.Fatalf("merchantUrls after the update: %+v, want %+v", s.MerchantURLs, urls)
	}
	if !s.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("updatedAt %v after the update at %v", s.UpdatedAt, t0.Add(time.Minute))
	}
}
