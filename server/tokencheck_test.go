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
	"github.com/kassahq/kassa/storage"
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

// TestAccessTokenLivesItsExpiresIn: a token answered with expires_in n is
// accepted for n seconds from its issue, to the last nanosecond, and refused
// once they are over. Its expiry is kept in whole seconds; rounded down, a
// token issued 0.9 s into a second was refused 0.9 s before the lifetime the
// server had announced ended.
func TestAccessTokenLivesItsExpiresIn(t *testing.T) {
	s := New(Config{Key: []byte("0123456789abcdef0123456789abcdef")})
	m := &storage.Merchant{ID: "m1"}
	for _, frac := range []time.Duration{0, time.Nanosecond, 100 * time.Millisecond, 900 * time.Millisecond, time.Second - time.Nanosecond} {
		issued := time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC).Add(frac)
		tok, expiresIn := s.issueToken(m, issued)
		if expiresIn != 3600 {
			t.Fatalf("expires_in %d, want 3600", expiresIn)
		}
		lifetime := time.Duration(expiresIn) * time.Second
		for _, at := range []time.Time{issued, issued.Add(lifetime - time.Nanosecond)} {
			if _, ok := s.verifyToken(tok, at); !ok {
				t.Errorf("issued at %s: refused at %s, within its expires_in", issued.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
			}
		}
		// Kept in whole seconds, it may outlive its expires_in by less than
		// one, never more.
		if at := issued.Add(lifetime + time.Second); func() bool { _, ok := s.verifyToken(tok, at); return ok }() {
			t.Errorf("issued at %s: still accepted at %s", issued.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		}
	}
}

// TestNegativeConfigTakesDefaults: a negative lifetime or rate in Config
// takes its default, as zero does (and as MaxBodyBytes and the ledger's
// Options do). Taken as given, a negative AccessTokenTTL issued tokens
// already expired, a negative DocumentLinkTTL signed document links already
// expired, and a negative CompanySearchRate refused every company search.
func TestNegativeConfigTakesDefaults(t *testing.T) {
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, openStore(t, clock.Now), func(c *Config) {
		c.AccessTokenTTL, c.DocumentLinkTTL, c.CompanySearchRate = -time.Hour, -time.Hour, -1
	})
	r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", e.auth)
	code, _, tok := e.send(r)
	if code != 200 || tok["expires_in"] != 3600.0 {
		t.Fatalf("token: %d %v, want expires_in 3600", code, tok)
	}
	if code, _, b := e.req("GET", "/v1/orders", "", "Bearer "+tok["access_token"].(string), nil); code != 200 {
		t.Fatalf("a new access token refused: %d %v", code, b)
	}
	_, _, link := e.capturedInvoice()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a new document link: %d", resp.StatusCode)
	}
	if code, _, b := e.req("GET", "/v1/headless/search/companies?country=SE&q=bygg", "", "", nil); code != 200 {
		t.Fatalf("company search: %d %v", code, b)
	}
}
