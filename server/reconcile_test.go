package server

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/internal/i18n"
)

// A month of a merchant's B2B trade, driven through the HTTP API only with a
// fixed seed, then reconciled as its finance team would from what the API
// gives it: orders, settlements and their transactions and CSV exports, and
// the documents behind them. Every action taken is one an order offers in its
// availableActions, so the month covers whatever the orders allow.
func TestMonthReconciles(t *testing.T) {
	if testing.Short() {
		t.Skip("a month of trade")
	}
	e := newSessionEnv(t)
	code, _, m := e.req("POST", "/sandbox/v1/merchants", `{"name":"Finance AB","feeBasisPoints":145,"feeFixedPerCapture":250}`, e.auth, nil)
	if code != 201 {
		t.Fatalf("merchant: %d %v", code, m)
	}
	mo := &month{e: e, t: t, auth: basic(m["clientId"].(string), m["clientSecret"].(string)), rng: rand.New(rand.NewPCG(monthSeed, 11)),
		caps: map[string]*capRec{}, refsAt: map[string][2]string{}, orders: map[string]*ordRec{}}
	mo.call("POST", "/sandbox/v1/clock", `{"set":"2031-03-01T07:00:00Z"}`, 200)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer hook.Close()
	mo.call("PUT", "/v1/notification-settings", `{"url":"`+hook.URL+`/hooks","events":["order.*"]}`, 200)

	for day := 0; day < 30; day++ {
		for range 6 {
			mo.newOrder()
		}
		for range 14 {
			mo.act()
		}
		mo.call("POST", "/sandbox/v1/clock", `{"advance":"24h"}`, 200)
		mo.call("POST", "/sandbox/v1/jobs/tasks", "", 200)
		mo.call("POST", "/sandbox/v1/jobs/expire", "", 200)
		if day < 29 { // the last day stays queued, to be derived
			mo.call("POST", "/sandbox/v1/settlements/run", "", 200)
		}
	}
	t.Logf("%d orders, %d captures, actions %v", len(mo.orders), len(mo.caps), mo.done)
	mo.reconcile()
}

var monthSeed uint64 = 12 // a month that sets references before voids and recourses

func init() {
	if v, err := strconv.ParseUint(os.Getenv("RECON_SEED"), 10, 64); err == nil {
		monthSeed = v
	}
}

type month struct {
	e      *sessionEnv
	t      *testing.T
	auth   string
	rng    *rand.Rand
	orders map[string]*ordRec
	ids    []string
	caps   map[string]*capRec   // by capture ledger id
	refsAt map[string][2]string // ledger id → the order's references when it was made
	done   map[string]int
}

type ordRec struct {
	id, currency, store, pm, mode string
	locale                        string
	ref, sref                     string // the references now
	refs                          int
}

// capRec is what the merchant knows of one capture from its own actions.
type capRec struct {
	order, ledger string
	amount        int64
	refunds       []string // ledger ids of its refunds
	refunded      int64
	paid          int64
	recoursed     bool
	claim         int64 // K at the recourse
	sinceRecourse int64 // refunded after the recourse
	voided        bool
}

func (mo *month) call(method, path, body string, want int) map[string]any {
	mo.t.Helper()
	code, _, b := mo.e.req(method, path, body, mo.auth, nil)
	if code != want {
		mo.t.Fatalf("%s %s %s: %d %v, want %d", method, path, body, code, b, want)
	}
	return b
}

func (mo *month) count(what string) {
	if mo.done == nil {
		mo.done = map[string]int{}
	}
	mo.done[what]++
}

var (
	monthCountries = []struct{ country, currency, locale, company string }{
		{"SE", "SEK", "sv-SE", "5560000001"}, {"FI", "EUR", "fi-FI", "1000001-1"}, {"SE", "SEK", "sv-SE", "5560000027"},
		{"DK", "DKK", "da-DK", "10000001"}, {"FI", "EUR", "fi-FI", "1000001-1"},
	}
	monthMethods = []string{"invoice", "invoice", "invoice", "card", "partPayment", "advanceInvoice", "bankTransfer", "paypal"}
	monthRates   = []int{2500, 1200, 600, 0, 2400, 1400}
)

func (mo *month) newOrder() {
	r := mo.rng
	c := monthCountries[r.IntN(len(monthCountries))]
	pm := monthMethods[r.IntN(len(monthMethods))]
	tok := mo.call("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":%q,"currency":%q,"locale":%q,"customer":{"companyId":%q},"paymentMethod":{"type":%q}}`,
		c.country, c.currency, c.locale, c.company, pm), 201)["authorizationToken"].(string)
	mode := "inclVat"
	if r.IntN(3) == 0 {
		mode = "exclVat"
	}
	var ls []string
	for i := range 1 + r.IntN(4) {
		ls = append(ls, fmt.Sprintf(`{"description":"Item %d","reference":"SKU-%d","quantity":%d,"unitPrice":%d,"vat":%d}`,
			i, r.IntN(1000), 1+r.IntN(5), 100+r.IntN(200000), monthRates[r.IntN(len(monthRates))]))
	}
	if r.IntN(5) == 0 {
		ls = append(ls, `{"description":"Freight","quantity":1,"unitPrice":9900,"vat":2500,"type":"shippingFee"}`)
	}
	auto := ""
	if r.IntN(10) == 0 {
		auto = `"autoCapture":{"enabled":true,"delayMinutes":120},`
	}
	store := fmt.Sprintf("store-%d", r.IntN(3))
	n := len(mo.ids)
	id := mo.call("POST", "/v1/authorization-tokens/"+tok+"/order", fmt.Sprintf(`{"country":%q,"currency":%q,"locale":%q,"vatMode":%q,%s
		"reference":"PO-%d","settlementReference":"SR-%d","storeId":%q,"orderLines":[%s]}`,
		c.country, c.currency, c.locale, mode, auto, n, n, store, strings.Join(ls, ",")), 200)["orderId"].(string)
	mo.orders[id] = &ordRec{id: id, currency: c.currency, locale: c.locale, store: store, pm: pm, mode: mode, ref: fmt.Sprintf("PO-%d", n), sref: fmt.Sprintf("SR-%d", n)}
	mo.ids = append(mo.ids, id)
	o := mo.call("GET", "/v1/orders/"+id, "", 200)
	if slices.Contains(strList(o["status"]), "unacknowledged") && r.IntN(4) != 0 {
		mo.call("POST", "/v1/orders/"+id+"/acknowledge", "", 200)
	}
}

func strList(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func i64(v any) int64 { return int64(v.(float64)) }

// gross is a line's amount including VAT.
func gross(mode string, l map[string]any) int64 {
	if mode == "exclVat" {
		return i64(l["totalAmount"]) + i64(l["totalVatAmount"])
	}
	return i64(l["totalAmount"])
}

// act takes one offered action on a random order, recent ones more often.
func (mo *month) act() {
	r := mo.rng
	n := len(mo.ids)
	k := n - 1 - r.IntN(min(n, 25))
	if r.IntN(4) == 0 {
		k = r.IntN(n)
	}
	or := mo.orders[mo.ids[k]]
	id := or.id
	o := mo.call("GET", "/v1/orders/"+id, "", 200)
	mo.sweepCaptures(o)
	if r.IntN(10) == 0 {
		or.refs++
		ref, sref := fmt.Sprintf("PO-%d-%d", k, or.refs), fmt.Sprintf("=SR-%d-%d", k, or.refs)
		code, _, b := mo.e.req("POST", "/v1/orders/"+id+"/reference", fmt.Sprintf(`{"reference":%q,"settlementReference":%q}`, ref, sref), mo.auth, nil)
		if code != 200 {
			mo.count("setReference refused " + fmt.Sprint(b["code"]))
			return
		}
		mo.count("setReference")
		or.ref, or.sref = ref, sref
		return
	}
	type choice struct {
		sub    map[string]any
		action string
	}
	var cs []choice
	unc := o["uncaptured"].(map[string]any)
	for _, a := range actions(unc) {
		cs = append(cs, choice{unc, a})
	}
	for _, c := range o["captured"].([]any) {
		c := c.(map[string]any)
		for _, a := range actions(c) {
			cs = append(cs, choice{c, a})
		}
		if mo.payable(or, c) {
			cs = append(cs, choice{c, "pay"})
		}
	}
	cs = slices.DeleteFunc(cs, func(c choice) bool {
		return c.action == "editCustomer" || c.action == "resendOrderInvoice" || c.action == "editPaymentMethod" || c.action == "acknowledge"
	})
	if len(cs) == 0 {
		return
	}
	c := cs[r.IntN(len(cs))]
	if c.action == "cancel" || c.action == "editOrder" || c.action == "extendOrderExpiry" {
		c = cs[r.IntN(len(cs))] // rarer than money moving
	}
	mo.count(c.action)
	ledger, _ := c.sub["ledgerId"].(string)
	base := "/v1/orders/" + id
	switch c.action {
	case "capture":
		o = mo.call("POST", base+"/capture", "", 200)
		mo.noteCaptures(o)
	case "partialCapture":
		ls := lines(unc)
		if len(ls) == 0 {
			return
		}
		l := ls[r.IntN(len(ls))].(map[string]any)
		if r.IntN(3) == 0 && len(ls) > 1 {
			// Captured without id, then the line edited away, as the spec says.
			body := fmt.Sprintf(`{"orderLines":[{"description":%q,"quantity":%v,"unitPrice":%v,"vat":%v}],"totalCaptureAmount":%v}`,
				l["description"], l["quantity"], l["unitPrice"], l["vat"], l["totalAmount"])
			code, _, b := mo.e.req("POST", base+"/partialcapture", body, mo.auth, nil)
			if code != 200 {
				mo.count("partialCaptureWithoutId refused " + b["code"].(string))
				return
			}
			mo.noteCaptures(b)
			mo.editWithout(or, b["uncaptured"].(map[string]any), l["id"].(string))
			return
		}
		o = mo.call("POST", base+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":%v}`, l["id"], l["totalAmount"]), 200)
		mo.noteCaptures(o)
	case "cancel":
		mo.call("DELETE", base, "", 200)
	case "editOrder":
		ls := lines(unc)
		if len(ls) < 2 {
			return
		}
		mo.editWithout(or, unc, ls[r.IntN(len(ls))].(map[string]any)["id"].(string))
	case "extendOrderExpiry":
		mo.call("POST", base+"/extendexpiry", "", 200)
	case "refund":
		before := len(o["refunded"].([]any))
		o = mo.call("POST", base+"/refund/"+ledger, "", 200)
		mo.noteRefund(o, ledger, before)
	case "partialRefund":
		cr := mo.caps[ledger]
		left := cr.amount - cr.refunded
		if left < 400 {
			return
		}
		// Goodwill at a rate the capture may not have.
		rate := monthRates[r.IntN(len(monthRates))]
		amt := 100 + r.Int64N(left/4)
		body := fmt.Sprintf(`{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":%d,"vat":%d}],"totalRefundAmount":%d,"note":"day"}`, amt, rate, amt)
		before := len(o["refunded"].([]any))
		code, _, b := mo.e.req("POST", base+"/partialrefund/"+ledger, body, mo.auth, nil)
		if code != 200 {
			mo.count("partialRefund refused " + b["code"].(string))
			return
		}
		mo.noteRefund(b, ledger, before)
	case "void":
		mo.call("DELETE", base+"/"+ledger, "", 200)
		mo.caps[ledger].voided = true
	case "recourseOrderInvoice":
		cr := mo.caps[ledger]
		mo.call("POST", base+"/recourse/"+ledger, `{"reason":"unpaid"}`, 200)
		cr.recoursed = true
		cr.claim = cr.amount - cr.refunded - cr.paid
	case "pay":
		cr := mo.caps[ledger]
		owed := cr.amount - cr.refunded - cr.paid
		amt := owed
		if r.IntN(2) == 0 {
			amt = 1 + r.Int64N(owed)
		}
		code, _, b := mo.e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+ledger+"/payments", fmt.Sprintf(`{"amount":%d}`, amt), mo.auth, nil)
		if code != 200 {
			mo.count("pay refused " + fmt.Sprint(b["code"]))
			return
		}
		cr.paid += amt
	default:
		mo.count("unhandled " + c.action)
	}
}

// payable says whether the sandbox buyer can still pay on capture c.
func (mo *month) payable(or *ordRec, c map[string]any) bool {
	if or.pm == "card" || or.pm == "paypal" {
		return false
	}
	cr := mo.caps[c["ledgerId"].(string)]
	return cr != nil && !cr.voided && !cr.recoursed && cr.amount-cr.refunded-cr.paid > 0
}

func (mo *month) editWithout(or *ordRec, unc map[string]any, lineID string) {
	var ls []string
	var tot, vat int64
	for _, l := range lines(unc) {
		l := l.(map[string]any)
		if l["id"] == lineID {
			continue
		}
		ls = append(ls, fmt.Sprintf(`{"description":%q,"quantity":%v,"unitPrice":%v,"vat":%v,"totalAmount":%v,"totalVatAmount":%v}`,
			l["description"], l["quantity"], l["unitPrice"], l["vat"], l["totalAmount"], l["totalVatAmount"]))
		tot += gross(or.mode, l)
		vat += i64(l["totalVatAmount"])
	}
	body := fmt.Sprintf(`{"orderLines":[%s],"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":%d}`, strings.Join(ls, ","), tot, tot-vat, vat)
	code, _, b := mo.e.req("POST", "/v1/orders/"+or.id, body, mo.auth, nil)
	if code != 200 {
		mo.count("edit refused " + fmt.Sprint(b["code"]))
		return
	}
	mo.count("edit")
}

func (mo *month) noteCaptures(o map[string]any) {
	for _, c := range o["captured"].([]any) {
		c := c.(map[string]any)
		id := c["ledgerId"].(string)
		if mo.caps[id] == nil {
			or := mo.orders[o["id"].(string)]
			mo.refsAt[id] = [2]string{or.ref, or.sref}
			mo.caps[id] = &capRec{order: o["id"].(string), ledger: id, amount: i64(c["totalOrderAmount"].(map[string]any)["minorUnits"])}
		}
	}
}

func (mo *month) noteRefund(o map[string]any, capID string, before int) {
	rs := o["refunded"].([]any)
	if len(rs) != before+1 {
		mo.t.Fatalf("refund made %d sub-orders", len(rs)-before)
	}
	rf := rs[len(rs)-1].(map[string]any)
	amt := i64(rf["totalOrderAmount"].(map[string]any)["minorUnits"])
	cr := mo.caps[capID]
	or := mo.orders[cr.order]
	mo.refsAt[rf["ledgerId"].(string)] = [2]string{or.ref, or.sref}
	cr.refunds = append(cr.refunds, rf["ledgerId"].(string))
	cr.refunded += amt
	if cr.recoursed {
		cr.sinceRecourse += amt
	}
}

// sweepCaptures picks up captures the merchant did not make itself
// (auto-capture).
func (mo *month) sweepCaptures(o map[string]any) {
	for _, c := range o["captured"].([]any) {
		c := c.(map[string]any)
		if mo.caps[c["ledgerId"].(string)] == nil {
			mo.count("capture by the server")
		}
	}
	mo.noteCaptures(o)
}

type settled struct {
	s   map[string]any
	txs []map[string]any
}

func (mo *month) settlements() []settled {
	var out []settled
	from := ""
	for range 100 {
		b := mo.call("GET", "/v1/settlements?size=50"+from, "", 200)
		for _, s := range b["settlements"].([]any) {
			s := s.(map[string]any)
			var txs []map[string]any
			txFrom := ""
			for range 100 {
				tb := mo.call("GET", "/v1/settlements/"+s["id"].(string)+"/tx?size=7"+txFrom, "", 200)
				for _, x := range tb["transactions"].([]any) {
					txs = append(txs, x.(map[string]any))
				}
				next, _ := tb["nextFromId"].(string)
				if next == "" {
					break
				}
				txFrom = "&fromId=" + url.QueryEscape(next)
			}
			out = append(out, settled{s, txs})
		}
		next, _ := b["nextFromId"].(string)
		if next == "" {
			break
		}
		from = "&fromId=" + url.QueryEscape(next)
	}
	return out
}

func mu(v any) int64 { return i64(v.(map[string]any)["minorUnits"]) }

func (mo *month) reconcile() {
	t := mo.t
	errs := 0
	fail := func(format string, a ...any) {
		t.Helper()
		if errs++; errs <= 40 {
			t.Errorf(format, a...)
		}
	}
	// The orders as the API has them now.
	all := map[string]map[string]any{}
	for _, id := range mo.ids {
		o := mo.call("GET", "/v1/orders/"+id, "", 200)
		all[id] = o
		mo.sweepCaptures(o)
	}

	// Per settlement.
	ss := mo.settlements()
	before := len(ss)
	txByLedger := map[string][]map[string]any{} // capture, fee, adjustment, recourse by capture ledger; refund by refund ledger
	seenTx := map[string]bool{}
	refs := map[int]bool{}
	for _, st := range ss {
		s := st.s
		var sum, gross, ref, fee, adj, rec int64
		for _, x := range st.txs {
			a := mu(x["amount"])
			sum += a
			if seenTx[x["id"].(string)] {
				fail("settlement %s: transaction %s twice", s["reference"], x["id"])
			}
			seenTx[x["id"].(string)] = true
			switch x["type"] {
			case "capture":
				gross += a
			case "refund":
				ref -= a
			case "fee":
				fee -= a
			case "adjustment":
				adj -= a
			case "recourse":
				rec -= a
			}
			key := x["ledgerId"].(string) + "/" + x["type"].(string)
			txByLedger[x["ledgerId"].(string)] = append(txByLedger[x["ledgerId"].(string)], x)
			o := all[x["orderId"].(string)]
			if o == nil {
				fail("settlement %s: tx %s of an unknown order", s["reference"], key)
				continue
			}
			if o["storeId"] != s["storeId"] || mu(o["orderAmount"]) != 0 && o["orderAmount"].(map[string]any)["currency"] != s["currency"] {
				fail("settlement %s (%s %s) holds a tx of order %s (%s)", s["reference"], s["storeId"], s["currency"], o["id"], o["storeId"])
			}
			if x["amount"].(map[string]any)["currency"] != s["currency"] {
				fail("settlement %s: tx %s in %v", s["reference"], key, x["amount"])
			}
			if at := mo.refsAt[x["ledgerId"].(string)]; x["merchantReference"] != at[0] || x["settlementReference"] != at[1] {
				fail("settlement %s: tx %s references %v/%v, made under %v", s["reference"], key, x["merchantReference"], x["settlementReference"], at)
			}
			if !mo.docMatches(o, x) {
				fail("settlement %s: tx %s documentReference %v matches no sub-order", s["reference"], key, x["documentReference"])
			}
		}
		if sum != mu(s["netAmount"]) {
			fail("settlement %s: transactions sum to %d, net %d", s["reference"], sum, mu(s["netAmount"]))
		}
		if gross != mu(s["grossAmount"]) || ref != mu(s["refundAmount"]) || fee != mu(s["feeAmount"]) || adj != mu(s["adjustmentAmount"]) || rec != mu(s["recourseAmount"]) {
			fail("settlement %s: totals %v/%v/%v/%v/%v, transactions give %d/%d/%d/%d/%d", s["reference"], mu(s["grossAmount"]), mu(s["refundAmount"]),
				mu(s["feeAmount"]), mu(s["adjustmentAmount"]), mu(s["recourseAmount"]), gross, ref, fee, adj, rec)
		}
		if gross-ref-fee-adj-rec != mu(s["netAmount"]) {
			fail("settlement %s: net is not gross − refunds − fees − adjustments − recourses", s["reference"])
		}
		if int(i64(s["transactionCount"])) != len(st.txs) {
			fail("settlement %s: transactionCount %v, %d transactions", s["reference"], s["transactionCount"], len(st.txs))
		}
		n, err := strconv.Atoi(strings.TrimPrefix(s["reference"].(string), "S-"))
		if err != nil || refs[n] {
			fail("settlement reference %v", s["reference"])
		}
		refs[n] = true
		mo.checkCSV(st, fail)
		mo.checkPeriod(st, fail)
	}
	mo.checkSettlementFilters(ss, fail)
	for i := 1; i <= len(refs); i++ {
		if !refs[i] {
			fail("settlement references have a gap at %d of %d", i, len(refs))
		}
	}

	// What is still queued, derived from the orders, is what the next run settles.
	queued := mo.expected(txByLedger)
	mo.call("POST", "/sandbox/v1/settlements/run", "", 200)
	ss = mo.settlements()
	if len(ss) == before {
		t.Fatalf("the last day made no settlement")
	}
	last := map[string]int64{}
	for _, st := range ss[:len(ss)-before] { // newest first
		for _, x := range st.txs {
			if x["type"] != "fee" {
				last[capOf(mo, x)] += mu(x["amount"])
			}
			txByLedger[x["ledgerId"].(string)] = append(txByLedger[x["ledgerId"].(string)], x)
		}
	}
	for capID, want := range queued {
		if last[capID] != want {
			fail("capture %s (order %s): derived queue %d, last settlement paid %d", capID, mo.caps[capID].order, want, last[capID])
		}
	}
	for capID, got := range last {
		if _, ok := queued[capID]; !ok && got != 0 {
			fail("capture %s: last settlement paid %d, nothing derived queued", capID, got)
		}
	}

	// Over all settlements, per capture: captured − refunded − claim still held; fees by formula.
	for capID, cr := range mo.caps {
		var paid, fees int64
		var settledCapture bool
		for _, x := range mo.capTxs(txByLedger, cr) {
			switch x["type"] {
			case "fee":
				fees -= mu(x["amount"])
			case "capture":
				settledCapture = true
				paid += mu(x["amount"])
			default:
				paid += mu(x["amount"])
			}
		}
		want := cr.want()
		if paid != want {
			fail("capture %s (order %s %s): paid out %d, want %d (%+v)", capID, cr.order, mo.orders[cr.order].pm, paid, want, *cr)
		}
		wantFee := int64(0)
		if settledCapture {
			wantFee = divRound(cr.amount*145, 10000) + 250
		} else if !cr.voided {
			fail("capture %s never settled", capID)
		}
		if fees != wantFee {
			fail("capture %s: fees %d, want %d", capID, fees, wantFee)
		}
	}

	kinds := map[string]int{}
	for _, xs := range txByLedger {
		for _, x := range xs {
			kinds[x["type"].(string)+"/"+x["amount"].(map[string]any)["currency"].(string)]++
		}
	}
	t.Logf("%d settlements, transactions %v", len(ss), kinds)
	mo.checkOrders(all, fail)
	mo.checkEvents(all, fail)
	mo.checkNotifications(all, fail)
	mo.checkDocuments(all, txByLedger, fail)
}

func divRound(a, b int64) int64 {
	if a >= 0 {
		return (a + b/2) / b
	}
	return -((-a + b/2) / b)
}

// want is what a capture pays the merchant over all settlements, fees aside.
func (cr *capRec) want() int64 {
	if cr.voided {
		return 0
	}
	held := int64(0)
	if cr.recoursed {
		held = max(0, cr.claim-cr.sinceRecourse)
	}
	return cr.amount - cr.refunded - held
}

func capOf(mo *month, x map[string]any) string {
	id := x["ledgerId"].(string)
	if mo.caps[id] != nil {
		return id
	}
	for cid, cr := range mo.caps {
		if slices.Contains(cr.refunds, id) {
			return cid
		}
	}
	return "?" + id
}

func (mo *month) capTxs(by map[string][]map[string]any, cr *capRec) []map[string]any {
	out := slices.Clone(by[cr.ledger])
	for _, r := range cr.refunds {
		out = append(out, by[r]...)
	}
	return out
}

// expected is, per capture, what is still to be paid (fees aside): what it
// pays over all settlements less what settlements paid so far.
func (mo *month) expected(by map[string][]map[string]any) map[string]int64 {
	out := map[string]int64{}
	for id, cr := range mo.caps {
		var paid int64
		for _, x := range mo.capTxs(by, cr) {
			if x["type"] != "fee" {
				paid += mu(x["amount"])
			}
		}
		if d := cr.want() - paid; d != 0 {
			out[id] = d
		}
	}
	return out
}

func (mo *month) docMatches(o map[string]any, x map[string]any) bool {
	var subs []any
	subs = append(subs, o["captured"].([]any)...)
	subs = append(subs, o["refunded"].([]any)...)
	for _, s := range subs {
		s := s.(map[string]any)
		if s["ledgerId"] == x["ledgerId"] {
			return s["documentReference"] == x["documentReference"]
		}
	}
	return false
}

func (mo *month) checkCSV(st settled, fail func(string, ...any)) {
	resp, err := httpGet(mo.e.ts.URL+"/v1/settlements/"+st.s["id"].(string)+"/export.csv", mo.auth)
	if err != nil {
		mo.t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(resp)).ReadAll()
	if err != nil {
		fail("settlement %s csv: %v", st.s["reference"], err)
		return
	}
	if len(rows) != len(st.txs)+2 {
		fail("settlement %s: %d csv rows for %d transactions", st.s["reference"], len(rows)-2, len(st.txs))
		return
	}
	for i, x := range st.txs {
		row := rows[i+1]
		cell := func(v any) string {
			s, _ := v.(string)
			if s != "" && strings.ContainsAny(s[:1], "=+-@\t\r") {
				return "'" + s
			}
			return s
		}
		if row[7] != cell(x["merchantReference"]) || row[10] != cell(x["settlementReference"]) || row[4] != x["orderId"] {
			fail("settlement %s: csv row %v, tx references %v/%v", st.s["reference"], row, x["merchantReference"], x["settlementReference"])
		}
		if row[2] != x["type"] || row[5] != x["ledgerId"] || row[8] != x["amount"].(map[string]any)["amount"] || row[6] != x["documentReference"] || row[1] != strconv.Itoa(i+1) {
			fail("settlement %s: csv row %v, tx %v", st.s["reference"], row, x)
		}
	}
	net := rows[len(rows)-1]
	if net[2] != "net" || net[8] != st.s["netAmount"].(map[string]any)["amount"] {
		fail("settlement %s: csv net row %v, net %v", st.s["reference"], net, st.s["netAmount"])
	}
}

func httpGet(u, auth string) (string, error) {
	r, _ := http.NewRequest("GET", u, nil)
	r.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b), err
}

var orderStatuses = []string{"partiallyCaptured", "fullyCaptured", "partiallyRefunded", "fullyRefunded", "uncaptured", "onHold", "readyForCapture",
	"fraudDeny", "cancelled", "unacknowledged", "expired", "partiallyPaid", "fullyPaid", "invoiceDeliveryFailure"}

func (mo *month) checkOrders(all map[string]map[string]any, fail func(string, ...any)) {
	for id, o := range all {
		capd, unc, refd, amt := mu(o["capturedAmount"]), mu(o["uncapturedAmount"]), mu(o["refundedAmount"]), mu(o["orderAmount"])
		st := strList(o["status"])
		var sumCap, sumRef, sumVoid int64
		for _, c := range o["captured"].([]any) {
			c := c.(map[string]any)
			sumCap += mu(c["totalOrderAmount"])
			if slices.Contains(strList(c["status"]), "void") {
				sumVoid += mu(c["totalOrderAmount"])
			}
		}
		for _, r := range o["refunded"].([]any) {
			sumRef += mu(r.(map[string]any)["totalOrderAmount"])
		}
		if refd > capd || refd != sumRef {
			fail("order %s: refunded %d, captured %d, refund sub-orders %d", id, refd, capd, sumRef)
		}
		if capd != sumCap && capd != sumCap-sumVoid {
			fail("order %s: capturedAmount %d, captures %d (voided %d)", id, capd, sumCap, sumVoid)
		}
		if mu(o["uncaptured"].(map[string]any)["totalOrderAmount"]) != unc {
			fail("order %s: uncapturedAmount %d, uncaptured sub-order %v", id, unc, mu(o["uncaptured"].(map[string]any)["totalOrderAmount"]))
		}
		cancelled := slices.Contains(st, "cancelled") || slices.Contains(st, "expired")
		if !cancelled && amt < capd+unc {
			fail("order %s: orderAmount %d < captured %d + uncaptured %d (%v)", id, amt, capd, unc, st)
		}
		has := func(s string) bool { return slices.Contains(st, s) }
		if has("fullyCaptured") && (unc != 0 || capd == 0) || has("partiallyCaptured") && (capd == 0 || unc == 0 && !cancelled) {
			fail("order %s: %v with captured %d uncaptured %d", id, st, capd, unc)
		}
		if has("fullyRefunded") && refd != capd || has("partiallyRefunded") && (refd == 0 || refd == capd && len(lines(o["uncaptured"])) == 0) || refd > 0 && !has("fullyRefunded") && !has("partiallyRefunded") {
			fail("order %s: %v with captured %d refunded %d", id, st, capd, refd)
		}
		// uncaptured says lines are left to capture, captured or not.
		if has("uncaptured") != (len(lines(o["uncaptured"])) > 0) {
			fail("order %s: %v with uncaptured lines %v", id, st, lines(o["uncaptured"]))
		}
		_ = amt
	}
	// List filters find exactly the orders they should.
	for _, s := range orderStatuses {
		want := map[string]bool{}
		for id, o := range all {
			if slices.Contains(strList(o["status"]), s) {
				want[id] = true
			}
		}
		got := mo.list("status=" + s)
		if !sameSet(got, want) {
			fail("list status=%s: %d orders, want %d (%v)", s, len(got), len(want), diffSet(got, want))
		}
	}
	for i := range 3 {
		store := fmt.Sprintf("store-%d", i)
		want := map[string]bool{}
		for id, o := range all {
			if o["storeId"] == store {
				want[id] = true
			}
		}
		if got := mo.list("storeId=" + store); !sameSet(got, want) {
			fail("list storeId=%s: %d orders, want %d", store, len(got), len(want))
		}
	}
	from, to := time.Date(2031, 3, 10, 0, 0, 0, 0, time.UTC), time.Date(2031, 3, 17, 0, 0, 0, 0, time.UTC)
	want := map[string]bool{}
	for id, o := range all {
		c, _ := time.Parse(time.RFC3339Nano, o["createdAt"].(string))
		if !c.Before(from) && c.Before(to) {
			want[id] = true
		}
	}
	if got := mo.list("createdFrom=" + from.Format(time.RFC3339) + "&createdTo=" + to.Format(time.RFC3339)); !sameSet(got, want) || len(want) == 0 {
		fail("list createdFrom/To: %d orders, want %d", len(got), len(want))
	}
}

func sameSet(a, b map[string]bool) bool { return len(diffSet(a, b)) == 0 }

func diffSet(a, b map[string]bool) []string {
	var d []string
	for k := range a {
		if !b[k] {
			d = append(d, "+"+k)
		}
	}
	for k := range b {
		if !a[k] {
			d = append(d, "-"+k)
		}
	}
	sort.Strings(d)
	return d
}

func (mo *month) list(q string) map[string]bool {
	out := map[string]bool{}
	cursor := ""
	for range 100 {
		b := mo.call("GET", "/v1/orders?size=40&"+q+cursor, "", 200)
		for _, o := range b["orders"].([]any) {
			out[o.(map[string]any)["id"].(string)] = true
		}
		next, _ := b["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(next)
	}
	return out
}

var (
	vatRowRe = regexp.MustCompile(`<tr><td>([0-9.,]+)</td><td class="n">(-?[0-9,.\x{a0}]+)</td><td class="n">(-?[0-9,.\x{a0}]+)</td><td class="n">(-?[0-9,.\x{a0}]+)</td></tr>`)
	docTitle = regexp.MustCompile(`<title>([^<]*)</title>`)
)

// credits matches the sentence of a credit note in t's words that names
// what it credits.
func credits(t *i18n.Texts) *regexp.Regexp {
	head := func(f string) string { h, _, _ := strings.Cut(f, "%s"); return regexp.QuoteMeta(h) }
	return regexp.MustCompile(`(?:` + head(t.CreditsInvoiceFmt) + `|` + head(t.CreditsReceiptFmt) + `)([A-Z]+-[0-9]+)`)
}

// minorIn reads an amount as t writes it.
func minorIn(t *i18n.Texts, s string) int64 {
	return minorOf(strings.ReplaceAll(strings.ReplaceAll(s, t.Group, ""), t.Point, "."))
}

func minorOf(s string) int64 {
	s = strings.ReplaceAll(s, ",", "")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	w, f, _ := strings.Cut(s, ".")
	a, _ := strconv.ParseInt(w, 10, 64)
	b, _ := strconv.ParseInt(f, 10, 64)
	v := a*100 + b
	if neg {
		return -v
	}
	return v
}

// checkDocuments reads every invoice, receipt and credit note: numbers gapless
// per merchant, VAT per rate on the page equal to the sub-order's, credit notes
// naming their invoice, and VAT over invoices − credit notes equal to the VAT
// of what is captured (not voided) less what is refunded.
func (mo *month) checkDocuments(all map[string]map[string]any, by map[string][]map[string]any, fail func(string, ...any)) {
	series := map[string][]int{}
	docVAT := map[string]int64{} // currency/rate → VAT on pages, invoices less credit notes
	subVAT := map[string]int64{}
	for capID, cr := range mo.caps {
		o := all[cr.order]
		or := mo.orders[cr.order]
		var c map[string]any
		for _, x := range o["captured"].([]any) {
			if x.(map[string]any)["ledgerId"] == capID {
				c = x.(map[string]any)
			}
		}
		if c == nil {
			fail("capture %s gone from order %s", capID, cr.order)
			continue
		}
		subs := []map[string]any{c}
		for _, x := range o["refunded"].([]any) {
			if slices.Contains(cr.refunds, x.(map[string]any)["ledgerId"].(string)) {
				subs = append(subs, x.(map[string]any))
			}
		}
		for i, s := range subs {
			ref, _ := s["documentReference"].(string)
			p, n, ok := strings.Cut(ref, "-")
			num, err := strconv.Atoi(n)
			if !ok || err != nil {
				fail("order %s sub-order %s: document reference %q", cr.order, s["ledgerId"], ref)
				continue
			}
			series[p] = append(series[p], num)
			code, _, page := fetchPage(mo.t, s["documentUrl"].(string))
			if code != 200 {
				fail("document %s: %d", ref, code)
				continue
			}
			// The document is in the order's language: the month's
			// orders are Swedish, Finnish and Danish.
			t := i18n.For(i18n.Language(or.locale))
			if !strings.Contains(page, `<html lang="`+t.Tag+`">`) {
				fail("document %s of a %s order is not in %s", ref, or.locale, t.Tag)
			}
			if tm := docTitle.FindStringSubmatch(page); tm == nil || !strings.HasSuffix(strings.TrimSuffix(tm[1], " "+t.VoidMark), ref) {
				fail("document %s titled %v", ref, tm)
			}
			if at := mo.refsAt[s["ledgerId"].(string)]; !strings.Contains(page, t.MerchantReference+" "+at[0]+".") {
				fail("document %s does not show the reference %q it was issued under", ref, at[0])
			}
			sign := int64(1)
			if i > 0 {
				sign = -1
				if m := credits(t).FindStringSubmatch(page); m == nil || m[1] != c["documentReference"] {
					fail("credit note %s names %v, credits %v", ref, m, c["documentReference"])
				}
			}
			voided := slices.Contains(strList(s["status"]), "void")
			perRate := map[int64]int64{}
			for _, l := range lines(s) {
				l := l.(map[string]any)
				perRate[i64(l["vat"])] += i64(l["totalVatAmount"])
			}
			pageRate := map[int64]int64{}
			for _, m := range vatRowRe.FindAllStringSubmatch(page, -1) {
				pageRate[minorIn(t, m[1])] += minorIn(t, m[3])
			}
			for k, v := range perRate {
				if v == 0 {
					delete(perRate, k)
				}
			}
			for k, v := range pageRate {
				if v == 0 {
					delete(pageRate, k)
				}
			}
			if fmt.Sprint(perRate) != fmt.Sprint(pageRate) {
				fail("document %s (%s): VAT per rate on the page %v, sub-order %v", ref, or.mode, pageRate, perRate)
			}
			if !voided {
				for k, v := range pageRate {
					docVAT[fmt.Sprint(or.currency, "/", k)] += sign * v
				}
				for k, v := range perRate {
					subVAT[fmt.Sprint(or.currency, "/", k)] += sign * v
				}
			}
		}
	}
	for p, nums := range series {
		slices.Sort(nums)
		for i, n := range nums {
			if n != i+1 {
				fail("series %s: numbers not gapless: %d at %d of %d", p, n, i+1, len(nums))
				break
			}
		}
	}
	if fmt.Sprint(docVAT) != fmt.Sprint(subVAT) {
		fail("VAT per rate: documents %v, sub-orders %v", docVAT, subVAT)
	}
	_ = by
}

// checkPeriod: the period is the first and last item, made no earlier than
// its last item, paid out the next weekday.
func (mo *month) checkPeriod(st settled, fail func(string, ...any)) {
	s := st.s
	tm := func(v any) time.Time {
		x, err := time.Parse(time.RFC3339Nano, v.(string))
		if err != nil {
			fail("settlement %s: time %v", s["reference"], v)
		}
		return x
	}
	var first, last time.Time
	for i, x := range st.txs {
		at := tm(x["occurredAt"])
		if i == 0 || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		if i > 0 && at.Before(tm(st.txs[i-1]["occurredAt"])) {
			fail("settlement %s: transaction %d occurred before the one above it", s["reference"], i)
		}
	}
	created := tm(s["createdAt"])
	if !tm(s["periodStart"]).Equal(first) || !tm(s["periodEnd"]).Equal(last) || created.Before(last) {
		fail("settlement %s: period %v..%v created %v, transactions %v..%v", s["reference"], s["periodStart"], s["periodEnd"], s["createdAt"], first, last)
	}
	pay := created.UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	for pay.Weekday() == time.Saturday || pay.Weekday() == time.Sunday {
		pay = pay.AddDate(0, 0, 1)
	}
	if s["payoutDate"] != pay.Format(time.DateOnly) {
		fail("settlement %s created %v: payout %v, want %s", s["reference"], s["createdAt"], s["payoutDate"], pay.Format(time.DateOnly))
	}
}

// checkSettlementFilters: each filter of the list finds exactly the
// settlements it names.
func (mo *month) checkSettlementFilters(ss []settled, fail func(string, ...any)) {
	list := func(q string) map[string]bool {
		out := map[string]bool{}
		from := ""
		for range 100 {
			b := mo.call("GET", "/v1/settlements?size=9&"+q+from, "", 200)
			for _, s := range b["settlements"].([]any) {
				out[s.(map[string]any)["id"].(string)] = true
			}
			next, _ := b["nextFromId"].(string)
			if next == "" {
				break
			}
			from = "&fromId=" + url.QueryEscape(next)
		}
		return out
	}
	check := func(q string, keep func(s map[string]any) bool) {
		want := map[string]bool{}
		for _, st := range ss {
			if keep(st.s) {
				want[st.s["id"].(string)] = true
			}
		}
		if got := list(q); !sameSet(got, want) || len(want) == 0 {
			fail("settlements %s: %d, want %d", q, len(got), len(want))
		}
	}
	check("storeId=store-1", func(s map[string]any) bool { return s["storeId"] == "store-1" })
	check("currency=EUR,DKK", func(s map[string]any) bool { return s["currency"] == "EUR" || s["currency"] == "DKK" })
	check("storeId=store-0&currency=SEK", func(s map[string]any) bool { return s["storeId"] == "store-0" && s["currency"] == "SEK" })
	from, to := "2031-03-08T00:00:00Z", "2031-03-15T00:00:00Z"
	check("createdFrom="+from+"&createdTo="+to, func(s map[string]any) bool {
		c := s["createdAt"].(string)
		return c >= from && c < to
	})
	pick := ss[len(ss)/2].s
	check("reference="+pick["reference"].(string), func(s map[string]any) bool { return s["reference"] == pick["reference"] })
	check("id="+pick["id"].(string), func(s map[string]any) bool { return s["id"] == pick["id"] })
}

// checkEvents: the events' amounts add up to the order's amounts.
func (mo *month) checkEvents(all map[string]map[string]any, fail func(string, ...any)) {
	for id, o := range all {
		sum := map[string]int64{}
		for _, ev := range events(o) {
			sum[ev["type"].(string)] += mu(ev["amount"])
		}
		var paid int64
		for _, c := range o["captured"].([]any) {
			paid += mo.caps[c.(map[string]any)["ledgerId"].(string)].paid
		}
		capd := sum["fullCapture"] + sum["partialCapture"]
		var all, void int64
		for _, c := range o["captured"].([]any) {
			c := c.(map[string]any)
			all += mu(c["totalOrderAmount"])
			if slices.Contains(strList(c["status"]), "void") {
				void += mu(c["totalOrderAmount"])
			}
		}
		if capd != all || sum["fullRefund"]+sum["partialRefund"] != mu(o["refundedAmount"]) || sum["paid"] != paid {
			fail("order %s: events capture %d refund %d paid %d; captures %d, refunded %d, paid %d", id, capd,
				sum["fullRefund"]+sum["partialRefund"], sum["paid"], all, mu(o["refundedAmount"]), paid)
		}
	}
}

// checkNotifications: the notification log holds each order event once,
// with the event's type, sub-order and amount, and nothing else.
func (mo *month) checkNotifications(all map[string]map[string]any, fail func(string, ...any)) {
	type note struct {
		typ, ledger string
		amount      int64
	}
	seen := map[string]note{}
	from := ""
	for range 1000 {
		b := mo.call("GET", "/v1/notifications?size=1000"+from, "", 200)
		for _, n := range b["notifications"].([]any) {
			p := n.(map[string]any)["payload"].(map[string]any)
			d := p["data"].(map[string]any)
			ev, _ := d["eventId"].(string)
			if ev == "" {
				continue
			}
			if _, dup := seen[ev]; dup {
				fail("event %s notified twice", ev)
			}
			seen[ev] = note{p["type"].(string), d["ledgerId"].(string), mu(d["amount"])}
		}
		next, _ := b["nextFromId"].(string)
		if next == "" {
			break
		}
		from = "&fromId=" + url.QueryEscape(next)
	}
	n := 0
	for id, o := range all {
		for _, ev := range events(o) {
			n++
			got, ok := seen[ev["id"].(string)]
			want := note{"order." + ev["type"].(string), ev["ledgerId"].(string), mu(ev["amount"])}
			if !ok || got != want {
				fail("order %s event %s %v: notified %v (%v)", id, ev["id"], want, got, ok)
			}
		}
	}
	if n != len(seen) {
		fail("%d order events, %d notified", n, len(seen))
	}
}
