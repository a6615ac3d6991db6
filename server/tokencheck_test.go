package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
)

// TestAccessTokenRefusals: a bearer token is refused once it has expired,
// when its signature is only part of the right one, and when the merchant it
// names is not in the store (a store restored or reset under the same key).
// Each was accepted by a hand-made mutant that no test caught.
func TestAccessTokenRefusals(t *testing.T) {
	e := newSessionEnv(t)
	m, err := e.ledger.Authenticate(context.Background(), "m1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	signer := &Server{cfg: Config{Key: []byte("0123456789abcdef0123456789abcdef")}}
	forge := func(claims accessClaims) string {
		payload, _ := json.Marshal(claims)
		p := base64.RawURLEncoding.EncodeToString(payload)
		return "kat_" + p + "." + signer.sign("access", p)
	}
	list := func(tok string) (int, map[string]any) {
		r, _ := http.NewRequest("GET", e.ts.URL+"/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		code, _, b := e.send(r)
		return code, b
	}
	// RFC 6749 §5.1: a token response must not be cached.
	tr, _ := http.NewRequest("POST", e.ts.URL+tokenPath, strings.NewReader("grant_type=client_credentials"))
	tr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tr.Header.Set("Authorization", e.auth)
	if code, h, b := e.send(tr); code != 200 || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("token response: %d, Cache-Control %q %v; want 200, no-store", code, h.Get("Cache-Control"), b)
	}
	tag := kassa.CredentialTag(m)
	live := forge(accessClaims{Merchant: m.ID, Credential: tag, Expires: time.Now().Add(time.Hour).Unix()})
	if code, b := list(live); code != 200 {
		t.Fatalf("token signed with the server's key: %d %v, want 200", code, b)
	}
	p, sig, _ := strings.Cut(strings.TrimPrefix(live, "kat_"), ".")
	for name, tok := range map[string]string{
		"expired a second ago": forge(accessClaims{Merchant: m.ID, Credential: tag, Expires: time.Now().Add(-time.Second).Unix()}),
		"expired an hour ago":  forge(accessClaims{Merchant: m.ID, Credential: tag, Expires: time.Now().Add(-time.Hour).Unix()}),
		"signature cut short":  "kat_" + p + "." + sig[:len(sig)-1],
		"signature's 1st char": "kat_" + p + "." + sig[:1],
		"no signature":         "kat_" + p + ".",
		"unknown merchant":     forge(accessClaims{Merchant: "ghost", Expires: time.Now().Add(time.Hour).Unix()}),
	} {
		code, b := list(tok)
		if code != 401 || b["code"] != "unauthorized" {
			t.Errorf("%s: %d %v, want 401 unauthorized", name, code, b)
		}
	}
}
