package server

import (
	"testing"
)

// A date-time bound of a list is taken at its instant, whichever instant it
// is: an upper bound at 0001-01-01T00:00:00Z (the zero value of many
// languages' date types) is exclusive like any other, so nothing was made
// before it. It used to be read as "no bound" and listed everything.
func TestUpperBoundAtTheZeroInstantListsNothing(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil)
	if code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); code != 200 || len(run["settlements"].([]any)) != 1 {
		t.Fatalf("run: %d %v", code, run)
	}
	if code, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "store-1", "PO-1", "ext-1"), e.auth); code != 201 {
		t.Fatalf("session: %d %v", code, s)
	}
	for _, zero := range []string{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z", "0001-01-01T01:00:00%2B01:00", "0001-01-01T00:00:00-00:00"} {
		for path, list := range map[string]string{
			"/v1/orders?createdTo=":      "orders",
			"/v1/orders?expiresTo=":      "orders",
			"/v1/sessions?createdTo=":    "sessions",
			"/v1/sessions?updatedTo=":    "sessions",
			"/v1/settlements?createdTo=": "settlements",
		} {
			code, _, b := e.do("GET", path+zero, "", e.auth)
			if got, _ := b[list].([]any); code != 200 || len(got) != 0 {
				t.Errorf("%s%s: %d, %d listed", path, zero, code, len(got))
			}
		}
	}
	// The same instant as a lower bound is no bound at all: everything.
	for path, list := range map[string]string{"/v1/orders?createdFrom=": "orders", "/v1/sessions?updatedFrom=": "sessions",
		"/v1/settlements?createdFrom=": "settlements"} {
		code, _, b := e.do("GET", path+"0001-01-01T00:00:00Z", "", e.auth)
		if got, _ := b[list].([]any); code != 200 || len(got) != 1 {
			t.Errorf("%s: %d, %d listed", path, code, len(got))
		}
	}
}
