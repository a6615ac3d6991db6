package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// layout is how Chromium lays page out in a window width pixels wide: the
// width in CSS pixels it takes (more than width when something on it cannot
// wrap), how many of its amount cells (td.n) span more than one line, and how
// many words of its table headings (th) are broken over two.
// The page is opened from a file with a script added that writes both into
// the DOM, which --dump-dom prints.
func layout(t *testing.T, page string, width int) (px, wrapped, broken int) {
	t.Helper()
	bin := os.Getenv("CHROMIUM_PATH")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("chromium"); err != nil {
			t.Skip("no chromium (CHROMIUM_PATH or chromium on PATH) to lay the page out in")
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "page.html")
	measured := strings.Replace(page, "</body>", "<script>function lines(r){return new Set([...r.getClientRects()].map(function(x){return x.top})).size}"+
		"document.body.dataset.w=document.documentElement.scrollWidth;"+
		"document.body.dataset.wrapped=[...document.querySelectorAll('td.n')].filter(function(td){"+
		"var r=document.createRange();r.selectNodeContents(td);return lines(r)>1}).length;"+
		"var broken=0;document.querySelectorAll('th').forEach(function(th){var w=document.createTreeWalker(th,NodeFilter.SHOW_TEXT),n;"+
		"while((n=w.nextNode())){var re=/\\S+/g,m;while((m=re.exec(n.data))){var r=document.createRange();"+
		"r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);if(lines(r)>1)broken++}}});"+
		"document.body.dataset.broken=broken</script></body>", 1)
	if err := os.WriteFile(file, []byte(measured), 0o600); err != nil {
		t.Fatal(err)
	}
	// Bounded: a Chromium that hangs must fail the test, not hold the run
	// until go test's own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--window-size="+strconv.Itoa(width)+",800", "--dump-dom", "file://"+file).Output()
	m := regexp.MustCompile(`data-w="([0-9]+)" data-wrapped="([0-9]+)" data-broken="([0-9]+)"`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("chromium: %v, no measures in %q", err, out)
	}
	px, _ = strconv.Atoi(string(m[1]))
	wrapped, _ = strconv.Atoi(string(m[2]))
	broken, _ = strconv.Atoi(string(m[3]))
	return px, wrapped, broken
}

// A line's description may be 200 characters without a space (a product
// code, a URL). It wrapped nowhere, so the lines' table grew to 3 500 px
// and on a page of A4's width (794 px) the quantity, prices, VAT and totals
// of every line were off the page: the invoice showed descriptions without
// their amounts; the checkout page, on a narrow screen, the same. Merchant
// text now wraps where it must, and an amount never does, nor a word of a
// table heading. The largest amounts are there too: a line of 9 999 999,00
// and its discount, whose total 1,00 does not hold the amounts' column as wide
// as they are. (Headless Chromium lays a window out at least 500 px wide, so
// the checkout is measured at 600.)
func TestDocumentAndCheckoutWrapLongMerchantWords(t *testing.T) {
	e := newSessionEnv(t)
	long := strings.Repeat("W", 200)
	lines := []any{map[string]any{"description": long, "quantity": 1, "unitPrice": 10000, "vat": 2500},
		map[string]any{"description": "Big", "quantity": 1, "unitPrice": 999999900, "vat": 2500},
		map[string]any{"description": "Discount", "quantity": 1, "unitPrice": -999999900, "vat": 2500}}
	body, _ := json.Marshal(map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "reference": strings.Repeat("R", 50), "orderLines": lines})
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", string(body), e.auth, nil)
	if code != 200 {
		t.Fatalf("create order: %d %v", code, b)
	}
	_, _, o := e.req("POST", "/v1/orders/"+b["orderId"].(string)+"/capture", "", e.auth, nil)
	_, _, doc := fetchPage(t, o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string))
	if !strings.Contains(doc, long) {
		t.Fatal("the invoice does not show the line's description")
	}
	if w, n, h := layout(t, doc, 794); w > 794 || n > 0 || h > 0 {
		t.Errorf("the invoice is laid out %d px wide in a window of 794 px, with %d amounts and %d heading words broken over lines", w, n, h)
	}
	body, _ = json.Marshal(map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "merchantReference": strings.Repeat("M", 50), "orderLines": lines})
	code, _, s := e.do("POST", "/v1/sessions", string(body), e.auth)
	if code != 201 {
		t.Fatalf("create session: %d %v", code, s)
	}
	_, _, page := fetchPage(t, s["checkoutUrl"].(string))
	if w, n, h := layout(t, page, 600); w > 600 || n > 0 || h > 0 {
		t.Errorf("the checkout page is laid out %d px wide in a window of 600 px, with %d amounts and %d heading words broken over lines", w, n, h)
	}
}
