package server

import (
	"net/http"
	"strings"
	"testing"
)

// Small HTTP edges found by a black-box probe, each asserted on the wire.
func TestHTTPEdges(t *testing.T) {
	e := newSessionEnv(t)

	// The successor link of the deprecated payment status carries the id
	// escaped, so an id cannot add link parameters.
	_, h, _ := e.req("GET", `/v1/orders/a%3E%3B%20rel%3D%22evil/paymentstatus`, "", e.auth, nil)
	if got, want := h.Get("Link"), `</v1/paymentstatus?orderId=a%3E%3B+rel%3D%22evil>; rel="successor-version"`; got != want {
		t.Fatalf("Link %q, want %q", got, want)
	}

	// The token endpoint refuses an encoded body, as the JSON endpoints do.
	r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Content-Encoding", "gzip")
	r.Header.Set("Authorization", e.auth)
	if code, _, out := e.send(r); code != 400 || out["error"] != "invalid_request" {
		t.Fatalf("gzip token request: %d %v", code, out)
	}

	// Each fee bound names its own field.
	code, _, b := e.req("POST", "/sandbox/v1/merchants", `{"name":"m","feeFixedPerCapture":-100}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if f := problemFields(b); f != "feeFixedPerCapture" {
		t.Fatalf("fee fields %s", f)
	}

	// A number no integer field can hold is named without int64's bounds.
	id := e.order("5560000001", "invoice")["id"].(string)
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":[{"id":"x"}],"totalCaptureAmount":2e4}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if msg := b["errors"].([]any)[0].(map[string]any)["message"].(string); strings.Contains(msg, "9223372036854775807") {
		t.Fatalf("message %q names int64's bounds", msg)
	}
}
