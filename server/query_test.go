package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
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

// A query parameter the route does not read is 400 naming it: a misspelled
// filter (stauts, storeID) used to list every order, as if none had been
// sent, and a reconciliation script would act on the wrong ones; an amount
// sent in the query of a capture was dropped and the whole order captured.
func TestUnknownQueryParameterRefused(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	for _, c := range []struct{ method, path, field string }{
		{"GET", "/v1/orders?stauts=fullyCaptured", "stauts"},
		{"GET", "/v1/orders?storeID=s1&size=5", "storeID"},
		{"GET", "/v1/orders?limit=5&Status=uncaptured", "Status,limit"},
		{"GET", "/v1/orders/" + id + "?expand=events", "expand"},
		{"GET", "/v1/orders/" + id + "/paymentstatus?x=1", "x"},
		{"GET", "/v1/paymentstatus?orderID=" + id, "orderID"},
		{"GET", "/v1/sessions?sotreId=s1", "sotreId"},
		{"GET", "/v1/settlements?curency=SEK", "curency"},
		{"GET", "/v1/settlements/x/tx?limit=5", "limit"},
		{"GET", "/v1/notifications?cursor=a", "cursor"},
		{"GET", "/v1/headless/search/companies?q=bygg&country=SE&limit=5", "limit"},
		{"GET", "/sandbox/v1/clock?tz=UTC", "tz"},
		{"POST", "/v1/orders/" + id + "/capture?totalCaptureAmount=100", "totalCaptureAmount"},
	} {
		code, _, b := e.do(c.method, c.path, "", e.auth)
		if code != 400 || b["code"] != "validation_failed" || problemFields(b) != c.field {
			t.Errorf("%s %s: %d %v, want 400 naming %s", c.method, c.path, code, b, c.field)
		}
	}
	if o := e.get(id); len(o["captured"].([]any)) != 0 {
		t.Fatalf("the refused capture captured: %v", o["captured"])
	}
	// What the routes read is still read.
	for _, path := range []string{
		"/v1/orders?q=" + id + "&id=" + id + "&status=uncaptured&size=5&createdFrom=2000-01-01T00:00:00Z",
		"/v1/sessions?size=5&updatedTo=2100-01-01T00:00:00Z",
		"/v1/settlements?currency=SEK&size=5",
		"/v1/notifications?size=5",
		"/v1/paymentstatus?orderId=" + id,
		"/v1/headless/search/companies?q=bygg&country=SE",
	} {
		if code, _, b := e.do("GET", path, "", e.auth); code != 200 {
			t.Errorf("%s: %d %v", path, code, b)
		}
	}
}

// A filter given with an empty value is 400 naming it, on every list
// route: "?storeId=" is what a script sends when its variable is unset, and
// reading it as no filter listed every store's orders. Paging parameters
// (cursor, fromId) may be empty: they then mean the first page.
func TestEmptyFilterRefused(t *testing.T) {
	e := newSessionEnv(t)
	e.order("5560000001", "invoice")
	for path, field := range map[string]string{
		"/v1/orders?storeId=":                        "storeId",
		"/v1/orders?storeId=s1&storeId=":             "storeId",
		"/v1/orders?merchantReference=%20":           "merchantReference",
		"/v1/orders?id=,":                            "id",
		"/v1/orders?status=&statusNot=":              "status,statusNot",
		"/v1/orders?q=":                              "q",
		"/v1/orders?createdFrom=&expiresTo=":         "createdFrom,expiresTo",
		"/v1/sessions?orderId=":                      "orderId",
		"/v1/sessions?state=&updatedTo=":             "state,updatedTo",
		"/v1/settlements?currency=":                  "currency",
		"/v1/settlements?reference=&createdFrom=":    "createdFrom,reference",
		"/v1/orders?paymentMethodCategory=&size=100": "paymentMethodCategory",
	} {
		code, _, b := e.do("GET", path, "", e.auth)
		if code != 400 || b["code"] != "validation_failed" || problemFields(b) != field {
			t.Errorf("%s: %d %v, want 400 naming %s", path, code, b, field)
		}
	}
	for _, path := range []string{"/v1/orders?cursor=", "/v1/orders?fromId=&size=5", "/v1/sessions?fromId=", "/v1/settlements?fromId="} {
		if code, _, b := e.do("GET", path, "", e.auth); code != 200 {
			t.Errorf("%s: %d %v", path, code, b)
		}
	}
}

// The table of API query parameters and the OpenAPI document name the same
// parameters for every route, so that a documented parameter is never
// refused and a refused one never documented.
func TestQueryTableMatchesOpenAPI(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range operations() {
		if !queryChecked(o.path) {
			continue
		}
		key := o.method + " " + strings.NewReplacer("{", ":", "}", "").Replace(o.path)
		seen[key] = true
		var documented []string
		for _, p := range o.query {
			documented = append(documented, p.name)
		}
		p := apiQuery[key]
		read := slices.Concat(p.filters, p.lists, p.others)
		slices.Sort(documented)
		slices.Sort(read)
		if !slices.Equal(documented, read) {
			t.Errorf("%s: OpenAPI documents %v, the server reads %v", key, documented, read)
		}
	}
	for key := range apiQuery {
		if !seen[key] {
			t.Errorf("%s is in the query table but is no documented operation", key)
		}
	}
}

// The OpenAPI document states each list's page size bounds as the server
// applies them: the delivery log's said "1 to 200, default 20" while the
// server takes 1 to 1000 and gives 100.
func TestPageSizeBoundsDocumented(t *testing.T) {
	e := newSessionEnv(t)
	bounds := map[string][2]int{
		"/v1/orders":                        {storage.MaxPageSize, storage.DefaultPageSize},
		"/v1/sessions":                      {1000, 100},
		"/v1/settlements":                   {settlement.MaxPageSize, settlement.DefaultPageSize},
		"/v1/settlements/{settlementId}/tx": {settlement.MaxPageSize, settlement.DefaultPageSize},
		"/v1/notifications":                 {kassa.MaxNotificationPage, kassa.DefaultNotificationPage},
	}
	for _, o := range operations() {
		for _, p := range o.query {
			if p.name != "size" {
				continue
			}
			b, ok := bounds[o.path]
			if want := fmt.Sprintf("1 to %d, default %d", b[0], b[1]); !ok || p.desc != want {
				t.Errorf("%s: size is documented as %q, want %q", o.path, p.desc, want)
			}
			if strings.Contains(o.path, "{") {
				continue
			}
			if code, _, body := e.do("GET", fmt.Sprintf("%s?size=%d", o.path, b[0]), "", e.auth); code != 200 {
				t.Errorf("%s?size=%d: %d %v", o.path, b[0], code, body)
			}
			if code, _, body := e.do("GET", fmt.Sprintf("%s?size=%d", o.path, b[0]+1), "", e.auth); code != 400 || problemFields(body) != "size" {
				t.Errorf("%s?size=%d: %d %v", o.path, b[0]+1, code, body)
			}
		}
	}
}

// A range whose upper bound is not after its lower bound is 400 naming the
// upper bound: the bounds swapped, or the same instant sent for "that day",
// listed nothing, which a reconciliation reads as "no orders".
func TestEmptyRangeRefused(t *testing.T) {
	e := newSessionEnv(t)
	e.order("5560000001", "invoice")
	const a, b = "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z"
	for path, field := range map[string]string{
		"/v1/orders?createdFrom=" + b + "&createdTo=" + a:                                           "createdTo",
		"/v1/orders?createdFrom=" + a + "&createdTo=" + a:                                           "createdTo",
		"/v1/orders?expiresFrom=" + b + "&expiresTo=2026-01-31T22:00:00-02:00":                      "expiresTo",
		"/v1/sessions?updatedFrom=" + b + "&updatedTo=" + a + "&createdFrom=" + a:                   "updatedTo",
		"/v1/sessions?createdFrom=" + b + "&createdTo=" + a:                                         "createdTo",
		"/v1/settlements?createdFrom=" + b + "&createdTo=" + a:                                      "createdTo",
		"/v1/orders?createdFrom=" + b + "&createdTo=" + a + "&expiresTo=" + a + "&expiresFrom=" + b: "createdTo,expiresTo",
	} {
		code, _, body := e.do("GET", path, "", e.auth)
		if code != 400 || body["code"] != "validation_failed" || problemFields(body) != field {
			t.Errorf("%s: %d %v, want 400 naming %s", path, code, body, field)
		}
	}
	for _, path := range []string{
		"/v1/orders?createdFrom=2000-01-01T00:00:00Z&createdTo=2100-01-01T00:00:00Z",
		"/v1/orders?createdFrom=" + a + "&createdTo=2026-01-31T00:00:00.000000001Z",
		"/v1/orders?createdTo=0001-01-01T00:00:00Z",
		"/v1/settlements?createdFrom=" + a + "&createdTo=" + b,
	} {
		if code, _, body := e.do("GET", path, "", e.auth); code != 200 {
			t.Errorf("%s: %d %v", path, code, body)
		}
	}
}

// TestAuthenticationBeforeQueryAndBody: on every route that needs a
// merchant, a caller without valid credentials is answered 401 whatever its
// query or body: a parameter the route does not read, or a body that is not
// JSON, must not tell it which parameters the route reads or that it takes
// a body.
func TestAuthenticationBeforeQueryAndBody(t *testing.T) {
	e := newSessionEnv(t)
	routes := 0
	for _, r := range New(Config{Sandbox: true}).served {
		method, pattern, _ := strings.Cut(r, " ")
		if !queryChecked(pattern) || pattern == "/v1/headless/search/companies" {
			continue
		}
		routes++
		var path []string
		for _, seg := range strings.Split(pattern, "/") {
			if strings.HasPrefix(seg, ":") {
				seg = "x"
			}
			path = append(path, seg)
		}
		target := strings.Join(path, "/") + "?notAParameter=1"
		for _, auth := range []string{"", "Bearer bogus", "Basic bm9ib2R5Om5vdGhpbmc="} {
			for _, body := range []string{"", "not json"} {
				req, _ := http.NewRequest(method, e.ts.URL+target, strings.NewReader(body))
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				req.Header.Set("Content-Type", "text/plain")
				res, err := e.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != 401 {
					t.Errorf("%s %s (auth %q, body %q): %d, want 401", method, target, auth, body, res.StatusCode)
				}
			}
		}
	}
	if routes < 40 {
		t.Fatalf("only %d authenticated routes found", routes)
	}
	// Authenticated, the parameter is named.
	code, _, b := e.do("POST", "/v1/orders/x/capture?notAParameter=1", "", e.auth)
	if code != 400 || problemFields(b) != "notAParameter" {
		t.Fatalf("authenticated: %d %v", code, b)
	}
	// Then the body: a body left out has no type to check.
	id := e.order("5560000001", "invoice")["id"].(string)
	text := map[string]string{"Content-Type": "text/plain"}
	if code, _, b = e.req("POST", "/v1/orders/"+id+"/capture", "x", e.auth, text); code != 415 {
		t.Fatalf("text body: %d %v", code, b)
	}
	if code, _, b = e.req("POST", "/v1/orders/"+id+"/capture", " ", e.auth, text); code != 200 {
		t.Fatalf("body left out, sent as text/plain: %d %v", code, b)
	}
}
