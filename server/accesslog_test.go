package server

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
)

// TestAccessLogRedactsTokens: an authorization or customer token in a path
// is a credential (with the merchant's, it creates an order or charges the
// buyer), so no log line holds one, on a matched route or on a refusal the
// router gives (wrong method, a typo, another case, an empty segment, an
// encoded slash). A matched route's line keeps the route's shape and a
// short SHA-256 fingerprint of the token, to find a token's requests by.
func TestAccessLogRedactsTokens(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	tok := e.mint("5560000001", "card")
	code, _, ct := e.req("POST", "/v1/authorization-tokens/"+tok+"/customer-token", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`, e.auth, map[string]string{"X-Request-Id": "r-ct"})
	if code != 200 {
		t.Fatalf("customer token %d %v", code, ct)
	}
	ctID := ct["customerToken"].(string)
	custOrder := `{"country":"SE","currency":"SEK","orderLines":[{"description":"Refill","quantity":1,"unitPrice":9900,"vat":2500}]}`
	if code, _, b := e.req("POST", "/v1/customer-tokens/"+ctID+"/order", custOrder, e.auth, map[string]string{"X-Request-Id": "r-order"}); code != 200 {
		t.Fatalf("order from customer token %d %v", code, b)
	}
	e.req("GET", "/v1/customer-tokens/"+ctID, "", e.auth, nil)
	e.req("HEAD", "/v1/customer-tokens/"+ctID, "", e.auth, nil)
	e.req("PUT", "/v1/customer-tokens/"+ctID, "", e.auth, nil)
	e.req("POST", "/v1/customer-tokens/"+ctID+"/orders", custOrder, e.auth, nil)
	e.req("POST", "/V1/Customer-Tokens/"+ctID+"/order", custOrder, e.auth, nil)
	e.req("GET", "/v1/customer-tokens//"+ctID, "", e.auth, nil)
	e.req("POST", "/v1/customer-tokens/x%2F"+ctID+"/order", custOrder, e.auth, nil)
	e.req("POST", "/v1/customer-tokens/"+ctID+"/order", custOrder, "Basic bm9ib2R5Om5vcGU=", nil)
	e.req("DELETE", "/v1/authorization-tokens/"+tok, "", e.auth, map[string]string{"X-Request-Id": "r-del"})

	logs.mu.Lock()
	all := logs.b.String()
	logs.mu.Unlock()
	for _, secret := range []string{tok, ctID} {
		if strings.Contains(all, secret) {
			t.Errorf("a log line holds the token %s:\n%s", secret, all)
		}
	}
	fp := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:])[:12] }
	want := map[string]string{
		"r-ct":    "/v1/authorization-tokens/{token:" + fp(tok) + "}/customer-token",
		"r-order": "/v1/customer-tokens/{token:" + fp(ctID) + "}/order",
		"r-del":   "/v1/authorization-tokens/{token:" + fp(tok) + "}",
	}
	checkAccessPaths(t, logs, want)
}

// TestAccessLogPathsWithoutSecretsStayAsSent: redaction touches only the
// token routes; an order id, a session id or a document path is logged as
// sent, and a link's signature is never logged, as it rides in the query.
func TestAccessLogPathsWithoutSecretsStayAsSent(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	e.req("GET", "/v1/orders/ord-123", "", e.auth, map[string]string{"X-Request-Id": "r-get"})
	e.req("GET", "/checkout/m-1/sess-1?sig=SIGNATURE-XYZ", "", "", map[string]string{"X-Request-Id": "r-checkout"})
	e.req("GET", "/v1/authorization-tokens", "", e.auth, map[string]string{"X-Request-Id": "r-bare"})
	want := map[string]string{"r-get": "/v1/orders/ord-123", "r-checkout": "/checkout/m-1/sess-1", "r-bare": "/v1/authorization-tokens"}
	checkAccessPaths(t, logs, want)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if strings.Contains(logs.b.String(), "SIGNATURE-XYZ") {
		t.Errorf("a link's signature reached the log:\n%s", logs.b.String())
	}
}

// checkAccessPaths checks the path of the access line of each request id in
// want, and that every one of them has a line.
func checkAccessPaths(t *testing.T, logs *logBuffer, want map[string]string) {
	t.Helper()
	for _, l := range logs.lines(t) {
		id, _ := l["requestId"].(string)
		if w, ok := want[id]; ok && l["msg"] == "request" {
			if l["path"] != w {
				t.Errorf("access line of %s: path %v, want %s", id, l["path"], w)
			}
			delete(want, id)
		}
	}
	if len(want) != 0 {
		t.Fatalf("no access lines for %v", want)
	}
}

// TestAccessLogRedactsTokensOnPathsItDoesNotStartWith: a client that joins
// its base URL and a path with one slash too many ("https://host/" +
// "/v1/..."), or sends a dot segment, is refused (404, or a redirect to
// the clean path), but its token is still in the path: the log line of
// that refusal must not hold it either.
func TestAccessLogRedactsTokensOnPathsItDoesNotStartWith(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	tok := e.mint("5560000001", "card")
	body := `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`
	for _, p := range []string{
		"//v1/authorization-tokens/" + tok + "/customer-token",
		"/v1//authorization-tokens/" + tok + "/customer-token",
		"/v1/./authorization-tokens/" + tok + "/customer-token",
		"/v1/orders/../authorization-tokens/" + tok + "/customer-token",
		"/sandbox/v1/authorization-tokens/" + tok,
	} {
		if code, _, _ := e.req("POST", p, body, e.auth, nil); code == 200 {
			t.Errorf("POST %s answered 200", p)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if strings.Contains(logs.b.String(), tok) {
		t.Errorf("a log line holds the token %s:\n%s", tok, logs.b.String())
	}
}
