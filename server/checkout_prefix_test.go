package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
)

// TestCheckoutUnderAPathPrefix: behind a proxy that serves kassa under a
// path (--base-url https://pay.example.com/kassa, the proxy taking /kassa
// off), the checkout link carries the prefix, but kassa sees paths without
// it. The page's forms, its redirect after a submit and its search as you
// type used those absolute paths, so they left kassa: the buyer could not
// search or approve. They are relative to the page now.
func TestCheckoutUnderAPathPrefix(t *testing.T) {
	clock := NewClock(true)
	var srv *Server
	ledger := kassa.New(openStore(t, clock.Now), kassa.Options{
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	ts := httptest.NewUnstartedServer(nil)
	srv = New(Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef"),
		Sandbox: true, Clock: clock, BaseURL: "http://" + ts.Listener.Addr().String() + "/kassa"})
	ts.Config.Handler = http.StripPrefix("/kassa", srv.Handler())
	ts.Start()
	t.Cleanup(ts.Close)
	if _, _, err := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m1", ClientSecret: "s1"}); err != nil {
		t.Fatal(err)
	}
	e := &sessionEnv{t: t, ts: ts, clock: clock, auth: basic("m1", "s1"), ledger: ledger}
	code, _, s := e.do("POST", "/kassa/v1/sessions", fill(sessionBody, "a", "b", "prefix"), e.auth)
	if code != 201 && code != 200 {
		t.Fatalf("session: %d %v", code, s)
	}
	page, err := url.Parse(s["checkoutUrl"].(string))
	if err != nil || !strings.HasPrefix(page.Path, "/kassa/checkout/") {
		t.Fatalf("checkout link %v, %v", s["checkoutUrl"], err)
	}
	get := func(u *url.URL) (int, string) {
		t.Helper()
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(page)
	if code != 200 {
		t.Fatalf("checkout page: %d", code)
	}
	resolve := func(ref string) *url.URL {
		t.Helper()
		r, err := url.Parse(ref)
		if err != nil {
			t.Fatalf("%q: %v", ref, err)
		}
		return page.ResolveReference(r)
	}

	// The forms post and search where the browser is: under /kassa.
	actions := regexp.MustCompile(`<form method="(get|post)" action="([^"]*)"`).FindAllStringSubmatch(body, -1)
	if len(actions) != 2 {
		t.Fatalf("want the search and the approval form, found %v", actions)
	}
	for _, a := range actions {
		if u := resolve(a[2]); u.Path != page.Path {
			t.Errorf("the %s form goes to %s, want the page's own %s", a[1], u.Path, page.Path)
		}
	}
	search := resolve(actions[0][2] + "?sig=" + url.QueryEscape(page.Query().Get("sig")) + "&q=bygg")
	if code, _ := get(search); code != 200 {
		t.Errorf("the search form's submit: %d", code)
	}

	// The script's search as you type.
	m := regexp.MustCompile(`fetch\('([^']+)'`).FindStringSubmatch(checkoutScript)
	if m == nil {
		t.Fatal("no fetch in the page's script")
	}
	if code, b := get(resolve(m[1] + "SE&q=bygg")); code != 200 || !strings.Contains(b, `"companies"`) {
		t.Errorf("search as you type from the page: %d %s", code, b)
	}

	// A submit's redirect lands on the page again.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(resolve(actions[1][2]).String(), url.Values{"action": {"decline"}, "sig": {page.Query().Get("sig")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decline: %d", resp.StatusCode)
	}
	if to := resolve(resp.Header.Get("Location")); to.Path != page.Path {
		t.Errorf("after a submit the buyer is sent to %s, want the page %s", to.Path, page.Path)
	} else if code, _ := get(to); code != 200 {
		t.Errorf("the page after the redirect: %d", code)
	}
}

// TestLocationUnderAPathPrefix: a new session's Location was the path
// kassa saw ("/v1/sessions/…"), without the prefix the proxy (or an
// embedder's mux, with http.StripPrefix) took off: a client following it
// left kassa. It now carries the path of BaseURL, and stays a path. The
// stored idempotency record keeps the path without it, so a replay is
// answered the same way.
func TestLocationUnderAPathPrefix(t *testing.T) {
	clock := NewClock(true)
	ledger := kassa.New(openStore(t, clock.Now), kassa.Options{})
	ts := httptest.NewUnstartedServer(nil)
	srv := New(Config{Ledger: ledger, Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"),
		Sandbox: true, Clock: clock, BaseURL: "http://" + ts.Listener.Addr().String() + "/payments/"})
	mux := http.NewServeMux()
	mux.Handle("/payments/", http.StripPrefix("/payments", srv.Handler()))
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(ts.Close)
	if _, _, err := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m1", ClientSecret: "s1"}); err != nil {
		t.Fatal(err)
	}
	post := func() (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/payments/v1/payment-sessions", strings.NewReader(fill(sessionBody, "a", "b", "loc")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", basic("m1", "s1"))
		req.Header.Set("Idempotency-Key", "loc-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s map[string]any
		json.NewDecoder(resp.Body).Decode(&s)
		return resp, s
	}
	for _, round := range []string{"first", "replay"} {
		resp, s := post()
		want := "/payments/v1/payment-sessions/" + s["id"].(string)
		if resp.StatusCode != 201 || resp.Header.Get("Location") != want {
			t.Fatalf("%s: %d, Location %q, want 201 and %q", round, resp.StatusCode, resp.Header.Get("Location"), want)
		}
		req, _ := http.NewRequest("GET", ts.URL+resp.Header.Get("Location"), nil)
		req.Header.Set("Authorization", basic("m1", "s1"))
		got, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got.Body.Close()
		if got.StatusCode != 200 {
			t.Errorf("%s: GET of the Location: %d", round, got.StatusCode)
		}
	}
}

// TestOpenAPIUnderAPathPrefix: /openapi.json named "/" as its server, so a
// client generated from the document that a server under a prefix serves
// called the host's root, not kassa. It names the path of BaseURL now.
func TestOpenAPIUnderAPathPrefix(t *testing.T) {
	for _, c := range []struct{ base, want string }{{"", "/"}, {"https://platform.example.com/payments/", "/payments"}} {
		srv := New(Config{Logger: quiet, Sandbox: true, BaseURL: c.base})
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
		var doc struct {
			Servers []struct{ URL string } `json:"servers"`
			Paths   map[string]any         `json:"paths"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != 200 {
			t.Fatalf("%q: %d %v", c.base, rec.Code, err)
		}
		if len(doc.Servers) != 1 || doc.Servers[0].URL != c.want || doc.Paths["/v1/orders"] == nil {
			t.Errorf("BaseURL %q: servers %+v, want one with url %q", c.base, doc.Servers, c.want)
		}
	}
}
