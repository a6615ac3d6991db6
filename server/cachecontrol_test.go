package server

import (
	"net/http"
	"testing"
)

// TestAuthenticatedAnswersAreNotStored: every answer of a route that needs
// credentials says Cache-Control: no-store, successes, replays and errors
// alike. Without it a browser or an intermediary may keep an order (the
// buyer, signed document links), a customer token or a settlement export,
// and serve it after a capture or a refund changed it.
func TestAuthenticatedAnswersAreNotStored(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	key := map[string]string{"Idempotency-Key": "cache-1"}
	for _, c := range []struct {
		method, path, body, auth string
		hdr                      map[string]string
		status                   int
	}{
		{"GET", "/v1/orders/" + id, "", e.auth, nil, 200},
		{"HEAD", "/v1/orders/" + id, "", e.auth, nil, 200},
		{"GET", "/v1/orders?size=1", "", e.auth, nil, 200},
		{"GET", "/v1/paymentstatus?orderId=" + id, "", e.auth, nil, 200},
		{"POST", "/v1/orders/" + id + "/partialrefund/" + capID, `{"orderLines":[{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, key, 200},
		{"POST", "/v1/orders/" + id + "/partialrefund/" + capID, `{"orderLines":[{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, key, 200},
		{"GET", "/v1/orders/unknown", "", e.auth, nil, 404},
		{"GET", "/v1/orders/" + id, "", "", nil, 401},
		{"GET", "/sandbox/v1/clock", "", e.auth, nil, 200},
	} {
		code, h, _ := e.req(c.method, c.path, c.body, c.auth, c.hdr)
		if code != c.status || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: %d, Cache-Control %q; want %d, no-store", c.method, c.path, code, h.Get("Cache-Control"), c.status)
		}
	}
	// The public company search may be kept: it is the same for everyone.
	r, _ := http.NewRequest("GET", e.ts.URL+"/v1/headless/search/companies?q=Bygg&country=SE", nil)
	if code, h, _ := e.send(r); code != 200 || h.Get("Cache-Control") != "" {
		t.Errorf("company search: %d, Cache-Control %q", code, h.Get("Cache-Control"))
	}
}
