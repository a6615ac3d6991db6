package server

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
)

// A document link changes only on the wall-clock hour, whatever the TTL:
// cached order responses rely on it (kassa.Options.DocumentURL). With a
// 90-minute TTL, rounding now+TTL instead would change the link at half past.
func TestDocumentLinkChangesOnlyOnTheHour(t *testing.T) {
	for _, ttl := range []time.Duration{90 * time.Minute, 7 * 24 * time.Hour, 45 * time.Minute} {
		s := New(Config{Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), BaseURL: "https://kassa.test", DocumentLinkTTL: ttl})
		o := &order.Order{ID: "o1", MerchantID: "m1"}
		sub := &order.Ledger{ID: "c1", DocumentReference: "INV-1"}
		for {
			before := time.Now()
			link := s.DocumentURL(o, sub)
			after := time.Now()
			if !before.Truncate(time.Hour).Equal(after.Truncate(time.Hour)) {
				continue // the hour turned during the call; take it again
			}
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := strconv.ParseInt(u.Query().Get("expires"), 10, 64)
			if err != nil {
				t.Fatalf("no expiry in %s", link)
			}
			want := before.Truncate(time.Hour).Add(time.Hour + ttl)
			if exp != want.Unix() {
				t.Fatalf("TTL %v: link expires %v, want the end of this hour plus the TTL, %v", ttl, time.Unix(exp, 0).UTC(), want.UTC())
			}
			if time.Unix(exp, 0).Before(after.Add(ttl)) {
				t.Fatalf("TTL %v: link valid for less than its TTL", ttl)
			}
			break
		}
	}
}

// documentLines fetches a document page and returns its title and its lines
// table, each row keyed by column heading, so a test reads the numbers a
// buyer reads.
func documentLines(t *testing.T, link string) (string, []map[string]string) {
	t.Helper()
	code, _, page := fetchPage(t, link)
	if code != 200 {
		t.Fatalf("document %s: %d %s", link, code, page)
	}
	title := regexp.MustCompile(`<h1>([^<]*)</h1>`).FindStringSubmatch(page)
	_, table, ok := strings.Cut(page, "<caption>Lines</caption>")
	table, _, _ = strings.Cut(table, "</table>")
	head, body, ok2 := strings.Cut(table, "</thead>")
	if title == nil || !ok || !ok2 {
		t.Fatalf("no lines table in %s", page)
	}
	cell := regexp.MustCompile(`<t[hd][^>]*>([^<]*)</t[hd]>`)
	var cols []string
	for _, m := range cell.FindAllStringSubmatch(head, -1) {
		cols = append(cols, m[1])
	}
	var rows []map[string]string
	for _, tr := range regexp.MustCompile(`<tr>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		cells := cell.FindAllStringSubmatch(tr[1], -1)
		if len(cells) != len(cols) {
			t.Fatalf("row %s has %d cells under %d headings %v", tr[1], len(cells), len(cols), cols)
		}
		row := map[string]string{}
		for i, c := range cells {
			row[cols[i]] = c[1]
		}
		rows = append(rows, row)
	}
	return title[1], rows
}

// pageMinor reads an amount as the page formats it ("1,234.50") back into
// minor units.
func pageMinor(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(strings.NewReplacer(",", "", ".", "").Replace(s), 10, 64)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return v
}

// A discounted line must add up on paper: quantity × (unit price − unit
// discount) = total, on the invoice and on the credit note that repeats it. A document
// without a discount keeps the columns it always had.
func TestDocumentShowsUnitDiscount(t *testing.T) {
	e := newSessionEnv(t)
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", `{"country":"SE","currency":"SEK","locale":"en-SE","reference":"PO-9","storeId":"s1",
		"orderLines":[{"description":"Widgets","quantity":2,"unitPrice":1000,"unitDiscountAmount":100,"vat":2500},{"description":"Grout","quantity":1,"unitPrice":5000,"vat":2500}]}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("create order: %d %v", code, b)
	}
	id := b["orderId"].(string)
	widgets := lines(e.get(id)["uncaptured"])[0].(map[string]any)["id"].(string)
	code, _, o := e.req("POST", "/v1/orders/"+id+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":1800}`, widgets), e.auth, nil)
	if code != 200 {
		t.Fatalf("partial capture: %d %v", code, o)
	}
	capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil); code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil); code != 200 {
		t.Fatalf("refund: %d %v", code, o)
	}
	link := func(kind string, i int) string {
		return o[kind].([]any)[i].(map[string]any)["documentUrl"].(string)
	}
	for _, doc := range []struct{ link, title, desc string }{
		{link("captured", 0), "Invoice", "Widgets"},
		{link("refunded", 0), "Credit note", "Widgets"},
		{link("captured", 1), "Invoice", "Grout"},
	} {
		title, rows := documentLines(t, doc.link)
		if !strings.HasPrefix(title, doc.title+" ") || len(rows) != 1 || rows[0]["Description"] != doc.desc {
			t.Fatalf("%s: %q %v", doc.desc, title, rows)
		}
		r := rows[0]
		disc, shown := r["Unit discount"]
		if doc.desc == "Widgets" {
			if !shown || disc != "1.00" || r["Quantity"] != "2" || r["Unit price (incl. VAT)"] != "10.00" || r["Total (incl. VAT)"] != "18.00" || r["VAT"] != "3.60" {
				t.Fatalf("%s: discounted line reads %v, want 2 × (10.00 − 1.00) = 18.00 with VAT 3.60", title, r)
			}
		} else if shown {
			t.Fatalf("%s: a discount column with no discount: %v", title, r)
		}
		q, _ := strconv.ParseInt(r["Quantity"], 10, 64)
		if d := pageMinor(t, r["Unit price (incl. VAT)"]) - pageMinor(t, cmp.Or(disc, "0")); q*d != pageMinor(t, r["Total (incl. VAT)"]) {
			t.Fatalf("%s: line does not add up: %v", title, r)
		}
	}
}

// A voided invoice keeps its link (the buyer may hold it), so the document
// itself must say it is void rather than read as an invoice to pay.
func TestDocumentOfVoidedInvoiceSaysVoid(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, link := e.capturedInvoice()
	if title, _ := documentLines(t, link); strings.Contains(title, "void") {
		t.Fatalf("live invoice reads %q", title)
	}
	if code, _, b := e.req("DELETE", "/v1/orders/"+id+"/"+capID, "", e.auth, nil); code != 200 {
		t.Fatalf("void: %d %v", code, b)
	}
	if title, _ := documentLines(t, link); !strings.HasPrefix(title, "Invoice ") || !strings.HasSuffix(title, " (void)") {
		t.Fatalf("voided invoice reads %q, want it marked void", title)
	}
}

// TestDocumentOfACardCaptureIsAReceipt: the spec resends "an invoice or card
// receipt"; a card capture is paid when made, so its document is a receipt,
// not an invoice that reads as still to be paid.
func TestDocumentOfACardCaptureIsAReceipt(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct{ pm, want string }{{"card", "Receipt "}, {"invoice", "Invoice "}} {
		o := e.order("5560000001", c.pm)
		_, _, o = e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil)
		link := o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string)
		if title, _ := documentLines(t, link); !strings.HasPrefix(title, c.want) {
			t.Errorf("%s capture's document reads %q, want %q…", c.pm, title, c.want)
		}
	}
}

// A credit note amends one invoice, and must say which: without the
// invoice's number the buyer's accountant cannot match the two, and a
// credit note that names no invoice is not a valid correction of one.
func TestCreditNoteNamesTheInvoiceItCredits(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	tiles := lines(o["uncaptured"])[0].(map[string]any)["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":25000}`, tiles), e.auth, nil); code != 200 {
		t.Fatalf("partial capture: %d %v", code, b)
	}
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	second := o["captured"].([]any)[1].(map[string]any)
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+second["ledgerId"].(string), "", e.auth, nil); code != 200 {
		t.Fatalf("refund: %d %v", code, o)
	}
	_, _, page := fetchPage(t, o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string))
	want := "Credits invoice " + second["documentReference"].(string) + " of " + second["createdAt"].(string)[:10] + "."
	if !strings.Contains(page, want) {
		t.Fatalf("credit note does not name the invoice it credits (want %q):\n%s", want, page)
	}
}

// A line's unit price and total are what the order's VAT mode makes them:
// with VAT in inclVat, without it in exclVat. The lines table must say which,
// or an exclVat line of total 10.00 and VAT 2.50 reads as 10.00 to pay.
func TestDocumentLinesSayWhetherTheyIncludeVAT(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct{ mode, basis, total string }{{"inclVat", "incl. VAT", "10.00"}, {"exclVat", "excl. VAT", "10.00"}} {
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", `{"country":"SE","currency":"SEK","locale":"en-SE","reference":"PO-9","storeId":"s1","vatMode":"`+c.mode+`",
			"orderLines":[{"description":"Widget","quantity":1,"unitPrice":1000,"vat":2500}]}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("create order: %d %v", code, b)
		}
		_, _, o := e.req("POST", "/v1/orders/"+b["orderId"].(string)+"/capture", "", e.auth, nil)
		_, rows := documentLines(t, o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string))
		if len(rows) != 1 || rows[0]["Unit price ("+c.basis+")"] != c.total || rows[0]["Total ("+c.basis+")"] != c.total {
			t.Fatalf("%s: lines read %v, want unit price and total headed %q", c.mode, rows, c.basis)
		}
	}
}

// A refund's note is internal (the spec: "internal note set at refund"):
// the credit note goes to the buyer, so it must not carry it.
func TestCreditNoteLeavesOutTheInternalNote(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	const note = "goodwill: buyer threatened to leave"
	code, _, o := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000,"note":"`+note+`"}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("partial refund: %d %v", code, o)
	}
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, `{"note":"`+note+`"}`, e.auth, nil); code != 200 {
		t.Fatalf("refund: %d %v", code, o)
	}
	for _, r := range o["refunded"].([]any) {
		r := r.(map[string]any)
		if r["note"] != note {
			t.Fatalf("the order response lost the note: %v", r["note"])
		}
		if _, _, page := fetchPage(t, r["documentUrl"].(string)); strings.Contains(page, "threatened") {
			t.Fatalf("credit note %s shows the internal note:\n%s", r["documentReference"], page)
		}
	}
}
