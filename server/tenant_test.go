package server

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tenantEnv is a server with two merchants: a, who has one of everything,
// and b, who is sent to every route with a's ids, keys and cursors.
type tenantEnv struct {
	*sessionEnv
	t *testing.T
	// secrets are what the answer to b must never hold unless b's own
	// request held it: a's ids, tokens, cursors, texts only a sent and its
	// webhook's URL and secret.
	secrets map[string]string // value → what it is
}

// tenantAnswer is an answer as sent: status, headers and the raw body.
type tenantAnswer struct {
	code int
	hdr  http.Header
	raw  []byte
}

func (x *tenantEnv) send(auth, method, path, body string, hdr map[string]string) tenantAnswer {
	x.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, x.ts.URL+path, rd)
	if err != nil {
		x.t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		x.t.Fatal(err)
	}
	return tenantAnswer{resp.StatusCode, resp.Header, raw}
}

// asA sends a's request and wants status.
func (x *tenantEnv) asA(status int, method, path, body string, hdr map[string]string) tenantAnswer {
	x.t.Helper()
	a := x.send(x.auth, method, path, body, hdr)
	if a.code != status {
		x.t.Fatalf("a: %s %s: %d %s, want %d", method, path, a.code, a.raw, status)
	}
	return a
}

// asB sends b's request (auth "" uses b's Basic credentials) and checks
// that neither the answer's body nor its headers hold anything of a's that
// the request itself did not.
func (x *tenantEnv) asB(auth, method, path, body string, hdr map[string]string) tenantAnswer {
	x.t.Helper()
	if auth == "" {
		auth = x.other
	}
	a := x.send(auth, method, path, body, hdr)
	sent := method + " " + path + "\n" + body + "\n" + fmt.Sprint(hdr)
	if u, err := url.PathUnescape(path); err == nil {
		sent += "\n" + u
	}
	if q, err := url.QueryUnescape(path); err == nil {
		sent += "\n" + q
	}
	got := string(a.raw) + "\n" + fmt.Sprint(a.hdr)
	for v, what := range x.secrets {
		if strings.Contains(got, v) && !strings.Contains(sent, v) {
			x.t.Errorf("b: %s %s: the answer holds a's %s %q: %d %s %v", method, path, what, v, a.code, a.raw, a.hdr)
		}
	}
	return a
}

// refused wants a problem document of status and code.
func (x *tenantEnv) refused(a tenantAnswer, what string, status int, code string) {
	x.t.Helper()
	if a.code != status || !strings.Contains(a.hdr.Get("Content-Type"), "problem+json") || !strings.Contains(string(a.raw), `"code":"`+code+`"`) {
		x.t.Errorf("%s: %d %s %s, want %d %s", what, a.code, a.hdr.Get("Content-Type"), a.raw, status, code)
	}
}

// notFound sends b's request and wants 404 with code (errors.md: unknown,
// or another merchant's, resource).
func (x *tenantEnv) notFound(method, path, body, code string) {
	x.t.Helper()
	x.refused(x.asB("", method, path, body, nil), "b: "+method+" "+path, 404, code)
}

// ok sends b's request and wants status, answering the decoded JSON body.
func (x *tenantEnv) ok(status int, method, path, body string, hdr map[string]string) map[string]any {
	x.t.Helper()
	a := x.asB("", method, path, body, hdr)
	if a.code != status {
		x.t.Fatalf("b: %s %s: %d %s, want %d", method, path, a.code, a.raw, status)
	}
	return decodeTenant(x.t, a.raw)
}

func decodeTenant(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("not JSON: %v: %s", err, raw)
		}
	}
	return out
}

// docLink is the part of a document link that changes on the hour (its
// expiry and signature), which a read of the same order an hour later
// renders anew: left out of the comparison of a's reads.
var docLink = regexp.MustCompile(`expires=[0-9]+(&|\\u0026)signature=[A-Za-z0-9_-]+`)

// TestEveryRouteKeepsMerchantsApart is a guard over every route the router
// serves: merchant a has one of everything (orders captured, refunded,
// cancelled and open, their sub-orders, a checkout and a payment session,
// an authorization and a customer token, settlements with transactions,
// notifications and webhook settings, requests made with an
// Idempotency-Key, list cursors and document links), and merchant b is sent
// to each route with a's ids, keys and cursors in its path, query and body.
// b gets what docs/errors.md says (404 for another merchant's resource, 400
// fromId for another's list position, a list of its own otherwise), never
// anything of a's, and afterwards every read of a's answers byte for byte
// as before, a's keyed requests replay their first answers, and a's unused
// authorization token still makes an order. A route added without a case
// here fails the test: the cases are checked against the router's routes
// (which TestOpenAPIIsValidAndCoversEveryRoute checks against openapi.json).
func TestEveryRouteKeepsMerchantsApart(t *testing.T) {
	x := &tenantEnv{sessionEnv: newSessionEnv(t), t: t, secrets: map[string]string{}}
	secret := func(what, v string) string {
		t.Helper()
		if v == "" {
			t.Fatalf("a's %s is empty", what)
		}
		x.secrets[v] = what
		return v
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(rcv.Close)

	// a's webhook settings, before its orders so that they make notifications.
	hookA := secret("webhook URL", rcv.URL+"/hook-of-a")
	set := decodeTenant(t, x.asA(200, "PUT", "/v1/notification-settings", `{"url":"`+hookA+`","events":["order.*","session.authorized","document.resent"]}`, nil).raw)
	secret("webhook secret", set["secret"].(string))

	// Orders of a: o1 captured in part and refunded in part (by keyed
	// requests), o2 open with a reference, o3 cancelled, o4 captured in full.
	newOrder := func() string {
		t.Helper()
		e := x.sessionEnv
		return secret("order id", e.order("5560000001", "invoice")["id"].(string))
	}
	o1, o2, o3, o4 := newOrder(), newOrder(), newOrder(), newOrder()
	const captureBody = `{"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":12500,"vat":2500}],"totalCaptureAmount":12500}`
	refundBody := `{"orderLines":[{"description":"Broken tile","quantity":1,"unitPrice":2500,"vat":2500}],"totalRefundAmount":2500,"note":"a-note-7"}`
	secret("refund note", "a-note-7")
	secret("reference", "a-ref-7")
	// keyed are a's requests sent with an Idempotency-Key, with their
	// first answers.
	type keyedRequest struct {
		method, path, body, key string
		first                   tenantAnswer
	}
	var keyed []*keyedRequest
	sendKeyed := func(status int, method, path, body, key string) map[string]any {
		t.Helper()
		k := &keyedRequest{method: method, path: path, body: body, key: key}
		k.first = x.asA(status, method, path, body, map[string]string{"Idempotency-Key": key})
		keyed = append(keyed, k)
		return decodeTenant(t, k.first.raw)
	}
	o1v := sendKeyed(200, "POST", "/v1/orders/"+o1+"/partialcapture", captureBody, "k-capture")
	capLedger := secret("capture sub-order id", o1v["captured"].([]any)[0].(map[string]any)["ledgerId"].(string))
	uncLedger := secret("uncaptured sub-order id", o1v["uncaptured"].(map[string]any)["ledgerId"].(string))
	docA := o1v["captured"].([]any)[0].(map[string]any)["documentUrl"].(string)
	docPath := docA[strings.Index(docA, "/documents/"):]
	secret("merchant id", strings.Split(docPath, "/")[2])
	refA := sendKeyed(200, "POST", "/v1/orders/"+o1+"/partialrefund/"+capLedger, refundBody, "k-refund")
	secret("refund sub-order id", refA["refunded"].([]any)[0].(map[string]any)["ledgerId"].(string))
	sendKeyed(200, "POST", "/v1/orders/"+o2+"/reference", `{"reference":"a-ref-7"}`, "k-reference")
	x.asA(200, "DELETE", "/v1/orders/"+o3, "", nil)
	x.asA(200, "POST", "/v1/orders/"+o4+"/capture", "", nil)

	// Tokens: one authorization token left unused, one made a customer token.
	e := x.sessionEnv
	tokA := secret("authorization token", e.mint("5560000001", "invoice"))
	tokCT := secret("authorization token", e.mint("5560000001", "invoice"))
	ct := decodeTenant(t, x.asA(200, "POST", "/v1/authorization-tokens/"+tokCT+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@a-buyer.example"}}`, nil).raw)
	ctA := secret("customer token", ct["customerToken"].(string))

	// Sessions, one of each API, the checkout one by a keyed request.
	checkoutBody := fill(sessionBody, "a-store-7", "a-mref-7", "a-ext-7")
	secret("store id", "a-store-7")
	secret("merchant reference", "a-mref-7")
	secret("external session id", "a-ext-7")
	sessA := sendKeyed(201, "POST", "/v1/sessions", checkoutBody, "k-session")
	sessionA := secret("session id", sessA["id"].(string))
	checkoutA := sessA["checkoutUrl"].(string)
	checkoutPath := checkoutA[strings.Index(checkoutA, "/checkout/"):]
	secret("external session id", "a-ext-8")
	psA := decodeTenant(t, x.asA(201, "POST", "/v1/payment-sessions", fill(sessionBody, "a-store-7", "a-mref-7", "a-ext-8"), nil).raw)
	paymentSessionA := secret("payment session id", psA["id"].(string))

	// The jobs, so that a has nothing left for b's runs of them to change:
	// its notifications delivered, its captures and refund settled.
	for _, job := range []string{"expire", "autocapture", "tasks", "notifications"} {
		x.asA(200, "POST", "/sandbox/v1/jobs/"+job, "", nil)
	}
	run := decodeTenant(t, x.asA(200, "POST", "/sandbox/v1/settlements/run", "", nil).raw)
	if len(run["settlements"].([]any)) == 0 {
		t.Fatalf("a's settlement run made none: %v", run)
	}
	settlementA := secret("settlement id", run["settlements"].([]any)[0].(map[string]any)["id"].(string))
	x.asA(200, "POST", "/sandbox/v1/jobs/notifications", "", nil)

	// a's list positions.
	cursor := func(path, field string) string {
		t.Helper()
		b := decodeTenant(t, x.asA(200, "GET", path, "", nil).raw)
		v, _ := b[field].(string)
		return secret(path+" cursor", v)
	}
	orderCursor := cursor("/v1/orders?size=1", "nextCursor")
	sessionCursor := cursor("/v1/sessions?size=1", "nextFromId")
	settlementTxCursor := cursor("/v1/settlements/"+settlementA+"/tx?size=1", "nextFromId")
	notificationCursor := cursor("/v1/notifications?size=1", "nextFromId")
	notes := decodeTenant(t, x.asA(200, "GET", "/v1/notifications?size=1000", "", nil).raw)["notifications"].([]any)
	var notificationA string
	for _, n := range notes {
		id := secret("notification id", n.(map[string]any)["id"].(string))
		if n.(map[string]any)["state"] != "pending" && notificationA == "" {
			notificationA = id
		}
	}
	if notificationA == "" {
		t.Fatalf("a has no delivered notification: %v", notes)
	}

	// Every read a has, as a sees it now.
	reads := []string{"/v1/orders", "/v1/orders?size=1", "/v1/orders?cursor=" + url.QueryEscape(orderCursor),
		"/v1/sessions", "/v1/sessions?fromId=" + url.QueryEscape(sessionCursor), "/v1/sessions/" + sessionA, "/v1/sessions/external:a-ext-7", "/v1/payment-sessions/external:a-ext-8",
		"/v1/payment-sessions/" + paymentSessionA, "/v1/paymentstatus?sessionId=" + sessionA,
		"/v1/customer-tokens/" + ctA, "/v1/settlements", "/v1/settlements/" + settlementA, "/v1/settlements/" + settlementA + "/tx",
		"/v1/settlements/" + settlementA + "/tx?fromId=" + url.QueryEscape(settlementTxCursor), "/v1/settlements/" + settlementA + "/export.csv",
		"/v1/notification-settings", "/v1/notifications?size=1000", "/v1/notifications?fromId=" + url.QueryEscape(notificationCursor),
		"/v1/notifications/" + notificationA, docPath}
	for _, o := range []string{o1, o2, o3, o4} {
		reads = append(reads, "/v1/orders/"+o, "/v1/paymentstatus?orderId="+o, "/v1/orders/"+o+"/paymentstatus")
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, p := range reads {
			out[p] = docLink.ReplaceAllString(string(x.asA(200, "GET", p, "", nil).raw), "")
		}
		return out
	}
	before := snapshot()

	// b's own order, captured, for the requests b makes on its own things.
	x.auth, x.other = x.other, x.auth
	ob := x.sessionEnv.order("5560000001", "invoice")["id"].(string)
	obv := decodeTenant(t, x.asA(200, "POST", "/v1/orders/"+ob+"/partialcapture", captureBody, nil).raw)
	x.auth, x.other = x.other, x.auth
	docB := obv["captured"].([]any)[0].(map[string]any)["documentUrl"].(string)
	merchantB := strings.Split(docB[strings.Index(docB, "/documents/"):], "/")[2]

	notFound := x.notFound
	type tenantCase struct {
		route string // method and pattern, as the router registers it
		run   func()
	}
	cases := []tenantCase{
		{"POST /oauth/token", func() {
			r, _ := http.NewRequest("POST", x.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
			r.Header.Set("Authorization", x.other)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			access, _ := decodeTenant(t, raw)["access_token"].(string)
			if resp.StatusCode != 200 || access == "" {
				t.Fatalf("b's access token: %d %s", resp.StatusCode, raw)
			}
			// The access token is b's: a's order is not found with it.
			x.refused(x.asB("Bearer "+access, "GET", "/v1/orders/"+o1, "", nil), "b's access token reads a's order", 404, "order_not_found")
			x.refused(x.asB("Bearer "+access, "POST", "/v1/orders/"+o2+"/capture", "", nil), "b's access token captures a's order", 404, "order_not_found")
		}},
		{"GET /healthz", func() { x.ok(200, "GET", "/healthz", "", nil) }},
		{"GET /readyz", func() { x.ok(200, "GET", "/readyz", "", nil) }},
		{"GET /metrics", func() {
			if a := x.asB("", "GET", "/metrics", "", nil); a.code != 200 {
				t.Errorf("metrics: %d", a.code)
			}
		}},
		{"GET /openapi.json", func() { x.ok(200, "GET", "/openapi.json", "", nil) }},
		{"GET /documents/:merchantId/:orderId/:ledgerId", func() {
			_, query, _ := strings.Cut(docPath, "?")
			// a's link with b's merchant in its path: the signature is a's path's.
			x.refused(x.asB("", "GET", "/documents/"+merchantB+"/"+o1+"/"+capLedger+"?"+query, "", nil), "a's link under b's merchant", 403, "document_link_invalid")
			// b's link with a's order and sub-order in its path.
			_, queryB, _ := strings.Cut(docB, "?")
			x.refused(x.asB("", "GET", "/documents/"+merchantB+"/"+o1+"/"+capLedger+"?"+queryB, "", nil), "b's link on a's order", 403, "document_link_invalid")
			// A link the server signed for b's merchant and a's order (no
			// such link is ever made): a's order is not b's.
			path := "/documents/" + merchantB + "/" + o1 + "/" + capLedger
			exp := strings.TrimPrefix(strings.Split(query, "&")[0], "expires=")
			x.refused(x.asB("", "GET", path+"?expires="+exp+"&signature="+x.srv.sign("document", path+"?"+exp), "", nil), "a link signed for b's merchant and a's order", 404, "order_not_found")
		}},
		{"GET /v1/orders", func() {
			for _, q := range []string{"", "?cursor=" + url.QueryEscape(orderCursor), "?fromId=" + url.QueryEscape(orderCursor), "?id=" + o1 + "&id=" + o2,
				"?merchantReference=a-mref-7", "?orderReference=a-ref-7", "?q=" + o1, "?storeId=a-store-7"} {
				b := x.ok(200, "GET", "/v1/orders"+q, "", nil)
				for _, o := range b["orders"].([]any) {
					if id := o.(map[string]any)["id"]; id != ob {
						t.Errorf("b's list %s shows %v", q, id)
					}
				}
			}
		}},
		{"GET /v1/orders/:orderId", func() { notFound("GET", "/v1/orders/"+o1, "", "order_not_found") }},
		{"POST /v1/orders/:orderId", func() {
			notFound("POST", "/v1/orders/"+o2, `{"orderLines":[{"description":"Gift","quantity":1,"unitPrice":0,"vat":0}],"totalOrderAmount":0,"totalOrderAmountExclVat":0,"totalOrderVatAmount":0}`, "order_not_found")
		}},
		{"DELETE /v1/orders/:orderId", func() { notFound("DELETE", "/v1/orders/"+o2, "", "order_not_found") }},
		{"DELETE /v1/orders/:orderId/:ledgerId", func() {
			notFound("DELETE", "/v1/orders/"+o1+"/"+uncLedger, "", "order_not_found")
			notFound("DELETE", "/v1/orders/"+o4+"/"+capLedger, "", "order_not_found")
			// a's sub-order on b's own order.
			notFound("DELETE", "/v1/orders/"+ob+"/"+uncLedger, "", "ledger_not_found")
		}},
		{"POST /v1/orders/:orderId/acknowledge", func() { notFound("POST", "/v1/orders/"+o2+"/acknowledge", "", "order_not_found") }},
		{"POST /v1/orders/:orderId/capture", func() {
			notFound("POST", "/v1/orders/"+o2+"/capture", "", "order_not_found")
			x.refused(x.asB("", "POST", "/v1/orders/"+o2+"/capture", "", map[string]string{"Idempotency-Key": "k-capture"}), "b captures a's order with a's key", 404, "order_not_found")
		}},
		{"POST /v1/orders/:orderId/partialcapture", func() {
			// a's key and a's very request: b's own request, not a's replay.
			x.refused(x.asB("", "POST", keyed[0].path, keyed[0].body, map[string]string{"Idempotency-Key": "k-capture"}), "a's keyed capture sent by b", 404, "order_not_found")
			notFound("POST", "/v1/orders/"+o2+"/partialcapture", captureBody, "order_not_found")
			// The same key and body on b's own order: b's capture, made.
			b := x.ok(200, "POST", "/v1/orders/"+ob+"/partialcapture", captureBody, map[string]string{"Idempotency-Key": "k-capture"})
			if b["id"] != ob || len(b["captured"].([]any)) != 2 {
				t.Errorf("b's capture with a's key: %v", b)
			}
		}},
		{"POST /v1/orders/:orderId/customer", func() { notFound("POST", "/v1/orders/"+o2+"/customer", `{"phone":"+46701234567"}`, "order_not_found") }},
		{"POST /v1/orders/:orderId/document/:ledgerId/resend", func() {
			notFound("POST", "/v1/orders/"+o1+"/document/"+capLedger+"/resend", "", "order_not_found")
			notFound("POST", "/v1/orders/"+ob+"/document/"+capLedger+"/resend", "", "ledger_not_found")
		}},
		{"POST /v1/orders/:orderId/extendexpiry", func() { notFound("POST", "/v1/orders/"+o2+"/extendexpiry", "", "order_not_found") }},
		{"POST /v1/orders/:orderId/partialrefund/:ledgerId", func() {
			x.refused(x.asB("", "POST", keyed[1].path, keyed[1].body, map[string]string{"Idempotency-Key": "k-refund"}), "a's keyed refund sent by b", 404, "order_not_found")
			notFound("POST", "/v1/orders/"+ob+"/partialrefund/"+capLedger, refundBody, "ledger_not_found")
		}},
		{"POST /v1/orders/:orderId/refund/:ledgerId", func() {
			notFound("POST", "/v1/orders/"+o4+"/refund/"+capLedger, "", "order_not_found")
			notFound("POST", "/v1/orders/"+ob+"/refund/"+capLedger, "", "ledger_not_found")
		}},
		{"POST /v1/orders/:orderId/paymentmethod", func() {
			notFound("POST", "/v1/orders/"+o2+"/paymentmethod", `{"paymentMethod":{"provider":"service","type":"advanceInvoice"}}`, "order_not_found")
		}},
		{"POST /v1/orders/:orderId/recourse/:ledgerId", func() {
			notFound("POST", "/v1/orders/"+o1+"/recourse/"+capLedger, `{"reason":"unpaid"}`, "order_not_found")
			notFound("POST", "/v1/orders/"+ob+"/recourse/"+capLedger, `{"reason":"unpaid"}`, "ledger_not_found")
		}},
		{"POST /v1/orders/:orderId/reference", func() {
			x.refused(x.asB("", "POST", keyed[2].path, keyed[2].body, map[string]string{"Idempotency-Key": "k-reference"}), "a's keyed reference sent by b", 404, "order_not_found")
			// The same key on b's own order is b's request, made.
			b := x.ok(200, "POST", "/v1/orders/"+ob+"/reference", keyed[2].body, map[string]string{"Idempotency-Key": "k-reference"})
			if b["id"] != ob || b["merchantReference"] != "a-ref-7" {
				t.Errorf("b's reference with a's key: %v", b)
			}
		}},
		{"GET /v1/orders/:orderId/paymentstatus", func() { notFound("GET", "/v1/orders/"+o1+"/paymentstatus", "", "order_not_found") }},
		{"GET /v1/paymentstatus", func() {
			notFound("GET", "/v1/paymentstatus?orderId="+o1, "", "order_not_found")
			notFound("GET", "/v1/paymentstatus?sessionId="+sessionA, "", "session_not_found")
			notFound("GET", "/v1/paymentstatus?sessionId=external:a-ext-7", "", "session_not_found")
		}},
		{"GET /v1/headless/search/companies", func() { x.ok(200, "GET", "/v1/headless/search/companies?country=SE&q=556", "", nil) }},
		{"DELETE /v1/authorization-tokens/:token", func() {
			notFound("DELETE", "/v1/authorization-tokens/"+tokA, "", "authorization_token_not_found")
		}},
		{"POST /v1/authorization-tokens/:token/customer-token", func() {
			notFound("POST", "/v1/authorization-tokens/"+tokA+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{}}`, "authorization_token_not_found")
		}},
		{"POST /v1/authorization-tokens/:token/order", func() {
			notFound("POST", "/v1/authorization-tokens/"+tokA+"/order", orderBody, "authorization_token_not_found")
			notFound("POST", "/v1/authorization-tokens/"+tokCT+"/order", orderBody, "authorization_token_not_found")
		}},
		{"GET /v1/customer-tokens/:token", func() { notFound("GET", "/v1/customer-tokens/"+ctA, "", "customer_token_not_found") }},
		{"DELETE /v1/customer-tokens/:token", func() { notFound("DELETE", "/v1/customer-tokens/"+ctA, "", "customer_token_not_found") }},
		{"POST /v1/customer-tokens/:token/order", func() {
			notFound("POST", "/v1/customer-tokens/"+ctA+"/order", `{"country":"SE","currency":"SEK","totalOrderAmount":100}`, "customer_token_not_found")
		}},
		{"GET /v1/sessions/:id", func() {
			for _, ref := range []string{sessionA, "external:a-ext-7", "external:a-ext-8", paymentSessionA, o1} {
				notFound("GET", "/v1/sessions/"+ref, "", "session_not_found")
			}
		}},
		{"POST /v1/sessions/:id", func() {
			notFound("POST", "/v1/sessions/"+sessionA, `{"orderLines":[{"description":"Excavator","quantity":1,"unitPrice":5000000,"vat":2500}]}`, "session_not_found")
		}},
		{"DELETE /v1/sessions/:id", func() { notFound("DELETE", "/v1/sessions/"+sessionA, "", "session_not_found") }},
		{"GET /v1/payment-sessions/:sessionId", func() {
			for _, ref := range []string{paymentSessionA, "external:a-ext-8", sessionA} {
				notFound("GET", "/v1/payment-sessions/"+ref, "", "session_not_found")
			}
		}},
		{"POST /v1/payment-sessions/:sessionId", func() {
			notFound("POST", "/v1/payment-sessions/"+paymentSessionA, `{"orderLines":[{"description":"Excavator","quantity":1,"unitPrice":5000000,"vat":2500}]}`, "session_not_found")
		}},
		{"DELETE /v1/payment-sessions/:sessionId", func() {
			notFound("DELETE", "/v1/payment-sessions/"+paymentSessionA, "", "session_not_found")
		}},
		{"GET /v1/sessions", func() {
			for _, q := range []string{"", "?orderId=" + o1, "?merchantReference=a-mref-7", "?storeId=a-store-7", "?q=a-ext-7"} {
				if b := x.ok(200, "GET", "/v1/sessions"+q, "", nil); len(b["sessions"].([]any)) != 0 {
					t.Errorf("b's session list %s: %v", q, b)
				}
			}
			for _, from := range []string{sessionA, sessionCursor} {
				x.refused(x.asB("", "GET", "/v1/sessions?fromId="+url.QueryEscape(from), "", nil), "b's sessions from a's position", 400, "validation_failed")
			}
		}},
		{"POST /v1/sessions", func() {
			// a's key, a's body, a's external id: b's own session, made.
			b := x.ok(201, "POST", "/v1/sessions", checkoutBody, map[string]string{"Idempotency-Key": "k-session"})
			if b["id"] == sessionA || b["externalSessionId"] != "a-ext-7" {
				t.Errorf("b's session with a's key: %v", b)
			}
		}},
		{"POST /v1/payment-sessions", func() {
			b := x.ok(201, "POST", "/v1/payment-sessions", fill(sessionBody, "a-store-7", "a-mref-7", "a-ext-8"), nil)
			if b["id"] == paymentSessionA || b["externalSessionId"] != "a-ext-8" {
				t.Errorf("b's payment session with a's external id: %v", b)
			}
		}},
		{"GET /v1/settlements", func() {
			for _, q := range []string{"", "?id=" + settlementA, "?storeId=s1"} {
				// b's capture is not settled yet: b has no settlement.
				if b := x.ok(200, "GET", "/v1/settlements"+q, "", nil); len(b["settlements"].([]any)) != 0 {
					t.Errorf("b's settlement list %s: %v", q, b)
				}
			}
			x.refused(x.asB("", "GET", "/v1/settlements?fromId="+settlementA, "", nil), "b's settlements from a's position", 400, "validation_failed")
		}},
		{"GET /v1/settlements/:settlementId", func() { notFound("GET", "/v1/settlements/"+settlementA, "", "settlement_not_found") }},
		{"GET /v1/settlements/:settlementId/tx", func() {
			notFound("GET", "/v1/settlements/"+settlementA+"/tx", "", "settlement_not_found")
			notFound("GET", "/v1/settlements/"+settlementA+"/tx?fromId="+url.QueryEscape(settlementTxCursor), "", "settlement_not_found")
		}},
		{"GET /v1/settlements/:settlementId/export.csv", func() {
			notFound("GET", "/v1/settlements/"+settlementA+"/export.csv", "", "settlement_not_found")
		}},
		{"GET /v1/notification-settings", func() { notFound("GET", "/v1/notification-settings", "", "webhook_not_configured") }},
		{"PUT /v1/notification-settings", func() {
			b := x.ok(200, "PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`/hook-of-b","events":["order.*"]}`, nil)
			if b["url"] != rcv.URL+"/hook-of-b" {
				t.Errorf("b's settings: %v", b)
			}
		}},
		{"DELETE /v1/notification-settings", func() {
			if a := x.asB("", "DELETE", "/v1/notification-settings", "", nil); a.code != 204 {
				t.Errorf("b deletes its settings: %d %s", a.code, a.raw)
			}
		}},
		{"GET /v1/notifications", func() {
			x.ok(200, "GET", "/v1/notifications?size=1000", "", nil)
			// A delivery-log cursor is a position: b's own log from there.
			x.ok(200, "GET", "/v1/notifications?fromId="+url.QueryEscape(notificationCursor), "", nil)
			x.refused(x.asB("", "GET", "/v1/notifications?fromId="+notificationA, "", nil), "b's log from a's notification", 400, "validation_failed")
		}},
		{"GET /v1/notifications/:notificationId", func() {
			notFound("GET", "/v1/notifications/"+notificationA, "", "notification_not_found")
		}},
		{"POST /v1/notifications/:notificationId/redeliver", func() {
			notFound("POST", "/v1/notifications/"+notificationA+"/redeliver", "", "notification_not_found")
		}},
		{"GET /checkout/:merchantId/:sessionId", func() {
			_, sig, _ := strings.Cut(checkoutPath, "?sig=")
			for _, path := range []string{
				"/checkout/" + merchantB + "/" + sessionA + "?sig=" + sig,                                    // a's signature under b's merchant
				"/checkout/" + merchantB + "/" + sessionA + "?sig=" + x.srv.checkoutSig(merchantB, sessionA), // signed for b: not b's session
			} {
				if a := x.asB("", "GET", path, "", nil); a.code != 404 || !strings.HasPrefix(a.hdr.Get("Content-Type"), "text/html") {
					t.Errorf("GET %s: %d %s", path, a.code, a.hdr.Get("Content-Type"))
				}
			}
		}},
		{"POST /checkout/:merchantId/:sessionId", func() {
			_, sig, _ := strings.Cut(checkoutPath, "?sig=")
			for _, s := range []string{sig, x.srv.checkoutSig(merchantB, sessionA)} {
				r, _ := http.NewRequest("POST", x.ts.URL+"/checkout/"+merchantB+"/"+sessionA, strings.NewReader(url.Values{"sig": {s}, "q": {"556"}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 404 || strings.Contains(string(raw), "a-mref-7") {
					t.Errorf("POST checkout of a's session under b's merchant: %d %s", resp.StatusCode, raw)
				}
			}
		}},
		{"POST /sandbox/v1/authorization-tokens", func() {
			b := x.ok(201, "POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"},"paymentMethod":{"type":"invoice"}}`, nil)
			// b's token, which a cannot use.
			x.asA(404, "DELETE", "/v1/authorization-tokens/"+b["authorizationToken"].(string), "", nil)
		}},
		{"POST /sandbox/v1/merchants", func() {
			// Any merchant of a sandbox makes merchants (README); the new
			// one sees nothing of a's.
			m := x.ok(201, "POST", "/sandbox/v1/merchants", `{"name":"c"}`, nil)
			c := basic(m["clientId"].(string), m["clientSecret"].(string))
			x.refused(x.asB(c, "GET", "/v1/orders/"+o1, "", nil), "a new merchant reads a's order", 404, "order_not_found")
			if b := decodeTenant(t, x.asB(c, "GET", "/v1/orders", "", nil).raw); len(b["orders"].([]any)) != 0 {
				t.Errorf("a new merchant's list: %v", b)
			}
		}},
		// The clock and the jobs are the server's, not the merchant's
		// (README): b reads the clock and runs every job; a's things stay
		// as they were, as a had nothing left for them to do.
		{"GET /sandbox/v1/clock", func() { x.ok(200, "GET", "/sandbox/v1/clock", "", nil) }},
		{"POST /sandbox/v1/clock", func() { x.ok(200, "POST", "/sandbox/v1/clock", `{"advance":"1s"}`, nil) }},
		{"GET /sandbox/v1/fixtures", func() { x.ok(200, "GET", "/sandbox/v1/fixtures", "", nil) }},
		{"POST /sandbox/v1/orders/:orderId/ledgers/:ledgerId/payments", func() {
			notFound("POST", "/sandbox/v1/orders/"+o1+"/ledgers/"+capLedger+"/payments", `{"amount":100}`, "order_not_found")
			notFound("POST", "/sandbox/v1/orders/"+ob+"/ledgers/"+capLedger+"/payments", `{"amount":100}`, "ledger_not_found")
		}},
		{"POST /sandbox/v1/orders/:orderId/ledgers/:ledgerId/status", func() {
			notFound("POST", "/sandbox/v1/orders/"+o1+"/ledgers/"+capLedger+"/status", `{"status":"reminder1"}`, "order_not_found")
			notFound("POST", "/sandbox/v1/orders/"+ob+"/ledgers/"+capLedger+"/status", `{"status":"reminder1"}`, "ledger_not_found")
		}},
		{"POST /sandbox/v1/orders/:orderId/risk", func() { notFound("POST", "/sandbox/v1/orders/"+o2+"/risk", `{"decision":"deny"}`, "order_not_found") }},
		{"POST /sandbox/v1/jobs/expire", func() { x.ok(200, "POST", "/sandbox/v1/jobs/expire", "", nil) }},
		{"POST /sandbox/v1/jobs/autocapture", func() { x.ok(200, "POST", "/sandbox/v1/jobs/autocapture", "", nil) }},
		{"POST /sandbox/v1/jobs/tasks", func() { x.ok(200, "POST", "/sandbox/v1/jobs/tasks", "", nil) }},
		{"POST /sandbox/v1/jobs/notifications", func() { x.ok(200, "POST", "/sandbox/v1/jobs/notifications", "", nil) }},
		{"POST /sandbox/v1/settlements/run", func() {
			// b's capture is settled; the answer is b's settlements only.
			b := x.ok(200, "POST", "/sandbox/v1/settlements/run", "", nil)
			if len(b["settlements"].([]any)) == 0 {
				t.Fatalf("b's run settled nothing of b's: %v", b)
			}
			// b's settlement's transactions from a's position in a's.
			mine := b["settlements"].([]any)[0].(map[string]any)["id"].(string)
			x.refused(x.asB("", "GET", "/v1/settlements/"+mine+"/tx?fromId="+url.QueryEscape(settlementTxCursor), "", nil),
				"b's settlement's transactions from a's position", 400, "validation_failed")
		}},
	}

	// Every route the router serves has its case, once.
	routes := slices.Clone(x.srv.served)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.route)
	}
	slices.Sort(routes)
	slices.Sort(covered)
	if !slices.Equal(routes, covered) {
		served := map[string]bool{}
		for _, r := range routes {
			served[r] = true
		}
		for _, c := range covered {
			if !served[c] {
				t.Errorf("a case for %s, which the server does not serve", c)
			}
			delete(served, c)
		}
		for _, r := range slices.Sorted(maps.Keys(served)) {
			t.Errorf("route %s has no case: add what merchant b is answered there with a's ids", r)
		}
		if len(slices.Compact(slices.Clone(covered))) != len(covered) {
			t.Errorf("a route has two cases: %v", covered)
		}
		t.FailNow()
	}
	for _, c := range cases {
		c.run()
	}

	// a's every read is as it was.
	after := snapshot()
	for _, p := range reads {
		if before[p] != after[p] {
			t.Errorf("a's GET %s changed after b's requests:\nbefore %s\nafter  %s", p, before[p], after[p])
		}
	}
	// a's keyed requests replay their first answers, byte for byte.
	for _, k := range keyed {
		got := x.asA(k.first.code, k.method, k.path, k.body, map[string]string{"Idempotency-Key": k.key})
		if got.hdr.Get("Idempotent-Replayed") != "true" || string(got.raw) != string(k.first.raw) {
			t.Errorf("a's %s %s with key %s: replayed %q, %s; first answered %s", k.method, k.path, k.key, got.hdr.Get("Idempotent-Replayed"), got.raw, k.first.raw)
		}
	}
	// a's unused authorization token still makes a's order.
	x.asA(200, "POST", "/v1/authorization-tokens/"+tokA+"/order", orderBody, nil)
}
