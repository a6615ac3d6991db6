package server

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage/memory"
)

// FuzzDecodeRequests feeds arbitrary bodies to the decoders of every kind of
// request body through the real handlers: never a 5xx, never a panic, and
// every refusal is a problem document with a code.
func FuzzDecodeRequests(f *testing.F) {
	for _, seed := range []string{
		orderBody, `{}`, `[]`, `null`, `{"orderLines":[{"quantity":1e30}]}`, `{"orderLines":[{"id":"x"}],"totalCaptureAmount":-1}`,
		`{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":1000}`, `{"orderLines":"x"}`,
		`{"metadata":{"a":{}}}`, `{"customer":{"billingAddress":{"contact":{"email":7}}}}`, "\x00\xff", `{"a":`,
		`{"totalCaptureAmount":1,"totalCaptureAmount":2}`, `{"url":"http://127.0.0.1:1/h","topics":["order.captured"]}`, `{"url":"http://u:p@h/"}`,
		`{"amount":100}`, `{"amount":-1}`, `{"status":"reminder1"}`, `{"approve":true}`, `{"reason":"x"}`, `{"reference":"r","settlementReference":"s"}`,
		`{"offset":"24h"}`, `{"offset":-1}`, `{"clientId":"m2","clientSecret":"s"}`, `{"note":"\u0000"}`, `{"ORDERLINES":[{"ID":"x","id":"y"}],"metadata":{"k":"1","k":"2"}}`,
	} {
		f.Add(seed)
	}
	st := memory.New(nil)
	ledger := kassa.New(st, kassa.Options{})
	s := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true})
	h := s.Handler()
	ctx := f.Context()
	ledger.EnsureMerchant(ctx, kassa.MerchantOptions{ClientID: "m", ClientSecret: "s"})
	// Every route that decodes a JSON body, with the method it takes.
	routes := [][2]string{{"POST", "/v1/authorization-tokens/t/order"}, {"POST", "/v1/orders/o/partialcapture"}, {"POST", "/v1/orders/o/capture"},
		{"POST", "/v1/orders/o"}, {"POST", "/v1/orders/o/customer"}, {"POST", "/v1/orders/o/partialrefund/l"}, {"POST", "/v1/orders/o/paymentmethod"},
		{"POST", "/v1/sessions"}, {"POST", "/sandbox/v1/authorization-tokens"}, {"POST", "/v1/authorization-tokens/t/customer-token"}, {"POST", "/sandbox/v1/clock"},
		{"POST", "/v1/orders/o/refund/l"}, {"POST", "/v1/orders/o/recourse/l"}, {"POST", "/v1/orders/o/reference"},
		{"POST", "/v1/customer-tokens/t/order"}, {"POST", "/v1/sessions/s"}, {"POST", "/v1/payment-sessions"}, {"POST", "/v1/payment-sessions/s"},
		{"PUT", "/v1/notification-settings"}, {"POST", "/sandbox/v1/merchants"}, {"POST", "/sandbox/v1/orders/o/ledgers/l/payments"},
		{"POST", "/sandbox/v1/orders/o/ledgers/l/status"}, {"POST", "/sandbox/v1/orders/o/risk"}}
	f.Fuzz(func(t *testing.T, body string) {
		for _, rt := range routes {
			p := rt[1]
			r := httptest.NewRequest(rt[0], p, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.SetBasicAuth("m", "s")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("%s answered %d to %q: %s", p, w.Code, body, w.Body)
			}
			if w.Code >= 400 {
				var p Problem
				if w.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code == "" {
					t.Fatalf("%s: %d without a problem document: %s", r.URL.Path, w.Code, w.Body)
				}
			}
		}
	})
}

// FuzzQueryRequests sends arbitrary query strings to every route that reads
// one: never a 5xx or a panic, a query url.ParseQuery refuses is a 400, and
// every refusal is a problem document with a code.
func FuzzQueryRequests(f *testing.F) {
	for _, seed := range []string{"", "size=1", "size=0", "size=-1", "size=1001", "size=1e3", "cursor=x", "cursor=%zz", "fromId=a&cursor=b",
		"createdFrom=2020-01-01T00:00:00Z&createdTo=2019-01-01T00:00:00Z", "createdFrom=bad", "status=fullyCaptured&status=x", "q=%00",
		"orderId=o", "country=SE&q=bygg", "expires=1&signature=00", "sig=x", "updatedFrom=9999-12-31T23:59:59Z", "a=1;b=2", "q=" + strings.Repeat("x", 300)} {
		f.Add(seed)
	}
	st := memory.New(nil)
	ledger := kassa.New(st, kassa.Options{})
	s := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true})
	h := s.Handler()
	ledger.EnsureMerchant(f.Context(), kassa.MerchantOptions{ClientID: "m", ClientSecret: "s"})
	paths := []string{"/v1/orders", "/v1/orders/o", "/v1/orders/o/paymentstatus", "/v1/paymentstatus", "/v1/sessions", "/v1/sessions/s",
		"/v1/payment-sessions/s", "/v1/settlements", "/v1/settlements/x", "/v1/settlements/x/tx", "/v1/settlements/x/export.csv",
		"/v1/notifications", "/v1/notifications/n", "/v1/notification-settings", "/v1/customer-tokens/t", "/v1/headless/search/companies",
		"/sandbox/v1/clock", "/sandbox/v1/fixtures", "/documents/m/o/l", "/checkout/m/s"}
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := url.ParseQuery(raw)
		for _, p := range paths {
			r := httptest.NewRequest("GET", p, nil)
			r.URL.RawQuery = raw
			r.RequestURI = p + "?" + raw
			r.SetBasicAuth("m", "s")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("%s?%s answered %d: %s", p, raw, w.Code, w.Body)
			}
			if perr != nil && w.Code != 400 && !strings.HasPrefix(p, "/checkout/") && !strings.HasPrefix(p, "/documents/") {
				t.Fatalf("%s?%s: ParseQuery refuses it (%v) but the answer is %d", p, raw, perr, w.Code)
			}
			if w.Code >= 400 && !strings.HasPrefix(p, "/checkout/") {
				var pd Problem
				if w.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &pd) != nil || pd.Code == "" {
					t.Fatalf("%s?%s: %d without a problem document: %s", p, raw, w.Code, w.Body)
				}
			}
		}
	})
}

// FuzzOrderMoneyOverHTTP creates a real order per input and sends the fuzzed
// bodies to it through the real router: an edit, a partial capture, a
// partial refund of each capture, a full capture and a full refund. Never a
// 5xx, every refusal a problem document, and the order read back keeps its
// amounts: orderAmount = captured + uncaptured, refunded ≤ captured, the
// order's amounts are its sub-orders' sums (captured ones may include void
// captures), and every sub-order's totals are gross = net + VAT and the sum
// of its lines.
func FuzzOrderMoneyOverHTTP(f *testing.F) {
	for _, s := range [][3]string{
		{`{}`, `{"orderLines":[{"id":"%L1"}],"totalCaptureAmount":25000}`, `{"orderLines":[{"description":"r","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`},
		{`{"orderLines":[{"description":"a","quantity":1,"unitPrice":30000,"vat":2500}],"totalOrderAmount":30000,"totalOrderAmountExclVat":24000,"totalOrderVatAmount":6000}`,
			`{"orderLines":[{"description":"a","quantity":1,"unitPrice":1,"vat":10000}],"totalCaptureAmount":1}`, `{"orderLines":[{"description":"a","quantity":1,"unitPrice":1,"vat":10000}],"totalRefundAmount":1,"note":"n"}`},
		{`[]`, `{"orderLines":[{"id":"%L2"},{"description":"c","quantity":2,"unitPrice":-5,"vat":2500}],"totalCaptureAmount":4990}`, `{"note":"x"}`},
		{`null`, `{"totalCaptureAmount":30000}`, `{"orderLines":[],"totalRefundAmount":0}`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	st := memory.New(nil)
	ledger := kassa.New(st, kassa.Options{})
	s := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true})
	h := s.Handler()
	ledger.EnsureMerchant(f.Context(), kassa.MerchantOptions{ClientID: "m", ClientSecret: "s"})
	f.Fuzz(func(t *testing.T, edit, capt, refd string) {
		do := func(method, path, body string) (int, map[string]any) {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			r := httptest.NewRequest(method, path, rd)
			r.Header.Set("Content-Type", "application/json")
			r.SetBasicAuth("m", "s")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("%s %s answered %d to %q: %s", method, path, w.Code, body, w.Body)
			}
			var out map[string]any
			if w.Code >= 400 {
				var p Problem
				if w.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code == "" {
					t.Fatalf("%s %s: %d without a problem document: %s", method, path, w.Code, w.Body)
				}
				return w.Code, nil
			}
			if w.Body.Len() > 0 && json.Unmarshal(w.Body.Bytes(), &out) != nil {
				t.Fatalf("%s %s: %d with a body that is not JSON: %s", method, path, w.Code, w.Body)
			}
			return w.Code, out
		}
		code, tok := do("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"},"paymentMethod":{"type":"invoice"}}`)
		if code != 201 {
			t.Fatalf("mint: %d", code)
		}
		code, created := do("POST", "/v1/authorization-tokens/"+tok["authorizationToken"].(string)+"/order", orderBody)
		if code != 200 {
			t.Fatalf("create: %d", code)
		}
		base := "/v1/orders/" + created["orderId"].(string)
		_, o := do("GET", base, "")
		// Line ids are per order: %L1 and %L2 in an input stand for this order's.
		ids := lines(o["uncaptured"])
		subst := strings.NewReplacer("%L1", ids[0].(map[string]any)["id"].(string), "%L2", ids[1].(map[string]any)["id"].(string))
		edit, capt, refd = subst.Replace(edit), subst.Replace(capt), subst.Replace(refd)
		check := func(step string) {
			_, o := do("GET", base, "")
			amt := func(k string) int64 { return int64(minor(o[k])) }
			if amt("orderAmount") != amt("capturedAmount")+amt("uncapturedAmount") || amt("refundedAmount") > amt("capturedAmount") ||
				amt("uncapturedAmount") < 0 || amt("refundedAmount") < 0 {
				t.Fatalf("after %s: order %d, captured %d, uncaptured %d, refunded %d", step,
					amt("orderAmount"), amt("capturedAmount"), amt("uncapturedAmount"), amt("refundedAmount"))
			}
			var refunded, captured int64
			for _, rf := range o["refunded"].([]any) {
				refunded += subTotals(t, step, rf)
			}
			for _, c := range o["captured"].([]any) {
				captured += subTotals(t, step, c)
			}
			if refunded != amt("refundedAmount") || captured < amt("capturedAmount") ||
				subTotals(t, step, o["uncaptured"]) != amt("uncapturedAmount") {
				t.Fatalf("after %s: sub-orders sum to refunded %d, captured %d; the order says %d, %d", step,
					refunded, captured, amt("refundedAmount"), amt("capturedAmount"))
			}
		}
		check("create")
		do("POST", base, edit)
		check("edit")
		do("POST", base+"/partialcapture", capt)
		check("partial capture")
		_, o = do("GET", base, "")
		for _, c := range o["captured"].([]any) {
			id := c.(map[string]any)["ledgerId"].(string)
			do("POST", base+"/partialrefund/"+id, refd)
			check("partial refund")
		}
		do("POST", base+"/capture", capt)
		check("full capture")
		_, o = do("GET", base, "")
		for _, c := range o["captured"].([]any) {
			do("POST", base+"/refund/"+c.(map[string]any)["ledgerId"].(string), refd)
			check("full refund")
		}
	})
}

// subTotals checks that a sub-order's totals are the sums of its lines and
// gross = net + VAT, and returns its gross.
func subTotals(t *testing.T, step string, sub any) int64 {
	m := sub.(map[string]any)
	gross, net, vat := int64(minor(m["totalOrderAmount"])), int64(minor(m["totalOrderAmountExclVat"])), int64(minor(m["totalOrderVatAmount"]))
	var lg, lv int64
	for _, l := range m["orderLines"].([]any) {
		lm := l.(map[string]any)
		lg += int64(lm["totalAmount"].(float64)) // the order is inclVat: line totals include VAT
		lv += int64(lm["totalVatAmount"].(float64))
	}
	if gross != net+vat || lg != gross || lv != vat || gross < 0 {
		t.Fatalf("after %s: sub-order %v totals %d/%d/%d, lines sum to %d with VAT %d", step, m["ledgerId"], gross, net, vat, lg, lv)
	}
	return gross
}
