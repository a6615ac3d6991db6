package server

import (
	"encoding/json"
	"net/http/httptest"
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
		`{"totalCaptureAmount":1,"totalCaptureAmount":2}`, `{"ORDERLINES":[{"ID":"x","id":"y"}],"metadata":{"k":"1","k":"2"}}`,
	} {
		f.Add(seed)
	}
	st := memory.New(nil)
	ledger := kassa.New(st, kassa.Options{})
	s := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true})
	h := s.Handler()
	ctx := f.Context()
	ledger.EnsureMerchant(ctx, kassa.MerchantOptions{ClientID: "m", ClientSecret: "s"})
	paths := []string{"/v1/authorization-tokens/t/order", "/v1/orders/o/partialcapture", "/v1/orders/o/capture",
		"/v1/orders/o", "/v1/orders/o/customer", "/v1/orders/o/partialrefund/l", "/v1/orders/o/paymentmethod",
		"/v1/sessions", "/sandbox/v1/authorization-tokens", "/v1/authorization-tokens/t/customer-token", "/sandbox/v1/clock"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range paths {
			r := httptest.NewRequest("POST", p, strings.NewReader(body))
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
