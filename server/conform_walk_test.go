package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// walker sends requests through the real router (validating: every answer
// is checked against /openapi.json by kin-openapi and by conformance) and
// checks every body it sends as valid against the operation's request
// schema.
type walker struct {
	*sessionEnv
	c       *conformance
	auth    string
	reached map[*conformOp]bool // the operations answered with success
}

// reach records that method and path were answered with a success.
func (w *walker) reach(method, path string) {
	p, _, _ := strings.Cut(path, "?")
	if o := w.c.match(method, p); o != nil {
		w.reached[o] = true
	}
}

// ok sends a request the document allows and wants status; its JSON body
// must match the operation's request schema.
func (w *walker) ok(method, path, body string, status int) map[string]any {
	w.t.Helper()
	if body != "" {
		p, _, _ := strings.Cut(path, "?")
		for _, e := range w.c.checkRequest(method, p, []byte(body)) {
			w.t.Errorf("%s %s: the walk's body does not match the document: %s\nbody: %s", method, path, e, body)
		}
	}
	return w.want(method, path, body, status, nil)
}

// want sends any request and wants status.
func (w *walker) want(method, path, body string, status int, hdr map[string]string) map[string]any {
	w.t.Helper()
	code, _, b := w.req(method, path, body, w.auth, hdr)
	if code != status {
		w.t.Fatalf("%s %s: %d %v, want %d", method, path, code, b, status)
	}
	if code < 400 {
		w.reach(method, path)
	}
	return b
}

type readTimeout struct{}

func (readTimeout) Error() string   { return "i/o timeout" }
func (readTimeout) Timeout() bool   { return true }
func (readTimeout) Temporary() bool { return true }

// slowBody is a body still arriving when the server's read deadline passes.
type slowBody struct{}

func (slowBody) Read([]byte) (int, error) { return 0, readTimeout{} }
func (slowBody) Close() error             { return nil }

// TestEveryAnswerMatchesTheDocument walks every operation of /openapi.json:
// the refusals every route or every body makes, then orders through their
// whole life, tokens, sessions, settlements, notifications, the sandbox
// and the operations routes, each answer checked against the document.
func TestEveryAnswerMatchesTheDocument(t *testing.T) {
	e := newSessionEnv(t)
	c := loadConformance()
	w := &walker{sessionEnv: e, c: c, auth: e.auth, reached: map[*conformOp]bool{}}
	defer func() {
		for i, o := range c.ops {
			if !w.reached[&c.ops[i]] && !t.Failed() {
				t.Errorf("the walk reached no success of %s %s", o.method, o.path)
			}
		}
	}()

	t.Run("refusals of every operation", func(t *testing.T) {
		// A server sharing the ledger, not behind validating (which reads
		// the body first): its answers are checked here.
		srv := New(Config{Ledger: e.ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true, Clock: e.clock})
		h := srv.Handler()
		for _, o := range c.ops {
			path := o.path
			for _, seg := range o.segs {
				if strings.HasPrefix(seg, "{") {
					path = strings.Replace(path, seg, "x", 1)
				}
			}
			_, body := o.op["requestBody"].(map[string]any)
			send := func(what string, status int, change func(r *http.Request)) {
				t.Helper()
				r := httptest.NewRequest(o.method, path, strings.NewReader("{}"))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", e.auth)
				change(r)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != status {
					t.Errorf("%s %s, %s: %d, want %d: %s", o.method, o.path, what, rec.Code, status, rec.Body)
				}
				for _, err := range c.checkResponse(o.method, path, rec.Code, rec.Header(), rec.Body.Bytes()) {
					t.Errorf("%s %s, %s → %d: %s\nbody: %.300s", o.method, o.path, what, rec.Code, err, rec.Body)
				}
			}
			send("a query that is not URL-encoded", 400, func(r *http.Request) { r.URL.RawQuery = "x=%zz" })
			send("two Authorization headers", 400, func(r *http.Request) { r.Header.Add("Authorization", "Basic eDp5") })
			send("an empty Idempotency-Key", 400, func(r *http.Request) { r.Header["Idempotency-Key"] = []string{""} })
			send("a Content-Length past the limit", 413, func(r *http.Request) { r.ContentLength = 1 << 30 })
			if body && o.path != tokenPath && o.op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"] != nil {
				send("a body that is not JSON", 415, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
				send("a body still arriving at the read deadline", 408, func(r *http.Request) { r.Body, r.ContentLength = slowBody{}, -1 })
			}
		}
		fixed := New(Config{Ledger: e.ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true}).Handler()
		r := httptest.NewRequest("POST", "/sandbox/v1/clock", strings.NewReader(`{"advance":"1h"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", e.auth)
		rec := httptest.NewRecorder()
		fixed.ServeHTTP(rec, r)
		if rec.Code != 403 {
			t.Errorf("moving a fixed clock: %d %s, want 403", rec.Code, rec.Body)
		}
		for _, err := range c.checkResponse("POST", "/sandbox/v1/clock", rec.Code, rec.Header(), rec.Body.Bytes()) {
			t.Errorf("moving a fixed clock → %d: %s", rec.Code, err)
		}
	})

	// Operations and the document itself.
	w.ok("GET", "/healthz", "", 200)
	w.ok("GET", "/readyz", "", 200)
	w.ok("GET", "/metrics", "", 200)
	w.ok("GET", "/openapi.json", "", 200)
	w.ok("GET", "/sandbox/v1/fixtures", "", 200)
	w.ok("GET", "/sandbox/v1/clock", "", 200)
	w.ok("GET", "/v1/headless/search/companies?q=Byggvaror&country=SE", "", 200)
	w.want("GET", "/v1/headless/search/companies?q=Byggvaror", "", 400, nil)

	// OAuth: a token, and the refusals in RFC 6749's shape.
	for _, tc := range []struct {
		form string
		auth string
		code int
	}{
		{"grant_type=client_credentials", e.auth, 200},
		{"grant_type=client_credentials&client_id=m1&client_secret=s1", "", 200},
		{"grant_type=password", e.auth, 400},
		{"grant_type=client_credentials", basic("m1", "wrong"), 401},
	} {
		r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader(tc.form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		code, _, b := e.send(r)
		if code != tc.code {
			t.Errorf("token %s: %d %v, want %d", tc.form, code, b, tc.code)
		}
		if code < 400 {
			w.reach("POST", "/oauth/token")
		}
	}

	// A merchant that acknowledges its orders, with fees for settlements.
	cr := w.ok("POST", "/sandbox/v1/merchants", `{"name":"Walk AB","requireAcknowledgement":true,"feeBasisPoints":150,"feeFixedPerCapture":100}`, 201)
	w.auth = basic(cr["clientId"].(string), cr["clientSecret"].(string))
	w.want("GET", "/v1/notification-settings", "", 404, nil)

	// Notifications to a receiver that fails its first delivery.
	var calls atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			rw.WriteHeader(500)
			return
		}
		rw.WriteHeader(204)
	}))
	defer recv.Close()
	ws := w.ok("PUT", "/v1/notification-settings", fmt.Sprintf(`{"url":%q,"events":["order.*"]}`, recv.URL), 200)
	if ws["secret"] == nil {
		t.Errorf("first settings without a secret: %v", ws)
	}
	w.ok("GET", "/v1/notification-settings", "", 200)
	w.ok("PUT", "/v1/notification-settings", fmt.Sprintf(`{"url":%q,"events":["order.*","document.resent"],"rotateSecret":true}`, recv.URL), 200)

	mint := func(company, pm string) string {
		b := w.ok("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"companyId":%q},"paymentMethod":{"type":%q}}`, company, pm), 201)
		return b["authorizationToken"].(string)
	}
	create := func(company, pm string) string {
		b := w.ok("POST", "/v1/authorization-tokens/"+mint(company, pm)+"/order", orderBody, 200)
		return b["orderId"].(string)
	}
	w.want("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000019"},"paymentMethod":{"type":"invoice"}}`, 402, nil)

	// An invoice order through its life.
	id := create("5560000001", "invoice")
	w.ok("GET", "/v1/orders/"+id, "", 200)
	// The delivery log before any attempt.
	pending := w.ok("GET", "/v1/notifications", "", 200)["notifications"].([]any)
	if len(pending) == 0 || pending[0].(map[string]any)["status"] != "pending" {
		t.Errorf("no pending notification: %v", pending)
	} else {
		w.ok("GET", "/v1/notifications/"+pending[0].(map[string]any)["id"].(string), "", 200)
	}
	w.ok("POST", "/v1/orders/"+id+"/acknowledge", "", 200)
	w.ok("POST", "/v1/orders/"+id+"/reference", `{"reference":"PO-2","settlementReference":"S-2"}`, 200)
	w.ok("POST", "/v1/orders/"+id+"/customer", `{"email":"ap@example.se","phone":"+4681234567","reference1":"Att: AP",
		"billingAddress":{"companyName":"Approved Byggvaror AB","streetAddress":"Gatan 1","postalCode":"11122","city":"Stockholm","country":"SE"},
		"invoiceChannel":{"type":"email","destination":"default"}}`, 200)
	w.ok("POST", "/v1/orders/"+id+"/extendexpiry", "", 200)
	w.ok("POST", "/v1/orders/"+id, `{"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500,"type":"physical","reference":"T-1"},
		{"description":"Grout","quantity":1,"unitPrice":4000,"vat":2500},{"description":"Freight","quantity":1,"unitPrice":1000,"vat":2500,"type":"shippingFee"}],
		"totalOrderAmount":30000,"totalOrderAmountExclVat":24000,"totalOrderVatAmount":6000}`, 200)
	o := w.ok("GET", "/v1/orders/"+id, "", 200)
	ls := lines(o["uncaptured"])
	first := ls[0].(map[string]any)
	capBody, _ := json.Marshal(map[string]any{"totalCaptureAmount": first["totalAmount"], "orderLines": []any{map[string]any{
		"id": first["id"], "description": first["description"], "quantity": first["quantity"]}}})
	w.ok("POST", "/v1/orders/"+id+"/partialcapture", string(capBody), 200)
	o = w.ok("POST", "/v1/orders/"+id+"/capture", `{}`, 200)
	caps := o["captured"].([]any)
	cap1 := caps[0].(map[string]any)["ledgerId"].(string)
	cap2 := caps[1].(map[string]any)["ledgerId"].(string)
	w.ok("POST", "/v1/orders/"+id+"/document/"+cap1+"/resend", "", 200)
	w.ok("POST", "/v1/orders/"+id+"/partialrefund/"+cap1, `{"totalRefundAmount":12500,"note":"one broken","orderLines":[{"description":"Tiles","quantity":1,"unitPrice":12500,"vat":2500}]}`, 200)
	w.ok("POST", "/v1/orders/"+id+"/refund/"+cap1, `{"note":"all of it"}`, 200)
	w.ok("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+cap2+"/payments", `{"amount":1000}`, 200)
	w.ok("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+cap2+"/status", `{"status":"reminder1"}`, 200)
	w.ok("POST", "/v1/orders/"+id+"/recourse/"+cap2, `{"reason":"unpaid"}`, 200)
	o = w.ok("GET", "/v1/orders/"+id, "", 200)
	w.ok("GET", "/v1/orders/"+id+"/paymentstatus", "", 200)
	w.ok("GET", "/v1/paymentstatus?orderId="+id, "", 200)
	if cap1 == "" || len(events(o)) == 0 {
		t.Fatalf("order: %v", o)
	}
	// Document link of the invoice.
	if link, _ := caps[1].(map[string]any)["documentUrl"].(string); link != "" {
		u, _ := url.Parse(link)
		w.ok("GET", u.RequestURI(), "", 200)
		w.want("GET", u.Path+"?expires=1&signature=x", "", 403, nil)
	}

	// A second invoice: voided, then the rest cancelled; a third cancelled whole.
	v := create("5560000001", "invoice")
	w.ok("POST", "/v1/orders/"+v+"/acknowledge", "", 200)
	o = w.ok("POST", "/v1/orders/"+v+"/partialcapture", `{"totalCaptureAmount":5000,"orderLines":[{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}]}`, 200)
	w.ok("DELETE", "/v1/orders/"+v+"/"+o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string), "", 200)
	w.ok("DELETE", "/v1/orders/"+v+"/"+o["uncaptured"].(map[string]any)["ledgerId"].(string), "", 200)
	x := create("5560000001", "invoice")
	w.ok("POST", "/v1/orders/"+x+"/paymentmethod", `{"paymentMethod":{"provider":"service","type":"advanceInvoice"}}`, 200)
	w.ok("DELETE", "/v1/orders/"+x, "", 200)
	// Advance invoice, card, on hold (approved and denied), blacklisted.
	create("5560000027", "advanceInvoice")
	card := create("5560000001", "card")
	w.ok("POST", "/v1/orders/"+card+"/acknowledge", "", 200)
	w.ok("POST", "/v1/orders/"+card+"/capture", "", 200)
	for _, d := range []string{"approve", "deny"} {
		h := create("5560000035", "invoice")
		w.ok("POST", "/sandbox/v1/orders/"+h+"/risk", fmt.Sprintf(`{"decision":%q}`, d), 200)
	}
	create("5560000043", "invoice")

	// Lists, filtered and paged.
	page := w.ok("GET", "/v1/orders?size=2", "", 200)
	w.ok("GET", "/v1/orders?size=2&cursor="+url.QueryEscape(page["nextCursor"].(string)), "", 200)
	w.ok("GET", "/v1/orders?status=fullyCaptured,cancelled&statusNot=expired&storeId=s1&paymentMethodCategory=invoice,card&createdFrom=2000-01-01T00:00:00Z", "", 200)
	w.ok("GET", "/v1/orders?q="+id, "", 200)
	w.want("GET", "/v1/orders?size=0", "", 400, nil)
	w.want("GET", "/v1/orders?status=", "", 400, nil)
	w.want("GET", "/v1/orders/nope", "", 404, nil)
	w.want("POST", "/v1/orders/nope/acknowledge", "", 404, nil)

	// Tokens: a customer token, an order from it, revoked.
	tok := mint("5560000001", "invoice")
	ct := w.ok("POST", "/v1/authorization-tokens/"+tok+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`, 200)
	ctok := ct["customerToken"].(string)
	w.ok("GET", "/v1/customer-tokens/"+ctok, "", 200)
	w.ok("POST", "/v1/customer-tokens/"+ctok+"/order", `{"country":"SE","currency":"SEK","storeId":"s2","orderLines":[{"description":"Tiles","quantity":1,"unitPrice":100,"vat":2500}]}`, 200)
	w.ok("DELETE", "/v1/customer-tokens/"+ctok, "", 200)
	w.ok("GET", "/v1/customer-tokens/"+ctok, "", 200)
	w.want("POST", "/v1/customer-tokens/"+ctok+"/order", `{"country":"SE","currency":"SEK","orderLines":[{"description":"Tiles","quantity":1,"unitPrice":100,"vat":2500}]}`, 409, nil)
	w.want("GET", "/v1/customer-tokens/nope", "", 404, nil)
	w.ok("DELETE", "/v1/authorization-tokens/"+mint("5560000001", "invoice"), "", 204)

	// Sessions of both APIs.
	sess := w.ok("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","merchantReference":"PO-9","externalSessionId":"ext-9","storeId":"s1",
		"merchantUrls":{"confirmation":"https://example.se/ok","cancel":"https://example.se/no"},"expiresInMinutes":60,
		"orderLines":[{"description":"a","quantity":1,"unitPrice":100,"vat":2500}]}`, 201)
	sid := sess["id"].(string)
	w.ok("GET", "/v1/sessions/"+sid, "", 200)
	w.ok("GET", "/v1/sessions/external:ext-9", "", 200)
	w.ok("POST", "/v1/sessions/"+sid, `{"merchantReference":"PO-10","orderLines":[{"description":"b","quantity":2,"unitPrice":100,"vat":2500}]}`, 200)
	if cu, _ := sess["checkoutUrl"].(string); cu != "" {
		u, _ := url.Parse(cu)
		w.ok("GET", u.RequestURI(), "", 200)
	}
	// The buyer approves another session on its hosted checkout page.
	approved := w.ok("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"a","quantity":1,"unitPrice":100,"vat":2500}]}`, 201)
	if link := approved["checkoutUrl"].(string); e.approve(link, e.checkoutTerms(link)) != http.StatusSeeOther {
		t.Errorf("the buyer's approval of %s was not answered 303", link)
	} else {
		u, _ := url.Parse(link)
		w.reach("POST", u.Path)
	}
	w.ok("GET", "/v1/sessions?size=1&state=created,authorized&storeId=s1&createdFrom=2000-01-01T00:00:00Z", "", 200)
	w.ok("GET", "/v1/paymentstatus?sessionId="+sid, "", 200)
	w.ok("DELETE", "/v1/sessions/"+sid, "", 200)
	w.want("DELETE", "/v1/sessions/"+sid, "", 409, nil)
	ps := w.ok("POST", "/v1/payment-sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"a","quantity":1,"unitPrice":100,"vat":2500}]}`, 201)
	psid := ps["id"].(string)
	w.ok("GET", "/v1/payment-sessions/"+psid, "", 200)
	w.ok("POST", "/v1/payment-sessions/"+psid, `{"metadata":{"k":"v"}}`, 200)
	w.ok("DELETE", "/v1/payment-sessions/"+psid, "", 200)
	w.want("GET", "/v1/payment-sessions/nope", "", 404, nil)

	// Jobs, the clock, settlements.
	w.ok("POST", "/sandbox/v1/jobs/autocapture", "", 200)
	w.ok("POST", "/sandbox/v1/jobs/tasks", "", 200)
	w.ok("POST", "/sandbox/v1/clock", `{"advance":"72h"}`, 200)
	w.ok("POST", "/sandbox/v1/jobs/expire", "", 200)
	run := w.ok("POST", "/sandbox/v1/settlements/run", "", 200)
	sl := w.ok("GET", "/v1/settlements?size=1", "", 200)
	w.ok("GET", "/v1/settlements?currency=SEK&createdFrom=2000-01-01T00:00:00Z", "", 200)
	if ss := sl["settlements"].([]any); len(ss) > 0 {
		stid := ss[0].(map[string]any)["id"].(string)
		w.ok("GET", "/v1/settlements/"+stid, "", 200)
		w.ok("GET", "/v1/settlements/"+stid+"/tx?size=2", "", 200)
		w.ok("GET", "/v1/settlements/"+stid+"/export.csv", "", 200)
	} else {
		t.Errorf("no settlement after a run: %v", run)
	}
	w.want("GET", "/v1/settlements/nope", "", 404, nil)

	// Deliveries: one failed attempt, then delivered, then redelivered.
	w.ok("POST", "/sandbox/v1/jobs/notifications", "", 200)
	w.ok("POST", "/sandbox/v1/clock", `{"advance":"1h"}`, 200)
	w.ok("POST", "/sandbox/v1/jobs/notifications", "", 200)
	np := w.ok("GET", "/v1/notifications?size=5", "", 200)
	ns := np["notifications"].([]any)
	if len(ns) == 0 {
		t.Fatalf("no notifications: %v", np)
	}
	for _, n := range ns {
		nid := n.(map[string]any)["id"].(string)
		nb := w.ok("GET", "/v1/notifications/"+nid, "", 200)
		if nb["status"] == "delivered" || nb["status"] == "failed" {
			w.ok("POST", "/v1/notifications/"+nid+"/redeliver", "", 200)
		}
	}
	w.want("GET", "/v1/notifications/nope", "", 404, nil)
	w.ok("DELETE", "/v1/notification-settings", "", 204)
}
