package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// sessionEnv is a real server on a bbolt store with a sandbox test clock.
type sessionEnv struct {
	t     testing.TB
	ts    *httptest.Server
	clock *Clock
	auth  string
	other string // Basic credentials of a second merchant
	// ledger is the server's, for merchants a test sets up itself.
	ledger *kassa.Ledger
	srv    *Server
}

func newSessionEnv(t *testing.T) *sessionEnv { return newEnv(t, true) }

// newEnv builds the environment; validate checks every response against the
// OpenAPI document (benchmarks turn it off to measure the server alone).
func newEnv(t testing.TB, validate bool) *sessionEnv {
	clock := NewClock(true)
	return newEnvOn(t, validate, clock, openStore(t, clock.Now), nil)
}

// newEnvOn builds the environment on st; configure, if given, adjusts the
// server's configuration.
func newEnvOn(t testing.TB, validate bool, clock *Clock, st storage.Store, configure func(*Config)) *sessionEnv {
	var srv *Server
	ledger := kassa.New(st, kassa.Options{
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	ts := httptest.NewUnstartedServer(nil)
	cfg := Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true, Clock: clock,
		Delivery: kassa.DeliveryOptions{AllowPrivateNetworks: true},
		BaseURL:  "http://" + ts.Listener.Addr().String()}
	if configure != nil {
		configure(&cfg)
	}
	srv = New(cfg)
	ts.Config.Handler = srv.Handler()
	if validate {
		ts.Config.Handler = validating(t.(*testing.T), srv.Handler())
	}
	ts.Start()
	t.Cleanup(ts.Close)
	creds, _, _ := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m1", ClientSecret: "s1"})
	_ = creds
	ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m2", ClientSecret: "s2"})
	return &sessionEnv{t: t, ts: ts, clock: clock, auth: basic("m1", "s1"), other: basic("m2", "s2"), ledger: ledger, srv: srv}
}

// openStore opens the store the HTTP tests run on: bbolt, or PostgreSQL
// when KASSA_TEST_STORE=postgres (with KASSA_TEST_DATABASE_URL; .ci/run).
func openStore(t testing.TB, clock func() time.Time) storage.Store {
	var st storage.Store
	var err error
	if pgtest.Selected() {
		st, err = postgres.Open(context.Background(), pgtest.FreshSchema(t), postgres.Options{Clock: clock, MaxConns: 8})
	} else {
		st, err = bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{Clock: clock})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func basic(id, secret string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(id, secret)
	return r.Header.Get("Authorization")
}

func (e *sessionEnv) do(method, path, body, auth string) (int, http.Header, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.ts.URL+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 && json.Unmarshal(b, &out) != nil {
		e.t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return resp.StatusCode, resp.Header, out
}

const sessionBody = `{"country":"SE","currency":"SEK","locale":"sv-SE","storeId":"%s","merchantReference":"%s","externalSessionId":"%s",
	"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`

func fill(s string, args ...string) string {
	for _, a := range args {
		s = strings.Replace(s, "%s", a, 1)
	}
	return s
}

func TestSessionEndpoints(t *testing.T) {
	e := newSessionEnv(t)
	for _, api := range []struct{ base, src string }{{"/v1/sessions", "checkout"}, {"/v1/payment-sessions", "payment"}} {
		code, hdr, s := e.do("POST", api.base, fill(sessionBody, "store-1", "PO-"+api.src, "ext-"+api.src), e.auth)
		id, _ := s["id"].(string)
		if code != 201 || hdr.Get("Location") != api.base+"/"+id || s["state"] != "created" || s["source"] != api.src ||
			s["totalOrderAmount"].(map[string]any)["minorUnits"] != 25000.0 || !strings.Contains(s["checkoutUrl"].(string), "/checkout/") {
			t.Fatalf("%s create: %d %v %v", api.base, code, hdr, s)
		}
		for _, ref := range []string{id, "external:ext-" + api.src} {
			if code, _, got := e.do("GET", api.base+"/"+ref, "", e.auth); code != 200 || got["id"] != id {
				t.Fatalf("%s get %s: %d %v", api.base, ref, code, got)
			}
		}
		if code, _, p := e.do("GET", api.base+"/"+id, "", e.other); code != 404 || p["code"] != "session_not_found" {
			t.Fatalf("other merchant: %d %v", code, p)
		}
		code, _, got := e.do("POST", api.base+"/"+id, `{"merchantReference":"PO-2","orderLines":[{"description":"Tiles","quantity":3,"unitPrice":12500,"vat":2500}]}`, e.auth)
		if code != 200 || got["merchantReference"] != "PO-2" || got["totalOrderAmount"].(map[string]any)["minorUnits"] != 37500.0 {
			t.Fatalf("update: %d %v", code, got)
		}
		code, _, p := e.do("POST", api.base+"/"+id, `{"orderLines":[{"quantity":0}],"totalOrderAmount":-1}`, e.auth)
		if code != 400 || p["code"] != "validation_failed" || len(p["errors"].([]any)) != 3 {
			t.Fatalf("bad update: %d %v", code, p)
		}
		if code, _, got = e.do("DELETE", api.base+"/"+id, "", e.auth); code != 200 || got["state"] != "cancelled" {
			t.Fatalf("delete: %d %v", code, got)
		}
		code, _, p = e.do("POST", api.base+"/"+id, `{"merchantReference":"PO-3"}`, e.auth)
		if code != 409 || p["code"] != "session_cancelled" {
			t.Fatalf("update cancelled: %d %v", code, p)
		}
	}
	// A duplicate external id is refused; a bad create names every field.
	code, _, p := e.do("POST", "/v1/sessions", fill(sessionBody, "s", "r", "ext-checkout"), e.auth)
	if code != 400 || p["code"] != "external_session_id_taken" {
		t.Fatalf("duplicate external id: %d %v", code, p)
	}
	// It is looked up by path, so it cannot hold a slash.
	code, _, p = e.do("POST", "/v1/sessions", fill(sessionBody, "s", "r", "a/b"), e.auth)
	if code != 400 || p["code"] != "validation_failed" || p["errors"].([]any)[0].(map[string]any)["field"] != "externalSessionId" {
		t.Fatalf("external id with a slash: %d %v", code, p)
	}
	code, _, p = e.do("POST", "/v1/sessions", `{"country":"Sweden","orderLines":[]}`, e.auth)
	if code != 400 || len(p["errors"].([]any)) != 4 {
		t.Fatalf("bad create: %d %v", code, p)
	}
	if code, _, _ := e.do("GET", "/v1/sessions", "", ""); code != 401 {
		t.Fatalf("unauthenticated list: %d", code)
	}
}

func TestSessionExpiryAndCompletion(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/payment-sessions", fill(sessionBody, "a", "b", "c"), e.auth)
	id := s["id"].(string)
	e.clock.Advance(25 * time.Hour)
	if _, _, got := e.do("GET", "/v1/payment-sessions/"+id, "", e.auth); got["state"] != "expired" {
		t.Fatalf("state after expiry %v", got["state"])
	}
	if code, _, p := e.do("POST", "/v1/payment-sessions/"+id, `{"merchantReference":"x"}`, e.auth); code != 409 || p["code"] != "session_expired" {
		t.Fatalf("update expired: %d %v", code, p)
	}
	// A fresh session is approved through its checkout page, then becomes an order.
	_, _, s = e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "d"), e.auth)
	id = s["id"].(string)
	// Not completed yet: no payment method to report, so none is made up
	// (an empty provider and type are outside the spec's enums).
	if _, _, ps := e.do("GET", "/v1/paymentstatus?sessionId="+id, "", e.auth); ps["status"] != "pending" || ps["paymentMethod"] != nil {
		t.Fatalf("payment status of a pending session %v", ps)
	}
	if code := e.approve(s["checkoutUrl"].(string), e.checkoutTerms(s["checkoutUrl"].(string))); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	_, _, got := e.do("GET", "/v1/sessions/"+id, "", e.auth)
	tok, _ := got["authorizationToken"].(string)
	if got["state"] != "authorized" || tok == "" {
		t.Fatalf("after approval %v", got)
	}
	if _, _, ps := e.do("GET", "/v1/paymentstatus?sessionId="+id, "", e.auth); ps["status"] != "authorized" || ps["paymentMethod"] == nil {
		t.Fatalf("payment status %v", ps)
	}
	code, _, o := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":25000}`, e.auth)
	if code != 200 {
		t.Fatalf("order: %d %v", code, o)
	}
	oid := o["orderId"].(string)
	for _, ref := range []string{id, oid} { // a checkout session is also found by its order id
		if _, _, got = e.do("GET", "/v1/sessions/"+ref, "", e.auth); got["state"] != "completed" || got["orderId"] != oid {
			t.Fatalf("completed by %s: %v", ref, got)
		}
	}
	if code, _, p := e.do("DELETE", "/v1/sessions/"+id, "", e.auth); code != 409 || p["code"] != "session_completed" {
		t.Fatalf("delete completed: %d %v", code, p)
	}
	// A tampered checkout link shows a plain page, not the session.
	u, _ := url.Parse(s["checkoutUrl"].(string))
	resp, _ := http.Get(e.ts.URL + u.Path + "?sig=forged")
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("forged link: %d", resp.StatusCode)
	}
}

func TestSessionListFilters(t *testing.T) {
	e := newSessionEnv(t)
	ids := map[string]string{}
	for _, spec := range []struct{ api, store, ref string }{
		{"/v1/sessions", "a", "PO-1"}, {"/v1/payment-sessions", "b", "PO-2"}, {"/v1/sessions", "b", "PO-3"}, {"/v1/sessions", "a", "PO-4"},
	} {
		_, _, s := e.do("POST", spec.api, fill(sessionBody, spec.store, spec.ref, "x"+spec.ref), e.auth)
		ids[spec.ref] = s["id"].(string)
		e.clock.Advance(time.Minute)
	}
	e.do("DELETE", "/v1/sessions/"+ids["PO-3"], "", e.auth)
	t1 := e.clock.Now().Format(time.RFC3339Nano)
	list := func(query string) []string {
		var out []string
		next := ""
		for pages := 0; pages < 10; pages++ {
			q := query + "&size=1"
			if next != "" {
				q += "&fromId=" + next
			}
			code, _, page := e.do("GET", "/v1/sessions?"+q, "", e.auth)
			if code != 200 {
				t.Fatalf("list %s: %d %v", q, code, page)
			}
			for _, s := range page["sessions"].([]any) {
				out = append(out, s.(map[string]any)["merchantReference"].(string))
			}
			n, _ := page["nextFromId"].(string)
			if n == "" {
				return out
			}
			next = n
		}
		return out
	}
	cases := map[string]string{
		"":                                   "PO-4,PO-3,PO-2,PO-1",
		"storeId=a":                          "PO-4,PO-1",
		"storeId=a,b&state=cancelled":        "PO-3",
		"merchantReference=PO-1,PO-2":        "PO-2,PO-1",
		"source=payment":                     "PO-2",
		"q=po-4":                             "PO-4",
		"state=created&source=checkout":      "PO-4,PO-1",
		"updatedFrom=" + url.QueryEscape(t1): "",
		"orderId=none":                       "",
	}
	for q, want := range cases {
		if got := strings.Join(list(q), ","); got != want {
			t.Errorf("%q: got %s, want %s", q, got, want)
		}
	}
	code, _, p := e.do("GET", "/v1/sessions?state=bogus&source=x&size=0&createdFrom=yesterday", "", e.auth)
	if code != 400 || len(p["errors"].([]any)) != 4 {
		t.Fatalf("bad query: %d %v", code, p)
	}
}

var termsField = regexp.MustCompile(`name="terms" value="([0-9a-f]+)"`)

// checkoutTerms loads the buyer's checkout page and returns the terms it
// carries in its form.
func (e *sessionEnv) checkoutTerms(checkoutURL string) string {
	e.t.Helper()
	resp, err := http.Get(checkoutURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	m := termsField.FindSubmatch(page)
	if resp.StatusCode != 200 || m == nil {
		e.t.Fatalf("checkout page %d without terms:\n%s", resp.StatusCode, page)
	}
	return string(m[1])
}

// approve submits the checkout form as a buyer who saw terms, and returns
// the status (303 when approved).
func (e *sessionEnv) approve(checkoutURL, terms string) int {
	e.t.Helper()
	return e.submit(checkoutURL, terms, "approve")
}

// submit posts the checkout form with the buyer's action (approve or decline).
func (e *sessionEnv) submit(checkoutURL, terms, action string) int {
	e.t.Helper()
	u, _ := url.Parse(checkoutURL)
	form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {"5560000001"}, "firstName": {"A"}, "lastName": {"B"},
		"email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {"invoice"},
		"action": {action}, "terms": {terms}}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(e.ts.URL+u.Path, form)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBuyerApprovesOnlyWhatTheySaw: the merchant changes the session's lines
// after the buyer loaded the page; the buyer's submit of the old page is
// refused with the page showing the new order, and nothing is authorized
// until the buyer confirms the new terms.
func TestBuyerApprovesOnlyWhatTheySaw(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "d"), e.auth)
	id, link := s["id"].(string), s["checkoutUrl"].(string)
	seen := e.checkoutTerms(link)
	if code, _, p := e.do("POST", "/v1/sessions/"+id, `{"orderLines":[{"description":"Excavator","quantity":1,"unitPrice":5000000,"vat":2500}]}`, e.auth); code != 200 {
		t.Fatalf("merchant update: %d %v", code, p)
	}
	if code := e.approve(link, seen); code != http.StatusConflict {
		t.Fatalf("approval of the page before the update: %d, want 409", code)
	}
	if _, _, got := e.do("GET", "/v1/sessions/"+id, "", e.auth); got["state"] != "created" || got["authorizationToken"] != nil {
		t.Fatalf("after the refused approval %v", got)
	}
	if code := e.approve(link, ""); code != http.StatusConflict {
		t.Fatalf("approval without terms: %d, want 409", code)
	}
	if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
		t.Fatalf("approval of the new terms: %d", code)
	}
	if _, _, got := e.do("GET", "/v1/sessions/"+id, "", e.auth); got["state"] != "authorized" || minor(got["totalOrderAmount"]) != 5000000 {
		t.Fatalf("after approving the new terms %v", got)
	}
}

// TestApprovalIsTheMerchantsToWithdraw: once the buyer approved, a decline
// posted from the same page changes nothing (the merchant was told of the
// approval); the merchant withdrawing the session's token cancels the
// session, which would otherwise stay authorized naming a dead token.
func TestApprovalIsTheMerchantsToWithdraw(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "dec"), e.auth)
	id, link := s["id"].(string), s["checkoutUrl"].(string)
	terms := e.checkoutTerms(link)
	if code := e.approve(link, terms); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	if code := e.submit(link, terms, "decline"); code != http.StatusSeeOther {
		t.Fatalf("decline after approval: %d, want 303 to the page showing the state", code)
	}
	_, _, got := e.do("GET", "/v1/sessions/"+id, "", e.auth)
	tok, _ := got["authorizationToken"].(string)
	if got["state"] != "authorized" || tok == "" || got["declineReason"] != nil {
		t.Fatalf("after a decline of an approved session: %v", got)
	}
	if code, _, p := e.do("DELETE", "/v1/authorization-tokens/"+tok, "", e.auth); code != 204 {
		t.Fatalf("delete the token: %d %v", code, p)
	}
	if _, _, got = e.do("GET", "/v1/sessions/"+id, "", e.auth); got["state"] != "cancelled" {
		t.Fatalf("session after its token was deleted: %v", got)
	}
	if code, _, p := e.do("GET", "/v1/paymentstatus?sessionId="+id, "", e.auth); code != 200 || p["status"] != "cancelled" {
		t.Fatalf("payment status after the token was deleted: %d %v", code, p)
	}

	// A session still awaiting the buyer is declined as before.
	_, _, s = e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "dec2"), e.auth)
	if code := e.submit(s["checkoutUrl"].(string), e.checkoutTerms(s["checkoutUrl"].(string)), "decline"); code != http.StatusSeeOther {
		t.Fatalf("decline: %d", code)
	}
	if _, _, got = e.do("GET", "/v1/sessions/"+s["id"].(string), "", e.auth); got["state"] != "cancelled" || got["declineReason"] != "declined by the buyer" {
		t.Fatalf("declined session: %v", got)
	}
}

// TestSessionApprovalUsedByACustomerToken: a customer token made from a
// session's approval completes the session, as an order would; and an
// approval whose token expired unused leaves the session expired.
func TestSessionApprovalUsedByACustomerToken(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/payment-sessions", fill(sessionBody, "a", "b", "ct"), e.auth)
	id, link := s["id"].(string), s["checkoutUrl"].(string)
	if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	_, _, got := e.do("GET", "/v1/payment-sessions/"+id, "", e.auth)
	tok := got["authorizationToken"].(string)
	code, _, ct := e.do("POST", "/v1/authorization-tokens/"+tok+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`, e.auth)
	if code != 200 {
		t.Fatalf("customer token: %d %v", code, ct)
	}
	if _, _, got = e.do("GET", "/v1/payment-sessions/"+id, "", e.auth); got["state"] != "completed" || got["customerToken"] != ct["customerToken"] {
		t.Fatalf("session after its customer token: %v", got)
	}
	if code, _, p := e.do("DELETE", "/v1/payment-sessions/"+id, "", e.auth); code != 409 || p["code"] != "session_completed" {
		t.Fatalf("delete after the customer token: %d %v", code, p)
	}
	if _, _, ps := e.do("GET", "/v1/paymentstatus?sessionId="+id, "", e.auth); ps["status"] != "authorized" || ps["paymentMethod"] == nil ||
		!strings.Contains(ps["note"].(string), "customer token") {
		t.Fatalf("payment status of a session completed by a customer token: %v", ps)
	}

	_, _, s = e.do("POST", "/v1/payment-sessions", fill(sessionBody, "a", "b", "late"), e.auth)
	id, link = s["id"].(string), s["checkoutUrl"].(string)
	if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	e.clock.Advance(61 * time.Minute)
	if _, _, got = e.do("GET", "/v1/payment-sessions/"+id, "", e.auth); got["state"] != "expired" {
		t.Fatalf("approved session after its token expired: %v", got["state"])
	}
	// The buyer did approve: the note must say that the authorization ran
	// out unused, not send the merchant chasing a buyer who never finished.
	if _, _, ps := e.do("GET", "/v1/paymentstatus?sessionId="+id, "", e.auth); ps["status"] != "expired" ||
		!strings.Contains(ps["note"].(string), "authorization expired") {
		t.Fatalf("payment status after the token expired: %v", ps)
	}
}

// TestCompletedCheckoutKeepsTheWayBack: a merchant that makes its order as
// soon as it is told of the approval (session.authorized) completes the
// session before the buyer's browser has followed the approval's redirect,
// or before the buyer reloads. The page of the completed session still
// thanks the buyer for what they approved and links back to the merchant's
// confirmation page; it lost both, so whether the buyer got the way back to
// the shop depended on who was faster. A session completed by a customer
// token says nothing of an order placed: none was.
func TestCompletedCheckoutKeepsTheWayBack(t *testing.T) {
	e := newSessionEnv(t)
	const body = `{"country":"SE","currency":"SEK","locale":"en-SE","orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}],
		"merchantUrls":{"confirmation":"https://shop.example/thanks?o=7","cancel":"https://shop.example/cancel"}}`
	for _, c := range []struct {
		api, use, done, placed string
	}{
		{"/v1/sessions", "/order", "orderId", "Your order has been placed."},
		{"/v1/payment-sessions", "/customer-token", "customerToken", ""},
	} {
		_, _, s := e.do("POST", c.api, body, e.auth)
		id, link := s["id"].(string), s["checkoutUrl"].(string)
		if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
			t.Fatalf("%s: approve: %d", c.api, code)
		}
		_, _, got := e.do("GET", c.api+"/"+id, "", e.auth)
		code, _, p := e.do("POST", "/v1/authorization-tokens/"+got["authorizationToken"].(string)+c.use,
			`{"country":"SE","currency":"SEK","locale":"en-SE","customer":{"email":"ap@b.se"}}`, e.auth)
		if code != 200 {
			t.Fatalf("%s: %s: %d %v", c.api, c.use, code, p)
		}
		if _, _, got = e.do("GET", c.api+"/"+id, "", e.auth); got["state"] != "completed" || got[c.done] == nil {
			t.Fatalf("%s: session after %s: %v", c.api, c.use, got)
		}
		code, _, page := fetchPage(t, link)
		if code != 200 {
			t.Fatalf("%s: completed page: %d", c.api, code)
		}
		wantAll(t, c.api+" completed page", page, `<h2 id="result">Purchase approved</h2>`,
			"approved this purchase by Invoice (pay within 30 days).",
			`<a href="https://shop.example/thanks?o=7">Back to the shop</a>`)
		if c.placed != "" {
			wantAll(t, c.api+" completed page", page, c.placed)
		} else if strings.Contains(page, "order has been placed") {
			t.Errorf("%s: a session completed by a customer token says an order was placed:\n%s", c.api, page)
		}
	}
}

// TestZeroTotalSessionApprovesNothing: a buyer who approved a session of
// total 0 (a free sample) approved 0, not "no amount stated": its token
// makes an order of 0 and refuses a bigger one, as the token of any other
// session refuses an order above the total the buyer saw. It used to make
// an order of any amount.
func TestZeroTotalSessionApprovesNothing(t *testing.T) {
	e := newSessionEnv(t)
	free := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"Free sample","quantity":1,"unitPrice":0,"vat":2500}]}`
	_, _, s := e.do("POST", "/v1/sessions", free, e.auth)
	link := s["checkoutUrl"].(string)
	if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	_, _, got := e.do("GET", "/v1/sessions/"+s["id"].(string), "", e.auth)
	tok := got["authorizationToken"].(string)
	code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":125000,"vat":2500}]}`, e.auth)
	if code != 400 || p["code"] != "authorization_exceeded" {
		t.Fatalf("an order of 2,500.00 from an approval of 0: %d %v", code, p)
	}
	code, _, p = e.do("POST", "/v1/authorization-tokens/"+tok+"/order", free, e.auth)
	if code != 200 {
		t.Fatalf("the order of 0 the buyer approved: %d %v", code, p)
	}
	o := e.get(p["orderId"].(string))
	if amt := o["orderAmount"].(map[string]any)["minorUnits"]; amt != float64(0) {
		t.Fatalf("order amount %v, want 0", amt)
	}
}

// TestCheckoutRedirectKeepsTheLink: a submit whose signature is in the
// address only (a client of its own, not the page's form) is redirected to
// the page with that link's signature, not to "?sig=", which the page
// refuses as invalid.
func TestCheckoutRedirectKeepsTheLink(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "redir"), e.auth)
	link := s["checkoutUrl"].(string)
	u, _ := url.Parse(link)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(e.ts.URL+u.Path+"?sig="+url.QueryEscape(u.Query().Get("sig")), url.Values{"action": {"decline"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err == nil {
		loc = resp.Request.URL.ResolveReference(loc) // relative to the page, as a browser reads it
	}
	if resp.StatusCode != http.StatusSeeOther || err != nil || loc.Path != u.Path || loc.Query().Get("sig") != u.Query().Get("sig") {
		t.Fatalf("decline with the signature in the address: %d, Location %q, want 303 to %s", resp.StatusCode, resp.Header.Get("Location"), link)
	}
	page, err := http.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Fatalf("the page redirected to: %d, want 200", page.StatusCode)
	}
}

// The hosted page's company search is limited as the search endpoint is:
// a checkout link, which never expires, searched the directory without limit.
func TestCheckoutSearchRateLimited(t *testing.T) {
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) { c.CompanySearchRate = 1 })
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", "x1"), e.auth)
	link := s["checkoutUrl"].(string)
	// Views of the page without a search take nothing from the limit: a
	// search after a burst's worth of them still passes.
	for i := 0; i < 12; i++ {
		if resp, err := http.Get(link); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("page without a search: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	if resp, err := http.Get(link + "&q=Approved"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a search after 12 views of the page: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	codes := map[int]int{}
	for i := 0; i < 15; i++ {
		resp, err := http.Get(link + "&q=Approved")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests && (strings.Contains(string(body), `name="companyId"`) || resp.Header.Get("Retry-After") != "1") {
			t.Fatalf("a refused search still lists companies or says no Retry-After: %s", body)
		}
	}
	if codes[http.StatusOK] > 10 || codes[http.StatusTooManyRequests] < 5 {
		t.Fatalf("15 searches through the checkout page at burst 10, one taken before: codes %v", codes)
	}
	// The page itself, without a search, is not limited.
	if resp, err := http.Get(link); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("page without a search: %v %v", resp, err)
	}

	// Below one search a second the page says the seconds to the next
	// token, as the endpoint does: 20 at 0.05 a second (19 should a loaded
	// machine take a second between the two), not the "1" that would be
	// refused again.
	slow := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) { c.CompanySearchRate = 0.05 })
	_, _, s = slow.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-2", "x2"), slow.auth)
	link = s["checkoutUrl"].(string)
	var got []string
	for i := 0; i < 2; i++ {
		resp, err := http.Get(link + "&q=Approved")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("Retry-After")))
	}
	if got[0] != "200 " || (got[1] != "429 20" && got[1] != "429 19") {
		t.Fatalf("the checkout page's searches at 0.05 a second: %q, want [200, 429 with Retry-After 20]", got)
	}
}

// TestCheckoutSubmitBoundsItsSearch: the page's form sends its search back
// (the hidden q) and a page shown again searches it. The address's q is cut
// to the search endpoint's 100 characters, the form's was not: one submit
// of 400 000 one-letter words (0.8 MB, within the body limit) searched for
// 6 s of CPU on the sandbox's directory alone, and echoed the query twice.
func TestCheckoutSubmitBoundsItsSearch(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", "big-q"), e.auth)
	link := s["checkoutUrl"].(string)
	u, _ := url.Parse(link)
	long := strings.Repeat("Approved ", 1000)
	resp, err := http.PostForm(e.ts.URL+u.Path, url.Values{"sig": {u.Query().Get("sig")}, "q": {long}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("submit without the buyer's details: %d, want 422", resp.StatusCode)
	}
	want := `value="` + string([]rune(strings.TrimSpace(long))[:maxCompanyQuery]) + `"`
	if n := strings.Count(string(page), want); n != 2 || strings.Contains(string(page), strings.TrimSpace(long)) {
		t.Fatalf("the page shown again holds the search as sent, not cut to %d characters as the address's is (%d fields of %s)", maxCompanyQuery, n, want)
	}
}

// TestCheckoutNoticeSurvivesTheSearchLimit: a buyer whose address has used
// up the search limit (a NAT shared by a company's buyers) submits a page
// whose order changed meanwhile. The page's hidden search went through the
// limiter and its message replaced the notice: the 409 page no longer said
// the order changed, the point of the 409.
func TestCheckoutNoticeSurvivesTheSearchLimit(t *testing.T) {
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) { c.CompanySearchRate = 1 })
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", "x1"), e.auth)
	id, link := s["id"].(string), s["checkoutUrl"].(string)
	seen := e.checkoutTerms(link)
	if code, _, p := e.do("POST", "/v1/sessions/"+id, `{"orderLines":[{"description":"Excavator","quantity":1,"unitPrice":5000000,"vat":2500}]}`, e.auth); code != 200 {
		t.Fatalf("merchant update: %d %v", code, p)
	}
	for i := 0; i < 12; i++ { // burst 10
		resp, err := http.Get(link + "&q=Approved")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	u, _ := url.Parse(link)
	form := url.Values{"sig": {u.Query().Get("sig")}, "q": {"Approved"}, "companyId": {"5560000001"}, "firstName": {"A"}, "lastName": {"B"},
		"email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {"invoice"},
		"action": {"approve"}, "terms": {seen}}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(e.ts.URL+u.Path, form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale approval: %d, want 409", resp.StatusCode)
	}
	if !strings.Contains(string(body), "Beställningen ändrades") { // the session is sv-SE
		t.Fatalf("409 page does not say the order changed:\n%s", body)
	}
}

// A merchant URL is checked as a URL, not only by its prefix: one holding a
// NUL or a line break was stored on bbolt (and failed on PostgreSQL, which
// holds no NUL) and linked from the checkout page.
func TestMerchantURLsMustParse(t *testing.T) {
	e := newSessionEnv(t)
	const body = `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"T","quantity":1,"unitPrice":100,"vat":2500}],"merchantUrls":{"confirmation":%s,"cancel":"https://shop.example/cancel#top"}}`
	for _, u := range []string{"https://shop.example/ok\x00", "https://shop.example/\nok", "https://shop.example/\tok", "https://", "http:///path"} {
		code, _, b := e.req("POST", "/v1/payment-sessions", fmt.Sprintf(body, jsonString(u)), e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := problemFields(b); f != "merchantUrls.confirmation" {
			t.Fatalf("%q: fields %s", u, f)
		}
	}
	code, _, b := e.req("POST", "/v1/payment-sessions", fmt.Sprintf(body, jsonString("https://shop.example/ok?o=1")), e.auth, nil)
	if code != 201 {
		t.Fatalf("a good URL: %d %v", code, b)
	}
	id := b["id"].(string)
	code, _, b = e.req("POST", "/v1/payment-sessions/"+id, `{"merchantUrls":{"cancel":"https://shop.example/\u0000"}}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if f := problemFields(b); f != "merchantUrls.cancel" {
		t.Fatalf("update: fields %s", f)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// On a session update an empty list or map differs from one left out, and
// null, which a client's nil list or map marshals to, could mean either: it
// is refused, as a full capture's "orderLines": null is.
func TestSessionUpdateRefusesNullWhereEmptyDiffers(t *testing.T) {
	e := newSessionEnv(t)
	code, _, b := e.req("POST", "/v1/payment-sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"T","quantity":1,"unitPrice":100,"vat":2500}],"paymentMethods":["card"],"metadata":{"k":"v"}}`, e.auth, nil)
	if code != 201 {
		t.Fatalf("create: %d %v", code, b)
	}
	id := b["id"].(string)
	for _, field := range []string{"orderLines", "paymentMethods", "metadata"} {
		code, _, b := e.req("POST", "/v1/payment-sessions/"+id, `{"merchantReference":"x","`+field+`":null}`, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := problemFields(b); f != field {
			t.Fatalf("%s: fields %s", field, f)
		}
	}
	code, _, b = e.req("POST", "/v1/payment-sessions/"+id, `{"merchantReference":"x","customer":null,"merchantUrls":null,"vatMode":null}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("null where it is the field left out: %d %v", code, b)
	}
}

// The session list's q is bounded at 200 characters, counted as every other
// text bound is (code points), not bytes: a Swedish reference of å, ä and ö
// is two bytes a letter in UTF-8 and was refused at 101 letters.
func TestSessionListQueryBoundCountsCharacters(t *testing.T) {
	e := newSessionEnv(t)
	ext := strings.Repeat("å", 100) // externalSessionId's bound
	code, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", ext), e.auth)
	id, _ := s["id"].(string)
	if code != 201 || id == "" {
		t.Fatalf("create: %d %v", code, s)
	}
	code, _, page := e.do("GET", "/v1/sessions?q="+url.QueryEscape(strings.Repeat("Å", 100)), "", e.auth)
	if code != 200 {
		t.Fatalf("100 letters: %d %v", code, page)
	}
	if got := page["sessions"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != id {
		t.Fatalf("100 letters found %v, want session %s", got, id)
	}
	code, _, p := e.do("GET", "/v1/sessions?q="+url.QueryEscape(strings.Repeat("ö", 200)), "", e.auth)
	if code != 200 {
		t.Fatalf("200 letters: %d %v", code, p)
	}
	code, _, p = e.do("GET", "/v1/sessions?q="+url.QueryEscape(strings.Repeat("ö", 201)), "", e.auth)
	if errs, _ := p["errors"].([]any); code != 400 || len(errs) != 1 || errs[0].(map[string]any)["field"] != "q" {
		t.Fatalf("201 letters: %d %v", code, p)
	}
}

// The checkout page shows the buyer's search and form again as they were
// sent; bytes that are no UTF-8 (a form or link of another encoding, "%FF")
// were copied into a page that declares UTF-8. They are refused as before,
// and shown as U+FFFD.
func TestCheckoutPageStaysUTF8(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", "x1"), e.auth)
	checkout := s["checkoutUrl"].(string)
	page := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := page(http.Get(checkout + "&q=G%C3%B6ta%FF%ED%A0%80"))
	if code != 200 || !utf8.ValidString(body) || !strings.Contains(body, `name="q" value="Göta`+"\uFFFD") {
		t.Fatalf("search shown again: %d, valid UTF-8 %v:\n%s", code, utf8.ValidString(body), body)
	}
	u, _ := url.Parse(checkout)
	form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {"5560000001"}, "firstName": {"A"}, "lastName": {"B\xc3"},
		"email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Malm\xf6"}, "paymentMethod": {"invoice"},
		"action": {"approve"}, "terms": {e.checkoutTerms(checkout)}, "q": {"\xff"}}
	code, body = page(http.PostForm(e.ts.URL+u.Path, form))
	if code != http.StatusUnprocessableEntity || !utf8.ValidString(body) ||
		!strings.Contains(body, `name="city" value="Malm`+"\uFFFD") || !strings.Contains(body, `id="city-error"`) ||
		!strings.Contains(body, `id="lastName-error"`) {
		t.Fatalf("form shown again: %d, valid UTF-8 %v:\n%s", code, utf8.ValidString(body), body)
	}
	if _, _, got := e.do("GET", "/v1/sessions/"+s["id"].(string), "", e.auth); got["state"] != "created" {
		t.Fatalf("session %v", got["state"])
	}
}

// Every field the checkout page shows again is shown as UTF-8, not only the
// search and the city: a value of each with a byte that is no UTF-8 comes
// back with U+FFFD in its place, refused (422, the field named), and the
// session not approved.
func TestCheckoutPageShowsEveryFieldAsUTF8(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "PO-1", "x1"), e.auth)
	checkout := s["checkoutUrl"].(string)
	u, _ := url.Parse(checkout)
	fields := map[string]string{"firstName": "Ann\xe5", "lastName": "B\xc3", "email": "a\xff@b.se", "phone": "070\xff",
		"street": "Gatan\xf6 1", "postalCode": "111\xff22", "city": "Malm\xf6"}
	form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {"5560000001"}, "paymentMethod": {"invoice"},
		"action": {"approve"}, "terms": {e.checkoutTerms(checkout)}}
	for k, v := range fields {
		form.Set(k, v)
	}
	resp, err := http.PostForm(e.ts.URL+u.Path, form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if resp.StatusCode != http.StatusUnprocessableEntity || !utf8.ValidString(body) {
		t.Fatalf("form shown again: %d, valid UTF-8 %v:\n%s", resp.StatusCode, utf8.ValidString(body), body)
	}
	for k, v := range fields {
		shown := strings.ToValidUTF8(v, "\uFFFD")
		if !strings.Contains(body, `name="`+k+`" value="`+shown+`"`) || !strings.Contains(body, `id="`+k+`-error"`) {
			t.Errorf("%s: not shown as %q and refused:\n%s", k, shown, body)
		}
	}
	if _, _, got := e.do("GET", "/v1/sessions/"+s["id"].(string), "", e.auth); got["state"] != "created" {
		t.Fatalf("session %v", got["state"])
	}
}
