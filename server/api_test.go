package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
)

// req sends a request with extra headers; body "" sends none.
func (e *sessionEnv) req(method, path, body, auth string, hdr map[string]string) (int, http.Header, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, e.ts.URL+path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return e.send(r)
}

// send sends r as it is (for headers req cannot set) and decodes a JSON answer.
func (e *sessionEnv) send(r *http.Request) (int, http.Header, map[string]any) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", r.Method, r.URL.Path, err, b)
		}
	}
	return resp.StatusCode, resp.Header, out
}

func (e *sessionEnv) mint(companyID, pm string) string {
	e.t.Helper()
	code, _, b := e.req("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE",
		"customer":{"companyId":%q},"paymentMethod":{"type":%q}}`, companyID, pm), e.auth, nil)
	if code != 201 {
		e.t.Fatalf("mint: %d %v", code, b)
	}
	return b["authorizationToken"].(string)
}

// orderBody's buyer reads English (en-SE): the tests that read its documents
// assert their English words; TestDocumentsInTheOrdersLanguage reads them
// in Swedish.
const orderBody = `{"country":"SE","currency":"SEK","locale":"en-SE","reference":"PO-1","storeId":"s1",
	"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500},{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}]}`

// capturedInvoice makes an invoice order of the sandbox buyer 5560000001
// and captures it in full, answering the order's id, the capture's ledger id
// and its invoice's link.
func (e *sessionEnv) capturedInvoice() (id, capID, link string) {
	e.t.Helper()
	id = e.order("5560000001", "invoice")["id"].(string)
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 {
		e.t.Fatalf("capture: %d %v", code, o)
	}
	c := o["captured"].([]any)[0].(map[string]any)
	return id, c["ledgerId"].(string), c["documentUrl"].(string)
}

func (e *sessionEnv) order(companyID, pm string) map[string]any {
	e.t.Helper()
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint(companyID, pm)+"/order", orderBody, e.auth, nil)
	if code != 200 {
		e.t.Fatalf("create order: %d %v", code, b)
	}
	return e.get(b["orderId"].(string))
}

func (e *sessionEnv) get(id string) map[string]any {
	e.t.Helper()
	code, _, o := e.req("GET", "/v1/orders/"+id, "", e.auth, nil)
	if code != 200 {
		e.t.Fatalf("get %s: %d %v", id, code, o)
	}
	return o
}

func minor(m any) float64 { return m.(map[string]any)["minorUnits"].(float64) }

func lines(sub any) []any { return sub.(map[string]any)["orderLines"].([]any) }

func actions(sub any) []string {
	var out []string
	for _, a := range sub.(map[string]any)["availableActions"].([]any) {
		out = append(out, a.(map[string]any)["type"].(string))
	}
	return out
}

func events(o map[string]any) []map[string]any {
	var out []map[string]any
	for _, e := range o["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// problemFields lists, sorted and comma-joined, the fields a problem
// document names.
func problemFields(b map[string]any) string {
	var fields []string
	for _, f := range b["errors"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	slices.Sort(fields)
	return strings.Join(fields, ",")
}

func wantProblem(t *testing.T, code int, b map[string]any, status int, problem string) {
	t.Helper()
	if code != status || b["code"] != problem || b["status"] != float64(status) || b["requestId"] == "" {
		t.Fatalf("got %d %v, want %d %s", code, b, status, problem)
	}
}

func TestAuthentication(t *testing.T) {
	e := newSessionEnv(t)
	form := func(body, user, pass string) (int, map[string]any) {
		r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, tok := form("grant_type=client_credentials", "m1", "s1")
	if code != 200 || tok["token_type"] != "Bearer" || tok["expires_in"] != 3600.0 || !strings.HasPrefix(tok["access_token"].(string), "kat_") {
		t.Fatalf("basic: %d %v", code, tok)
	}
	bearer := "Bearer " + tok["access_token"].(string)
	if code, tok := form("grant_type=client_credentials&client_id=m1&client_secret=s1", "", ""); code != 200 || tok["access_token"] == "" {
		t.Fatalf("form credentials: %d %v", code, tok)
	}
	if code, tok := form("grant_type=password", "m1", "s1"); code != 400 || tok["error"] != "unsupported_grant_type" {
		t.Fatalf("grant: %d %v", code, tok)
	}
	if code, tok := form("grant_type=client_credentials", "m1", "wrong"); code != 401 || tok["error"] != "invalid_client" {
		t.Fatalf("bad secret: %d %v", code, tok)
	}
	for body, want := range map[string]string{
		"grant_type=client_credentials&grant_type=client_credentials": "invalid_request", // RFC 6749 §3.2
		"grant_type=client_credentials&client_id=m2":                  "invalid_request", // two ways to authenticate
		"grant_type=client_credentials&scope=admin":                   "invalid_scope",
		"scope=orders": "invalid_request", // RFC 6749 §5.2: grant_type missing
		"grant_type=":  "invalid_request",
	} {
		if code, tok := form(body, "m1", "s1"); code != 400 || tok["error"] != want {
			t.Fatalf("%s: %d %v, want 400 %s", body, code, tok, want)
		}
	}
	if code, tok := form("grant_type=client_credentials&scope=orders+settlements", "m1", "s1"); code != 200 || tok["access_token"] == "" {
		t.Fatalf("known scopes: %d %v", code, tok)
	}
	// A JSON body is not a token request, whatever it holds.
	jr, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader(`{"grant_type":"client_credentials"}`))
	jr.Header.Set("Content-Type", "application/json")
	jr.SetBasicAuth("m1", "s1")
	if code, _, out := e.send(jr); code != 400 || out["error"] != "invalid_request" {
		t.Fatalf("JSON body: %d %v", code, out)
	}
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	for _, auth := range []string{bearer, e.auth} {
		if code, _, _ := e.req("GET", "/v1/orders/"+id, "", auth, nil); code != 200 {
			t.Fatalf("%s: %d", auth[:6], code)
		}
	}
	for _, auth := range []string{"", "Bearer kat_forged.x", bearer + "x", basic("m1", "nope"), "Token abc"} {
		code, h, b := e.req("GET", "/v1/orders/"+id, "", auth, nil)
		wantProblem(t, code, b, 401, "unauthorized")
		if h.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	}
	// Another merchant's order does not exist for it; company search needs no credentials.
	code, _, b := e.req("GET", "/v1/orders/"+id, "", e.other, nil)
	wantProblem(t, code, b, 404, "order_not_found")
	if code, _, _ := e.req("GET", "/v1/headless/search/companies?country=SE&q=approved", "", "", nil); code != 200 {
		t.Fatalf("company search: %d", code)
	}
}

func TestErrorsOnEveryPath(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	code, _, b := e.req("GET", "/v1/nothing", "", e.auth, nil)
	wantProblem(t, code, b, 404, "route_not_found")
	code, h, b := e.req("PUT", "/v1/orders/"+id, "{}", e.auth, nil)
	wantProblem(t, code, b, 405, "method_not_allowed")
	if allow := h.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "HEAD") || !strings.Contains(allow, "POST") {
		t.Fatalf("Allow: %q", allow)
	}
	// A filter that does not decode is refused, naming it, not dropped.
	for query, field := range map[string]string{"id=%zz": "id", "size=5&status=fraudDeny%zz": "status", "%zz=1": "%zz", "a=1;b=2": "a"} {
		code, _, b = e.req("GET", "/v1/orders?"+query, "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if fields := problemFields(b); fields != field {
			t.Fatalf("?%s: fields %s, want %s", query, fields, field)
		}
	}
	// OPTIONS names the same methods as a 405 does, HEAD included.
	code, h, _ = e.req("OPTIONS", "/v1/orders/"+id, "", "", nil)
	if allow := h.Get("Allow"); code != 204 || !strings.Contains(allow, "GET") || !strings.Contains(allow, "HEAD") || !strings.Contains(allow, "OPTIONS") {
		t.Fatalf("OPTIONS: %d, Allow %q", code, allow)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":[`, e.auth, nil)
	wantProblem(t, code, b, 400, "malformed_json")
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"x":1}`, e.auth, map[string]string{"Content-Type": "text/plain"})
	wantProblem(t, code, b, 415, "unsupported_media_type")
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":"`+strings.Repeat("x", 2<<20)+`"}`, e.auth, nil)
	wantProblem(t, code, b, 413, "body_too_large")
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", "", e.auth, nil)
	wantProblem(t, code, b, 400, "body_required")
	code, _, b = e.req("GET", "/v1/orders/no-such-order", "", e.auth, nil)
	wantProblem(t, code, b, 404, "order_not_found")
	// Wrong JSON types: every offending field at once.
	code, _, b = e.req("POST", "/v1/authorization-tokens/x/order", `{"country":1,"currency":true,"orderLines":[{"quantity":"2"},{"unitPrice":1.5}],"metadata":{"a":2}}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	var fields []string
	for _, f := range b["errors"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	for _, want := range []string{"country", "currency", "orderLines[0].quantity", "orderLines[1].unitPrice", "metadata.a"} {
		if !strings.Contains(strings.Join(fields, " "), want) {
			t.Errorf("type errors %v lack %s", fields, want)
		}
	}
	// Bounds: every field at once, with JSON paths.
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"reference":"`+strings.Repeat("r", 51)+`","orderLines":[{"description":"a","quantity":1,"unitPrice":1},{"description":"","quantity":0},{"description":"c","quantity":1,"unitPrice":2000000000}]}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	fields = nil
	for _, f := range b["errors"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	if got := strings.Join(fields, ","); got != "reference,orderLines[1].description,orderLines[1].quantity,orderLines[1].unitPrice,orderLines[2].unitPrice" {
		t.Fatalf("fields %s", got)
	}
	// Text no store can keep as sent: a NUL is refused on every store, and
	// NUL or invalid UTF-8 in a path or filter matches nothing; never a 500.
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order",
		strings.Replace(orderBody, `"PO-1"`, `"PO\u00001"`, 1), e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	for _, path := range []string{"/v1/orders/a%00b", "/v1/orders/%FF%FE", "/v1/notifications/%00"} {
		code, _, b = e.req("GET", path, "", e.auth, nil)
		if code != 404 {
			t.Errorf("GET %s: %d %v, want 404", path, code, b)
		}
	}
	for _, q := range []string{"reference=%00", "q=%FF", "merchantReference=a%00"} {
		code, _, b = e.req("GET", "/v1/orders?"+q, "", e.auth, nil)
		if code >= 500 {
			t.Errorf("GET /v1/orders?%s: %d %v", q, code, b)
		}
	}
	// The same on every store (on PostgreSQL these once failed the query):
	// such a filter value matches nothing, and a list's fromId names no item.
	e.order("5560000001", "invoice") // storeId s1, merchantReference PO-1
	e.req("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","merchantReference":"PO-1","orderLines":[{"description":"a","quantity":1,"unitPrice":100,"vat":2500}]}`, e.auth, nil)
	for q, want := range map[string]int{"q=%00": 0, "q=PO%00": 0, "storeId=%00": 0, "id=%FF": 0, "merchantReference=%00": 0,
		"storeId=s1&storeId=%00": 1, "merchantReference=PO-1&merchantReference=%00": 1} {
		code, _, b = e.req("GET", "/v1/orders?"+q, "", e.auth, nil)
		if code != 200 || len(b["orders"].([]any)) < want || (want == 0 && len(b["orders"].([]any)) != 0) {
			t.Errorf("GET /v1/orders?%s: %d %v, want 200 with %d+ orders", q, code, b, want)
		}
	}
	for _, q := range []string{"q=%00", "q=%00%00", "q=%FF"} {
		code, _, b = e.req("GET", "/v1/sessions?"+q, "", e.auth, nil)
		if code != 200 || len(b["sessions"].([]any)) != 0 {
			t.Errorf("GET /v1/sessions?%s: %d %v, want 200 and no session", q, code, b)
		}
	}
	for _, path := range []string{"/v1/sessions?fromId=%00", "/v1/settlements?fromId=%00", "/v1/notifications?fromId=%FF"} {
		code, _, b = e.req("GET", path, "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if !strings.Contains(fmt.Sprint(b["errors"]), "field:fromId") {
			t.Errorf("GET %s: errors %v, want fromId named", path, b["errors"])
		}
	}
}

func TestOrderLifecycleOverHTTP(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	ev := events(o)
	if len(ev) != 2 || ev[0]["type"] != "create" || minor(ev[0]["amount"]) != 30000 || ev[1]["type"] != "readyForCapture" || minor(ev[1]["amount"]) != 0 {
		t.Fatalf("creation events %v", ev)
	}
	if o["updatedAt"] != ev[1]["createdAt"] {
		t.Fatal("updatedAt is not the last event's time")
	}
	unc := o["uncaptured"]
	if got := strings.Join(actions(unc), ","); got != "capture,partialCapture,cancel,editOrder,editCustomer,editPaymentMethod,extendOrderExpiry" {
		t.Fatalf("actions %s", got)
	}
	tiles := lines(unc)[0].(map[string]any)["id"].(string)

	// Edit customer: event with zero amount, status unchanged.
	code, _, o := e.req("POST", "/v1/orders/"+id+"/customer", `{"email":"ap@buyer.example","reference1":"cost centre 4"}`, e.auth, nil)
	last := events(o)[len(events(o))-1]
	if code != 200 || last["type"] != "editCustomer" || minor(last["amount"]) != 0 || o["customer"].(map[string]any)["email"] != "ap@buyer.example" || o["updatedAt"] != last["createdAt"] {
		t.Fatalf("edit customer: %d %v", code, last)
	}
	code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"email":"nope","invoiceChannel":{"type":"fax"}}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	for _, body := range []string{`{}`, `null`, `{"phone":null}`, `{"unknownField":"x"}`, `{"invoiceChannel":{}}`, `{"invoiceChannel":{"details":"x"}}`} {
		code, _, b = e.req("POST", "/v1/orders/"+id+"/customer", body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
	}
	if _, _, o = e.req("GET", "/v1/orders/"+id, "", e.auth, nil); events(o)[len(events(o))-1]["id"] != last["id"] {
		t.Fatalf("an edit naming no field appended an event: %v", events(o)[len(events(o))-1])
	}

	// The spec's fields no request sets are rendered all the same.
	if fs, ok := o["uncaptured"].(map[string]any)["factoringStatus"]; !ok || fs != "" {
		t.Fatalf("uncaptured factoringStatus %v (present %v)", fs, ok)
	}
	code, _, o = e.req("POST", "/v1/orders/"+id+"/customer", `{"invoiceChannel":{"type":"email","details":"ap@buyer.example"}}`, e.auth, nil)
	ic, _ := o["customer"].(map[string]any)["invoiceChannel"].(map[string]any)
	if code != 200 || ic["type"] != "email" || ic["state"] != "enabled" || fmt.Sprint(ic["configurations"]) != "map[promoteGln:false]" {
		t.Fatalf("invoice channel: %d %v", code, ic)
	}
	if ev := events(o)[len(events(o))-1]; ev["type"] != "editCustomer" || ev["id"] == last["id"] {
		t.Fatalf("the invoice channel's edit made no event of its own: %v", ev)
	}

	// Partial capture: mismatch refused; by line id accepted.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":1}`, tiles), e.auth, nil)
	wantProblem(t, code, b, 400, "capture_amount_mismatch")
	code, _, o = e.req("POST", "/v1/orders/"+id+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":25000}`, tiles), e.auth, nil)
	if code != 200 || minor(o["capturedAmount"]) != 25000 || minor(o["uncapturedAmount"]) != 5000 || len(o["captured"].([]any)) != 1 {
		t.Fatalf("partial capture: %d %v", code, o["capturedAmount"])
	}
	cap1 := o["captured"].([]any)[0].(map[string]any)
	capID := cap1["ledgerId"].(string)
	if cap1["documentReference"] != "INV-00000001" || !strings.Contains(cap1["documentUrl"].(string), "/documents/") {
		t.Fatalf("document %v", cap1)
	}
	// The signed document link serves the invoice; a tampered one is refused.
	resp, err := http.Get(cap1["documentUrl"].(string))
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("document: %v %d", err, resp.StatusCode)
	}
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), "INV-00000001") || !strings.Contains(string(page), "250.00") {
		t.Fatal("invoice lacks its number or total")
	}
	code, _, b = e.req("GET", strings.TrimPrefix(strings.Replace(cap1["documentUrl"].(string), "signature=", "signature=x", 1), e.ts.URL), "", "", nil)
	wantProblem(t, code, b, 403, "document_link_invalid")

	// Refunds: over-refund refused; partial then full.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"x","quantity":1,"unitPrice":30000,"vat":2500}],"totalRefundAmount":30000}`, e.auth, nil)
	wantProblem(t, code, b, 400, "refund_exceeds_captured")
	code, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Broken tile","quantity":1,"unitPrice":12500,"vat":2500}],"totalRefundAmount":12500,"note":"broken"}`, e.auth, nil)
	if code != 200 || minor(o["refundedAmount"]) != 12500 || o["refunded"].([]any)[0].(map[string]any)["note"] != "broken" {
		t.Fatalf("partial refund %d %v", code, o["refundedAmount"])
	}
	code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil)
	if code != 200 || minor(o["refundedAmount"]) != 25000 {
		t.Fatalf("full refund %d %v", code, o)
	}
	// Refunding the uncaptured sub-order is not an available action.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/refund/"+o["uncaptured"].(map[string]any)["ledgerId"].(string), "", e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")

	// Edit, extend expiry, reference, resend, recourse, payment status.
	code, _, o = e.req("POST", "/v1/orders/"+id, `{"orderLines":[{"description":"Grout","quantity":1,"unitPrice":4000,"vat":2500}],"totalOrderAmount":4000,"totalOrderAmountExclVat":3200,"totalOrderVatAmount":800}`, e.auth, nil)
	if code != 200 || minor(o["uncapturedAmount"]) != 4000 {
		t.Fatalf("edit: %d %v", code, o["uncapturedAmount"])
	}
	code, _, o = e.req("POST", "/v1/orders/"+id+"/extendexpiry", "", e.auth, nil)
	if code != 200 || events(o)[len(events(o))-1]["type"] != "extendExpiry" {
		t.Fatalf("extend: %d", code)
	}
	code, _, o = e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"PO-77"}`, e.auth, nil)
	if code != 200 || o["merchantReference"] != "PO-77" {
		t.Fatalf("reference: %d", code)
	}
	if code, _, _ = e.req("POST", "/v1/orders/"+id+"/document/"+capID+"/resend", "", e.auth, nil); code != 200 {
		t.Fatalf("resend: %d", code)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	// The invoice is refunded in full: no claim is left to hand back.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`, e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")
	code, h, ps := e.req("GET", "/v1/orders/"+id+"/paymentstatus", "", e.auth, nil)
	if code != 200 || h.Get("Deprecation") != "true" || ps["status"] != "partiallyRefunded" {
		t.Fatalf("deprecated payment status: %d %v %v", code, h.Get("Deprecation"), ps)
	}
	if code, _, ps = e.req("GET", "/v1/paymentstatus?orderId="+id, "", e.auth, nil); code != 200 || ps["status"] != "partiallyRefunded" {
		t.Fatalf("payment status: %d %v", code, ps)
	}
	code, _, b = e.req("GET", "/v1/paymentstatus?orderId="+id+"&sessionId=s1", "", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	// Cancel the remainder; then nothing can be captured.
	if code, _, o = e.req("DELETE", "/v1/orders/"+id, "", e.auth, nil); code != 200 || minor(o["uncapturedAmount"]) != 0 {
		t.Fatalf("cancel: %d", code)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")

	// Void a fresh capture through DELETE of its sub-order.
	o = e.order("5560000001", "invoice")
	id = o["id"].(string)
	code, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(o["status"]), "fullyCaptured") {
		t.Fatalf("full capture: %d %v", code, o["status"])
	}
	capID = o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	if code, _, o = e.req("DELETE", "/v1/orders/"+id+"/"+capID, "", e.auth, nil); code != 200 || minor(o["capturedAmount"]) != 0 {
		t.Fatalf("void: %d %v", code, o["capturedAmount"])
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/acknowledge", "", e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")

	// List with filters.
	code, _, list := e.req("GET", "/v1/orders?storeId=s1&status=cancelled,fullyCaptured&size=1", "", e.auth, nil)
	if code != 200 || list["noOfOrders"] != 1.0 || list["nextCursor"] == nil {
		t.Fatalf("list: %d %v", code, list)
	}
	code, _, b = e.req("GET", "/v1/orders?status=bogus&size=1001&createdFrom=yesterday", "", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if len(b["errors"].([]any)) != 3 {
		t.Fatalf("list errors %v", b["errors"])
	}
}

// A full capture naming no lines ([] or null) is refused; only an omitted
// body (or omitted orderLines) captures every remaining line.
func TestFullCaptureWithEmptyLinesIsRefused(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	for _, body := range []string{`{"orderLines":[]}`, `{"orderLines":null}`, `{"orderLines":null,"totalCaptureAmount":"x"}`} {
		code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if !strings.Contains(fmt.Sprint(b["errors"]), "field:orderLines") {
			t.Fatalf("%s: errors %v name no orderLines", body, b["errors"])
		}
	}
	_, _, o := e.req("GET", "/v1/orders/"+id, "", e.auth, nil)
	if o["capturedAmount"].(map[string]any)["minorUnits"] != 0.0 || len(o["captured"].([]any)) != 0 {
		t.Fatalf("captured after the refusal: %v %v", o["capturedAmount"], o["captured"])
	}
	if code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", `{}`, e.auth, nil); code != 200 || !strings.Contains(fmt.Sprint(o["status"]), "fullyCaptured") {
		t.Fatalf("capture with {}: %d %v", code, o["status"])
	}
}

func TestAdvanceInvoiceAndRiskFixtures(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000027", "invoice") // approved only for advance invoice
	id := o["id"].(string)
	if o["paymentMethod"].(map[string]any)["type"] != "advanceInvoice" || !strings.Contains(fmt.Sprint(o["status"]), "unacknowledged") {
		t.Fatalf("advance invoice order %v %v", o["paymentMethod"], o["status"])
	}
	code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")
	if code, _, _ = e.req("POST", "/v1/orders/"+id+"/acknowledge", "", e.auth, nil); code != 200 {
		t.Fatalf("acknowledge: %d", code)
	}
	if code, _, _ = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil); code != 200 {
		t.Fatalf("capture after acknowledge: %d", code)
	}
	// Declined for credit on invoice: 402.
	code, _, b = e.req("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000019"}}`, e.auth, nil)
	wantProblem(t, code, b, 402, "credit_declined")
	// possibleFraud: on hold until the sandbox approves.
	o = e.order("5560000035", "invoice")
	id = o["id"].(string)
	if o["authorizeStatus"] != "pending" || !strings.Contains(fmt.Sprint(o["status"]), "onHold") {
		t.Fatalf("hold %v", o["status"])
	}
	code, _, o = e.req("POST", "/sandbox/v1/orders/"+id+"/risk", `{"decision":"approve"}`, e.auth, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(o["status"]), "readyForCapture") {
		t.Fatalf("approve hold: %d %v", code, o["status"])
	}
	// Payment and reminders on a capture.
	_, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	if code, _, o = e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/status", `{"status":"reminder1"}`, e.auth, nil); code != 200 || !strings.Contains(fmt.Sprint(o["captured"].([]any)[0].(map[string]any)["status"]), "reminder1") {
		t.Fatalf("reminder: %d %v", code, o["captured"])
	}
	code, _, o = e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":30000}`, e.auth, nil)
	if code != 200 || !strings.Contains(fmt.Sprint(o["status"]), "fullyPaid") {
		t.Fatalf("paid: %d %v", code, o["status"])
	}
}

// TestRiskReviewEndsWithTheOrder: a hold on an order that was cancelled or
// has expired cannot be approved or denied any more. Approving one appended
// an authorize event (and sent order.authorize) for the whole amount after
// the cancel, and turned authorizeStatus to authorized; denying one turned a
// cancelled order's payment status to denied.
func TestRiskReviewEndsWithTheOrder(t *testing.T) {
	e := newSessionEnv(t)
	cancelled := e.order("5560000035", "invoice")["id"].(string)
	if code, _, _ := e.req("DELETE", "/v1/orders/"+cancelled, "", e.auth, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	expired := e.order("5560000035", "invoice")["id"].(string)
	if code, _, _ := e.req("POST", "/sandbox/v1/clock", `{"advance":"700h"}`, e.auth, nil); code != 200 {
		t.Fatalf("advance: %d", code)
	}
	for _, id := range []string{cancelled, expired} {
		for _, d := range []string{"approve", "deny"} {
			code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/risk", `{"decision":"`+d+`"}`, e.auth, nil)
			wantProblem(t, code, b, 409, "action_not_available")
		}
		_, _, o := e.req("GET", "/v1/orders/"+id, "", e.auth, nil)
		if o["authorizeStatus"] != "pending" || strings.Contains(fmt.Sprint(o["status"]), "fraudDeny") ||
			strings.Contains(fmt.Sprint(o["events"]), "authorize") {
			t.Fatalf("after refused decisions: %v %v %v", o["authorizeStatus"], o["status"], o["events"])
		}
	}
}

// TestEditDuringRiskReviewAuthorizesNothing: an edit that raises the amount
// of an order on hold appended an authorize event (and sent
// order.authorize) while its authorizeStatus was still pending, so a review
// that then denied it, which appends and sends nothing, left the merchant
// holding an authorization for an order denied for fraud. The approval
// authorizes the amount as edited.
func TestEditDuringRiskReviewAuthorizesNothing(t *testing.T) {
	e := newSessionEnv(t)
	edit := func(id, lines string, total, vat int) map[string]any {
		t.Helper()
		code, _, o := e.req("POST", "/v1/orders/"+id, fmt.Sprintf(`{"orderLines":[%s],"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":%d}`,
			lines, total, total-vat, vat), e.auth, nil)
		if code != 200 {
			t.Fatalf("edit: %d %v", code, o)
		}
		return o
	}
	const grout = `{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}`
	const all = `{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500},` + grout
	for _, decision := range []string{"approve", "deny"} {
		id := e.order("5560000035", "invoice")["id"].(string)
		edit(id, grout, 5000, 1000)
		o := edit(id, all, 30000, 6000) // back up to what the buyer approved
		if o["authorizeStatus"] != "pending" || strings.Contains(fmt.Sprint(o["events"]), "authorize") {
			t.Fatalf("raised on hold: %v %v", o["authorizeStatus"], o["events"])
		}
		code, _, o := e.req("POST", "/sandbox/v1/orders/"+id+"/risk", `{"decision":"`+decision+`"}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("%s: %d %v", decision, code, o)
		}
		var auths []float64
		for _, ev := range events(o) {
			if ev["type"] == "authorize" {
				auths = append(auths, minor(ev["amount"]))
			}
		}
		if want := map[string]string{"approve": "[30000]", "deny": "[]"}[decision]; fmt.Sprint(auths) != want {
			t.Fatalf("%s: authorize events %v, want %s", decision, auths, want)
		}
	}
}

func TestSandboxClockExpiryAndTokens(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	code, _, c := e.req("GET", "/sandbox/v1/clock", "", e.auth, nil)
	if code != 200 || c["offset"] != "0s" {
		t.Fatalf("clock %v", c)
	}
	code, _, c = e.req("POST", "/sandbox/v1/clock", `{"advance":"700h"}`, e.auth, nil)
	if code != 200 || c["offset"] != "700h0m0s" {
		t.Fatalf("advance %d %v", code, c)
	}
	code, _, b := e.req("POST", "/sandbox/v1/clock", `{"set":"2001-01-01T00:00:00Z"}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if _, _, b = e.req("POST", "/sandbox/v1/jobs/expire", "", e.auth, nil); b["expired"] != 1.0 {
		t.Fatalf("expire job %v", b)
	}
	o = e.get(id)
	if !strings.Contains(fmt.Sprint(o["status"]), "expired") || strings.Contains(strings.Join(actions(o["uncaptured"]), ","), "capture") {
		t.Fatalf("expired order %v %v", o["status"], actions(o["uncaptured"]))
	}
	if code, _, f := e.req("GET", "/sandbox/v1/fixtures", "", e.auth, nil); code != 200 || len(f["fixtures"].([]any)) != 20 {
		t.Fatalf("fixtures %d", code)
	}
	if code, _, m := e.req("POST", "/sandbox/v1/merchants", `{"name":"Third"}`, e.auth, nil); code != 201 || m["clientSecret"] == "" {
		t.Fatalf("merchant %d %v", code, m)
	}
	// Authorization tokens: delete → 204, then unusable; customer tokens.
	tok := e.mint("5560000001", "invoice")
	if code, _, _ := e.req("DELETE", "/v1/authorization-tokens/"+tok, "", e.auth, nil); code != 204 {
		t.Fatalf("delete token %d", code)
	}
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+tok+"/order", orderBody, e.auth, nil)
	wantProblem(t, code, b, 404, "authorization_token_not_found")
	tok = e.mint("5560000001", "card")
	code, _, ct := e.req("POST", "/v1/authorization-tokens/"+tok+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("customer token %d %v", code, ct)
	}
	ctID := ct["customerToken"].(string)
	if code, _, rec := e.req("GET", "/v1/customer-tokens/"+ctID, "", e.auth, nil); code != 200 || rec["state"] != "active" || rec["account"].(map[string]any)["maskedAccount"] == "" {
		t.Fatalf("get customer token %d %v", code, rec)
	}
	custOrder := `{"country":"SE","currency":"SEK","orderLines":[{"description":"Refill","quantity":1,"unitPrice":9900,"vat":2500}]}`
	if code, _, b = e.req("POST", "/v1/customer-tokens/"+ctID+"/order", custOrder, e.auth, nil); code != 200 {
		t.Fatalf("order from customer token %d %v", code, b)
	}
	if code, _, rec := e.req("DELETE", "/v1/customer-tokens/"+ctID, "", e.auth, nil); code != 200 || rec["state"] != "revoked" {
		t.Fatalf("revoke %d", code)
	}
	code, _, b = e.req("POST", "/v1/customer-tokens/"+ctID+"/order", custOrder, e.auth, nil)
	wantProblem(t, code, b, 409, "customer_token_revoked")
}

func TestIdempotencyOverHTTP(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	body := `{"orderLines":[{"description":"part","quantity":1,"unitPrice":1000,"vat":2500}],"totalCaptureAmount":1000}`
	key := map[string]string{"Idempotency-Key": "cap-1"}
	code, h1, first := e.req("POST", "/v1/orders/"+id+"/partialcapture", body, e.auth, key)
	code2, h2, again := e.req("POST", "/v1/orders/"+id+"/partialcapture", body, e.auth, key)
	if code != 200 || code2 != 200 || h1.Get("Idempotent-Replayed") != "" || h2.Get("Idempotent-Replayed") != "true" || fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("replay: %d %d %q", code, code2, h2.Get("Idempotent-Replayed"))
	}
	code, _, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", strings.Replace(body, "1000", "2000", 2), e.auth, key)
	wantProblem(t, code, b, 422, "idempotency_key_reused")
	// The same key from another merchant is another key.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", body, e.other, key)
	wantProblem(t, code, b, 404, "order_not_found")

	// Concurrent requests with one key: exactly one executes.
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", body, e.auth, map[string]string{"Idempotency-Key": "race"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 200 && h.Get("Idempotent-Replayed") == "true":
				counts["replayed"]++
			case code == 200:
				counts["executed"]++
			case code == 409 && b["code"] == "idempotency_request_in_progress":
				counts["inFlight"]++
			default:
				counts[fmt.Sprint(code, b["code"])]++
			}
		}()
	}
	wg.Wait()
	if counts["executed"] != 1 || counts["executed"]+counts["replayed"]+counts["inFlight"] != 8 {
		t.Fatalf("outcomes %v", counts)
	}
	if got := len(e.get(id)["captured"].([]any)); got != 2 {
		t.Fatalf("captures %d, want 2 (one per key)", got)
	}
}

func TestOperationsEndpoints(t *testing.T) {
	e := newSessionEnv(t)
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if code, _, b := e.req("GET", p, "", "", nil); code != 200 || b == nil {
			t.Fatalf("%s: %d", p, code)
		}
	}
	e.order("5560000001", "invoice")
	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`kassa_http_requests_total{method="POST",route="/v1/authorization-tokens/:token/order",status="200"} 1`,
		"kassa_http_request_duration_seconds_bucket", "kassa_store_commit_duration_seconds_count"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// X-Request-Id is honoured and returned, and appears in problems.
	_, h, b := e.req("GET", "/v1/orders/x", "", e.auth, map[string]string{"X-Request-Id": "trace-42"})
	if h.Get("X-Request-Id") != "trace-42" || b["requestId"] != "trace-42" {
		t.Fatalf("request id %q %v", h.Get("X-Request-Id"), b["requestId"])
	}
	_ = url.Values{}
	_ = time.Second
}

// What the merchant sent is stored as sent or refused: text that
// encoding/json would quietly replace with U+FFFD, numbers no integer
// field takes, and bodies in another charset or encoding.
func TestInputIsTakenAsSentOrRefused(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", "{\"reference\":\"\xc3\x28\"}", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "reference" {
		t.Fatalf("invalid UTF-8: fields %s", got)
	}
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order",
		strings.Replace(orderBody, `"Grout"`, `"\ud800"`, 1), e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "orderLines[1].description" {
		t.Fatalf("unpaired surrogate: fields %s", got)
	}
	if got := e.get(id)["merchantReference"]; got != "PO-1" {
		t.Fatalf("a refused reference changed the order: %v", got)
	}
	// A surrogate pair is text like any other.
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order",
		strings.Replace(orderBody, `"Grout"`, `"Grout \ud83d\ude00"`, 1), e.auth, nil)
	if code != 200 {
		t.Fatalf("surrogate pair: %d %v", code, b)
	}
	if stored, _ := json.Marshal(e.get(b["orderId"].(string))); !strings.Contains(string(stored), `"Grout 😀"`) {
		t.Fatalf("the pair was not stored as sent: %s", stored)
	}
	// 1.0 and 1e0 are not integers to an integer field; the path has its index.
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order",
		strings.Replace(strings.Replace(orderBody, `"quantity":1`, `"quantity":1.0`, 1), `"unitPrice":12500`, `"unitPrice":1.25e4`, 1), e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "orderLines[0].unitPrice,orderLines[1].quantity" && got != "orderLines[1].quantity,orderLines[0].unitPrice" {
		t.Fatalf("non-integer numbers: fields %s", got)
	}
	// JSON is UTF-8 without a content coding.
	for _, hdr := range []map[string]string{
		{"Content-Type": "application/json; charset=utf-16"},
		{"Content-Encoding": "gzip"},
	} {
		code, _, b = e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"R-2"}`, e.auth, hdr)
		wantProblem(t, code, b, 415, "unsupported_media_type")
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"R-3"}`, e.auth, map[string]string{"Content-Type": "application/json; charset=UTF-8"})
	if code != 200 {
		t.Fatalf("charset=UTF-8: %d %v", code, b)
	}
}

// Paths and cursors mean one thing only: an encoded slash or an empty
// segment routes nowhere, and a damaged cursor is refused instead of being
// read as another position or as the end of the list.
func TestPathsAndCursorsAreUnambiguous(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	e.order("5560000001", "invoice")
	e.order("5560000001", "invoice")
	for _, path := range []string{"/v1/orders/" + id + "%2Fcapture", "/v1/orders/" + id + "%2fcapture", "/v1/orders//" + id} {
		method := "POST"
		if strings.Contains(path, "//") {
			method = "GET"
		}
		code, _, b := e.req(method, path, "", e.auth, nil)
		wantProblem(t, code, b, 404, "route_not_found")
	}
	if got := minor(e.get(id)["capturedAmount"]); got != 0 {
		t.Fatalf("an encoded-slash path captured %v", got)
	}
	// HEAD is GET without a body: read the raw answer, since an HTTP client
	// never reads a body after HEAD.
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "HEAD /v1/orders/%s HTTP/1.1\r\nHost: kassa\r\nAuthorization: %s\r\nConnection: close\r\n\r\n", id, e.auth)
	raw, _ := io.ReadAll(conn)
	head, rest, found := strings.Cut(string(raw), "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 200") || !found || rest != "" {
		t.Fatalf("HEAD answered %q with %d bytes after the headers", strings.SplitN(head, "\r\n", 2)[0], len(rest))
	}

	code, _, b := e.req("GET", "/v1/orders?size=1", "", e.auth, nil)
	cursor, _ := b["nextCursor"].(string)
	if code != 200 || cursor == "" {
		t.Fatalf("first page: %d %v", code, b)
	}
	seen := map[string]bool{}
	for _, o := range b["orders"].([]any) {
		seen[o.(map[string]any)["id"].(string)] = true
	}
	for _, damaged := range []string{cursor[:len(cursor)-2], strings.ToUpper(cursor), cursor[1:], "x" + cursor, strings.SplitN(cursor, ".", 2)[0]} {
		code, _, b := e.req("GET", "/v1/orders?size=1&cursor="+url.QueryEscape(damaged), "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != "cursor" {
			t.Fatalf("damaged cursor %q named %v", damaged, f)
		}
	}
	code, _, b = e.req("GET", "/v1/orders?size=1&fromId=nope", "", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != "fromId" {
		t.Fatalf("bad fromId named %v", f)
	}
	// The undamaged cursor walks the rest, each order once.
	for cursor != "" {
		code, _, b = e.req("GET", "/v1/orders?size=1&cursor="+url.QueryEscape(cursor), "", e.auth, nil)
		if code != 200 {
			t.Fatalf("page: %d %v", code, b)
		}
		for _, o := range b["orders"].([]any) {
			oid := o.(map[string]any)["id"].(string)
			if seen[oid] {
				t.Fatalf("order %s listed twice", oid)
			}
			seen[oid] = true
		}
		cursor, _ = b["nextCursor"].(string)
	}
	if len(seen) < 3 {
		t.Fatalf("walk saw %d orders, want at least 3", len(seen))
	}
}

// A wrong JSON type does not hide the body's other offending fields, and a
// zero value standing in for the wrong-typed one is not reported again.
func TestTypeErrorsAndRuleErrorsTogether(t *testing.T) {
	e := newSessionEnv(t)
	body := `{"country":"SE","currency":"SEK","locale":"sv-SE","reference":"` + strings.Repeat("r", 51) + `",
		"autoCapture":{"delayMinutes":10081},"metadata":{"a":1},
		"orderLines":[{"description":"x","quantity":"1","unitPrice":100,"vat":2500},{"description":"` + strings.Repeat("d", 300) + `","quantity":1,"unitPrice":100,"vat":2500}]}`
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "autoCapture.delayMinutes,metadata.a,orderLines[0].quantity,orderLines[1].description,reference" {
		t.Fatalf("fields %s", got)
	}
	// The customer-token route checks by its own rules (customer is refused there).
	code, _, b = e.req("POST", "/v1/customer-tokens/ct_nope/order", `{"country":"SE","currency":"SEK","customer":{},"orderLines":[{"description":"x","quantity":true,"unitPrice":100,"vat":2500}]}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "customer,orderLines[0].quantity" {
		t.Fatalf("customer-token fields %s", got)
	}
}

// A list asked to start after an id it does not hold is the caller's
// mistake (400 naming fromId), on every list that pages by id.
func TestUnknownFromIDIsABadRequest(t *testing.T) {
	e := newSessionEnv(t)
	for _, path := range []string{"/v1/settlements", "/v1/sessions", "/v1/notifications"} {
		code, _, b := e.req("GET", path+"?fromId=bogus", "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != "fromId" {
			t.Fatalf("%s: field %v", path, f)
		}
		if code, _, _ := e.req("GET", path, "", e.auth, nil); code != 200 {
			t.Fatalf("%s without fromId: %d", path, code)
		}
	}
	// The always-sent topic may be named in a subscription; it changes nothing.
	code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"https://example.com/hook","events":["order.acknowledgementRequired","order.create"]}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("subscribe with the always-sent topic: %d %v", code, b)
	}
}

// Checks that compare amounts are not run against the zero standing in for
// a wrong-typed amount: the client's own total was right (found by review).
func TestTypeErrorDoesNotFakeASumMismatch(t *testing.T) {
	e := newSessionEnv(t)
	body := `{"country":"SE","currency":"SEK","locale":"sv-SE","reference":"` + strings.Repeat("r", 51) + `",
		"orderLines":[{"description":"x","quantity":1,"unitPrice":1000,"unitDiscountAmount":"100","vat":2500,"totalAmount":900},
		              {"description":"` + strings.Repeat("d", 300) + `","quantity":1,"unitPrice":100,"vat":2500}],
		"totalOrderAmount":1000}`
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "orderLines[0].unitDiscountAmount,orderLines[1].description,reference" {
		t.Fatalf("fields %s", got)
	}
	// With no other line finding the order totals are checked too, against
	// lines holding the stand-in: the client's 900 is right, so only the type
	// error is reported.
	body = `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"x","quantity":1,"unitPrice":1000,"unitDiscountAmount":"100","vat":2500}],
		"totalOrderAmount":900}`
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "orderLines[0].unitDiscountAmount" {
		t.Fatalf("fields %s", got)
	}
	// A wrong-typed vatMode stands in for how every line's VAT is computed.
	body = `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":1,
		"orderLines":[{"description":"x","quantity":1,"unitPrice":1000,"vat":2500,"totalAmount":1000,"totalVatAmount":250}]}`
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if got := problemFields(b); got != "vatMode" {
		t.Fatalf("fields %s", got)
	}
}

// TestClientHangUpIsNoServerError: a request whose client went away while
// it was handled is recorded as 499 (client closed), not as a 500 in the
// metrics and the error log.
func TestClientHangUpIsNoServerError(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("POST", "/v1/orders/"+id+"/capture", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", e.auth)
	rec := httptest.NewRecorder()
	e.ts.Config.Handler.ServeHTTP(rec, r)
	if rec.Code != statusClientClosed {
		t.Fatalf("capture with the client gone: %d %s, want 499", rec.Code, rec.Body)
	}
	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `route="/v1/orders/:orderId/capture",status="499"} 1`) || strings.Contains(string(m), `status="500"`) {
		t.Fatalf("metrics after a hang-up:\n%s", m)
	}
	if o := e.get(id); minor(o["capturedAmount"]) != 0 {
		t.Fatalf("the abandoned capture was applied: %v", o["capturedAmount"])
	}
}

// TestMetricsMethodLabelIsBounded: methods a client invents share one
// series, so unauthenticated requests cannot grow the registry.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	e := newSessionEnv(t)
	for i := 0; i < 50; i++ {
		r := httptest.NewRequest(fmt.Sprintf("M%dX", i), "/nope", nil)
		e.ts.Config.Handler.ServeHTTP(httptest.NewRecorder(), r)
	}
	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(m), `method="M1X"`) || !strings.Contains(string(m), `method="other",route="unmatched",status="404"} 50`) {
		t.Fatalf("metrics after 50 invented methods:\n%s", m)
	}
}

// TestIdempotencyKeyGivenTwice: two different Idempotency-Key header lines
// are refused, not read as the first; nothing is captured. The same line
// twice is one key.
func TestIdempotencyKeyGivenTwice(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	r, _ := http.NewRequest("POST", e.ts.URL+"/v1/orders/"+id+"/capture", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", e.auth)
	r.Header.Add("Idempotency-Key", "k1")
	r.Header.Add("Idempotency-Key", "k2")
	code, _, b := e.send(r)
	wantProblem(t, code, b, 400, "validation_failed")
	if !strings.Contains(fmt.Sprint(b["errors"]), "field:Idempotency-Key") {
		t.Fatalf("errors %v name no Idempotency-Key", b["errors"])
	}
	if o := e.get(id); minor(o["capturedAmount"]) != 0 {
		t.Fatalf("captured after the refusal: %v", o["capturedAmount"])
	}
	r, _ = http.NewRequest("POST", e.ts.URL+"/v1/orders/"+id+"/capture", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", e.auth)
	r.Header.Add("Idempotency-Key", "k1")
	r.Header.Add("Idempotency-Key", "k1")
	if code, _, o := e.send(r); code != 200 {
		t.Fatalf("the same key twice: %d %v", code, o)
	}
}

// TestSingleHeadersGivenTwice: Authorization, Content-Type and
// Content-Encoding in two header lines that differ are refused naming each
// such header, as Idempotency-Key is, instead of being served by the first
// line; nothing is captured. The same line twice is one value.
func TestSingleHeadersGivenTwice(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	for _, c := range []struct {
		name   string
		lines  [][2]string // header lines added to the request, in order
		fields string      // the headers the refusal names; "" for none (served)
	}{
		{"two merchants' credentials", [][2]string{{"Authorization", e.auth}, {"Authorization", e.other}}, "Authorization"},
		{"two media types", [][2]string{{"Content-Type", "application/json"}, {"Content-Type", "text/plain"}}, "Content-Type"},
		{"two encodings", [][2]string{{"Content-Encoding", "identity"}, {"Content-Encoding", "gzip"}}, "Content-Encoding"},
		{"every repeat named at once", [][2]string{{"Authorization", e.auth}, {"Authorization", e.other},
			{"Content-Type", "application/json"}, {"Content-Type", "application/xml"}}, "Authorization,Content-Type"},
		{"an empty key", [][2]string{{"Idempotency-Key", ""}}, "Idempotency-Key"},
		{"the same lines twice", [][2]string{{"Authorization", e.auth}, {"Authorization", e.auth},
			{"Content-Type", "application/json"}, {"Content-Type", "application/json"}}, ""},
	} {
		r, _ := http.NewRequest("POST", e.ts.URL+"/v1/orders/"+id+"/capture", strings.NewReader(`{}`))
		for _, h := range c.lines {
			r.Header.Add(h[0], h[1])
		}
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", e.auth)
		}
		if r.Header.Get("Content-Type") == "" {
			r.Header.Set("Content-Type", "application/json")
		}
		code, _, b := e.send(r)
		if c.fields == "" {
			if code != 200 {
				t.Fatalf("%s: %d %v", c.name, code, b)
			}
			continue
		}
		wantProblem(t, code, b, 400, "validation_failed")
		if f := problemFields(b); f != c.fields {
			t.Fatalf("%s: fields %s, want %s", c.name, f, c.fields)
		}
		if o := e.get(id); minor(o["capturedAmount"]) != 0 {
			t.Fatalf("%s: captured after the refusal: %v", c.name, o["capturedAmount"])
		}
	}
}

// TestTokenEndpointRefusalsBeforeRouting: what the server refuses before
// routing (a query that does not decode, a header given twice) is answered
// on /oauth/token in the endpoint's RFC 6749 shape, naming what was wrong,
// not as a problem document an OAuth client cannot read.
func TestTokenEndpointRefusalsBeforeRouting(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct {
		name, query string
		lines       [][2]string
		names       string // what error_description must name
	}{
		{"a query that does not decode", "?x=%zz", nil, "x"},
		{"two media types", "", [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}, {"Content-Type", "text/plain"}}, "Content-Type"},
		{"two keys", "", [][2]string{{"Idempotency-Key", "k1"}, {"Idempotency-Key", "k2"}}, "Idempotency-Key"},
	} {
		r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token"+c.query, strings.NewReader("grant_type=client_credentials"))
		r.Header.Set("Authorization", e.auth)
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i, h := range c.lines {
			if i == 0 {
				r.Header.Del(h[0])
			}
			r.Header.Add(h[0], h[1])
		}
		code, h, out := e.send(r)
		if desc, _ := out["error_description"].(string); code != 400 || out["error"] != "invalid_request" ||
			!strings.HasPrefix(desc, c.names+" ") || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %v %v", c.name, code, h, out)
		}
	}
}

// TestBasicCredentialsFormEncoded: RFC 6749 §2.3.1 has an OAuth client
// form-urlencode its id and secret before Basic authentication (Go's
// golang.org/x/oauth2 and others do), so a ':' in a client id or a '+', '/'
// or '%' in a secret arrives escaped. Both the token endpoint and Basic on
// the API take them so, and as sent (curl -u).
func TestBasicCredentialsFormEncoded(t *testing.T) {
	e := newSessionEnv(t)
	id, secret := "shop:7 ab", "p+w/d=%x 9!"
	if _, _, err := e.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "odd", ClientID: id, ClientSecret: secret}); err != nil {
		t.Fatal(err)
	}
	encoded := basic(url.QueryEscape(id), url.QueryEscape(secret))
	token := func(auth string) int {
		r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
		r.Header.Set("Authorization", auth)
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		code, _, _ := e.send(r)
		return code
	}
	if code := token(encoded); code != 200 {
		t.Errorf("token with form-encoded Basic credentials: %d, want 200", code)
	}
	if code := token(basic(url.QueryEscape(id), url.QueryEscape("wrong"))); code != 401 {
		t.Errorf("token with a wrong encoded secret: %d, want 401", code)
	}
	r, _ := http.NewRequest("GET", e.ts.URL+"/v1/orders", nil)
	r.Header.Set("Authorization", encoded)
	if code, _, _ := e.send(r); code != 200 {
		t.Errorf("API with form-encoded Basic credentials: %d, want 200", code)
	}
	// As sent, unencoded, for an id without ':' (Basic cannot carry one).
	if _, _, err := e.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "plain", ClientID: "plain", ClientSecret: "a+b%41"}); err != nil {
		t.Fatal(err)
	}
	if code := token(basic("plain", "a+b%41")); code != 200 {
		t.Errorf("token with a secret sent as it is: %d, want 200", code)
	}
}

// TestAccessTokenEndsWithItsSecret: a merchant's access tokens are bound to
// the client secret they were obtained with. Setting a new secret (a leaked
// one rotated) ends them at once, not an hour later; giving the same secret
// again (every restart of a server started with its credentials) ends
// nothing; tokens of builds that did not bind them stay valid until expiry.
func TestAccessTokenEndsWithItsSecret(t *testing.T) {
	e := newSessionEnv(t)
	ctx := context.Background()
	ensure := func(secret string) {
		t.Helper()
		if _, _, err := e.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "rotating", ClientID: "rot", ClientSecret: secret}); err != nil {
			t.Fatal(err)
		}
	}
	token := func(secret string) (int, string) {
		r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
		r.Header.Set("Authorization", basic("rot", secret))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		code, _, body := e.send(r)
		tok, _ := body["access_token"].(string)
		return code, tok
	}
	list := func(tok string) int {
		r, _ := http.NewRequest("GET", e.ts.URL+"/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		code, _, _ := e.send(r)
		return code
	}
	ensure("first-secret-1")
	code, old := token("first-secret-1")
	if code != 200 || old == "" {
		t.Fatalf("token: %d %q", code, old)
	}
	ensure("first-secret-1")
	if code := list(old); code != 200 {
		t.Errorf("token after the same secret was given again: %d, want 200", code)
	}

	m, err := e.ledger.Authenticate(ctx, "rot", "first-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"m": m.ID, "e": time.Now().Add(time.Hour).Unix()})
	p := base64.RawURLEncoding.EncodeToString(payload)
	legacy := "kat_" + p + "." + (&Server{cfg: Config{Key: []byte("0123456789abcdef0123456789abcdef")}}).sign("access", p)
	if code := list(legacy); code != 200 {
		t.Errorf("token without a credential claim: %d, want 200 until it expires", code)
	}

	ensure("second-secret-2")
	if code := list(old); code != 401 {
		t.Errorf("token obtained with the replaced secret: %d, want 401", code)
	}
	if code, _ := token("first-secret-1"); code != 401 {
		t.Errorf("token endpoint with the replaced secret: %d, want 401", code)
	}
	code, fresh := token("second-secret-2")
	if code != 200 || list(fresh) != 200 {
		t.Errorf("token with the new secret: %d, then %d; want 200, 200", code, list(fresh))
	}
	if code := list("kat_" + p + ".forged"); code != 401 {
		t.Errorf("token with a wrong signature: %d, want 401", code)
	}
}

// TestCardCaptureTakesNoPayment: a card or PayPal capture is paid when it is
// made (its document is a receipt), so the sandbox's buyer payment and the
// reminders, which are for an invoice still owed, are refused on it. A card
// capture took a payment before, turned partiallyPaid and could be sent to
// debt collection.
func TestCardCaptureTakesNoPayment(t *testing.T) {
	e := newSessionEnv(t)
	for _, pm := range []string{"card", "paypal"} {
		id := e.order("5560000001", pm)["id"].(string)
		code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
		if code != 200 {
			t.Fatalf("%s capture: %d %v", pm, code, o)
		}
		capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
		code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":1}`, e.auth, nil)
		wantProblem(t, code, b, 409, "action_not_available")
		for _, s := range []string{"reminder1", "reminder2", "debtCollection"} {
			code, _, b = e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/status", `{"status":"`+s+`"}`, e.auth, nil)
			wantProblem(t, code, b, 409, "action_not_available")
		}
		after := e.get(id)
		if st := fmt.Sprint(after["status"]); strings.Contains(st, "Paid") || minor(after["capturedAmount"]) == 0 {
			t.Fatalf("%s after refused payments: %v", pm, st)
		}
		if ev := fmt.Sprint(after["events"]); strings.Contains(ev, "paid") {
			t.Fatalf("%s: a paid event was recorded: %v", pm, ev)
		}
	}
}

// The spec's flow for capturing part of a line's quantity: capture it
// without id, then edit the order to reduce that uncaptured line's quantity
// and recalculate its amounts. availableActions must say at each step what
// the next request can do. In exclVat the units' VAT is rounded per line, so
// 1 + 2 units of 0.03 at 25 % invoice 0.01 more VAT than 3 did, and the edit
// passes the authorization unless its line's totalVatAmount is sent 1 lower.
func TestCaptureWithoutIDThenEditOverHTTP(t *testing.T) {
	e := newSessionEnv(t)
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat",
		"orderLines":[{"description":"Book","quantity":3,"unitPrice":3,"vat":2500},{"description":"Food","quantity":1,"unitPrice":5600,"vat":1200}]}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("create: %d %v", code, b)
	}
	id := b["orderId"].(string)
	o := e.get(id)
	if minor(o["orderAmount"]) != 6283 || !slices.Contains(actions(o["uncaptured"]), "capture") {
		t.Fatalf("created %v, actions %v", o["orderAmount"], actions(o["uncaptured"]))
	}
	before := lines(o["uncaptured"])

	// One Book without id: captured, the uncaptured Book line untouched.
	code, _, o = e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":[{"description":"Book","quantity":1,"unitPrice":3,"vat":2500}],"totalCaptureAmount":3}`, e.auth, nil)
	if code != 200 || minor(o["capturedAmount"]) != 4 || fmt.Sprint(lines(o["uncaptured"])) != fmt.Sprint(before) {
		t.Fatalf("capture without id: %d %v %v", code, o["capturedAmount"], o["uncaptured"])
	}
	// 62.83 uncaptured, 62.79 of the authorization left: no full capture.
	if got := strings.Join(actions(o["uncaptured"]), ","); got != "partialCapture,cancel,editOrder,editCustomer,extendOrderExpiry" {
		t.Fatalf("after capture without id: %s", got)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")

	// The edit to 2 Books as computed passes the authorization by the rounding.
	edit := `{"orderLines":[{"description":"Book","quantity":2,"unitPrice":3,"vat":2500%s},{"description":"Food","quantity":1,"unitPrice":5600,"vat":1200}],
		"totalOrderAmount":%d,"totalOrderAmountExclVat":5606,"totalOrderVatAmount":%d}`
	code, _, b = e.req("POST", "/v1/orders/"+id, fmt.Sprintf(edit, "", 6280, 674), e.auth, nil)
	wantProblem(t, code, b, 400, "authorization_exceeded")
	if !strings.Contains(b["detail"].(string)+fmt.Sprint(b["errors"]), "1 lower") {
		t.Fatalf("refusal names no rounding: %v", b)
	}
	code, _, o = e.req("POST", "/v1/orders/"+id, fmt.Sprintf(edit, `,"totalVatAmount":1`, 6279, 673), e.auth, nil)
	if code != 200 || minor(o["uncapturedAmount"]) != 6279 || minor(o["orderAmount"]) != 6283 {
		t.Fatalf("edit: %d %v", code, o)
	}
	if got := strings.Join(actions(o["uncaptured"]), ","); got != "capture,partialCapture,cancel,editOrder,editCustomer,extendOrderExpiry" {
		t.Fatalf("after the edit: %s", got)
	}

	// The rest captured: exactly what was authorized, nothing left.
	code, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 || minor(o["capturedAmount"]) != 6283 || minor(o["uncapturedAmount"]) != 0 || len(lines(o["uncaptured"])) != 0 {
		t.Fatalf("final capture: %d %v %v", code, o["capturedAmount"], o["uncapturedAmount"])
	}
	if got := strings.Join(actions(o["uncaptured"]), ","); got != "editCustomer" {
		t.Fatalf("fully captured: %s", got)
	}
	for _, c := range o["captured"].([]any) {
		if got := strings.Join(actions(c), ","); got != "refund,partialRefund,resendOrderInvoice,void,recourseOrderInvoice" {
			t.Fatalf("capture %v: %s", c.(map[string]any)["ledgerId"], got)
		}
	}
}

// TestEditCustomerKeepsTheBillingAddress: the billing address sent on edit
// customer replaces the order's whole, and one with none of its fields (`{}`,
// or every field "" as a client's struct without omitempty marshals it
// beside the field it meant to change) was taken, erasing the address every
// later invoice must state (docs/decisions.md) while reading as done. It is
// refused on billingAddress, as an invoiceChannel with none of its fields
// is; a shipping address, which no document states, may still be cleared so.
func TestEditCustomerKeepsTheBillingAddress(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	edit := func(body string) (int, map[string]any) {
		t.Helper()
		code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", body, e.auth, nil)
		return code, b
	}
	if code, b := edit(`{"billingAddress":{"companyName":"Buyer AB","streetAddress":"Storgatan 1","postalCode":"11122","city":"Stockholm","country":"SE"},
		"shippingAddress":{"streetAddress":"Lagervägen 2","city":"Solna"}}`); code != 200 {
		t.Fatalf("set addresses: %d %v", code, b)
	}
	events := len(events(e.get(id)))
	for _, body := range []string{`{"billingAddress":{}}`, `{"billingAddress":{"contact":{}}}`,
		`{"email":"ap@buyer.example","billingAddress":{"attentionName":"","careOf":"","city":"","companyName":"","country":"","postalCode":"","streetAddress":"",
			"contact":{"email":"","firstName":"","lastName":"","phone":""}}}`} {
		code, b := edit(body)
		wantProblem(t, code, b, 400, "validation_failed")
		if got := problemFields(b); got != "billingAddress" {
			t.Fatalf("%s: refused on %s", body, got)
		}
	}
	o := e.get(id)
	if addr := fmt.Sprint(o["customer"].(map[string]any)["billingAddress"]); !strings.Contains(addr, "Storgatan 1") || len(o["events"].([]any)) != events {
		t.Fatalf("after refused edits: %s, %d events (had %d)", addr, len(o["events"].([]any)), events)
	}
	if code, b := edit(`{"shippingAddress":{}}`); code != 200 || b["customer"].(map[string]any)["shippingAddress"] != nil && fmt.Sprint(b["customer"].(map[string]any)["shippingAddress"]) != "map[]" {
		t.Fatalf("clear shipping address: %d %v", code, b["customer"])
	}
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	res, err := http.Get(o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(doc), "Storgatan 1") {
		t.Fatalf("the invoice states no billing address:\n%s", doc)
	}
}
