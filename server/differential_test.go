package server

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/internal/rapidrun"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// The differential test: random sequences of requests, each sent through
// the real router to a server on the memory store, one on bbolt and (with
// KASSA_TEST_DATABASE_URL) one on PostgreSQL, and every answer compared
// with the memory store's: status, headers and body bytes. The servers
// share a fixed wall clock that only the test moves, and count ids the same
// way, so every answer is the same unless a store stores, orders, pages or
// replays differently.
//
// It runs 3 sequences unless -rapid.checks is given, and -diff.steps sets
// the most requests of one (default 60); a long run: -rapid.checks=2000
// -diff.steps=200 -run TestStoresAnswerAlike (.ci/run runs 100). A failure
// leaves rapid's fail file under testdata/rapid (not committed), which every
// later run replays first: delete it once the cause is fixed.
var diffDebug = os.Getenv("KASSA_DIFF_DEBUG") != ""

var diffSteps = flag.Int("diff.steps", 60, "most requests of one sequence of TestStoresAnswerAlike")

// diffIDs counts ids per kind under a prefix set for each sequence, so that
// every sequence starts every store from the same ids.
type diffIDs struct {
	mu     sync.Mutex
	prefix string
	n      map[string]int
}

func (s *diffIDs) NewID(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[kind]++
	return fmt.Sprintf("%s%s-%d", s.prefix, kind, s.n[kind])
}

func (s *diffIDs) reset(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefix, s.n = prefix, map[string]int{}
}

// diffEnv is one server on one store.
type diffEnv struct {
	name  string
	url   string
	ids   *diffIDs
	auth  string
	toRef map[string]string // this server's random values → the memory server's
	toOwn map[string]string // and back, for requests
}

// The values minted at random whatever the store (authorization tokens,
// merchant credentials, signing secrets): paired by position with the
// memory server's in the same answer.
var diffRandom = regexp.MustCompile(`at_[A-Z2-7]{32}|k[cs]_[A-Z2-7]+|whsec_[A-Za-z0-9_-]{43}`)

// An order list's cursor is the store's position, opaque: the memory
// store writes its own text where bbolt and PostgreSQL share one key
// encoding (storage.TimeKey), so it is paired like a random value, and the
// durable stores' cursors are compared with each other.
var diffCursor = regexp.MustCompile(`"(?:nextCursor|lastId)":"([^"]+)"`)

var (
	// Request ids are random per request.
	diffRequestID = regexp.MustCompile(`"requestId":"[0-9a-f]{24}"`)
	// A document link expires at the end of the wall-clock hour after it
	// is rendered (time.Now, not the sandbox clock): the servers render it
	// moments apart and may straddle an hour.
	diffDocLink = regexp.MustCompile(`expires=[0-9]+(&|&amp;|\\u0026)signature=[A-Za-z0-9_-]+`)
)

type diffAnswer struct {
	cursors []string // as the store wrote them
	status  int
	header  http.Header
	body    string
}

func newDiffEnv(t *testing.T, name string, st storage.Store, clock *Clock) *diffEnv {
	ids := &diffIDs{n: map[string]int{}}
	var srv *Server
	ledger := kassa.New(st, kassa.Options{IDs: ids,
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	ts := httptest.NewUnstartedServer(nil)
	srv = New(Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef"),
		Sandbox: true, Clock: clock, CompanySearchRate: 1e9, BaseURL: "http://" + ts.Listener.Addr().String()})
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	ids.reset("boot-")
	if _, _, err := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "diff", ClientSecret: "diff-secret"}); err != nil {
		t.Fatal(err)
	}
	return &diffEnv{name: name, url: ts.URL, ids: ids, toRef: map[string]string{}, toOwn: map[string]string{}}
}

func (e *diffEnv) send(method, path, body string, hdr map[string]string, form url.Values) diffAnswer {
	for own, ref := range e.toRef {
		path = strings.ReplaceAll(path, ref, own)
		body = strings.ReplaceAll(body, ref, own)
	}
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	} else if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	switch {
	case form != nil:
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	if !strings.HasPrefix(path, "/checkout/") {
		req.Header.Set("Authorization", e.auth)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return diffAnswer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return diffAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// normalise makes e's answer comparable with ref's (the memory server's,
// already normalised): its random values become ref's, its base URL and
// the request id a placeholder.
func (e *diffEnv) normalise(a diffAnswer, ref *diffAnswer) diffAnswer {
	if ref != nil {
		own, theirs := diffRandom.FindAllString(a.body, -1), diffRandom.FindAllString(ref.body, -1)
		if len(own) == len(theirs) {
			for i, v := range own {
				if _, ok := e.toRef[v]; !ok && v != theirs[i] {
					e.toRef[v], e.toOwn[theirs[i]] = theirs[i], v
				}
			}
		}
	}
	for _, m := range diffCursor.FindAllStringSubmatch(a.body, -1) {
		a.cursors = append(a.cursors, m[1])
	}
	if ref != nil && len(a.cursors) == len(ref.cursors) {
		for i, v := range a.cursors {
			if _, ok := e.toRef[v]; !ok && v != ref.cursors[i] {
				e.toRef[v], e.toOwn[ref.cursors[i]] = ref.cursors[i], v
			}
		}
	}
	fix := func(s string) string {
		for own, ref := range e.toRef {
			s = strings.ReplaceAll(s, own, ref)
		}
		s = strings.ReplaceAll(s, e.url, "http://kassa")
		s = strings.ReplaceAll(s, strings.TrimPrefix(e.url, "http://"), "kassa")
		s = diffRequestID.ReplaceAllString(s, `"requestId":"…"`)
		return diffDocLink.ReplaceAllString(s, "expires=…&signature=…")
	}
	a.body = fix(a.body)
	h := http.Header{}
	for k, v := range a.header {
		switch k {
		case "Date", "X-Request-Id", "Content-Length":
			continue
		}
		for _, x := range v {
			h.Add(k, fix(x))
		}
	}
	a.header = h
	return a
}

func (a diffAnswer) headerText() string {
	var keys []string
	for k := range a.header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(a.header[k], ", "))
	}
	return b.String()
}

// diffRun is one sequence: its requests go to every server, and what it
// knows of the merchant's records it reads from the memory server's answers.
type diffRun struct {
	t        *rapid.T
	envs     []*diffEnv
	wall     *atomic.Int64
	now      func() time.Time // the servers' clock: the wall clock and the sandbox clock's offset
	n        int
	trace    []string
	tokens   []string // authorization tokens (the memory server's)
	ctokens  []string
	orders   []string
	captured []string // orders a capture succeeded on
	sessions []struct {
		base, id, link string
	}
	settlements []string
	keyed       []diffKeyed
	statuses    map[string]map[int]int
	log         func(string, ...any) // the test's, for KASSA_DIFF_DEBUG
}

type diffKeyed struct{ method, path, body, key string }

// do sends one request to every server and compares the answers; it returns
// the memory server's, its body decoded when it is JSON.
func (r *diffRun) do(op, method, path, body string, hdr map[string]string, form url.Values) (int, map[string]any, diffAnswer) {
	r.n++
	r.trace = append(r.trace, fmt.Sprintf("%d %s %s %s %v %s", r.n, op, method, path, hdr, body))
	ans := make([]diffAnswer, len(r.envs))
	for i, e := range r.envs {
		var ref *diffAnswer
		if i > 0 {
			ref = &ans[0]
		}
		ans[i] = e.normalise(e.send(method, path, body, hdr, form), ref)
	}
	for i := 2; i < len(ans); i++ {
		if !slices.Equal(ans[1].cursors, ans[i].cursors) {
			r.t.Fatalf("request %d (%s) %s %s: cursors %s %v, %s %v", r.n, op, method, path, r.envs[1].name, ans[1].cursors, r.envs[i].name, ans[i].cursors)
		}
	}
	for i := 1; i < len(ans); i++ {
		a, b := ans[0], ans[i]
		if a.status != b.status || a.headerText() != b.headerText() || a.body != b.body {
			r.t.Fatalf("request %d (%s) %s %s answered differently:\n%s: %d\n%s%s\n\n%s: %d\n%s%s\n\ntrace:\n%s",
				r.n, op, method, path, r.envs[0].name, a.status, a.headerText(), a.body, r.envs[i].name, b.status, b.headerText(), b.body,
				strings.Join(r.trace, "\n"))
		}
	}
	if r.statuses[op] == nil {
		r.statuses[op] = map[int]int{}
	}
	r.statuses[op][ans[0].status]++
	if diffDebug && ans[0].status >= 400 {
		r.log("%s %s %s → %d %.300s", op, method, path, ans[0].status, ans[0].body)
	}
	var out map[string]any
	if strings.Contains(ans[0].header.Get("Content-Type"), "json") {
		json.Unmarshal([]byte(ans[0].body), &out)
	}
	return ans[0].status, out, ans[0]
}

// mutate sends a mutating request, with an Idempotency-Key drawn or none.
func (r *diffRun) mutate(op, method, path, body string) (int, map[string]any) {
	var hdr map[string]string
	if rapid.IntRange(0, 2).Draw(r.t, "keyed") == 0 {
		k := fmt.Sprintf("%s-key-%d", r.envs[0].ids.prefix, r.n)
		hdr = map[string]string{"Idempotency-Key": k}
		r.keyed = append(r.keyed, diffKeyed{method, path, body, k})
	}
	code, b, _ := r.do(op, method, path, body, hdr, nil)
	return code, b
}

func (r *diffRun) pick(list []string, label string) string {
	if len(list) == 0 {
		return "nope"
	}
	// Mostly the newest: a sequence then takes records far through their lives.
	if rapid.IntRange(0, 4).Draw(r.t, label+"New") < 3 {
		return list[len(list)-1]
	}
	return list[rapid.IntRange(0, len(list)-1).Draw(r.t, label)]
}

func (r *diffRun) getOrder(id string) map[string]any {
	_, o, _ := r.do("get", "GET", "/v1/orders/"+id, "", nil, nil)
	return o
}

var diffCompanies = []string{"5560000001", "5560000001", "5560000001", "5560000027", "5560000035", "5560000043", "5560000019"}

// lines draws 1–20 order lines: mixed VAT rates, discounts, quantities.
func (r *diffRun) lines(max int) []order.LineInput {
	n := rapid.IntRange(1, max).Draw(r.t, "lines")
	out := make([]order.LineInput, n)
	for i := range out {
		l := order.LineInput{
			Description: diffPtr(fmt.Sprintf("Item %d", i)),
			Quantity:    diffPtr(rapid.Int64Range(1, 12).Draw(r.t, "qty")),
			UnitPrice:   diffPtr(rapid.Int64Range(1000, 250000).Draw(r.t, "unit")),
			Vat:         diffPtr(rapid.SampledFrom([]int64{0, 600, 1200, 2500, 2550, 1400}).Draw(r.t, "vat")),
		}
		switch rapid.IntRange(0, 5).Draw(r.t, "kind") {
		case 0:
			l.UnitDiscountAmount = diffPtr(rapid.Int64Range(0, *l.UnitPrice/2).Draw(r.t, "discount"))
		case 1:
			if i > 0 { // after a line of at least 1000 units of 1 or more
				l.Type, l.UnitPrice, l.Quantity = "discount", diffPtr(-rapid.Int64Range(1, 999).Draw(r.t, "minus")), diffPtr(int64(1))
			}
		case 2:
			l.Type = "shippingFee"
		}
		out[i] = l
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// subLines answers a sub-order's lines.
func subLines(sub any) []map[string]any {
	var out []map[string]any
	m, _ := sub.(map[string]any)
	ls, _ := m["orderLines"].([]any)
	for _, l := range ls {
		out = append(out, l.(map[string]any))
	}
	return out
}

func ledgers(o map[string]any, kind string) []string {
	var out []string
	list, _ := o[kind].([]any)
	for _, s := range list {
		out = append(out, s.(map[string]any)["ledgerId"].(string))
	}
	return out
}

// selection draws lines of a sub-order by id, some with fewer units, and
// answers them with their gross total (lines with fewer units priced as
// the order would price them).
func (r *diffRun) selection(ls []map[string]any, exclVat, byID bool) ([]map[string]any, int64) {
	var sel []map[string]any
	var total int64
	for i, l := range ls {
		// At least the last line: an empty selection is only ever refused.
		if !rapid.Bool().Draw(r.t, "take") && (len(sel) > 0 || i < len(ls)-1) {
			continue
		}
		q := int64(l["quantity"].(float64))
		in := map[string]any{"id": l["id"]}
		t := int64(l["totalAmount"].(float64))
		if !byID || q > 1 && rapid.Bool().Draw(r.t, "fewer") {
			// Part of a line goes without its id, stated in full, as
			// every line of a refund.
			if q > 1 && rapid.Bool().Draw(r.t, "fewer") {
				q = rapid.Int64Range(1, q-1).Draw(r.t, "units")
			}
			li := order.LineInput{Description: diffPtr(l["description"].(string)), Quantity: diffPtr(q), UnitPrice: diffPtr(int64(l["unitPrice"].(float64))),
				UnitDiscountAmount: diffPtr(int64(l["unitDiscountAmount"].(float64))), Vat: diffPtr(int64(l["vat"].(float64)))}
			if ty, _ := l["type"].(string); ty != "" {
				li.Type = ty
			}
			in = map[string]any{"description": *li.Description, "quantity": q, "unitPrice": *li.UnitPrice, "unitDiscountAmount": *li.UnitDiscountAmount,
				"vat": *li.Vat}
			if li.Type != "" {
				in["type"] = li.Type
			}
			mode := ""
			if exclVat {
				mode = "exclVat"
			}
			got, _, err := order.ValidateCreate(&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", VatMode: mode,
				OrderLines: []order.LineInput{li}}, false, order.NoIDs{})
			if err != nil {
				continue
			}
			t = got[0].TotalAmount
		}
		total += t
		sel = append(sel, in)
	}
	if rapid.IntRange(0, 9).Draw(r.t, "wrongTotal") == 0 {
		total++ // refused
	}
	return sel, total
}

func (r *diffRun) step() {
	rt := r.t
	switch op := rapid.IntRange(0, 39).Draw(rt, "op"); op {
	case 0, 1, 2: // mint a token
		pm := rapid.SampledFrom([]string{"invoice", "invoice", "card", "advanceInvoice", "partPayment"}).Draw(rt, "pm")
		body := fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":%q,"customer":{"companyId":%q},"paymentMethod":{"type":%q}}`,
			rapid.SampledFrom([]string{"sv-SE", "en-SE"}).Draw(rt, "locale"), rapid.SampledFrom(diffCompanies).Draw(rt, "company"), pm)
		if code, b, _ := r.do("mint", "POST", "/sandbox/v1/authorization-tokens", body, nil, nil); code == 201 {
			r.tokens = append(r.tokens, b["authorizationToken"].(string))
		}
	case 3, 4, 5, 6: // an order from a token (or a customer token)
		req := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": r.lines(20),
			"storeId": rapid.SampledFrom([]string{"s1", "s2", "s3"}).Draw(rt, "store"), "reference": fmt.Sprintf("PO-%d", r.n)}
		if rapid.Bool().Draw(rt, "exclVat") {
			req["vatMode"] = "exclVat"
		}
		if rapid.IntRange(0, 3).Draw(rt, "autoCapture") == 0 {
			req["autoCapture"] = map[string]any{"enabled": true}
		}
		path := "/v1/authorization-tokens/" + r.pick(r.tokens, "token") + "/order"
		if len(r.ctokens) > 0 && rapid.IntRange(0, 3).Draw(rt, "fromCustomer") == 0 {
			delete(req, "locale")
			path = "/v1/customer-tokens/" + r.pick(r.ctokens, "ctoken") + "/order"
		}
		if code, b := r.mutate("create", "POST", path, mustJSON(req)); code == 200 {
			r.orders = append(r.orders, b["orderId"].(string))
		}
	case 7: // a customer token
		code, b := r.mutate("customerToken", "POST", "/v1/authorization-tokens/"+r.pick(r.tokens, "token")+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`)
		if code == 200 {
			r.ctokens = append(r.ctokens, b["customerToken"].(string))
		}
	case 8: // tokens read, revoked, deleted
		switch rapid.IntRange(0, 2).Draw(rt, "tokenOp") {
		case 0:
			r.do("getCustomerToken", "GET", "/v1/customer-tokens/"+r.pick(r.ctokens, "ctoken"), "", nil, nil)
		case 1:
			r.mutate("revoke", "DELETE", "/v1/customer-tokens/"+r.pick(r.ctokens, "ctoken"), "")
		case 2:
			r.mutate("deleteToken", "DELETE", "/v1/authorization-tokens/"+r.pick(r.tokens, "token"), "")
		}
	case 9, 10, 11: // capture, in full or by lines
		id := r.pick(r.orders, "order")
		o := r.getOrder(id)
		if o == nil || rapid.IntRange(0, 2).Draw(rt, "full") == 0 {
			if code, _ := r.mutate("capture", "POST", "/v1/orders/"+id+"/capture", rapid.SampledFrom([]string{"", "{}"}).Draw(rt, "body")); code == 200 {
				r.captured = append(r.captured, id)
			}
			return
		}
		sel, total := r.selection(subLines(o["uncaptured"]), o["vatMode"] == "exclVat", true)
		if code, _ := r.mutate("partialCapture", "POST", "/v1/orders/"+id+"/partialcapture", mustJSON(map[string]any{"orderLines": sel, "totalCaptureAmount": total})); code == 200 {
			r.captured = append(r.captured, id)
		}
	case 12, 13, 14: // refund, in full or by lines
		id := r.pick(r.captured, "order")
		o := r.getOrder(id)
		caps := ledgers(o, "captured")
		cap := r.pick(caps, "capture")
		if rapid.IntRange(0, 2).Draw(rt, "full") == 0 {
			r.mutate("refund", "POST", "/v1/orders/"+id+"/refund/"+cap, rapid.SampledFrom([]string{"", "{}", `{"note":"all"}`}).Draw(rt, "body"))
			return
		}
		var ls []map[string]any
		capList, _ := o["captured"].([]any)
		for _, c := range capList {
			// Lines of this capture, and at times of another: a refund
			// that spans two captures is refused.
			if c.(map[string]any)["ledgerId"] == cap || rapid.IntRange(0, 4).Draw(rt, "span") == 0 {
				ls = append(ls, subLines(c)...)
			}
		}
		sel, total := r.selection(ls, o["vatMode"] == "exclVat", false)
		r.mutate("partialRefund", "POST", "/v1/orders/"+id+"/partialrefund/"+cap, mustJSON(map[string]any{"orderLines": sel, "totalRefundAmount": total, "note": "n"}))
	case 15: // cancel, void
		id := r.pick(r.orders, "order")
		if rapid.Bool().Draw(rt, "whole") {
			r.mutate("cancel", "DELETE", "/v1/orders/"+id, "")
			return
		}
		o := r.getOrder(id)
		subs := ledgers(o, "captured")
		if u, ok := o["uncaptured"].(map[string]any); ok {
			subs = append(subs, u["ledgerId"].(string))
		}
		r.mutate("cancelLedger", "DELETE", "/v1/orders/"+id+"/"+r.pick(subs, "ledger"), "")
	case 16:
		r.mutate("acknowledge", "POST", "/v1/orders/"+r.pick(r.orders, "order")+"/acknowledge", "")
	case 17:
		r.mutate("extend", "POST", "/v1/orders/"+r.pick(r.orders, "order")+"/extendexpiry", "")
	case 18: // edit lines: some kept, some new
		id := r.pick(r.orders, "order")
		o := r.getOrder(id)
		exclVat := o["vatMode"] == "exclVat"
		var in []order.LineInput
		for _, l := range subLines(o["uncaptured"]) {
			if rapid.Bool().Draw(rt, "keep") {
				in = append(in, order.LineInput{Description: diffPtr(l["description"].(string)), Quantity: diffPtr(int64(l["quantity"].(float64))),
					UnitPrice: diffPtr(int64(l["unitPrice"].(float64))), UnitDiscountAmount: diffPtr(int64(l["unitDiscountAmount"].(float64))),
					Vat: diffPtr(int64(l["vat"].(float64)))})
			}
		}
		in = append(in, r.lines(3)...)
		mode := ""
		if exclVat {
			mode = "exclVat"
		}
		got, _, err := order.ValidateCreate(&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", VatMode: mode, OrderLines: in}, false, order.NoIDs{})
		var sum, vat int64
		if err == nil {
			for _, l := range got {
				sum += l.TotalAmount
				vat += l.TotalVatAmount
			}
		}
		gross := sum
		if exclVat {
			gross += vat
		}
		r.mutate("edit", "POST", "/v1/orders/"+id, mustJSON(map[string]any{"orderLines": in, "totalOrderAmount": gross,
			"totalOrderAmountExclVat": gross - vat, "totalOrderVatAmount": vat}))
	case 19:
		r.mutate("customer", "POST", "/v1/orders/"+r.pick(r.orders, "order")+"/customer", fmt.Sprintf(`{"email":"ap%d@example.se","reference1":"Att: %d",
			"billingAddress":{"companyName":"Approved Byggvaror AB","streetAddress":"Gatan 1","postalCode":"11122","city":"Stockholm","country":"SE"}}`, r.n, r.n))
	case 20:
		r.mutate("paymentMethod", "POST", "/v1/orders/"+r.pick(r.orders, "order")+"/paymentmethod",
			fmt.Sprintf(`{"paymentMethod":{"provider":"service","type":%q}}`, rapid.SampledFrom([]string{"invoice", "advanceInvoice", "card"}).Draw(rt, "pm")))
	case 21:
		r.mutate("reference", "POST", "/v1/orders/"+r.pick(r.orders, "order")+"/reference", fmt.Sprintf(`{"reference":"PO-R%d","settlementReference":"S-%d"}`, r.n, r.n%3))
	case 22: // resend, recourse, pay, mark, risk
		id := r.pick(r.captured, "order")
		o := r.getOrder(id)
		cap := r.pick(ledgers(o, "captured"), "capture")
		switch rapid.IntRange(0, 4).Draw(rt, "ledgerOp") {
		case 0:
			r.mutate("resend", "POST", "/v1/orders/"+id+"/document/"+cap+"/resend", "")
		case 1:
			r.mutate("recourse", "POST", "/v1/orders/"+id+"/recourse/"+cap, `{"reason":"unpaid"}`)
		case 2:
			r.do("pay", "POST", "/sandbox/v1/orders/"+id+"/ledgers/"+cap+"/payments", fmt.Sprintf(`{"amount":%d}`, rapid.Int64Range(-1, 300000).Draw(rt, "paid")), nil, nil)
		case 3:
			r.do("mark", "POST", "/sandbox/v1/orders/"+id+"/ledgers/"+cap+"/status",
				fmt.Sprintf(`{"status":%q}`, rapid.SampledFrom([]string{"reminder1", "reminder2", "debtCollection", "paid", "nope"}).Draw(rt, "mark")), nil, nil)
		case 4:
			r.do("risk", "POST", "/sandbox/v1/orders/"+id+"/risk", fmt.Sprintf(`{"decision":%q}`, rapid.SampledFrom([]string{"approve", "deny"}).Draw(rt, "decision")), nil, nil)
		}
	case 23, 24: // sessions: created, updated, cancelled
		base := rapid.SampledFrom([]string{"/v1/sessions", "/v1/payment-sessions"}).Draw(rt, "api")
		switch rapid.IntRange(0, 3).Draw(rt, "sessionOp") {
		case 0, 1:
			req := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": r.lines(5),
				"storeId": rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "store"), "merchantReference": fmt.Sprintf("PO-%d", r.n%4)}
			if rapid.Bool().Draw(rt, "external") {
				req["externalSessionId"] = fmt.Sprintf("ext-%d", rapid.IntRange(0, 5).Draw(rt, "ext"))
			}
			if code, b := r.mutate("session", "POST", base, mustJSON(req)); code == 201 {
				link, _ := b["checkoutUrl"].(string)
				r.sessions = append(r.sessions, struct{ base, id, link string }{base, b["id"].(string), link})
			}
		case 2:
			if len(r.sessions) > 0 {
				s := r.sessions[rapid.IntRange(0, len(r.sessions)-1).Draw(rt, "session")]
				r.mutate("updateSession", "POST", s.base+"/"+s.id, mustJSON(map[string]any{"merchantReference": fmt.Sprintf("PO-U%d", r.n), "orderLines": r.lines(4)}))
			}
		case 3:
			if len(r.sessions) > 0 {
				s := r.sessions[rapid.IntRange(0, len(r.sessions)-1).Draw(rt, "session")]
				r.mutate("cancelSession", "DELETE", s.base+"/"+s.id, "")
			}
		}
	case 25: // the buyer on the hosted checkout page
		if len(r.sessions) == 0 {
			return
		}
		s := r.sessions[rapid.IntRange(0, len(r.sessions)-1).Draw(rt, "session")]
		if s.link == "" {
			return
		}
		u, _ := url.Parse(strings.Replace(s.link, "http://kassa", "", 1))
		_, _, page := r.do("checkoutPage", "GET", u.RequestURI(), "", nil, nil)
		terms := ""
		if m := termsField.FindStringSubmatch(page.body); m != nil {
			terms = m[1]
		}
		action := rapid.SampledFrom([]string{"approve", "approve", "decline"}).Draw(rt, "action")
		form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {rapid.SampledFrom(diffCompanies).Draw(rt, "company")}, "firstName": {"A"}, "lastName": {"B"},
			"email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {"invoice"},
			"action": {action}, "terms": {terms}}
		r.do("checkoutSubmit", "POST", u.Path, "", nil, form)
		_, got, _ := r.do("getSession", "GET", s.base+"/"+s.id, "", nil, nil)
		if tok, _ := got["authorizationToken"].(string); tok != "" && !slices.Contains(r.tokens, tok) {
			r.tokens = append(r.tokens, tok)
		}
	case 26, 27: // orders listed, each filter, paged
		var q []string
		for _, f := range []struct {
			name   string
			values []string
		}{
			{"status", []string{"uncaptured", "partiallyCaptured", "fullyCaptured", "cancelled", "expired", "partiallyRefunded", "fullyRefunded",
				"fullyCaptured,cancelled", "unacknowledged", "onHold", "readyForCapture", "partiallyPaid", "fullyPaid"}},
			{"statusNot", []string{"expired", "cancelled", "uncaptured,fullyPaid"}},
			{"statusAnd", []string{"fullyCaptured,partiallyRefunded", "partiallyCaptured,partiallyPaid"}},
			{"storeId", []string{"s1", "s2,s3"}},
			{"paymentMethodCategory", []string{"invoice", "card", "invoice,card"}},
			{"merchantReference", []string{"PO-R5", "PO-3"}},
			{"q", []string{"PO", "Item", "orderref"}},
			{"createdFrom", []string{"2025-01-01T00:00:00Z", "2030-01-01T00:00:00Z"}},
			{"expiresTo", []string{"2026-06-01T00:00:00Z", "2040-01-01T00:00:00Z"}},
		} {
			if rapid.IntRange(0, 4).Draw(rt, "filter") == 0 {
				q = append(q, f.name+"="+url.QueryEscape(rapid.SampledFrom(f.values).Draw(rt, f.name)))
			}
		}
		q = append(q, r.timeBounds("createdFrom", "createdTo", "expiresFrom", "expiresTo")...)
		q = append(q, "size="+r.pageSize(7))
		r.pages("listOrders", "/v1/orders?"+strings.Join(q, "&"))
	case 28: // sessions listed
		var q []string
		if rapid.Bool().Draw(rt, "state") {
			q = append(q, "state="+rapid.SampledFrom([]string{"created", "authorized", "cancelled", "created,authorized"}).Draw(rt, "states"))
		}
		if rapid.Bool().Draw(rt, "source") {
			q = append(q, "source="+rapid.SampledFrom([]string{"checkout", "payment"}).Draw(rt, "sources"))
		}
		if rapid.Bool().Draw(rt, "ref") {
			q = append(q, "merchantReference=PO-"+fmt.Sprint(rapid.IntRange(0, 3).Draw(rt, "refn")))
		}
		q = append(q, r.timeBounds("createdFrom", "createdTo", "updatedFrom", "updatedTo")...)
		q = append(q, "size="+r.pageSize(5))
		r.pages("listSessions", "/v1/sessions?"+strings.Join(q, "&"))
	case 29: // the clock moves
		d := rapid.SampledFrom([]string{"1m", "90m", "25h", "72h", "240h"}).Draw(rt, "advance")
		r.do("clock", "POST", "/sandbox/v1/clock", fmt.Sprintf(`{"advance":%q}`, d), nil, nil)
	case 30: // jobs
		job := rapid.SampledFrom([]string{"expire", "tasks", "autocapture"}).Draw(rt, "job")
		r.do("job-"+job, "POST", "/sandbox/v1/jobs/"+job, "", nil, nil)
	case 31: // a settlement run, and its settlements read
		r.do("settle", "POST", "/sandbox/v1/settlements/run", "", nil, nil)
		_, l, _ := r.do("listSettlements", "GET", "/v1/settlements", "", nil, nil)
		list, _ := l["settlements"].([]any)
		for _, s := range list {
			if id, _ := s.(map[string]any)["id"].(string); !slices.Contains(r.settlements, id) {
				r.settlements = append(r.settlements, id)
			}
		}
	case 32:
		if len(r.settlements) == 0 {
			return
		}
		id := r.pick(r.settlements, "settlement")
		r.do("getSettlement", "GET", "/v1/settlements/"+id, "", nil, nil)
		r.pages("settlementTx", fmt.Sprintf("/v1/settlements/%s/tx?size=%d", id, rapid.IntRange(1, 4).Draw(rt, "size")))
		r.do("exportSettlement", "GET", "/v1/settlements/"+id+"/export.csv", "", nil, nil)
		r.pages("listSettlements", fmt.Sprintf("/v1/settlements?size=%d", rapid.IntRange(1, 3).Draw(rt, "size")))
	case 33: // the delivery log
		r.pages("notifications", fmt.Sprintf("/v1/notifications?size=%d", rapid.IntRange(1, 9).Draw(rt, "size")))
	case 34, 35: // an Idempotency-Key again: the same request, or another body
		if len(r.keyed) == 0 {
			return
		}
		k := r.keyed[rapid.IntRange(0, len(r.keyed)-1).Draw(rt, "replay")]
		body := k.body
		if rapid.IntRange(0, 2).Draw(rt, "otherBody") == 0 {
			body = `{"note":"other"}`
		}
		r.do("replay", k.method, k.path, body, map[string]string{"Idempotency-Key": k.key}, nil)
	case 36: // reads
		id := r.pick(r.orders, "order")
		r.getOrder(id)
		r.do("paymentStatus", "GET", "/v1/paymentstatus?orderId="+id, "", nil, nil)
		if len(r.sessions) > 0 {
			s := r.sessions[rapid.IntRange(0, len(r.sessions)-1).Draw(rt, "session")]
			r.do("sessionStatus", "GET", "/v1/paymentstatus?sessionId="+s.id, "", nil, nil)
		}
	case 37: // the wall clock moves: whole seconds, or to the nanosecond
		d := rapid.SampledFrom([]time.Duration{0, time.Nanosecond, 1500 * time.Microsecond, time.Second, 59 * time.Minute}).Draw(rt, "wall")
		r.wall.Add(int64(d) + rapid.Int64Range(0, 999).Draw(rt, "ns"))
	case 38: // refused: bad amounts
		id := r.pick(r.orders, "order")
		r.mutate("badCapture", "POST", "/v1/orders/"+id+"/partialcapture", fmt.Sprintf(`{"orderLines":[{"description":"x","quantity":1,"unitPrice":%d,"vat":2500}],"totalCaptureAmount":-1}`,
			rapid.Int64Range(-5, 5).Draw(rt, "bad")))
	case 39: // notification settings
		if rapid.Bool().Draw(rt, "put") {
			r.do("putSettings", "PUT", "/v1/notification-settings", `{"url":"http://127.0.0.1:21001/hook","events":["order.*","document.resent"]}`, nil, nil)
		} else {
			r.do("getSettings", "GET", "/v1/notification-settings", "", nil, nil)
		}
	}
}

// timeBounds draws some of the named range filters, each a time near the
// servers' clock (a day before it to 40 days after, where the orders and
// sessions the sequence makes are created, updated and expire), so that
// they split the lists rather than take all or nothing. The servers' clock,
// not the wall clock: the sandbox clock's moves add up over the sequences
// (past 40 days by about the 20th), and bounds near the wall clock then
// split nothing.
func (r *diffRun) timeBounds(names ...string) []string {
	var q []string
	for _, name := range names {
		if rapid.IntRange(0, 5).Draw(r.t, name) == 0 {
			h := rapid.IntRange(-24, 40*24).Draw(r.t, name+"Hours")
			at := r.now().Add(time.Duration(h) * time.Hour).UTC()
			q = append(q, name+"="+url.QueryEscape(at.Format(time.RFC3339)))
		}
	}
	return q
}

// pageSize draws a page size up to most, small ones more often: a list the
// sequence made spans several pages only when they are small, and paging is
// where the stores' code differs most.
func (r *diffRun) pageSize(most int) string {
	return fmt.Sprint(rapid.SampledFrom([]int{1, 1, 2, 2, 3, most}).Draw(r.t, "size"))
}

// pages reads every page of a list, following its cursor.
func (r *diffRun) pages(op, path string) {
	for range 1000 {
		code, b, _ := r.do(op, "GET", path, "", nil, nil)
		if code != 200 {
			return
		}
		next, param := "", ""
		if c, _ := b["nextCursor"].(string); c != "" {
			next, param = c, "cursor"
		} else if c, _ := b["nextFromId"].(string); c != "" {
			next, param = c, "fromId"
		}
		if next == "" {
			return
		}
		base, query, _ := strings.Cut(path, "?")
		v, _ := url.ParseQuery(query)
		v.Set(param, next)
		path = base + "?" + v.Encode()
	}
	r.t.Fatalf("%s: more than 1000 pages", path)
}

func TestStoresAnswerAlike(t *testing.T) {
	var wall atomic.Int64
	wall.Store(time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC).UnixNano())
	newClock := func() *Clock {
		c := NewClock(true)
		c.wall = func() time.Time { return time.Unix(0, wall.Load()) }
		return c
	}
	var envs []*diffEnv
	mc := newClock()
	envs = append(envs, newDiffEnv(t, "memory", memory.New(mc.Now), mc))
	bc := newClock()
	// No fsync: the test compares what the stores answer, not durability.
	b, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{Clock: bc.Now, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	envs = append(envs, newDiffEnv(t, "bolt", b, bc))
	if os.Getenv("KASSA_TEST_DATABASE_URL") != "" {
		pc := newClock()
		u, _ := url.Parse(pgtest.FreshSchema(t))
		q := u.Query()
		q.Set("synchronous_commit", "off") // as NoSync: speed, not durability
		u.RawQuery = q.Encode()
		st, err := postgres.Open(context.Background(), u.String(), postgres.Options{Clock: pc.Now, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		envs = append(envs, newDiffEnv(t, "postgres", st, pc))
	} else {
		t.Log("KASSA_TEST_DATABASE_URL not set: memory and bbolt only")
	}
	statuses := map[string]map[int]int{}
	rapidrun.Check(t, 3, func(rt *rapid.T, seq int) {
		prefix := fmt.Sprintf("r%d-", seq)
		for _, e := range envs {
			e.ids.reset(prefix)
			e.auth = basic("diff", "diff-secret")
		}
		run := &diffRun{t: rt, envs: envs, wall: &wall, now: mc.Now, statuses: statuses, log: t.Logf}
		wall.Add(int64(time.Hour))
		// A merchant of the sequence's own: every list starts empty.
		body := mustJSON(map[string]any{"name": "Diff AB", "requireAcknowledgement": rapid.Bool().Draw(rt, "ack"),
			"feeBasisPoints": rapid.Int64Range(0, 300).Draw(rt, "bp"), "feeFixedPerCapture": rapid.Int64Range(0, 500).Draw(rt, "fixed")})
		code, m, _ := run.do("merchant", "POST", "/sandbox/v1/merchants", body, nil, nil)
		if code != 201 {
			rt.Fatalf("merchant: %d %v", code, m)
		}
		for _, e := range envs {
			e.auth = basic(e.toOwnOr(m["clientId"].(string)), e.toOwnOr(m["clientSecret"].(string)))
		}
		for range rapid.IntRange(min(30, *diffSteps), *diffSteps).Draw(rt, "steps") {
			run.step()
		}
	})
	if testing.Verbose() {
		var ops []string
		for op := range statuses {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		for _, op := range ops {
			t.Logf("%-18s %v", op, statuses[op])
		}
	}
}

func (e *diffEnv) toOwnOr(ref string) string {
	if own, ok := e.toOwn[ref]; ok {
		return own
	}
	return ref
}

func diffPtr[T any](v T) *T { return &v }
