package server

import (
	"net/url"
	"strings"
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

// RFC 3339 offsets run from -23:59 to +23:59; Go's parser also takes +24:00
// and a minute of 60, which no client means. Every date-time input refuses
// them, naming the field, as it refuses any other malformed time.
func TestDateTimeOffsetsOutOfRangeAreRefused(t *testing.T) {
	e := newSessionEnv(t)
	for _, v := range []string{"2026-03-29T01:00:00%2B24:00", "2026-03-29T01:00:00-24:00", "2026-03-29T01:00:00%2B23:60", "2026-03-29T01:00:00.5-00:60"} {
		for _, name := range []string{"/v1/orders?createdFrom", "/v1/orders?createdTo", "/v1/orders?expiresFrom", "/v1/orders?expiresTo",
			"/v1/sessions?createdFrom", "/v1/sessions?createdTo", "/v1/sessions?updatedFrom", "/v1/sessions?updatedTo",
			"/v1/settlements?createdFrom", "/v1/settlements?createdTo"} {
			code, _, b := e.do("GET", name+"="+v, "", e.auth)
			wantProblem(t, code, b, 400, "validation_failed")
			if field := name[strings.Index(name, "?")+1:]; problemFields(b) != field {
				t.Errorf("%s=%s: names %q", name, v, problemFields(b))
			}
		}
		set, _ := url.QueryUnescape(v)
		code, _, b := e.do("POST", "/sandbox/v1/clock", `{"set":"`+strings.Replace(set, "2026", "2099", 1)+`"}`, e.auth)
		wantProblem(t, code, b, 400, "validation_failed")
		if problemFields(b) != "set" {
			t.Errorf("clock set %s: names %q", set, problemFields(b))
		}
	}
	// The extremes of the range are times like any other.
	for _, v := range []string{"2026-03-29T01:00:00%2B23:59", "2026-03-29T01:00:00-23:59", "2026-03-29T01:00:00-00:00", "2026-03-29T01:00:00.123%2B14:00"} {
		if code, _, b := e.do("GET", "/v1/orders?createdFrom="+v, "", e.auth); code != 200 {
			t.Errorf("createdFrom=%s: %d %v", v, code, b)
		}
	}
}
