package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// approvedToken opens a checkout session with body, has the buyer approve
// it and returns the session's authorization token.
func (e *sessionEnv) approvedToken(path, body string) string {
	e.t.Helper()
	code, _, s := e.do("POST", path, body, e.auth)
	if code != 201 {
		e.t.Fatalf("session: %d %v", code, s)
	}
	link := s["checkoutUrl"].(string)
	if code := e.approve(link, e.checkoutTerms(link)); code != http.StatusSeeOther {
		e.t.Fatalf("approve: %d", code)
	}
	_, _, got := e.do("GET", path+"/"+s["id"].(string), "", e.auth)
	return got["authorizationToken"].(string)
}

// TestOrderFromSessionTakesTheSessionsReferences: the merchant opened the
// session with its store, its reference, metadata and the buyer's shipping
// address and references; the order made from the session's approval
// carries them when its request leaves them out (it used to carry none, so
// the order was in no store, matched no merchantReference filter and lost
// the delivery address), and the request's own values win when it sends
// them. A customer token made from a session's approval takes its store.
func TestOrderFromSessionTakesTheSessionsReferences(t *testing.T) {
	e := newSessionEnv(t)
	sess := `{"country":"SE","currency":"SEK","locale":"sv-SE","storeId":"store-7","merchantReference":"PO-1",
		"metadata":{"crm":"42"},"customer":{"reference1":"Cost centre 9","reference2":"Ann",
		"shippingAddress":{"companyName":"Acme Site","streetAddress":"Bygget 3","postalCode":"11122","city":"Solna","country":"SE"}},
		"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`
	bare := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`

	tok := e.approvedToken("/v1/sessions", sess)
	code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", bare, e.auth)
	if code != 200 {
		t.Fatalf("order: %d %v", code, p)
	}
	o := e.get(p["orderId"].(string))
	c := o["customer"].(map[string]any)
	if o["storeId"] != "store-7" || o["merchantReference"] != "PO-1" || o["metadata"].(map[string]any)["crm"] != "42" ||
		c["reference1"] != "Cost centre 9" || c["reference2"] != "Ann" || c["shippingAddress"] == nil ||
		c["shippingAddress"].(map[string]any)["streetAddress"] != "Bygget 3" {
		t.Fatalf("order from a session left out what the session said: storeId %v merchantReference %v metadata %v customer %v",
			o["storeId"], o["merchantReference"], o["metadata"], c)
	}
	if c["email"] != "a@b.se" || c["companyId"] != "5560000001" {
		t.Fatalf("the buyer's approved details must stay: %v", c)
	}
	if _, _, l := e.do("GET", "/v1/orders?storeId=store-7&merchantReference=PO-1", "", e.auth); len(l["orders"].([]any)) != 1 {
		t.Fatalf("the order is not found by the session's store and reference: %v", l)
	}

	tok = e.approvedToken("/v1/payment-sessions", sess)
	own := `{"country":"SE","currency":"SEK","locale":"sv-SE","storeId":"store-9","reference":"PO-2","metadata":{"erp":"x"},
		"customer":{"reference1":"Dock 4","shippingAddress":{"streetAddress":"Hamnen 1","postalCode":"41101","city":"Göteborg","country":"SE"}},
		"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`
	if code, _, p = e.do("POST", "/v1/authorization-tokens/"+tok+"/order", own, e.auth); code != 200 {
		t.Fatalf("order: %d %v", code, p)
	}
	o = e.get(p["orderId"].(string))
	c = o["customer"].(map[string]any)
	md := o["metadata"].(map[string]any)
	if o["storeId"] != "store-9" || o["merchantReference"] != "PO-2" || md["erp"] != "x" || md["crm"] != nil ||
		c["reference1"] != "Dock 4" || c["reference2"] != "Ann" || c["shippingAddress"].(map[string]any)["city"] != "Göteborg" {
		t.Fatalf("the order's own values must win: storeId %v merchantReference %v metadata %v customer %v",
			o["storeId"], o["merchantReference"], md, c)
	}

	tok = e.approvedToken("/v1/payment-sessions", sess)
	code, _, ct := e.do("POST", "/v1/authorization-tokens/"+tok+"/customer-token",
		`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{}}`, e.auth)
	if code != 200 {
		t.Fatalf("customer token: %d %v", code, ct)
	}
	if _, _, got := e.do("GET", "/v1/customer-tokens/"+ct["customerToken"].(string), "", e.auth); got["storeId"] != "store-7" {
		t.Fatalf("customer token from a session of store-7: storeId %v", got["storeId"])
	}
}

// TestCheckoutPageShowsTheMerchantsPrefill: the session's customer is the
// merchant's prefill of the buyer; the hosted page opens with it filled in
// (the company chosen, in the directory's form of its number), where it
// used to open empty, so the buyer retyped what the merchant already knew.
func TestCheckoutPageShowsTheMerchantsPrefill(t *testing.T) {
	e := newSessionEnv(t)
	code, _, s := e.do("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"customer":{"companyId":"556000-0001","email":"ap@acme.se","firstName":"Eva","lastName":"Berg","phone":"+46701234567",
		"billingAddress":{"streetAddress":"Storgatan 1","postalCode":"11122","city":"Stockholm"}},
		"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":12500,"vat":2500}]}`, e.auth)
	if code != 201 {
		t.Fatalf("session: %d %v", code, s)
	}
	resp, err := http.Get(s["checkoutUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`value="ap@acme.se"`, `value="Eva"`, `value="Berg"`, `value="&#43;46701234567"`,
		`value="Storgatan 1"`, `value="11122"`, `value="Stockholm"`, `value="5560000001" checked`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("checkout page lacks the prefill %s", want)
		}
	}
}

// TestCustomerTokenKeepsTheBuyersReferences: the authorized buyer's
// reference1 and reference2 stay on a customer token made without them (as
// its email and names do, and as an order made from the same token keeps
// them); they used to be dropped, so every order of the token lost them.
// References sent with the customer token win.
func TestCustomerTokenKeepsTheBuyersReferences(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct{ customer, want1, want2 string }{
		{`{}`, "Buyer ref", "Proj 9"},
		{`{"reference1":"Own"}`, "Own", "Proj 9"},
	} {
		code, _, m := e.do("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"companyId":"5560000001","reference1":"Buyer ref","reference2":"Proj 9","email":"x@y.se"}}`, e.auth)
		if code != 201 {
			t.Fatalf("mint: %d %v", code, m)
		}
		code, _, ct := e.do("POST", "/v1/authorization-tokens/"+m["authorizationToken"].(string)+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":`+c.customer+`}`, e.auth)
		if code != 200 {
			t.Fatalf("customer token: %d %v", code, ct)
		}
		id := ct["customerToken"].(string)
		if _, _, got := e.do("GET", "/v1/customer-tokens/"+id, "", e.auth); got["reference1"] != c.want1 || got["reference2"] != c.want2 {
			t.Errorf("customer token made with %s: references %v, %v; want %s, %s", c.customer, got["reference1"], got["reference2"], c.want1, c.want2)
		}
		code, _, p := e.do("POST", "/v1/customer-tokens/"+id+"/order", `{"country":"SE","currency":"SEK",
			"orderLines":[{"description":"Refill","quantity":1,"unitPrice":9900,"vat":2500}]}`, e.auth)
		if code != 200 {
			t.Fatalf("order: %d %v", code, p)
		}
		if cu := e.get(p["orderId"].(string))["customer"].(map[string]any); cu["reference1"] != c.want1 || cu["reference2"] != c.want2 {
			t.Errorf("order of the token made with %s: references %v, %v", c.customer, cu["reference1"], cu["reference2"])
		}
	}
}

// TestOrderFromSessionKeepsItsVATMode: the buyer approved an exclVat
// session (prices without VAT, 125.00 with it); the order made from the
// approval with the same lines and no vatMode is exclVat too, not read in
// the default inclVat, which made it 100.00 with VAT included: 25.00 less
// than the buyer approved and the merchant meant to bill.
func TestOrderFromSessionKeepsItsVATMode(t *testing.T) {
	e := newSessionEnv(t)
	ls := `"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":10000,"vat":2500}]`
	tok := e.approvedToken("/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat",`+ls+`}`)
	code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",`+ls+`}`, e.auth)
	if code != 200 {
		t.Fatalf("order: %d %v", code, p)
	}
	o := e.get(p["orderId"].(string))
	if o["vatMode"] != "exclVat" || minor(o["orderAmount"]) != 12500 {
		t.Fatalf("order from an exclVat session: vatMode %v, amount %v; want exclVat, 12500", o["vatMode"], minor(o["orderAmount"]))
	}
	// A mode the order states is its own.
	tok = e.approvedToken("/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat",`+ls+`}`)
	code, _, p = e.do("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"inclVat",`+ls+`}`, e.auth)
	if code != 200 {
		t.Fatalf("order: %d %v", code, p)
	}
	if o = e.get(p["orderId"].(string)); o["vatMode"] != "inclVat" || minor(o["orderAmount"]) != 10000 {
		t.Fatalf("order stating inclVat: vatMode %v, amount %v", o["vatMode"], minor(o["orderAmount"]))
	}
}

// TestOrderFromSessionTakesItsLinesAsShown: a merchant copies the lines of
// an exclVat session into the order as the session shows them, VAT amounts
// included, and leaves vatMode out. They are read in the session's mode, as
// lines without VAT amounts are; they used to be checked in the default
// inclVat first, where 2500 of VAT on 10000 is no 25 % line, and refused.
func TestOrderFromSessionTakesItsLinesAsShown(t *testing.T) {
	e := newSessionEnv(t)
	ls := `"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":10000,"vat":2500}]`
	tok := e.approvedToken("/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat",`+ls+`}`)
	shown := `"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":10000,"vat":2500,"totalAmount":10000,"totalVatAmount":2500}],
		"totalOrderAmount":12500,"totalOrderVatAmount":2500`
	code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",`+shown+`}`, e.auth)
	if code != 200 {
		t.Fatalf("order with the session's lines as shown: %d %v", code, p)
	}
	if o := e.get(p["orderId"].(string)); o["vatMode"] != "exclVat" || minor(o["orderAmount"]) != 12500 {
		t.Fatalf("order: vatMode %v, amount %v; want exclVat, 12500", o["vatMode"], minor(o["orderAmount"]))
	}
	// Lines no mode can read are refused before the token is looked at, as
	// any invalid request is.
	bad := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"Tiles","quantity":1,"unitPrice":10000,"vat":2500,"totalVatAmount":9999}]}`
	if code, _, p := e.do("POST", "/v1/authorization-tokens/no-such-token/order", bad, e.auth); code != 400 {
		t.Fatalf("invalid lines on an unknown token: %d %v, want 400", code, p)
	}
}

// TestOrderFromSessionWithoutLinesTakesTheSessions: orderLines are
// optional on an order from an authorization token (spec), and the buyer
// approved the session's lines, so an order request that sends neither
// lines nor totals takes them, in the session's VAT mode. It used to be
// refused ("orderLines are required"). Without a session behind the token,
// or with a mode of its own that is not the session's, the request must
// still state its lines.
func TestOrderFromSessionWithoutLinesTakesTheSessions(t *testing.T) {
	e := newSessionEnv(t)
	ls := `"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":10000,"vat":2500,"reference":"T-1","type":"physical"},
		{"description":"Grout","quantity":1,"unitPrice":5000,"unitDiscountAmount":1000,"vat":1200}]`
	head := `{"country":"SE","currency":"SEK","locale":"sv-SE"`
	for _, mode := range []string{"inclVat", "exclVat"} {
		tok := e.approvedToken("/v1/sessions", head+`,"vatMode":"`+mode+`",`+ls+`}`)
		code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", head+`}`, e.auth)
		if code != 200 {
			t.Fatalf("%s: order without lines from a session: %d %v", mode, code, p)
		}
		o := e.get(p["orderId"].(string))
		lines := o["uncaptured"].(map[string]any)["orderLines"].([]any)
		want := float64(2*10000 + 5000 - 1000)
		if mode == "exclVat" {
			want = 2*12500 + 4000 + 480
		}
		if o["vatMode"] != mode || minor(o["orderAmount"]) != want || len(lines) != 2 {
			t.Fatalf("%s: order: vatMode %v, amount %v, %d lines; want %s, %v, 2", mode, o["vatMode"], minor(o["orderAmount"]), len(lines), mode, want)
		}
		l0, l1 := lines[0].(map[string]any), lines[1].(map[string]any)
		if l0["description"] != "Tiles" || l0["reference"] != "T-1" || l0["type"] != "physical" || l0["quantity"] != float64(2) ||
			l1["description"] != "Grout" || l1["unitDiscountAmount"] != float64(1000) || l1["vat"] != float64(1200) {
			t.Fatalf("%s: lines not as the session's: %v", mode, lines)
		}
	}
	// A mode stated against the session's: the lines must be stated too.
	tok := e.approvedToken("/v1/sessions", head+`,"vatMode":"exclVat",`+ls+`}`)
	if code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", head+`,"vatMode":"inclVat"}`, e.auth); code != 400 {
		t.Fatalf("order stating another mode and no lines: %d %v, want 400", code, p)
	}
	// Still refused before the token is looked at when something else is wrong.
	if code, _, p := e.do("POST", "/v1/authorization-tokens/no-such-token/order", `{"country":"SE","currency":"SEK"}`, e.auth); code != 400 {
		t.Fatalf("no locale and no lines on an unknown token: %d %v, want 400", code, p)
	}
}

// TestOrderFromSessionWithEmptyLinesIsRefused: "orderLines": [] is lines
// sent, and none of them, not lines left out: as a capture's empty
// selection does not capture the whole order, it does not take the
// session's lines (docs/sessions.md: a request that sends neither lines nor
// a total takes them). It used to make an order of every session line.
// null is the field left out, as everywhere.
func TestOrderFromSessionWithEmptyLinesIsRefused(t *testing.T) {
	e := newSessionEnv(t)
	ls := `"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":10000,"vat":2500}]`
	head := `{"country":"SE","currency":"SEK","locale":"sv-SE"`
	tok := e.approvedToken("/v1/sessions", head+`,`+ls+`}`)
	if code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", head+`,"orderLines":[]}`, e.auth); code != 400 {
		t.Fatalf(`order with "orderLines": [] from a session: %d %v, want 400`, code, p)
	}
	// The token is not used up by the refusal; null reads as left out.
	if code, _, p := e.do("POST", "/v1/authorization-tokens/"+tok+"/order", head+`,"orderLines":null}`, e.auth); code != 200 {
		t.Fatalf(`order with "orderLines": null from a session: %d %v, want 200`, code, p)
	}
}
