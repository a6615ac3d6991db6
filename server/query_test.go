package server

import (
	"net/url"
	"testing"
)

// checkQuery refuses exactly what url.ParseQuery refuses, without building
// the map; the fuzz target keeps it so on inputs no table lists.
func FuzzCheckQueryAgreesWithParseQuery(f *testing.F) {
	for _, s := range []string{"", "a=1", "id=%zz", "%zz=1", "a=1;b=2", "a=%4", "a=%41&b", "&&", "=", "a=+%20", "q=%E2%82%AC", "k;=v", "x=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := url.ParseQuery(raw)
		if cerr := checkQuery(raw); (perr == nil) != (cerr == nil) {
			t.Fatalf("%q: ParseQuery %v, checkQuery %v", raw, perr, cerr)
		}
	})
}

// A parameter that takes one value, given again with another value, is 400
// naming it: url.Values.Get reads the first, so the other (a filter, a
// bound, a page size, a cursor) was dropped without a word. The same value
// twice is one value.
func TestQueryParameterGivenTwice(t *testing.T) {
	e := newSessionEnv(t)
	for range 3 {
		e.order("5560000001", "invoice")
	}
	_, _, p := e.do("GET", "/v1/orders?size=1", "", e.auth)
	c1, _ := p["nextCursor"].(string)
	_, _, p = e.do("GET", "/v1/orders?size=1&cursor="+url.QueryEscape(c1), "", e.auth)
	c2, _ := p["nextCursor"].(string)
	if c1 == "" || c2 == "" {
		t.Fatalf("cursors %q %q", c1, c2)
	}
	for path, field := range map[string]string{
		"/v1/orders?createdFrom=2020-01-01T00:00:00Z&createdFrom=2030-01-01T00:00:00Z":   "createdFrom",
		"/v1/orders?expiresTo=2030-01-01T00:00:00Z&expiresTo=bad":                        "expiresTo",
		"/v1/orders?size=5&size=2000":                                                    "size",
		"/v1/orders?q=a&q=b":                                                             "q",
		"/v1/orders?cursor=" + c1 + "&cursor=" + c2:                                      "cursor",
		"/v1/orders?cursor=" + c1 + "&fromId=" + c2:                                      "fromId",
		"/v1/sessions?updatedFrom=2020-01-01T00:00:00Z&updatedFrom=2030-01-01T00:00:00Z": "updatedFrom",
		"/v1/sessions?size=1&size=2":                                                     "size",
		"/v1/settlements?createdTo=2020-01-01T00:00:00Z&createdTo=2030-01-01T00:00:00Z":  "createdTo",
		"/v1/settlements/x/tx?fromId=a&fromId=b":                                         "fromId",
		"/v1/notifications?size=1&size=2":                                                "size",
		"/v1/paymentstatus?orderId=a&orderId=b":                                          "orderId",
		"/v1/headless/search/companies?country=SE&country=NO&q=bygg":                     "country",
	} {
		code, _, b := e.do("GET", path, "", e.auth)
		wantProblem(t, code, b, 400, "validation_failed")
		if got := problemFields(b); got != field {
			t.Errorf("%s: names %q, want %q", path, got, field)
		}
	}
	for _, path := range []string{"/v1/orders?size=1&size=1", "/v1/orders?size=1&cursor=" + c1 + "&fromId=" + c1} {
		if code, _, b := e.do("GET", path, "", e.auth); code != 200 || b["noOfOrders"] != 1.0 {
			t.Errorf("%s: %d %v", path, code, b)
		}
	}
}
