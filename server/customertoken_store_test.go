package server

import "testing"

// A customer token made for a store makes that store's orders: an order sent
// without storeId is the token's store's (as it takes the token's locale), so
// its captures settle with that store's, and one that names a store keeps it.
func TestCustomerTokenOrderTakesTheTokensStore(t *testing.T) {
	e := newSessionEnv(t)
	tok := e.mint("5560000001", "invoice")
	code, _, ct := e.req("POST", "/v1/authorization-tokens/"+tok+"/customer-token",
		`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{},"storeId":"shop-7"}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("customer token %d %v", code, ct)
	}
	ctID := ct["customerToken"].(string)
	line := `"orderLines":[{"description":"Refill","quantity":1,"unitPrice":9900,"vat":2500}]`
	for _, c := range []struct{ body, want string }{
		{`{"country":"SE","currency":"SEK",` + line + `}`, "shop-7"},
		{`{"country":"SE","currency":"SEK","storeId":"shop-9",` + line + `}`, "shop-9"},
	} {
		code, _, b := e.req("POST", "/v1/customer-tokens/"+ctID+"/order", c.body, e.auth, nil)
		if code != 200 {
			t.Fatalf("order %d %v", code, b)
		}
		if got := e.get(b["orderId"].(string))["storeId"]; got != c.want {
			t.Errorf("order from %s: storeId %q, want %q", c.body, got, c.want)
		}
	}
}
