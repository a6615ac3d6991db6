package server

import "testing"

// The buyer's billing address, given at the hosted checkout, is what every
// invoice states. A merchant's customer data sent with a billingAddress of
// no field ({}, or every field "" as a client's struct without omitempty
// marshals it beside the field it meant to set) is no address: it leaves
// the buyer's, as an empty field leaves the buyer's value, on an order and
// on a customer token (whose every order would otherwise lack it).
func TestEmptyBillingAddressLeavesTheBuyers(t *testing.T) {
	e := newSessionEnv(t)
	sess := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`
	for _, empty := range []string{`{}`, `{"streetAddress":"","city":"","postalCode":"","country":"","contact":{}}`} {
		tok := e.approvedToken("/v1/sessions", sess)
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"email":"x@y.se","billingAddress":`+empty+`}}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("order: %d %v", code, b)
		}
		c := e.get(b["orderId"].(string))["customer"].(map[string]any)
		if a, _ := c["billingAddress"].(map[string]any); a["streetAddress"] != "Gatan 1" || c["email"] != "x@y.se" {
			t.Errorf("order with billingAddress %s: customer %v, want the buyer's address and the sent email", empty, c)
		}

		tok = e.approvedToken("/v1/sessions", sess)
		code, _, b = e.req("POST", "/v1/authorization-tokens/"+tok+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"email":"x@y.se","billingAddress":`+empty+`}}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("customer token: %d %v", code, b)
		}
		ct := b["customerToken"].(string)
		code, _, b = e.req("POST", "/v1/customer-tokens/"+ct+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":100,"vat":2500}]}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("order from customer token: %d %v", code, b)
		}
		c = e.get(b["orderId"].(string))["customer"].(map[string]any)
		if a, _ := c["billingAddress"].(map[string]any); a["streetAddress"] != "Gatan 1" {
			t.Errorf("customer token made with billingAddress %s: its order's customer %v, want the buyer's address", empty, c)
		}
	}
}
