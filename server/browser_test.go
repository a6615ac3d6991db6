package server

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fetchPage GETs a page a browser opens and returns its headers and body.
func fetchPage(t *testing.T, link string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// The pages kassa hands to browsers carry merchant text (lines,
// references) and signed links in their URL. Escaping keeps that text
// inert; the headers are the second line: no script runs but the page's
// own, the checkout cannot be framed to trick a click on Approve, the
// signed URL is not sent on as a Referer, and no response is sniffed into
// another type.
func TestBrowserPagesSecurityHeaders(t *testing.T) {
	e := newSessionEnv(t)
	code, _, s := e.do("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","merchantReference":"</title><script>alert(1)</script>",
		"orderLines":[{"description":"\"><img src=x onerror=alert(2)></script><script>alert(3)</script>","quantity":1,"unitPrice":12500,"vat":2500}]}`, e.auth)
	if code != 201 {
		t.Fatalf("create session: %d %v", code, s)
	}
	status, h, page := fetchPage(t, s["checkoutUrl"].(string))
	if status != 200 {
		t.Fatalf("checkout page: %d", status)
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img") {
		t.Fatalf("merchant text reached the page as markup:\n%s", page)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("checkout CSP %q lacks %s", csp, want)
		}
	}
	if strings.Contains(csp, "'unsafe-inline' 'self'") || strings.Contains(csp, "script-src 'unsafe-inline'") {
		t.Errorf("checkout CSP %q lets any inline script run", csp)
	}
	scripts := inlineScript.FindAllStringSubmatch(page, -1)
	if len(scripts) != 1 {
		t.Fatalf("want the page's one script, found %d", len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0][1]))
	if hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, "script-src "+hash) {
		t.Errorf("checkout CSP %q does not allow the page's own script %s", csp, hash)
	}
	if got := h.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("checkout X-Frame-Options %q, want DENY", got)
	}
	if got := h.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("checkout Referrer-Policy %q, want no-referrer", got)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("checkout X-Content-Type-Options %q", got)
	}

	o := e.order("5560000001", "invoice")
	code, _, o = e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil)
	if code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	status, h, _ = fetchPage(t, o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string))
	if status != 200 {
		t.Fatalf("document: %d", status)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "base-uri 'none'") {
		t.Errorf("document CSP %q, want nothing loaded or run", csp)
	}
	if got := h.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("document Referrer-Policy %q, want no-referrer", got)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("document X-Content-Type-Options %q", got)
	}

	if _, h, _ := e.do("GET", "/v1/sessions/"+s["id"].(string), "", e.auth); h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("API response X-Content-Type-Options %q", h.Get("X-Content-Type-Options"))
	}
}

// The buyer approves what the checkout's table shows: its lines under
// "Total" add up to the total below them, of which VAT, in either VAT mode.
// In exclVat the lines showed their amounts excluding VAT (200.00 + 100.00)
// over a total including it (356.00): the same heading, figures that do
// not add up.
func TestCheckoutLinesAddUpToItsTotal(t *testing.T) {
	e := newSessionEnv(t)
	cell := regexp.MustCompile(`<td class="n">([^<]*)</td></tr>`)
	total := regexp.MustCompile(`<th colspan="2">Total SEK \(VAT ([^)]*)\)</th><th class="n" id="total">([^<]*)</th>`)
	for mode, want := range map[string][]string{"inclVat": {"200.00", "100.00", "45.66", "300.00"}, "exclVat": {"250.00", "106.00", "56.00", "356.00"}} {
		code, _, s := e.do("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"en-SE","vatMode":"`+mode+`",
			"orderLines":[{"description":"Tiles","quantity":2,"unitPrice":10000,"vat":2500},{"description":"Book","quantity":1,"unitPrice":10000,"vat":600}]}`, e.auth)
		if code != 201 {
			t.Fatalf("create session: %d %v", code, s)
		}
		_, _, page := fetchPage(t, s["checkoutUrl"].(string))
		var got []string
		for _, m := range cell.FindAllStringSubmatch(page, -1) {
			got = append(got, m[1])
		}
		if m := total.FindStringSubmatch(page); m != nil {
			got = append(got, m[1], m[2])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the checkout reads lines, VAT and total %q, want %q", mode, got, want)
		}
	}
}
