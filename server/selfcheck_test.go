package server

import (
	"strings"
	"testing"
)

// A wrong JSON type does not hide the other offending fields of a body that
// is checked against an order or a session: the body's own checks, those
// that need neither, are reported with it (docs/errors.md: every offending
// field is listed at once). Found by a black-box probe of edit order.
func TestTypeErrorDoesNotHideOtherFieldsOfOperationBodies(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", `{"orderLines":[{"description":"Credit","quantity":1,"unitPrice":0}]}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	ledger := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	code, _, s := e.req("POST", "/v1/sessions", fill(sessionBody, "s1", "ref", "ext-1"), e.auth, nil)
	if code != 201 {
		t.Fatalf("session: %d %v", code, s)
	}
	sid := s["id"].(string)
	long := strings.Repeat("d", 201)
	sessionBad := `{"country":"SE","currency":"SEK","locale":"sv-SE","expiresInMinutes":0,"merchantUrls":{"confirmation":"ftp://x"},
		"orderLines":[{"description":"x","quantity":"2","unitPrice":100},{"description":"","quantity":1,"unitPrice":1}]}`
	for _, c := range []struct{ name, path, body, want string }{
		{"edit order", "/v1/orders/" + id,
			`{"orderLines":[{"description":"","quantity":0,"unitPrice":"x","vat":2500},{"description":"` + long + `","quantity":1,"unitPrice":1,"type":"bogus"}],
			"totalOrderAmount":-1,"totalOrderAmountExclVat":0,"totalOrderVatAmount":0}`,
			// A line's description and quantity are checked alone: found beside its wrong-typed unitPrice.
			"orderLines[0].description,orderLines[0].quantity,orderLines[0].unitPrice,orderLines[1].description,orderLines[1].type,totalOrderAmount"},
		{"partial capture", "/v1/orders/" + id + "/partialcapture",
			`{"orderLines":[{"id":"line","quantity":"2"},{"description":"","quantity":1,"unitPrice":1}],"totalCaptureAmount":-1}`,
			"orderLines[0].quantity,orderLines[1].description,totalCaptureAmount"},
		{"partial capture, wrong-typed id", "/v1/orders/" + id + "/partialcapture",
			// With id unreadable, what the line must state is unknown: nothing else of it is reported.
			`{"orderLines":[{"id":5,"quantity":0}],"totalCaptureAmount":0}`,
			"orderLines[0].id"},
		{"full capture", "/v1/orders/" + id + "/capture",
			`{"orderLines":[{"id":"line","unitPrice":"x"},{"id":""}],"totalCaptureAmount":-1}`,
			"orderLines[0].unitPrice,orderLines[1].id,totalCaptureAmount"},
		{"partial refund", "/v1/orders/" + id + "/partialrefund/" + ledger,
			`{"orderLines":[{"description":"x","quantity":1,"unitPrice":100,"vat":"25"},{"quantity":1,"unitPrice":1}],"totalRefundAmount":-5,"note":"` + long + `"}`,
			"note,orderLines[0].vat,orderLines[1].description,totalRefundAmount"},
		{"create session", "/v1/sessions", sessionBad,
			"expiresInMinutes,merchantUrls.confirmation,orderLines[0].quantity,orderLines[1].description"},
		{"create payment session", "/v1/payment-sessions", sessionBad,
			"expiresInMinutes,merchantUrls.confirmation,orderLines[0].quantity,orderLines[1].description"},
		{"update session", "/v1/sessions/" + sid,
			`{"merchantReference":"` + long + `","orderLines":[{"description":"x","quantity":1,"unitPrice":"1"},{"description":"","quantity":1,"unitPrice":1}],"totalOrderAmount":-1}`,
			"merchantReference,orderLines[0].unitPrice,orderLines[1].description,totalOrderAmount"},
	} {
		code, _, b := e.req("POST", c.path, c.body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if got := problemFields(b); got != c.want {
			t.Errorf("%s: fields %s, want %s", c.name, got, c.want)
		}
	}
}

// A session body's checks compare fields with one another: the totals with
// the lines' sums, each line's VAT by vatMode, the payment methods with
// those the country offers. A finding that only describes the zero standing
// in for a wrong-typed field is not reported; the others are.
func TestSessionTypeErrorDoesNotFakeOtherFindings(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct{ name, body, want string }{
		// The client's total is right for the 1000 less 100 of discount it sent.
		{"line total", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"orderLines":[{"description":"x","quantity":1,"unitPrice":1000,"unitDiscountAmount":"100","vat":2500}],"totalOrderAmount":900}`,
			"orderLines[0].unitDiscountAmount"},
		// 25 on 100 is right at 25 % excluding VAT.
		{"vat mode", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":1,
			"orderLines":[{"description":"x","quantity":1,"unitPrice":100,"vat":2500,"totalVatAmount":25}]}`,
			"vatMode"},
		// advanceInvoice is offered in Sweden; the bad locale stays reported.
		{"country", `{"country":46,"currency":"SEK","locale":"sweden","paymentMethods":["advanceInvoice"],
			"orderLines":[{"description":"x","quantity":1,"unitPrice":100}]}`,
			"country,locale"},
		// A wrong total is still named when the wrong-typed field is not in the lines.
		{"other field", `{"country":"SE","currency":"SEK","locale":"sv-SE","metadata":{"a":1},
			"orderLines":[{"description":"x","quantity":1,"unitPrice":100}],"totalOrderAmount":99}`,
			"metadata.a,totalOrderAmount"},
	} {
		code, _, b := e.req("POST", "/v1/sessions", c.body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if got := problemFields(b); got != c.want {
			t.Errorf("%s: fields %s, want %s", c.name, got, c.want)
		}
	}
}
