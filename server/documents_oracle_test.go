package server

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/internal/rapidrun"
	"github.com/kassahq/kassa/storage"
)

// The documents oracle: what the invoices, receipts and credit notes a
// buyer receives SAY, predicted from the interface spec, shared/design.md,
// docs/decisions.md, docs/errors.md and the README alone (not from
// documents.go, order/ or money/), driven by TestOracle's order sequences
// (its `after` hook sees the order model after every step).
//
// Each sequence is a merchant of its own (a name with characters HTML
// escapes), whose orders (one or two) are written in a locale drawn from
// the five languages kassa writes and two it does not (English then).
// After every step every sub-order with a document is fetched by the
// documentUrl the order gives, and its page is read as a buyer reads it:
//   - the heading: "Invoice" for an invoice or advance invoice, "Receipt" for
//     a card capture, "Credit note" for a refund, then the documentReference,
//     "(void)" after a voided invoice, which also says nothing is payable;
//   - numbers: INV-… for captures and CN-… for refunds, one series each per
//     merchant, gapless and in the order the documents were issued, over
//     every order of the merchant (refusals and voids take no number away);
//   - the date: the UTC date of the capture or refund, in the language's
//     layout; a credit note names the invoice (or receipt) it credits by
//     number and date;
//   - the due date, after the date: on an invoice its issue date plus the
//     term the checkout offers (30 days), on an advance invoice its issue
//     date ("pay before delivery"), as issued: a voided or recoursed
//     invoice keeps it; none on a receipt or a credit note;
//   - what the document was issued with (decisions.md): the merchant
//     reference, the seller (the merchant's name), the buyer's name, company
//     id and billing address as the order read when it was issued: an edit
//     of the customer or the reference after it changes nothing;
//   - the lines: each captured line (description, quantity, unit price,
//     unit discount, VAT rate, VAT, total) as captured; a credit note's lines
//     as the refund sent them, the capture's lines for a full refund of a
//     capture nothing was refunded of, and one "remaining balance" line per
//     VAT rate for a full refund after partial ones, crediting exactly what
//     is left there; the unit price and total headed incl. or excl. VAT
//     after vatMode;
//   - the VAT breakdown: per rate the net, VAT and gross, each the sum of
//     its lines, and the totals the sub-order's totalOrderAmount,
//     totalOrderVatAmount and totalOrderAmountExclVat to the minor unit;
//   - after its issue: a payment status (invoiced, credited, paid,
//     outstanding or due to the buyer) on an invoice once paid in part or
//     recoursed, the recourse notice, and nothing of the refund's note;
//   - every amount written as the language writes it (decimal comma,
//     no-break-space or dot grouping), every date too.
//
// A page whose post-issue state (void, paid, recourse, credited) is as it
// was must be byte for byte the page fetched before: time passing (due
// dates, expiry), edits and resends do not rewrite it. Between steps, at
// random: the billing address is edited; an amount is refunded as one
// goodwill line, at the capture's rate or another (with a note, which the
// credit note must not show); a document is resent (offered on
// every live capture and every refund, 409 elsewhere; it changes neither the
// page nor the order); a link is tampered with, expired, or signed for
// another merchant's path or a sub-order with no document (403
// document_link_invalid, 404).
//
// It runs dChecks sequences unless -rapid.checks is given; a long run:
// go test ./server -run TestDocumentsOracle -v -rapid.checks=3000

const dChecks = 30

// dTermDays is the days an invoice gives its buyer to pay (decisions.md,
// the checkout's "Invoice (pay within 30 days)").
const dTermDays = 30

// dLang is how a language writes amounts and dates (decisions.md: decimal
// comma, no-break-space grouping in sv/nb/fi, dot grouping in da; dates ISO
// in English and Swedish, dd.mm.yyyy in Norwegian and Danish, d.m.yyyy in
// Finnish).
type dLang struct {
	tag, group, point, date string
}

var dLangs = map[string]dLang{
	"en": {"en", ",", ".", "2006-01-02"},
	"sv": {"sv", "\u00a0", ",", "2006-01-02"},
	"nb": {"nb", "\u00a0", ",", "02.01.2006"},
	"da": {"da", ".", ",", "02.01.2006"},
	"fi": {"fi", "\u00a0", ",", "2.1.2006"},
}

// dLocales: a locale and the language kassa writes to its buyer (English
// for a language without a table; nn reads Bokmål).
var dLocales = [][2]string{{"sv-SE", "sv"}, {"en-GB", "en"}, {"de-DE", "en"}, {"nb-NO", "nb"}, {"nn-NO", "nb"}, {"da-DK", "da"}, {"fi-FI", "fi"}}

// amount writes minor units of SEK (two decimals).
func (d dLang) amount(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	digits := strconv.FormatInt(v/100, 10)
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteString(d.group)
		}
		b.WriteRune(c)
	}
	return fmt.Sprintf("%s%s%s%02d", sign, b.String(), d.point, v%100)
}

func (d dLang) day(t time.Time) string { return t.UTC().Format(d.date) }

// dIssued is what a document was issued with, as the model saw the order
// then.
type dIssued struct {
	ledger, ref        string
	at                 time.Time
	merchantRef        string
	buyerName, buyerID string
	street, city       string // of the billing address, "" for none
	// page is the last page fetched and key the post-issue state it was
	// fetched in.
	page, key string
}

type docEnv struct {
	*oracleEnv
	other    string // another merchant's id
	merchant string
	name     string // the merchant's name: the seller
	lang     dLang
	words    *i18n.Texts // the headings of the language: words, not logic
	inv, cn  int         // numbers issued in each series so far
	addrs    int
	// of the current order
	m        *oOrder
	caps     []*dIssued
	refs     []*dIssued
	street   string
	city     string
	custName string
}

var dNames = []string{"Oracle Handel AB", "Kakel & Co AB", `Åkesson "Bygg" <Nord> AB`, "Café Ölstugan's"}

func TestDocumentsOracle(t *testing.T) {
	// On the store the HTTP tests run on (bbolt, or PostgreSQL): what a
	// document was issued with is a stored record, encoded by the store.
	e, wall := oracleServerOn(t, func(now func() time.Time) storage.Store { return openStore(t, now) })
	x := &docEnv{oracleEnv: &oracleEnv{e: e, wall: wall, stats: map[string]int{}}}
	x.after = x.afterStep
	a := x.sendKey("POST", "/sandbox/v1/merchants", `{"name":"Other AB"}`, "")
	if a.code != 201 {
		t.Fatalf("merchant: %d %v", a.code, a.body)
	}
	x.other = a.body["merchantId"].(string)
	rapidrun.Check(t, dChecks, func(rt *rapid.T, _ int) {
		startSequence(rt, wall)
		x.start(rt)
		for range rapid.IntRange(1, 2).Draw(rt, "orders") {
			x.run(rt)
		}
	})
	logStats(t, x.stats)
	t.Logf("%d steps", x.steps)
}

// start makes the sequence's merchant and draws its orders' locale.
func (x *docEnv) start(rt *rapid.T) {
	x.name = rapid.SampledFrom(dNames).Draw(rt, "merchantName")
	body, _ := json.Marshal(map[string]string{"name": x.name})
	a := x.sendKey("POST", "/sandbox/v1/merchants", string(body), "")
	if a.code != 201 {
		rt.Fatalf("merchant: %d %v", a.code, a.body)
	}
	x.merchant = a.body["merchantId"].(string)
	x.e.auth = basic(a.body["clientId"].(string), a.body["clientSecret"].(string))
	loc := rapid.SampledFrom(dLocales).Draw(rt, "locale")
	x.locale, x.lang, x.words = loc[0], dLangs[loc[1]], i18n.For(loc[1])
	x.inv, x.cn, x.m = 0, 0, nil
}

func (x *docEnv) now() time.Time { return time.Unix(0, x.wall.Load()).UTC() }

func (x *docEnv) afterStep(rt *rapid.T, m *oOrder, what string) {
	if m != x.m {
		x.m, x.caps, x.refs, x.street, x.city, x.custName = m, nil, nil, "", "", ""
	}
	got := x.e.get(m.id)
	x.learn(rt, m, got)
	x.checkAll(rt, m, got, what)
	switch rapid.IntRange(0, 9).Draw(rt, "docStep") {
	case 0: // the buyer's billing address changes
		x.editAddress(rt, m)
	case 1:
		x.resend(rt, m)
	case 2:
		x.badLinks(rt, m, got)
	case 3:
		x.refundAmount(rt, m)
	}
}

// refundAmount refunds an amount rather than lines: one goodwill line, at a
// rate of the capture or another (decisions.md: goodwill at 0 % is
// allowed), judged by TestOracle's refund rules.
func (x *docEnv) refundAmount(rt *rapid.T, m *oOrder) {
	if len(m.captures) == 0 {
		return
	}
	ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "goodwillOf")
	c := m.captures[ci]
	left, _ := c.left()
	if left < 2 || c.voided {
		return // the last unit and voids: TestOracle's
	}
	l := oLine{desc: "Goodwill", qty: 1, excl: m.excl, vat: rapid.SampledFrom(oracleRates).Draw(rt, "goodwillVat")}
	l.unit = rapid.SampledFrom([]int64{1, left / 3, left / 2, left - 1}).Draw(rt, "goodwill")
	if m.excl {
		l.unit = roundHalfAway(l.unit*10000, 10000+l.vat)
	}
	l = l.computed()
	rl := []oLine{l}
	total, vat := sums(rl)
	what := fmt.Sprintf("goodwill refund of %d at %d on capture %d (left %d)", total, l.vat, ci, left)
	a := x.sendKey("POST", "/v1/orders/"+m.id+"/partialrefund/"+c.ledgerID, fmt.Sprintf(`{"orderLines":%s,"totalRefundAmount":%d,"note":"damaged"}`, linesJSON(rl, false), max(l.total, 0)), "")
	probs := m.refundProblems(c, rl)
	if l.total < 0 {
		probs = append(probs, "refund_amount_mismatch")
	}
	if len(probs) > 0 {
		expect(rt, what, a, 400, probs...)
		x.stats["goodwill refund 400"]++
		return
	}
	expect(rt, what, a, 200)
	x.stats["goodwill refund 200"]++
	rates := byRate(rl)
	for k, s := range rates {
		r := c.refunded[k]
		c.refunded[k] = [2]int64{r[0] + s[0], r[1] + s[1]}
	}
	c.refunds++
	m.refunds = append(m.refunds, oRefund{amount: total, vat: vat, rates: rates, note: "damaged", of: ci, lines: rl})
	m.events = append(m.events, oEvent{"partialRefund", total})
	x.check(rt, what, m, a.body)
	got := x.e.get(m.id)
	x.check(rt, what+" (read)", m, got)
	x.learn(rt, m, got)
	x.checkAll(rt, m, got, what)
}

// learn records the documents issued by the step: numbers, dates, and what
// the order read when they were issued.
func (x *docEnv) learn(rt *rapid.T, m *oOrder, got map[string]any) {
	cust, _ := got["customer"].(map[string]any)
	buyerName, _ := cust["companyName"].(string)
	buyerID, _ := cust["companyId"].(string)
	issue := func(sub map[string]any, prefix string, n int) *dIssued {
		ref, _ := sub["documentReference"].(string)
		if want := fmt.Sprintf("%s%08d", prefix, n); ref != want {
			rt.Fatalf("sub-order %v: documentReference %q, the next in its series is %s", sub["ledgerId"], ref, want)
		}
		at, err := time.Parse(time.RFC3339Nano, sub["createdAt"].(string))
		if err != nil || !at.Equal(x.now()) {
			rt.Fatalf("sub-order %v: createdAt %v, issued at %v", sub["ledgerId"], sub["createdAt"], x.now())
		}
		return &dIssued{ledger: sub["ledgerId"].(string), ref: ref, at: at, merchantRef: m.reference, buyerName: buyerName, buyerID: buyerID, street: x.street, city: x.city}
	}
	caps, _ := got["captured"].([]any)
	for i := len(x.caps); i < len(caps); i++ {
		x.inv++
		x.caps = append(x.caps, issue(caps[i].(map[string]any), "INV-", x.inv))
	}
	refs, _ := got["refunded"].([]any)
	for i := len(x.refs); i < len(refs); i++ {
		x.cn++
		x.refs = append(x.refs, issue(refs[i].(map[string]any), "CN-", x.cn))
	}
	if unc, _ := got["uncaptured"].(map[string]any); unc["documentUrl"] != nil || unc["documentReference"] != nil {
		rt.Fatalf("the uncaptured sub-order has a document: %v %v", unc["documentReference"], unc["documentUrl"])
	}
}

// dPage is a document page as a buyer reads it: its heading, paragraphs and
// tables (caption and rows of cells), text unescaped.
type dPage struct {
	lang   string
	h1     string
	paras  []string
	tables []dTable
}

type dTable struct {
	caption string
	rows    [][]string
}

var (
	dLangRE    = regexp.MustCompile(`<html lang="([^"]*)">`)
	dH1RE      = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
	dParaRE    = regexp.MustCompile(`(?s)<p>(.*?)</p>`)
	dTableRE   = regexp.MustCompile(`(?s)<table>(.*?)</table>`)
	dCaptionRE = regexp.MustCompile(`(?s)<caption>(.*?)</caption>`)
	dRowRE     = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	dCellRE    = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
	dTagRE     = regexp.MustCompile(`<[^>]*>`)
)

func dText(s string) string {
	return strings.TrimSpace(html.UnescapeString(dTagRE.ReplaceAllString(s, "")))
}

func parseDoc(page string) dPage {
	var p dPage
	if m := dLangRE.FindStringSubmatch(page); m != nil {
		p.lang = m[1]
	}
	if m := dH1RE.FindStringSubmatch(page); m != nil {
		p.h1 = dText(m[1])
	}
	for _, m := range dParaRE.FindAllStringSubmatch(page, -1) {
		p.paras = append(p.paras, dText(m[1]))
	}
	for _, m := range dTableRE.FindAllStringSubmatch(page, -1) {
		var t dTable
		if c := dCaptionRE.FindStringSubmatch(m[1]); c != nil {
			t.caption = dText(c[1])
		}
		for _, r := range dRowRE.FindAllStringSubmatch(m[1], -1) {
			var cells []string
			for _, c := range dCellRE.FindAllStringSubmatch(r[1], -1) {
				cells = append(cells, dText(c[1]))
			}
			t.rows = append(t.rows, cells)
		}
		p.tables = append(p.tables, t)
	}
	return p
}

func (p dPage) para(substr string) bool {
	return slices.ContainsFunc(p.paras, func(s string) bool { return strings.Contains(s, substr) })
}

// dFetch gets a document link: status, headers, body, and the problem code.
func dFetch(rt *rapid.T, link string) (int, http.Header, string, string) {
	resp, err := http.Get(link)
	if err != nil {
		rt.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var prob struct {
		Code string `json:"code"`
	}
	if resp.StatusCode != 200 {
		json.Unmarshal(b, &prob)
	}
	return resp.StatusCode, resp.Header, string(b), prob.Code
}

// checkAll fetches every document of the order and compares it with the model.
func (x *docEnv) checkAll(rt *rapid.T, m *oOrder, got map[string]any, what string) {
	caps, _ := got["captured"].([]any)
	for i, v := range caps {
		x.checkDoc(rt, m, got, v.(map[string]any), x.caps[i], i, -1, what)
	}
	refs, _ := got["refunded"].([]any)
	for j, v := range refs {
		x.checkDoc(rt, m, got, v.(map[string]any), x.refs[j], -1, j, what)
	}
}

// checkDoc compares one document with the model: capture ci, or refund rj.
func (x *docEnv) checkDoc(rt *rapid.T, m *oOrder, got, sub map[string]any, is *dIssued, ci, rj int, what string) {
	rt.Helper()
	ctx := fmt.Sprintf("%s: document %s", what, is.ref)
	if sub["ledgerId"] != is.ledger || sub["documentReference"] != is.ref {
		rt.Fatalf("%s: sub-order %v numbered %v, was %s %s", ctx, sub["ledgerId"], sub["documentReference"], is.ledger, is.ref)
	}
	link, _ := sub["documentUrl"].(string)
	if link == "" {
		rt.Fatalf("%s: no documentUrl", ctx)
	}
	code, hdr, page, prob := dFetch(rt, link)
	if code != 200 {
		rt.Fatalf("%s: %d %s", ctx, code, prob)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(hdr.Get("Cache-Control"), "no-store") {
		rt.Fatalf("%s: Content-Type %q, Cache-Control %q", ctx, ct, hdr.Get("Cache-Control"))
	}
	p := parseDoc(page)
	L, W := x.lang, x.words
	if p.lang != L.tag {
		rt.Fatalf("%s: lang %q, the order's locale %s writes %s", ctx, p.lang, x.locale, L.tag)
	}
	var c *oCapture
	var lines []oLine
	var amount, vat int64
	var rates map[int64][2]int64
	key := ""
	title := W.CreditNote
	if ci >= 0 {
		c = m.captures[ci]
		lines, amount, vat, rates = c.lines, c.amount, c.vat, byRate(c.lines)
		title = W.Invoice
		if m.card {
			title = W.Receipt
		}
	} else {
		r := m.refunds[rj]
		amount, vat, rates = r.amount, r.vat, r.rates
		lines = r.lines
		if r.lines == nil {
			// decisions.md: one "remaining balance" line per VAT rate,
			// crediting exactly what is left there.
			for _, rate := range slices.Sorted(maps.Keys(r.rates)) {
				s := r.rates[rate]
				if s == [2]int64{} {
					continue
				}
				l := oLine{desc: "", qty: 1, vat: rate, vatAmount: s[1], excl: m.excl, total: s[0]}
				if m.excl {
					l.total = s[0] - s[1]
				}
				l.unit = l.total
				lines = append(lines, l)
			}
		}
	}
	// The heading, and the void mark.
	h1 := title + " " + is.ref
	if c != nil && c.voided {
		h1 += " " + W.VoidMark
	}
	if p.h1 != h1 {
		rt.Fatalf("%s: heading %q, model %q", ctx, p.h1, h1)
	}
	if got := p.para(W.VoidInvoice); got != (c != nil && c.voided) {
		rt.Fatalf("%s: says it is void: %v, model voided %v", ctx, got, c != nil && c.voided)
	}
	// The order, its merchant reference at issue, the date of issue.
	orderRef, _ := got["orderReference"].(string)
	date := L.day(is.at)
	var head string
	for _, s := range p.paras {
		if strings.Contains(s, "("+m.id+")") {
			head = s
		}
	}
	// The merchant reference as issued, "" for none (a later one set
	// after the issue does not show).
	// The due date closes it, on an invoice (decisions.md).
	due := ""
	if c != nil && !m.card {
		d := is.at.UTC()
		day := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
		if !m.advance {
			day = day.AddDate(0, 0, dTermDays)
		}
		due = " " + W.DueDate + " " + L.day(day) + "."
	}
	if head == "" || !strings.Contains(head, orderRef+" ("+m.id+")") || !strings.HasSuffix(head, ". "+W.Date+" "+date+"."+due) ||
		(is.merchantRef != "") != strings.Contains(head, W.MerchantReference) || is.merchantRef != "" && !strings.Contains(head, W.MerchantReference+" "+is.merchantRef+".") {
		rt.Fatalf("%s: order paragraph %q, model: order %s (%s), merchant reference %q, date %s, due %q", ctx, head, orderRef, m.id, is.merchantRef, date, due)
	}
	// Seller and buyer as issued.
	if !p.para(W.Seller + ": " + x.name) {
		rt.Fatalf("%s: no seller %q in %q", ctx, x.name, p.paras)
	}
	if !p.para(W.Buyer + ": " + is.buyerName + " " + is.buyerID) {
		rt.Fatalf("%s: buyer not %q %q in %q", ctx, is.buyerName, is.buyerID, p.paras)
	}
	hasAddr := p.para(W.BillingAddress + ": ")
	if hasAddr != (is.street != "") || is.street != "" && (!p.para(is.street) || !p.para(is.city)) {
		rt.Fatalf("%s: billing address issued with %q %q, the page says %q", ctx, is.street, is.city, p.paras)
	}
	if x.street != is.street && x.street != "" && p.para(x.street) {
		rt.Fatalf("%s: states the billing address %q edited in after its issue", ctx, x.street)
	}
	// A credit note names what it credits, and not the refund's note.
	if rj >= 0 {
		cap := x.caps[m.refunds[rj].of]
		// decisions.md: by number and date, an invoice's or a receipt's.
		credits := W.CreditsInvoiceFmt
		if m.card {
			credits = W.CreditsReceiptFmt
		}
		if credits = fmt.Sprintf(credits, cap.ref, L.day(cap.at)); !slices.Contains(p.paras, credits) {
			rt.Fatalf("%s: does not say %q: %q", ctx, credits, p.paras)
		}
		if strings.Contains(page, "damaged") {
			rt.Fatalf("%s: shows the refund's internal note", ctx)
		}
	}
	// The lines.
	if len(p.tables) < 2 {
		rt.Fatalf("%s: %d tables, want lines and VAT breakdown:\n%s", ctx, len(p.tables), page)
	}
	lt := p.tables[0]
	basis := W.InclVAT
	if m.excl {
		basis = W.ExclVAT
	}
	if len(lt.rows) != len(lines)+1 {
		rt.Fatalf("%s: %d line rows, model %d:\n%s", ctx, len(lt.rows)-1, len(lines), page)
	}
	hd := lt.rows[0]
	disc := len(hd) == 7
	if len(hd) != 6 && !disc || !strings.Contains(hd[2], basis) || !strings.Contains(hd[len(hd)-1], basis) {
		rt.Fatalf("%s: lines head %q, model basis %q", ctx, hd, basis)
	}
	for i, l := range lines {
		row := lt.rows[i+1]
		want := []string{l.desc, strconv.FormatInt(l.qty, 10), L.amount(l.unit)}
		if disc {
			want = append(want, L.amount(l.disc))
		} else if l.disc != 0 {
			rt.Fatalf("%s: line %d has a unit discount of %d, the page shows none: %q", ctx, i, l.disc, row)
		}
		want = append(want, L.amount(l.vat), L.amount(l.vatAmount), L.amount(l.total))
		if l.desc == "" {
			// A remaining-balance line: kassa's words, naming the rate.
			if len(row) > 0 && strings.Contains(row[0], L.amount(l.vat)) {
				want[0] = row[0]
			}
		}
		if !slices.Equal(row, want) {
			rt.Fatalf("%s: line %d reads %q, model %q", ctx, i, row, want)
		}
	}
	// The VAT breakdown: per rate, and the totals the sub-order's.
	vt := p.tables[1]
	if !strings.Contains(vt.caption, "(SEK)") {
		rt.Fatalf("%s: VAT breakdown caption %q names no currency", ctx, vt.caption)
	}
	var used []int64
	for _, l := range lines {
		if !slices.Contains(used, l.vat) {
			used = append(used, l.vat)
		}
	}
	if len(vt.rows) != len(used)+2 {
		rt.Fatalf("%s: %d VAT rows, model %d rates:\n%s", ctx, len(vt.rows)-2, len(used), page)
	}
	seen := map[string]bool{}
	for _, row := range vt.rows[1 : len(vt.rows)-1] {
		var rate int64 = -1
		for _, r := range used {
			if L.amount(r) == row[0] {
				rate = r
			}
		}
		if rate < 0 || seen[row[0]] {
			rt.Fatalf("%s: VAT row %q: no such rate among %v, or twice", ctx, row, used)
		}
		seen[row[0]] = true
		s := rates[rate]
		if want := []string{row[0], L.amount(s[0] - s[1]), L.amount(s[1]), L.amount(s[0])}; !slices.Equal(row, want) {
			rt.Fatalf("%s: VAT row %q, model %q", ctx, row, want)
		}
	}
	foot := vt.rows[len(vt.rows)-1]
	if want := []string{W.DocTotal, L.amount(amount - vat), L.amount(vat), L.amount(amount)}; !slices.Equal(foot, want) {
		rt.Fatalf("%s: VAT totals %q, model %q", ctx, foot, want)
	}
	// The sub-order says the same as its document.
	checkSub(rt, ctx, sub, amount, vat)
	// After its issue: payment status and recourse, on a live invoice.
	var want [][]string
	if c != nil && !m.card && !c.voided && (c.paid > 0 || c.recourse) {
		want = append(want, []string{W.Invoiced, L.amount(c.amount)})
		if cr := c.amount - func() int64 { a, _ := c.left(); return a }(); cr != 0 {
			want = append(want, []string{W.Credited, L.amount(cr)})
		}
		want = append(want, []string{W.Paid, L.amount(c.paid)})
		if o := c.owed(); o >= 0 {
			want = append(want, []string{W.Outstanding, L.amount(o)})
		} else {
			want = append(want, []string{W.DueToBuyer, L.amount(-o)})
		}
		key = fmt.Sprint(want, c.recourse)
	}
	if (want != nil) != (len(p.tables) == 3) || len(p.tables) > 3 {
		rt.Fatalf("%s: %d tables, model payment status %v:\n%s", ctx, len(p.tables), want, page)
	}
	if want != nil {
		if st := p.tables[2]; !slices.EqualFunc(st.rows, want, slices.Equal) {
			rt.Fatalf("%s: payment status %q, model %q", ctx, st.rows, want)
		}
	}
	if got := p.para(W.RecourseInvoice); got != (c != nil && c.recourse) {
		rt.Fatalf("%s: recourse notice %v, model %v", ctx, got, c != nil && c.recourse)
	}
	// Nothing else changes a page once issued.
	if c != nil {
		key += fmt.Sprint(c.voided)
	}
	if is.page != "" && is.key == key && is.page != page {
		rt.Fatalf("%s: the page changed with nothing after its issue changed:\nbefore:\n%s\nnow:\n%s", ctx, is.page, page)
	}
	is.page, is.key = page, key
	x.stats["document "+map[bool]string{true: "capture", false: "refund"}[c != nil]]++
}

// editAddress edits the buyer's billing address: documents issued before
// keep theirs, those issued after state it.
func (x *docEnv) editAddress(rt *rapid.T, m *oOrder) {
	x.addrs++
	street, city := fmt.Sprintf("Storgatan %d", x.addrs), fmt.Sprintf("Stad%d", x.addrs)
	a := x.sendKey("POST", "/v1/orders/"+m.id+"/customer", fmt.Sprintf(`{"billingAddress":{"streetAddress":%q,"postalCode":"11122","city":%q,"country":"SE"}}`, street, city), "")
	// TestOracle's rule for edit customer (decisions.md).
	live := slices.ContainsFunc(m.captures, func(c *oCapture) bool { return !c.voided })
	if (m.cancelled || m.expired() || len(m.uncaptured) == 0) && !live || m.denied {
		expect(rt, "edit address", a, 409, "action_not_available")
		return
	}
	expect(rt, "edit address", a, 200)
	x.stats["edit address 200"]++
	x.street, x.city = street, city
	m.events = append(m.events, oEvent{"editCustomer", 0})
	x.check(rt, "edit address", m, a.body)
	got := x.e.get(m.id)
	x.check(rt, "edit address (read)", m, got)
	x.checkAll(rt, m, got, "edit address")
}

// resend resends a document: offered on every live capture and every
// refund; it changes neither the order nor the page.
func (x *docEnv) resend(rt *rapid.T, m *oOrder) {
	type target struct {
		ledger  string
		offered bool
	}
	ts := []target{{m.uncLedger, false}}
	for i, c := range m.captures {
		ts = append(ts, target{x.caps[i].ledger, !c.voided})
	}
	for j := range m.refunds {
		ts = append(ts, target{x.refs[j].ledger, true})
	}
	t := rapid.SampledFrom(ts).Draw(rt, "resend")
	what := fmt.Sprintf("resend %s", t.ledger)
	a := x.sendKey("POST", "/v1/orders/"+m.id+"/document/"+t.ledger+"/resend", "", "")
	if !t.offered {
		expect(rt, what, a, 409, "action_not_available")
		x.stats["resend 409"]++
		return
	}
	expect(rt, what, a, 200)
	x.stats["resend 200"]++
	x.check(rt, what, m, a.body)
	got := x.e.get(m.id)
	x.check(rt, what+" (read)", m, got)
	x.checkAll(rt, m, got, what)
}

// badLinks: a link tampered with or expired is 403 document_link_invalid;
// one signed for another merchant's path, or for a sub-order without a
// document, is 404 (errors.md: unknown, or another merchant's).
func (x *docEnv) badLinks(rt *rapid.T, m *oOrder, got map[string]any) {
	base := x.e.srv.cfg.BaseURL
	signed := func(merchant, ledger string, exp int64) string {
		path := "/documents/" + url.PathEscape(merchant) + "/" + url.PathEscape(m.id) + "/" + url.PathEscape(ledger)
		e := strconv.FormatInt(exp, 10)
		return base + path + "?expires=" + e + "&signature=" + x.e.srv.sign("document", path+"?"+e)
	}
	later := time.Now().Add(time.Hour).Unix()
	try := func(what, link string, status int, codes ...string) {
		code, _, body, prob := dFetch(rt, link)
		if code != status || !slices.Contains(codes, prob) {
			rt.Fatalf("%s: %d %s, want %d %v: %s", what, code, prob, status, codes, body)
		}
		x.stats[fmt.Sprintf("link %s %d", strings.Fields(what)[0], code)]++
	}
	try("uncaptured sub-order", signed(x.merchant, m.uncLedger, later), 404, "document_not_found")
	try("unknown sub-order", signed(x.merchant, "nosuchledger", later), 404, "document_not_found", "ledger_not_found")
	if len(x.caps) == 0 {
		return
	}
	is := x.caps[rapid.IntRange(0, len(x.caps)-1).Draw(rt, "linkOf")]
	try("another merchant's path", signed(x.other, is.ledger, later), 404, "order_not_found", "document_not_found")
	try("expired link", signed(x.merchant, is.ledger, time.Now().Unix()-1), 403, "document_link_invalid")
	for _, v := range got["captured"].([]any) {
		sub := v.(map[string]any)
		if sub["ledgerId"] != is.ledger {
			continue
		}
		link := sub["documentUrl"].(string)
		u, _ := url.Parse(link)
		q := u.Query()
		// The same link with a later expiry, or pointing at another merchant.
		q.Set("expires", strconv.FormatInt(later+3600*24*365, 10))
		u.RawQuery = q.Encode()
		try("tampered expiry", u.String(), 403, "document_link_invalid")
		try("tampered merchant", strings.Replace(link, "/documents/"+url.PathEscape(x.merchant)+"/", "/documents/"+url.PathEscape(x.other)+"/", 1), 403, "document_link_invalid")
	}
}
