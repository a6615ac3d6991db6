package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage/memory"
)

// fuzzServer is a sandbox server on a memory store with merchant m (secret
// s), for the fuzz targets of this file.
func fuzzServer(f *testing.F) (*Server, *kassa.Ledger) {
	ledger := kassa.New(memory.New(nil), kassa.Options{})
	s := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true})
	if _, _, err := ledger.EnsureMerchant(f.Context(), kassa.MerchantOptions{ClientID: "m", ClientSecret: "s"}); err != nil {
		f.Fatal(err)
	}
	return s, ledger
}

// problemOrFail fails t unless an answer of 4xx is a problem document with a
// code, and fails it on any 5xx.
func problemOrFail(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("%s answered %d: %s", what, w.Code, w.Body)
	}
	if w.Code >= 400 {
		var p Problem
		if w.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Code == "" {
			t.Fatalf("%s: %d without a problem document: %s", what, w.Code, w.Body)
		}
	}
}

// basicIsMS reports whether an Authorization value carries m:s as Basic
// credentials, by RFC 9110 and 7617 read independently of auth.go: the
// scheme in any case, then one or more spaces, then base64 of "m:s" (or of
// each part form-urlencoded, RFC 6749 §2.3.1), which for "m" and "s" is the
// same bytes or their escapes).
func basicIsMS(v string) bool {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Trim(cred, " \t"))
	if err != nil {
		return false
	}
	id, secret, _ := strings.Cut(string(raw), ":")
	if id == "m" && secret == "s" {
		return true
	}
	did, e1 := url.QueryUnescape(id)
	ds, e2 := url.QueryUnescape(secret)
	return e1 == nil && e2 == nil && did == "m" && ds == "s"
}

// FuzzRequestHeaders sends arbitrary Authorization, Idempotency-Key,
// Content-Type, Content-Encoding, X-Request-Id and Accept-Language values
// to a read, a write and a sandbox route: never a 5xx, every refusal a
// problem document, and a request is let in only with the merchant's Basic
// credentials (no fuzzed Bearer token can carry the server's MAC).
func FuzzRequestHeaders(f *testing.F) {
	ms := base64.StdEncoding.EncodeToString([]byte("m:s"))
	for _, s := range [][6]string{
		{"Basic " + ms, "", "application/json", "", "", ""},
		{"bAsIc   " + ms, "k1", "application/json; charset=utf-8", "identity", "req-1", "sv-SE,sv;q=0.9"},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("%6D:%73")), "k\xff", "text/plain", "gzip", "\x00", "*"},
		{"Bearer kat_e30.AAAA", strings.Repeat("k", 300), "application/json;charset=latin1", "", strings.Repeat("r", 200), "en;q=x"},
		{"Basic", "", "", "", "", ""}, {"Basic " + ms + "=", " ", "application/merge-patch+json", "br", "a b", ",,,;q=1"},
		{"Bearer ", "\t", "application/json; charset=\"", "identity, gzip", "ü", "nb-NO;q=0.5, da;q=1.0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	s, _ := fuzzServer(f)
	h := s.Handler()
	// The sandbox's and the headless company search's routes take no
	// credentials: they are here for the headers other than Authorization.
	routes := [][3]string{{"GET", "/v1/orders", ""}, {"POST", "/v1/orders/o/capture", `{}`}, {"POST", "/sandbox/v1/clock", `{"advance":"1s"}`},
		{"GET", "/v1/headless/search/companies?country=SE&q=bygg", ""}}
	f.Fuzz(func(t *testing.T, authz, idem, ctype, cenc, reqID, lang string) {
		for _, rt := range routes {
			r := httptest.NewRequest(rt[0], rt[1], strings.NewReader(rt[2]))
			// Set directly: these are the bytes a client's header carried.
			for k, v := range map[string]string{"Authorization": authz, "Idempotency-Key": idem, "Content-Type": ctype,
				"Content-Encoding": cenc, "X-Request-Id": reqID, "Accept-Language": lang} {
				if v != "" {
					r.Header[k] = []string{v}
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			what := rt[0] + " " + rt[1]
			problemOrFail(t, what, w)
			if w.Code != 401 && !basicIsMS(authz) && !strings.HasPrefix(rt[1], "/sandbox/") &&
				!strings.HasPrefix(rt[1], "/v1/headless/") {
				t.Fatalf("%s with Authorization %q answered %d: %s", what, authz, w.Code, w.Body)
			}
			if w.Code == 401 && basicIsMS(authz) {
				t.Fatalf("%s with Authorization %q (m:s) answered 401: %s", what, authz, w.Body)
			}
		}
	})
}

// FuzzOAuthToken posts arbitrary form bodies (and Content-Type and
// Authorization values) to the token endpoint: never a 5xx; every refusal
// is an OAuth error document (RFC 6749 §5.2); a token is issued only for
// client_credentials with the merchant's credentials, and it lets a request
// in.
func FuzzOAuthToken(f *testing.F) {
	ms := base64.StdEncoding.EncodeToString([]byte("m:s"))
	for _, s := range [][3]string{
		{"grant_type=client_credentials&client_id=m&client_secret=s", "application/x-www-form-urlencoded", ""},
		{"grant_type=client_credentials", "application/x-www-form-urlencoded; charset=utf-8", "Basic " + ms},
		{"grant_type=client_credentials&scope=orders+payments", "application/x-www-form-urlencoded", "Basic " + ms},
		{"grant_type=client_credentials&client_id=m&client_id=m&client_secret=s", "application/x-www-form-urlencoded", ""},
		{"grant_type=password&client_id=m&client_secret=s", "application/x-www-form-urlencoded", ""},
		{"grant_type=client_credentials&client_id=m", "application/x-www-form-urlencoded", "Basic " + ms},
		{"%zz", "application/x-www-form-urlencoded", ""}, {`{"grant_type":"client_credentials"}`, "application/json", ""},
		{"grant_type=client_credentials&scope=admin", "application/x-www-form-urlencoded", "Basic " + ms},
		{"grant_type=client_credentials;client_id=m", "application/x-www-form-urlencoded", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	s, _ := fuzzServer(f)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body, ctype, authz string) {
		r := httptest.NewRequest("POST", tokenPath, strings.NewReader(body))
		if ctype != "" {
			r.Header["Content-Type"] = []string{ctype}
		}
		if authz != "" {
			r.Header["Authorization"] = []string{authz}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%q answered %d: %s", body, w.Code, w.Body)
		}
		if w.Code != 200 {
			var e oauthError
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%q: %d without an OAuth error: %s", body, w.Code, w.Body)
			}
			return
		}
		form, err := url.ParseQuery(body)
		if err != nil || form.Get("grant_type") != "client_credentials" ||
			!(basicIsMS(authz) || form.Get("client_id") == "m" && form.Get("client_secret") == "s") {
			t.Fatalf("a token for body %q, Authorization %q: %s", body, authz, w.Body)
		}
		var tok tokenResponse
		if json.Unmarshal(w.Body.Bytes(), &tok) != nil || tok.TokenType != "Bearer" || tok.ExpiresIn <= 0 {
			t.Fatalf("token response %s", w.Body)
		}
		r = httptest.NewRequest("GET", "/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("the issued token is refused: %d %s", w.Code, w.Body)
		}
	})
}

// FuzzCheckoutSubmit posts arbitrary form bodies to a real session's hosted
// checkout page, with the link's signature in the address: never a 5xx,
// whatever Accept-Language the buyer's browser sends, and the page and the
// session read back over the API still answer.
func FuzzCheckoutSubmit(f *testing.F) {
	for _, s := range []string{"", "action=decline", "q=bygg", "q=%00", "companyId=5560000001&firstName=A&lastName=B&email=a%40b.se&phone=%2B46701234567&street=S+1&postalCode=11122&city=Sthlm&paymentMethod=invoice&action=approve",
		"companyId=x&action=approve", "sig=bad", "%zz", "action=approve&terms=x", strings.Repeat("q=a+", 100), "companyId=5560000001&companyId=5560000002"} {
		f.Add(s, "sv-SE,sv;q=0.9")
	}
	f.Add("", "fi;q=0.1, nb;q=0.9, *;q=x")
	f.Add("action=decline", ",;,\x00")
	s, _ := fuzzServer(f)
	h := s.Handler()
	do := func(t *testing.T, lang, method, path, ctype, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		if lang != "" {
			r.Header["Accept-Language"] = []string{lang}
		}
		if !strings.HasPrefix(path, "/checkout/") {
			r.SetBasicAuth("m", "s")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s answered %d to %q: %s", method, path, w.Code, body, w.Body)
		}
		return w
	}
	f.Fuzz(func(t *testing.T, form, lang string) {
		w := do(t, "", "POST", "/v1/sessions", "application/json", `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"a","quantity":1,"unitPrice":1000,"vat":2500}]}`)
		var created struct{ ID, MerchantID string }
		if w.Code != 201 && w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &created) != nil || created.ID == "" {
			t.Fatalf("create session: %d %s", w.Code, w.Body)
		}
		u, err := url.Parse(s.CheckoutURL(created.MerchantID, created.ID))
		if err != nil {
			t.Fatal(err)
		}
		do(t, lang, "POST", u.RequestURI(), "application/x-www-form-urlencoded", form)
		if w := do(t, lang, "GET", u.RequestURI(), "", ""); w.Code != 200 || !strings.Contains(w.Body.String(), "<html lang=") {
			t.Fatalf("the page after form %q, Accept-Language %q: %d %.300s", form, lang, w.Code, w.Body)
		}
		w = do(t, "", "GET", "/v1/sessions/"+created.ID, "", "")
		problemOrFail(t, "GET session", w)
		var sess map[string]any
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &sess) != nil || sess["state"] == nil {
			t.Fatalf("session after form %q: %d %s", form, w.Code, w.Body)
		}
	})
}

// FuzzSandboxClockFile starts a clock from arbitrary file contents: a file
// it takes holds an offset from 0 to MaxClockOffset, which the clock then
// reads; any other is refused with an error that says the file is damaged.
func FuzzSandboxClockFile(f *testing.F) {
	for _, s := range []string{`{"offsetNanos":0}`, `{"offsetNanos":3600000000000}`, `{"offsetNanos":-1}`, `{"offsetNanos":1e30}`, `{}`, `null`, ``, `[]`,
		`{"offsetNanos":"1h"}`, `{"offsetNanos":9223372036854775807}`, "\xef\xbb\xbf{}", `{"offsetNanos":1}x`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "clock.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c := NewClock(true)
		err := c.PersistTo(path)
		if err != nil {
			if !strings.Contains(err.Error(), "is damaged") {
				t.Fatalf("refusal of %q does not say the file is damaged: %v", b, err)
			}
			return
		}
		off := c.Now().Sub(time.Now())
		if off < -time.Minute || off > MaxClockOffset+time.Minute {
			t.Fatalf("file %q gave the clock an offset of %v", b, off)
		}
	})
}
