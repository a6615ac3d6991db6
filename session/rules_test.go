package session

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// TestExpiresInMinutes: the session lasts the minutes asked for, up to and
// including the longest allowed.
func TestExpiresInMinutes(t *testing.T) {
	for _, m := range []int64{1, 90, MaxTTLMinutes} {
		r := newReq()
		r.ExpiresInMinutes = ordertest.Ptr(m)
		if s := open(t, r); !s.ExpiresAt.Equal(t0.Add(time.Duration(m) * time.Minute)) {
			t.Errorf("expiresInMinutes %d: expiresAt %s", m, s.ExpiresAt)
		}
	}
	r := newReq()
	r.ExpiresInMinutes = ordertest.Ptr(int64(MaxTTLMinutes + 1))
	if err := r.Validate(); !hasField(err, "expiresInMinutes") {
		t.Errorf("expiresInMinutes %d: %v", MaxTTLMinutes+1, err)
	}
}

func hasField(err error, field string) bool {
	fe, ok := err.(*fault.Error)
	return ok && slices.ContainsFunc(fe.Fields, func(f fault.FieldError) bool { return f.Field == field })
}

// A method named twice is offered once.
func TestPaymentMethodsOnce(t *testing.T) {
	r := newReq()
	r.PaymentMethods = []string{"card", "invoice", "card"}
	if s := open(t, r); !slices.Equal(s.PaymentMethods, []order.PaymentType{order.PayCard, order.PayInvoice}) {
		t.Fatalf("paymentMethods %v", s.PaymentMethods)
	}
}

// Once the buyer approved, the session's terms are fixed: the merchant
// cannot update it and the buyer cannot decline it (only the merchant
// withdraws an approval), and withdrawing another token leaves it be.
func TestApprovedSessionIsFixed(t *testing.T) {
	pm := order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}
	s := open(t, newReq())
	if err := s.Authorize(order.Customer{CompanyID: "5560000001"}, pm, "at1", t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	before := s.Totals
	err := s.Update(&UpdateRequest{OrderLines: []order.LineInput{ordertest.Line("More", 9, 90000, 2500)}}, &ordertest.IDs{}, t0)
	if fault.CodeOf(err) != "session_authorized" || s.Totals != before {
		t.Fatalf("update after approval: %v, totals %+v", err, s.Totals)
	}
	if err := s.Decline(t0); fault.CodeOf(err) != "session_authorized" || s.State != StateAuthorized {
		t.Fatalf("decline after approval: %v, state %s", err, s.State)
	}
	if s.Withdraw("at-other", t0) || s.State != StateAuthorized {
		t.Fatalf("withdrawing another token changed the session: %s", s.State)
	}
	if !s.Withdraw("at1", t0) || s.State != StateCancelled {
		t.Fatalf("withdrawing its token: %s", s.State)
	}
}

// A long decline reason is kept to its first MaxDeclineReason characters.
func TestDeclineReasonCut(t *testing.T) {
	s := open(t, newReq())
	if err := s.Cancel(strings.Repeat("é", MaxDeclineReason+5), t0); err != nil {
		t.Fatal(err)
	}
	if s.DeclineReason != strings.Repeat("é", MaxDeclineReason) {
		t.Fatalf("reason of %d characters", len([]rune(s.DeclineReason)))
	}
}

// TestQueryBounds: the from bounds are inclusive, the to bounds exclusive,
// q matches the order id too, and size and q have their limits.
func TestQueryBounds(t *testing.T) {
	s := open(t, newReq())
	s.OrderID = "order-77"
	s.UpdatedAt = t0.Add(time.Minute)
	for _, c := range []struct {
		q    Query
		want bool
	}{
		{Query{CreatedFrom: t0}, true},
		{Query{CreatedFrom: t0.Add(time.Nanosecond)}, false},
		{Query{CreatedTo: t0}, false},
		{Query{CreatedTo: t0.Add(time.Nanosecond)}, true},
		{Query{UpdatedFrom: s.UpdatedAt}, true},
		{Query{UpdatedFrom: s.UpdatedAt.Add(time.Nanosecond)}, false},
		{Query{UpdatedTo: s.UpdatedAt}, false},
		{Query{UpdatedTo: s.UpdatedAt.Add(time.Nanosecond)}, true},
		{Query{Q: "ORDER-7"}, true},
		{Query{Q: "order-8"}, false},
	} {
		if got := c.q.Match(s, t0); got != c.want {
			t.Errorf("%+v: match %v, want %v", c.q, got, c.want)
		}
	}
	for _, c := range []struct {
		q  Query
		ok bool
	}{
		{Query{Size: maxPageSize}, true},
		{Query{Size: maxPageSize + 1}, false},
		{Query{Size: -1}, false},
		{Query{Q: strings.Repeat("q", 200)}, true},
		{Query{Q: strings.Repeat("q", 201)}, false},
		// Characters, not bytes: "ö" is two bytes, "😀" four.
		{Query{Q: strings.Repeat("ö", 200)}, true},
		{Query{Q: strings.Repeat("😀", 200)}, true},
		{Query{Q: strings.Repeat("ö", 201)}, false},
	} {
		if err := c.q.Validate(); (err == nil) != c.ok {
			t.Errorf("size %d, q of %d: %v", c.q.Size, len(c.q.Q), err)
		}
	}
}

// The API record shows each total in its own field.
func TestViewTotals(t *testing.T) {
	v := open(t, newReq()).View(t0)
	if v.TotalOrderAmount.MinorUnits != 30000 || v.TotalOrderAmountExclVat.MinorUnits != 24000 ||
		v.TotalOrderVatAmount.MinorUnits != 6000 || v.TotalOrderAmount.Currency != "SEK" {
		t.Fatalf("record totals %+v %+v %+v", v.TotalOrderAmount, v.TotalOrderAmountExclVat, v.TotalOrderVatAmount)
	}
}

// The terms the buyer approves cover the lines, not only their sums: a page
// showing other lines of the same total is another page.
func TestTermsCoverTheLines(t *testing.T) {
	s := open(t, newReq())
	terms := s.Terms()
	err := s.Update(&UpdateRequest{OrderLines: []order.LineInput{ordertest.Line("Other tiles", 2, 12500, 2500),
		ordertest.Line("Delivery", 1, 5000, 2500)}}, &ordertest.IDs{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals.Gross != 30000 || s.Terms() == terms {
		t.Fatalf("other lines of the same total: terms unchanged (%+v)", s.Totals)
	}
}

// An update keeps what it does not name and takes what it does.
func TestUpdateTakesWhatItNames(t *testing.T) {
	s := open(t, newReq())
	cust := &order.CustomerInput{Email: "ap@buyer.example"}
	md := map[string]string{"k": "v"}
	err := s.Update(&UpdateRequest{Customer: cust, Metadata: md, PaymentMethods: []string{"card"}}, &ordertest.IDs{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if s.Customer != cust || !maps.Equal(s.Metadata, md) || !slices.Equal(s.PaymentMethods, []order.PaymentType{order.PayCard}) ||
		s.MerchantReference != "PO-1" || !s.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("session %+v", s)
	}
}

// TestCreateFields: what create takes and refuses beyond TestNew.
func TestCreateFields(t *testing.T) {
	r := newReq()
	r.ExternalSessionID = "cart-9"
	s := open(t, r)
	if s.ExternalSessionID != "cart-9" {
		t.Fatalf("externalSessionId %q", s.ExternalSessionID)
	}
	if want := []order.PaymentType{order.PayInvoice, order.PayAdvanceInvoice, order.PayCard}; !slices.Equal(OfferedMethods("NO"), want) ||
		!slices.Equal(OfferedMethods("DE"), []order.PaymentType{order.PayInvoice, order.PayCard}) {
		t.Fatalf("offered %v %v", OfferedMethods("NO"), OfferedMethods("DE"))
	}
	for field, edit := range map[string]func(r *CreateRequest){
		"externalSessionId":         func(r *CreateRequest) { r.ExternalSessionID = "a/b" },
		"merchantUrls.confirmation": func(r *CreateRequest) { r.MerchantURLs = &MerchantURLs{Confirmation: "https:///path"} },
		"merchantUrls.cancel": func(r *CreateRequest) {
			r.MerchantURLs = &MerchantURLs{Cancel: "https://x.example/" + strings.Repeat("a", MaxURLLen+1-len("https://x.example/"))}
		},
	} {
		r := newReq()
		edit(r)
		if err := r.Validate(); !hasField(err, field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	r = newReq()
	r.MerchantURLs = &MerchantURLs{Cancel: "https://x.example/" + strings.Repeat("a", MaxURLLen-len("https://x.example/"))}
	if err := r.Validate(); err != nil {
		t.Errorf("a URL of %d characters: %v", MaxURLLen, err)
	}
}

// TestQueryPaging: the default size, the source filter and a store's byte
// budget ending a page early.
func TestQueryPaging(t *testing.T) {
	var all []*Session
	for i := range 150 {
		s := open(t, newReq())
		s.ID, s.Source = "s"+strconv.Itoa(i), []Source{SourceCheckout, SourcePayment}[i%2]
		all = append(all, s)
	}
	q := Query{}
	if err := q.Validate(); err != nil || q.Size != 100 {
		t.Fatalf("default size %d: %v", q.Size, err)
	}
	if p, next := q.Page(all, t0, nil); len(p) != 100 || next != "s99" {
		t.Fatalf("default page %d, next %q", len(p), next)
	}
	q = Query{Sources: []Source{SourcePayment}, Size: 2}
	if p, _ := q.Page(all, t0, nil); ids(p) != "s1,s3" {
		t.Fatalf("payment sessions %s", ids(p))
	}
	n := 0
	q = Query{Size: 10}
	p, next := q.Page(all, t0, func(*Session) bool { n++; return n <= 3 })
	if ids(p) != "s0,s1,s2" || next != "s2" {
		t.Fatalf("budget of 3: %s, next %q", ids(p), next)
	}
}
