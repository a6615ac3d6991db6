package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/company"
)

func TestCompanySearch(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("SE", []company.Company{{ID: "5560360793", Name: "Göta Bygg AB", Country: "SE"}, {ID: "5560000001", Name: "Approved Byggvaror AB", Country: "SE"}})
	s := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet})
	h := s.Handler()
	get := func(q url.Values) (int, CompanySearchResponse, Problem) { return searchCompanies(h, q) }
	code, res, _ := get(url.Values{"q": {"gota bygg ab"}, "country": {"SE"}})
	if code != 200 || res.Country != "SE" || len(res.Companies) != 1 || res.Companies[0].CompanyID != "5560360793" || !res.Companies[0].ExactMatch {
		t.Fatalf("name search: %d %+v", code, res)
	}
	code, res, _ = get(url.Values{"q": {"556036-0793"}, "country": {"SE"}})
	if code != 200 || len(res.Companies) != 1 || !res.Companies[0].ExactMatch {
		t.Fatalf("number search: %d %+v", code, res)
	}
	code, res, _ = get(url.Values{"q": {"nothing here"}, "country": {"SE"}})
	if code != 200 || res.Companies == nil || len(res.Companies) != 0 {
		t.Fatalf("no match must be an empty list: %d %+v", code, res)
	}
	code, _, p := get(url.Values{"country": {"XX"}})
	if code != 400 || p.Code != "validation_failed" || len(p.Errors) != 2 || p.Errors[0].Field != "country" || p.Errors[1].Field != "q" {
		t.Fatalf("bad query: %d %+v", code, p)
	}
}

func TestCompanySearchRateLimit(t *testing.T) {
	l := newRateLimiter(1, 3)
	now := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if !l.allow("a", now) {
			t.Fatalf("burst request %d refused", i)
		}
	}
	if l.allow("a", now) {
		t.Fatal("fourth request in the same instant allowed")
	}
	if !l.allow("b", now) {
		t.Fatal("another address must have its own bucket")
	}
	if !l.allow("a", now.Add(time.Second)) {
		t.Fatal("a token must come back after a second")
	}
	s := New(Config{CompanySearchRate: 1, Logger: quiet})
	h := s.Handler()
	codes := map[int]int{}
	for i := 0; i < 15; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?country=SE&q=bygg", nil))
		codes[rec.Code]++
		// A refusal says when to come back and is a problem document.
		if rec.Code == http.StatusTooManyRequests && (rec.Header().Get("Retry-After") != "1" ||
			rec.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(rec.Body.String(), `"code":"rate_limited"`)) {
			t.Fatalf("429 without Retry-After or its problem: %v %s", rec.Header(), rec.Body)
		}
	}
	// Burst 10 at 1/s: ten pass at once; a slow machine may earn one more token meanwhile.
	if codes[http.StatusOK] < 10 || codes[http.StatusTooManyRequests] < 4 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 15 {
		t.Fatalf("codes %v", codes)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A country imported with `kassa companies import` and no checksum rule (any
// 4–20 alphanumerics is a number there) is still searched by name: a name
// query that is also shaped like a number found nothing.
func TestCompanySearchImportedCountryByName(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("GB", []company.Company{{ID: "GB123456", Name: "Acme Widgets Ltd", Country: "GB"},
		{ID: "AB12CD34", Name: "Zeta & Sons", Country: "GB"}})
	h := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet}).Handler()
	for q, want := range map[string]string{"Acme": "GB123456", "acme widgets": "GB123456", "Zeta": "AB12CD34",
		"Widgets": "GB123456", "GB123456": "GB123456", "gb-123 456": "GB123456"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?"+url.Values{"q": {q}, "country": {"GB"}}.Encode(), nil))
		var res CompanySearchResponse
		json.Unmarshal(rec.Body.Bytes(), &res)
		if rec.Code != 200 || len(res.Companies) != 1 || res.Companies[0].CompanyID != want {
			t.Errorf("q=%q: %d %+v, want %s", q, rec.Code, res, want)
		}
	}
}

// Every query word must start a different word of the name; which word a
// short query word takes must not keep a longer one from its only match
// ("s sto" is "Sven" and "Stockholm", though "s" also starts "Stockholm").
func TestCompanySearchWordsMatchedAsAWhole(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("SE", []company.Company{{ID: "5560360793", Name: "Stockholm Sven AB", Country: "SE"}})
	h := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet}).Handler()
	for _, q := range []string{"s sto", "sto s", "sven sto", "s s"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?"+url.Values{"q": {q}, "country": {"SE"}}.Encode(), nil))
		var res CompanySearchResponse
		json.Unmarshal(rec.Body.Bytes(), &res)
		if rec.Code != 200 || len(res.Companies) != 1 {
			t.Errorf("q=%q: %d %+v, want Stockholm Sven AB", q, rec.Code, res)
		}
	}
}

// Names are indexed without their legal form, so a query that ends inside
// one, as it does while a buyer types it, still finds the company.
func TestCompanySearchWhileTypingALegalForm(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("SE", []company.Company{{ID: "5560000001", Name: "Approved Byggvaror AB", Country: "SE"},
		{ID: "5567080121", Name: "Göta Bygg AB (publ)", Country: "SE"}, {ID: "5560360793", Name: "Approved Alfa AB", Country: "SE"},
		{ID: "5561414474", Name: "Göta Bygg Park Aktiebolag", Country: "SE"}})
	h := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet}).Handler()
	for q, want := range map[string]string{"Approved Byggvaror A": "5560000001", "Approved Byggvaror AB": "5560000001",
		"Göta Bygg AB (p": "5567080121", "Göta Bygg AB (pub": "5567080121", "Göta Bygg AB (publ)": "5567080121"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?"+url.Values{"q": {q}, "country": {"SE"}}.Encode(), nil))
		var res CompanySearchResponse
		json.Unmarshal(rec.Body.Bytes(), &res)
		if rec.Code != 200 || !slices.ContainsFunc(res.Companies, func(m company.Match) bool { return m.CompanyID == want }) {
			t.Errorf("q=%q: %d %+v, want %s among them", q, rec.Code, res, want)
		}
	}
	// A word that begins a legal form but starts a word of a name matches
	// that name first: "Approved A" is Approved Alfa, then Approved Byggvaror.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?"+url.Values{"q": {"Approved A"}, "country": {"SE"}}.Encode(), nil))
	var res CompanySearchResponse
	json.Unmarshal(rec.Body.Bytes(), &res)
	if len(res.Companies) != 2 || res.Companies[0].CompanyID != "5560360793" || res.Companies[1].CompanyID != "5560000001" {
		t.Errorf("q=Approved A: %+v", res)
	}
}

// An IPv6 host holds a whole /64 and may send every search from another
// address in it: the limit is kept per /64, or it limited nothing.
func TestCompanySearchRateLimitPerIPv6Network(t *testing.T) {
	h := New(Config{CompanySearchRate: 1, Logger: quiet}).Handler()
	codes := map[int]int{}
	for i := 0; i < 15; i++ {
		r := httptest.NewRequest("GET", "/v1/headless/search/companies?country=SE&q=bygg", nil)
		r.RemoteAddr = fmt.Sprintf("[2001:db8:1:2::%x]:40000", i+1)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		codes[rec.Code]++
	}
	if codes[http.StatusOK] > 11 || codes[http.StatusTooManyRequests] < 4 {
		t.Fatalf("15 searches from one /64 at burst 10: codes %v", codes)
	}
	for addr, want := range map[string]string{"[2001:db8:1:2:aaaa::1]:1": "2001:db8:1:2::/64", "192.0.2.7:80": "192.0.2.7",
		"[::ffff:192.0.2.7]:80": "192.0.2.7", "[2001:db8:1:3::1]:1": "2001:db8:1:3::/64"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := (&Server{}).clientAddr(r); got != want {
			t.Errorf("clientAddr(%s) = %s, want %s", addr, got, want)
		}
	}
}

// Behind a load balancer every browser's search came from the balancer's
// address, so one busy client used up the limit of all. A trusted proxy's
// X-Forwarded-For names the client; the header of an untrusted peer, and the
// addresses a client put before the proxies' own, are not believed.
func TestCompanySearchRateLimitBehindTrustedProxies(t *testing.T) {
	lb := netip.MustParsePrefix("10.0.0.0/8")
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{lb, netip.MustParsePrefix("2001:db8:ff::/48")}}}
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"10.0.0.5:1", []string{"198.51.100.7"}, "198.51.100.7"},
		{"10.0.0.5:1", []string{"203.0.113.9, 198.51.100.7"}, "198.51.100.7"},   // the first is the client's say
		{"10.0.0.5:1", []string{"198.51.100.7, 10.1.2.3"}, "198.51.100.7"},      // two proxies
		{"10.0.0.5:1", []string{"198.51.100.7", "10.1.2.3"}, "198.51.100.7"},    // one header each
		{"10.0.0.5:1", []string{"2001:db8:1:2::9"}, "2001:db8:1:2::/64"},        // an IPv6 client
		{"[2001:db8:ff::1]:1", []string{"::ffff:198.51.100.7"}, "198.51.100.7"}, // an IPv6 proxy
		{"10.0.0.5:1", []string{"10.1.2.3, 10.9.9.9"}, "10.1.2.3"},              // only proxies: the farthest
		{"10.0.0.5:1", []string{"unknown"}, "10.0.0.5"},                         // a form it cannot follow
		{"10.0.0.5:1", nil, "10.0.0.5"},                                         // no header
		{"192.0.2.7:1", []string{"198.51.100.7"}, "192.0.2.7"},                  // an untrusted peer's header
		{"[::ffff:10.0.0.5]:1", []string{"198.51.100.8"}, "198.51.100.8"},       // a mapped proxy address
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, h := range tc.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		if got := s.clientAddr(r); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}

	// Through the router: two browsers behind one balancer each get their
	// own burst.
	h := New(Config{CompanySearchRate: 1, Logger: quiet, TrustedProxies: []netip.Prefix{lb}}).Handler()
	for _, client := range []string{"198.51.100.7", "198.51.100.8"} {
		ok := 0
		for range 10 {
			r := httptest.NewRequest("GET", "/v1/headless/search/companies?country=SE&q=bygg", nil)
			r.RemoteAddr = "10.0.0.5:40000"
			r.Header.Set("X-Forwarded-For", client)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				ok++
			}
		}
		if ok != 10 {
			t.Errorf("client %s behind the balancer: %d of its 10 searches answered, want its whole burst", client, ok)
		}
	}
}

// A proxy reached over a link-local address is the peer with its zone
// ([fe80::1%eth0]:443), which a network never contains, and a network can
// be written in its IPv4-mapped form (::ffff:10.0.0.0/104) while addresses
// are compared unmapped: either way the proxy was not trusted, and every
// client behind it shared its limit.
func TestTrustedProxyZonedOrMappedForms(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("::ffff:10.0.0.0/104")}}}
	for _, tc := range []struct{ peer, xff, want string }{
		{"[fe80::1%eth0]:1", "198.51.100.7", "198.51.100.7"},
		{"10.0.0.5:1", "198.51.100.7", "198.51.100.7"},
		{"[::ffff:10.0.0.5]:1", "198.51.100.7", "198.51.100.7"},
		{"10.0.0.5:1", "198.51.100.7, fe80::2%eth1", "198.51.100.7"}, // a link-local hop
		{"10.0.0.5:1", "198.51.100.7, ::ffff:10.9.9.9", "198.51.100.7"},
		{"192.0.2.7:1", "198.51.100.7", "192.0.2.7"}, // still not believed from anyone else
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		if got := s.clientAddr(r); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
}

// A client behind the proxy sends what X-Forwarded-For it likes before the
// address the proxy appends: a header filled with entries (64 KiB, some
// 8 000) was split whole for every search, before its limit was looked at,
// which tripled the request's cost. Only the entries walked are read now.
func TestForwardedForReadsOnlyTheHopsWalked(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.5:1"
	r.Header.Set("X-Forwarded-For", strings.Repeat("203.0.113.9, ", 5000)+"198.51.100.7, 10.1.2.3")
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if got := s.clientAddr(r); got != "198.51.100.7" {
			t.Fatalf("client %s, want 198.51.100.7", got)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
		t.Errorf("%d bytes allocated per request for a header of %d bytes; want what the two hops walked need", per, len(r.Header.Get("X-Forwarded-For")))
	}
}

// Past minSweep clients a new client dropped the idle buckets by scanning
// all of them under the lock; with every client active (many addresses
// within seconds) that scan found nothing to drop and ran again for every
// request: 1.3 ms each at 100 000 clients, growing without bound, while every
// search waited on the lock. Sweeps now come when the count doubles.
func TestRateLimiterSweepsRarelyUnderManyClients(t *testing.T) {
	l := newRateLimiter(20, 200)
	now := time.Unix(1000, 0)
	for l.allow("exhausted", now) {
	}
	for i := 0; i < minSweep+5000; i++ {
		l.allow("c"+strconv.Itoa(i), now)
	}
	if l.sweeps > 1 {
		t.Fatalf("%d sweeps for %d clients all active at once", l.sweeps, minSweep+5000)
	}
	if l.allow("exhausted", now) {
		t.Fatal("a sweep gave an exhausted client a new burst")
	}
	// Buckets that have filled up again are dropped: a new one starts full.
	later := now.Add(time.Minute)
	for i := 0; l.sweeps < 2; i++ {
		l.allow("d"+strconv.Itoa(i), later)
	}
	for k := range l.buckets {
		if k[0] != 'd' {
			t.Fatalf("bucket %s, idle for a minute, kept after a sweep", k)
		}
	}
}

// A merchant's search box gets registration numbers in every form buyers
// type them: the 12 digits with the century and the VAT id find the
// company as the 10 digits do; a number typed whole but wrong is 400
// naming q, not an empty list that reads as "no such company"; a number
// still being typed, a listed one whose check digit is made up, and a
// valid unlisted one are answered as before.
func TestCompanySearchNumberForms(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("SE", []company.Company{{ID: "5560360793", Name: "Göta Bygg AB", Country: "SE"}, {ID: "5560000001", Name: "Approved Byggvaror AB", Country: "SE"}})
	dir.Set("NO", []company.Company{{ID: "910000001", Name: "Godkjent Bygg AS", Country: "NO"}})
	h := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet}).Handler()
	get := func(country, q string) (int, CompanySearchResponse, Problem) {
		return searchCompanies(h, url.Values{"q": {q}, "country": {country}})
	}
	for _, c := range []struct{ country, q, want string }{
		{"SE", "165560360793", "5560360793"}, {"SE", "16556036-0793", "5560360793"}, {"SE", "SE556036079301", "5560360793"},
		{"SE", "SE 556036-0793 01", "5560360793"}, {"SE", "SE556000000101", "5560000001"}, {"SE", "165560000001", "5560000001"},
		{"NO", "NO910000001MVA", "910000001"}, {"NO", "910 000 001 MVA", "910000001"},
	} {
		code, res, _ := get(c.country, c.q)
		if code != 200 || len(res.Companies) != 1 || res.Companies[0].CompanyID != c.want || !res.Companies[0].ExactMatch {
			t.Errorf("%s q=%q: %d %+v, want %s", c.country, c.q, code, res, c.want)
		}
	}
	for _, q := range []string{"5560360794", "556036-0794", "SE556036079302", "555560360793", "1655603607931", "165560360794"} {
		code, _, p := get("SE", q)
		if code != 400 || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "q" {
			t.Errorf("malformed q=%q: %d %+v, want 400 on q", q, code, p)
		}
	}
	for _, q := range []string{"556036", "55603607", "16556036079", "SE5560360793", "5560000001", "5560360801", "Göta 16"} {
		if code, _, p := get("SE", q); code != 200 {
			t.Errorf("q=%q: %d %+v, want 200", q, code, p)
		}
	}
}

// The sandbox's buyer fixtures answer to every form of their number, and a
// token's buyer is the same company whichever form the merchant names it
// by later, as the hosted checkout lists it by its canonical number.
func TestSandboxBuyerNumberForms(t *testing.T) {
	e := newEnv(t, true)
	for _, id := range []string{"556000-0019", "165560000019", "SE556000001901"} {
		code, _, b := e.req("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":%q}}`, id), e.auth, nil)
		wantProblem(t, code, b, 402, "credit_declined")
	}
	body := func(companyID string) string {
		return strings.Replace(orderBody, `"reference":"PO-1"`, fmt.Sprintf(`"reference":"PO-1","customer":{"companyId":%q}`, companyID), 1)
	}
	for _, c := range []struct{ minted, named string }{
		{"556000-0001", "5560000001"}, {"SE556000000101", "556000-0001"}, {"5560000001", "165560000001"},
	} {
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint(c.minted, "invoice")+"/order", body(c.named), e.auth, nil)
		if code != 200 {
			t.Errorf("order naming %s for a token of %s: %d %v", c.named, c.minted, code, b)
		}
		code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint(c.minted, "invoice")+"/customer-token",
			fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":%q}}`, c.named), e.auth, nil)
		if code != 201 && code != 200 {
			t.Errorf("customer token naming %s for a token of %s: %d %v", c.named, c.minted, code, b)
		}
	}
	// Another company is still refused.
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("556000-0001", "invoice")+"/order", body("5560360793"), e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
}

// An order or customer token that names the authorized buyer in another form
// of its number keeps the authorized buyer's companyId: the merchant's
// spelling (a VAT id, the 12 digits) would otherwise become the buyer's
// registration number on the order, its documents and notifications, and
// differ between the orders of one buyer.
func TestBuyerNumberFormKeepsAuthorizedID(t *testing.T) {
	e := newEnv(t, true)
	body := strings.Replace(orderBody, `"reference":"PO-1"`, `"reference":"PO-1","customer":{"companyId":"SE556000000101"}`, 1)
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	if code != 200 {
		t.Fatalf("order: %d %v", code, b)
	}
	id, _ := b["orderId"].(string)
	code, _, o := e.req("GET", "/v1/orders/"+id, "", e.auth, nil)
	if c, _ := o["customer"].(map[string]any); code != 200 || c["companyId"] != "5560000001" {
		t.Errorf("the order's customer: %d %v; want companyId 5560000001, the authorized buyer's", code, o["customer"])
	}
	code, _, ct := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/customer-token",
		`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"165560000001"}}`, e.auth, nil)
	if code != 200 && code != 201 {
		t.Fatalf("customer token: %d %v", code, ct)
	}
	tok, _ := ct["customerToken"].(string)
	code, _, got := e.req("GET", "/v1/customer-tokens/"+tok, "", e.auth, nil)
	if code != 200 || got["companyId"] != "5560000001" {
		t.Errorf("the customer token: %d %v; want companyId 5560000001", code, got)
	}
}

// searchCompanies asks h's company search for q and decodes the answer, or
// the problem refusing it.
func searchCompanies(h http.Handler, q url.Values) (int, CompanySearchResponse, Problem) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?"+q.Encode(), nil))
	var ok CompanySearchResponse
	var p Problem
	if rec.Code == 200 {
		json.Unmarshal(rec.Body.Bytes(), &ok)
	} else {
		json.Unmarshal(rec.Body.Bytes(), &p)
	}
	return rec.Code, ok, p
}

// Below one search a second an address earns a token in more than a second:
// a client that waits the "1" it was told is refused again, and below 0.1 a
// second the burst of ten times the rate held less than one token, so no
// search ever passed. The first search passes; the refusal says when the
// next will, in whole seconds rounded up.
func TestCompanySearchRetryAfterBelowOnePerSecond(t *testing.T) {
	l := newRateLimiter(0.25, 2.5)
	now := time.Unix(1000, 0)
	for i := 0; i < 2; i++ {
		if wait := l.take("a", now); wait != 0 {
			t.Fatalf("burst request %d refused for %d s", i, wait)
		}
	}
	// Half a token left, a quarter a second: two seconds to the next.
	if wait := l.take("a", now); wait != 2 {
		t.Fatalf("refused for %d s, want 2", wait)
	}
	if wait := l.take("a", now.Add(500*time.Millisecond)); wait != 2 {
		t.Fatalf("1.5 s before the token: refused for %d s, want 2 (rounded up)", wait)
	}
	if wait := l.take("a", now.Add(1900*time.Millisecond)); wait != 1 {
		t.Fatalf("0.1 s before the token: refused for %d s, want 1 (rounded up, never 0)", wait)
	}
	if wait := l.take("a", now.Add(2*time.Second)); wait != 0 {
		t.Fatalf("refused for %d s when the token is back", wait)
	}
	// At a rate of one a century the seconds would overflow an int; no
	// client waits more than a day.
	tiny := newRateLimiter(1e-12, 1)
	tiny.take("a", now)
	if wait := tiny.take("a", now); wait != 86400 {
		t.Fatalf("at 1e-12 a second: refused for %d s, want a day", wait)
	}

	h := New(Config{CompanySearchRate: 0.05, Logger: quiet}).Handler()
	var got []string
	for i := 0; i < 2; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?country=SE&q=bygg", nil))
		got = append(got, fmt.Sprint(rec.Code, " ", rec.Header().Get("Retry-After")))
	}
	// One token at once (never under one), then 20 s to the next; a
	// second's delay of a loaded machine makes it 19.
	if got[0] != "200 " || (got[1] != "429 20" && got[1] != "429 19") {
		t.Fatalf("at 0.05 searches a second: %q, want [200, 429 with Retry-After 20]", got)
	}
}

// Config.CompanySearchRate says NaN takes the default, as zero and less do;
// NaN is neither, so it was taken as given: a burst of NaN tokens, never
// below one, let every search through without limit.
func TestCompanySearchRateNaNTakesTheDefault(t *testing.T) {
	h := New(Config{CompanySearchRate: math.NaN(), Logger: quiet}).Handler()
	// The default's burst is 200; 400 searches refill it only over 10 s.
	for i := range 400 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/headless/search/companies?country=SE&q=bygg", nil))
		if rec.Code == http.StatusTooManyRequests {
			if i < 200 || rec.Header().Get("Retry-After") != "1" {
				t.Fatalf("refused after %d searches with Retry-After %q; want after the default's 200, with 1", i, rec.Header().Get("Retry-After"))
			}
			return
		}
		if rec.Code != 200 {
			t.Fatalf("search %d: %d %s", i, rec.Code, rec.Body.Bytes())
		}
	}
	t.Fatal("400 searches at once from one address, none refused: a NaN rate limits nothing")
}

// Text pasted from a PDF or a web page carries characters a buyer does not
// see: a soft hyphen or a zero-width space inside a word, a ligature ("ﬁ")
// or full-width letters. The name still reads the same, so it must find the
// same company as the plain spelling, in NFC or NFD.
func TestCompanySearchInvisibleAndCompatibilityCharacters(t *testing.T) {
	dir := company.NewDirectory()
	dir.Set("SE", []company.Company{{ID: "5560360793", Name: "Malmö Fiskeriföretag AB", Country: "SE"},
		{ID: "5560000001", Name: "Approved Byggvaror AB", Country: "SE"}})
	h := New(Config{Companies: dir, CompanySearchRate: 1000, Logger: quiet}).Handler()
	for _, q := range []string{"Malmö Fiskeriföretag", "Malmo\u0308 fiskeri", "MALMÖ", "malmo",
		"Malm\u00adö Fiskeri\u00adföretag", "Malm\u200bö", "Mal\u200dmö", "\ufeffMalmö", "Malmö \ufb01skeri",
		"Ｍａｌｍö", "\u00a0Malmö\u00a0fisk\u00a0", "556036\u00a00793", "556036\u20110793"} {
		code, res, p := searchCompanies(h, url.Values{"q": {q}, "country": {"SE"}})
		if code != 200 || len(res.Companies) != 1 || res.Companies[0].CompanyID != "5560360793" {
			t.Errorf("q=%q: %d %+v %+v, want Malmö Fiskeriföretag AB", q, code, res, p)
		}
	}
}
