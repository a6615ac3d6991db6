package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// The copy-fidelity property: a random business built through the real
// router on a bolt store (orders captured, refunded, cancelled, settled;
// sessions, customer tokens, notifications delivered, failed and
// redelivered, keyed requests, the clock moved) answers every read the API
// offers the same, byte for byte, on its copies: the backup archive
// unpacked into a new data directory (bolt → bolt) and, with
// KASSA_TEST_DATABASE_URL, kassa store copy into PostgreSQL (bolt →
// PostgreSQL). Every list is walked through all its pages with each kind of
// filter, every order, session, token, settlement (and its export),
// notification and document is read, and every stored Idempotency-Key is
// sent again: its replay must be the first answer's bytes. Then the same
// random operations go on on the original and the copies alike, every
// answer compared (the next invoice, credit-note and settlement numbers,
// the next notifications and their place in the delivery log), and
// everything is read again.
//
// kassa has no PostgreSQL → bolt copy (docs/postgres.md, "Moving from
// bolt"): that direction is not tested.
//
// It runs 3 businesses unless -rapid.checks is given; -copy.steps sets the
// most operations before the copy (default 50), and half as many go on
// after it.
var copySteps = flag.Int("copy.steps", 50, "most operations before the copy in TestCopiesAnswerAsTheOriginal")

var cfDebug = os.Getenv("KASSA_COPY_DEBUG") != ""

// cfIDs counts ids per kind under a prefix: the original and its copies,
// reset to one new prefix after the copy, mint the same ids.
type cfIDs struct {
	mu     sync.Mutex
	prefix string
	n      map[string]int
}

func (s *cfIDs) NewID(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[kind]++
	return fmt.Sprintf("%s%s-%d", s.prefix, kind, s.n[kind])
}

// cfEnv is one server on one store.
type cfEnv struct {
	name   string
	st     storage.Store
	ledger *kassa.Ledger
	h      http.Handler
	ids    *cfIDs
}

func newCFEnv(name string, st storage.Store, key []byte, prefix string) *cfEnv {
	ids := &cfIDs{prefix: prefix, n: map[string]int{}}
	var srv *server.Server
	ledger := kassa.New(st, kassa.Options{IDs: ids,
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	srv = server.New(server.Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: key,
		Sandbox: true, BaseURL: "http://kassa", CompanySearchRate: 1e9})
	return &cfEnv{name: name, st: st, ledger: ledger, h: srv.Handler(), ids: ids}
}

type cfAnswer struct {
	status int
	header string
	body   string
}

var (
	cfRequestID = regexp.MustCompile(`"requestId":"[0-9a-f]{24}"`)
	// A document link's expiry follows the wall clock's hour (time.Now).
	cfDocLink = regexp.MustCompile(`expires=[0-9]+(&|&amp;|\\u0026)signature=[A-Za-z0-9_-]+`)
)

func (e *cfEnv) send(method, path, body string, hdr map[string]string) cfAnswer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "http://kassa"+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	b := cfRequestID.ReplaceAllString(w.Body.String(), `"requestId":"…"`)
	b = cfDocLink.ReplaceAllString(b, "expires=…&signature=…")
	var keys []string
	for k := range w.Header() {
		switch k {
		case "Date", "X-Request-Id", "Content-Length":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var h strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&h, "%s: %s\n", k, cfDocLink.ReplaceAllString(strings.Join(w.Header()[k], ", "), "expires=…&signature=…"))
	}
	return cfAnswer{status: w.Code, header: h.String(), body: b}
}

type cfMerchant struct {
	id, auth string
	ack      bool // its orders wait for an acknowledgement
	tokens   []string
	ctokens  []string
	orders   []string
	captured []string
	sessions [][2]string // API base, id
	keyed    []cfKeyed
}

type cfKeyed struct {
	method, path, body, key string
	at                      time.Time // when first answered
	first                   cfAnswer  // the original's first answer
}

// cfRun is one business: the operations go to every server in envs (the
// original alone before the copy) and their answers are compared.
type cfRun struct {
	t         *rapid.T
	envs      []*cfEnv
	wall      *atomic.Int64
	now       func() time.Time
	receiver  *atomic.Int32 // the webhook receiver's status
	merchants []*cfMerchant
	m         *cfMerchant // this step's
	n         int
	trace     []string
	statuses  map[string]map[int]int // per operation, for -v
}

func (r *cfRun) do(op, method, path, body string, hdr map[string]string) (int, map[string]any, cfAnswer) {
	r.n++
	r.trace = append(r.trace, fmt.Sprintf("%d %s %s %s %v %.200s", r.n, op, method, path, hdr, body))
	if hdr == nil {
		hdr = map[string]string{}
	}
	if _, ok := hdr["Authorization"]; !ok && !strings.HasPrefix(path, "/documents/") && !strings.HasPrefix(path, "/checkout/") {
		hdr["Authorization"] = r.m.auth
	}
	ans := make([]cfAnswer, len(r.envs))
	for i, e := range r.envs {
		ans[i] = e.send(method, path, body, hdr)
		if i > 0 && ans[i] != ans[0] {
			a, b := ans[0], ans[i]
			r.t.Fatalf("request %d (%s) %s %s answered differently:\n%s: %d\n%s%s\n\n%s: %d\n%s%s\n\ntrace:\n%s",
				r.n, op, method, path, r.envs[0].name, a.status, a.header, a.body, e.name, b.status, b.header, b.body,
				strings.Join(r.trace[max(0, len(r.trace)-40):], "\n"))
		}
	}
	if r.statuses[op] == nil {
		r.statuses[op] = map[int]int{}
	}
	r.statuses[op][ans[0].status]++
	if cfDebug && ans[0].status >= 400 {
		fmt.Fprintf(os.Stderr, "%s %s %s → %d %.300s\n", op, method, path, ans[0].status, ans[0].body)
	}
	var out map[string]any
	if strings.Contains(ans[0].header, "application/json") || strings.Contains(ans[0].header, "problem+json") {
		json.Unmarshal([]byte(ans[0].body), &out)
	}
	return ans[0].status, out, ans[0]
}

// mutate sends a mutating request, with an Idempotency-Key drawn or none.
func (r *cfRun) mutate(op, method, path, body string) (int, map[string]any) {
	var hdr map[string]string
	key := ""
	if rapid.IntRange(0, 2).Draw(r.t, "keyed") > 0 {
		key = fmt.Sprintf("%skey-%d", r.envs[0].ids.prefix, r.n)
		hdr = map[string]string{"Idempotency-Key": key}
	}
	code, b, a := r.do(op, method, path, body, hdr)
	if key != "" {
		r.m.keyed = append(r.m.keyed, cfKeyed{method, path, body, key, r.now(), a})
	}
	return code, b
}

func (r *cfRun) pick(list []string, label string) string {
	if len(list) == 0 {
		return "nope"
	}
	if rapid.IntRange(0, 3).Draw(r.t, label+"New") < 2 {
		return list[len(list)-1]
	}
	return list[rapid.IntRange(0, len(list)-1).Draw(r.t, label)]
}

func (r *cfRun) lines(most int) []order.LineInput {
	out := make([]order.LineInput, rapid.IntRange(1, most).Draw(r.t, "lines"))
	for i := range out {
		out[i] = order.LineInput{
			Description: new(fmt.Sprintf("Item %d", i)),
			Quantity:    new(rapid.Int64Range(1, 5).Draw(r.t, "qty")),
			UnitPrice:   new(rapid.Int64Range(1000, 90000).Draw(r.t, "unit")),
			Vat:         new(rapid.SampledFrom([]int64{0, 600, 1200, 2500}).Draw(r.t, "vat")),
		}
		if rapid.IntRange(0, 4).Draw(r.t, "shipping") == 0 {
			out[i].Type = "shippingFee"
		}
	}
	return out
}

// mint puts an authorization token of the sandbox's kind on every store,
// under a name of the test's (the sandbox's own are random).
func (r *cfRun) mint() {
	tok := fmt.Sprintf("at_%stok%d", r.envs[0].ids.prefix, r.n)
	r.n++
	req := sandbox.TokenRequest{Country: "SE", Currency: "SEK", Locale: rapid.SampledFrom([]string{"sv-SE", "en-SE"}).Draw(r.t, "locale"),
		Customer: &order.CustomerInput{CompanyID: rapid.SampledFrom([]string{"5560000001", "5560000027", "5560000019"}).Draw(r.t, "company")}}
	if pm := rapid.SampledFrom([]string{"", "invoice", "card"}).Draw(r.t, "pm"); pm != "" {
		req.PaymentMethod = &struct {
			Type string `json:"type"`
		}{pm}
	}
	var first error
	for i, e := range r.envs {
		a, err := sandbox.Mint(&req, r.m.id, tok, r.now(), e.ledger.AuthorizationTTL())
		if err == nil {
			err = e.ledger.PutAuthorization(context.Background(), a)
		}
		if i == 0 {
			first = err
		} else if fmtErr(err) != fmtErr(first) {
			r.t.Fatalf("mint: %s: %v, %s: %v", r.envs[0].name, first, e.name, err)
		}
	}
	if first == nil {
		r.m.tokens = append(r.m.tokens, tok)
	}
}

// ledgerIDs answers the ids of an order's sub-orders of a kind.
func ledgerIDs(o map[string]any, kind string) []string {
	var out []string
	list, _ := o[kind].([]any)
	for _, s := range list {
		out = append(out, s.(map[string]any)["ledgerId"].(string))
	}
	return out
}

func subOrderLines(sub any) []map[string]any {
	var out []map[string]any
	m, _ := sub.(map[string]any)
	ls, _ := m["orderLines"].([]any)
	for _, l := range ls {
		out = append(out, l.(map[string]any))
	}
	return out
}

func (r *cfRun) step() {
	rt := r.t
	r.m = r.merchants[rapid.IntRange(0, len(r.merchants)-1).Draw(rt, "merchant")]
	ctx := context.Background()
	switch op := rapid.IntRange(0, 31).Draw(rt, "op"); op {
	case 0, 1, 2:
		r.mint()
	case 3, 4, 5, 6: // an order, from a token or a customer token
		req := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": r.lines(4),
			"storeId": rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "store"), "reference": fmt.Sprintf("PO-%d", r.n%5)}
		if rapid.IntRange(0, 3).Draw(rt, "autoCapture") == 0 {
			req["autoCapture"] = map[string]any{"enabled": true}
		}
		if len(r.m.tokens) == 0 || rapid.IntRange(0, 3).Draw(rt, "fresh") > 0 {
			r.mint()
		}
		path := "/v1/authorization-tokens/" + r.pick(r.m.tokens, "token") + "/order"
		if len(r.m.ctokens) > 0 && rapid.IntRange(0, 3).Draw(rt, "fromCustomer") == 0 {
			delete(req, "locale")
			path = "/v1/customer-tokens/" + r.pick(r.m.ctokens, "ctoken") + "/order"
		}
		b, _ := json.Marshal(req)
		if code, o := r.mutate("create", "POST", path, string(b)); code == 200 {
			r.m.orders = append(r.m.orders, o["orderId"].(string))
		}
	case 7:
		r.mint()
		code, b := r.mutate("customerToken", "POST", "/v1/authorization-tokens/"+r.pick(r.m.tokens, "token")+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`)
		if code == 200 {
			r.m.ctokens = append(r.m.ctokens, b["customerToken"].(string))
		}
	case 8:
		if rapid.Bool().Draw(rt, "revoke") {
			r.mutate("revoke", "DELETE", "/v1/customer-tokens/"+r.pick(r.m.ctokens, "ctoken"), "")
		} else {
			r.mutate("deleteToken", "DELETE", "/v1/authorization-tokens/"+r.pick(r.m.tokens, "token"), "")
		}
	case 9, 10, 11: // capture, in full or some lines
		id := r.pick(r.m.orders, "order")
		_, o, _ := r.do("get", "GET", "/v1/orders/"+id, "", nil)
		ls := subOrderLines(o["uncaptured"])
		if len(ls) == 0 || rapid.Bool().Draw(rt, "full") {
			if code, _ := r.mutate("capture", "POST", "/v1/orders/"+id+"/capture", ""); code == 200 {
				r.m.captured = append(r.m.captured, id)
			}
			return
		}
		l := ls[rapid.IntRange(0, len(ls)-1).Draw(rt, "line")]
		body := fmt.Sprintf(`{"orderLines":[{"id":%q}],"totalCaptureAmount":%d}`, l["id"], int64(l["totalAmount"].(float64)))
		if code, _ := r.mutate("partialCapture", "POST", "/v1/orders/"+id+"/partialcapture", body); code == 200 {
			r.m.captured = append(r.m.captured, id)
		}
	case 12, 13: // refund, in full or one line
		id := r.pick(r.m.captured, "order")
		_, o, _ := r.do("get", "GET", "/v1/orders/"+id, "", nil)
		caps := ledgerIDs(o, "captured")
		capID := r.pick(caps, "capture")
		if rapid.Bool().Draw(rt, "full") {
			r.mutate("refund", "POST", "/v1/orders/"+id+"/refund/"+capID, "")
			return
		}
		list, _ := o["captured"].([]any)
		for _, c := range list {
			if c.(map[string]any)["ledgerId"] != capID {
				continue
			}
			ls := subOrderLines(c)
			l := ls[rapid.IntRange(0, len(ls)-1).Draw(rt, "line")]
			body, _ := json.Marshal(map[string]any{"orderLines": []any{map[string]any{"description": l["description"], "quantity": 1,
				"unitPrice": l["unitPrice"], "vat": l["vat"]}}, "totalRefundAmount": int64(l["unitPrice"].(float64)) - int64(l["unitDiscountAmount"].(float64)), "note": "n"})
			r.mutate("partialRefund", "POST", "/v1/orders/"+id+"/partialrefund/"+capID, string(body))
		}
	case 14: // cancel, void
		id := r.pick(r.m.orders, "order")
		if rapid.Bool().Draw(rt, "whole") {
			r.mutate("cancel", "DELETE", "/v1/orders/"+id, "")
			return
		}
		_, o, _ := r.do("get", "GET", "/v1/orders/"+id, "", nil)
		subs := ledgerIDs(o, "captured")
		if u, ok := o["uncaptured"].(map[string]any); ok {
			subs = append(subs, u["ledgerId"].(string))
		}
		r.mutate("cancelLedger", "DELETE", "/v1/orders/"+id+"/"+r.pick(subs, "ledger"), "")
	case 15:
		r.mutate("acknowledge", "POST", "/v1/orders/"+r.pick(r.m.orders, "order")+"/acknowledge", "")
	case 16:
		switch rapid.IntRange(0, 2).Draw(rt, "orderOp") {
		case 0:
			r.mutate("extend", "POST", "/v1/orders/"+r.pick(r.m.orders, "order")+"/extendexpiry", "")
		case 1:
			r.mutate("reference", "POST", "/v1/orders/"+r.pick(r.m.orders, "order")+"/reference", fmt.Sprintf(`{"reference":"PO-R%d","settlementReference":"SR-%d"}`, r.n, r.n%3))
		case 2:
			r.mutate("customer", "POST", "/v1/orders/"+r.pick(r.m.orders, "order")+"/customer", fmt.Sprintf(`{"email":"ap%d@example.se"}`, r.n))
		}
	case 17: // resend, recourse, pay, mark
		id := r.pick(r.m.captured, "order")
		_, o, _ := r.do("get", "GET", "/v1/orders/"+id, "", nil)
		capID := r.pick(ledgerIDs(o, "captured"), "capture")
		switch rapid.IntRange(0, 3).Draw(rt, "ledgerOp") {
		case 0:
			r.mutate("resend", "POST", "/v1/orders/"+id+"/document/"+capID+"/resend", "")
		case 1:
			r.mutate("recourse", "POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`)
		case 2:
			r.do("pay", "POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", fmt.Sprintf(`{"amount":%d}`, rapid.Int64Range(1, 90000).Draw(rt, "paid")), nil)
		case 3:
			r.do("mark", "POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/status",
				fmt.Sprintf(`{"status":%q}`, rapid.SampledFrom([]string{"reminder1", "debtCollection", "paid"}).Draw(rt, "mark")), nil)
		}
	case 18, 19: // sessions
		base := rapid.SampledFrom([]string{"/v1/sessions", "/v1/payment-sessions"}).Draw(rt, "api")
		switch rapid.IntRange(0, 3).Draw(rt, "sessionOp") {
		case 0, 1:
			req := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": r.lines(3),
				"storeId": rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "store"), "merchantReference": fmt.Sprintf("PO-%d", r.n%4)}
			b, _ := json.Marshal(req)
			if code, s := r.mutate("session", "POST", base, string(b)); code == 201 {
				r.m.sessions = append(r.m.sessions, [2]string{base, s["id"].(string)})
			}
		case 2, 3:
			if len(r.m.sessions) == 0 {
				return
			}
			s := r.m.sessions[rapid.IntRange(0, len(r.m.sessions)-1).Draw(rt, "session")]
			if rapid.Bool().Draw(rt, "update") {
				b, _ := json.Marshal(map[string]any{"merchantReference": fmt.Sprintf("PO-U%d", r.n), "orderLines": r.lines(2)})
				r.mutate("updateSession", "POST", s[0]+"/"+s[1], string(b))
			} else {
				r.mutate("cancelSession", "DELETE", s[0]+"/"+s[1], "")
			}
		}
	case 20, 21: // the clock moves
		// 31 days at times: past the retention of authorization tokens
		// and of the delivery log (30 days), so the sweeps remove some.
		d := rapid.SampledFrom([]time.Duration{1, 1500 * time.Microsecond, time.Second, time.Hour, 25 * time.Hour, 72 * time.Hour, 240 * time.Hour,
			31 * 24 * time.Hour}).Draw(rt, "advance")
		r.wall.Add(int64(d))
		r.trace = append(r.trace, fmt.Sprintf("clock +%v", d))
	case 22: // jobs
		job := rapid.SampledFrom([]string{"expire", "tasks", "autocapture"}).Draw(rt, "job")
		r.do("job-"+job, "POST", "/sandbox/v1/jobs/"+job, "", nil)
	case 23: // a settlement run
		r.do("settle", "POST", "/sandbox/v1/settlements/run", "", nil)
	case 24, 25: // notifications delivered, the receiver answering as drawn
		r.receiver.Store(int32(rapid.SampledFrom([]int{200, 200, 500, 410}).Draw(rt, "receiver")))
		r.wall.Add(int64(time.Millisecond))
		var first kassa.DeliveryStats
		for i, e := range r.envs {
			st, err := e.ledger.DeliverNotifications(ctx, r.deliveryOptions())
			if err != nil {
				rt.Fatalf("%s: deliver: %v", e.name, err)
			}
			if i == 0 {
				first = st
			} else if st != first {
				rt.Fatalf("%s delivered %+v, %s %+v", r.envs[0].name, first, e.name, st)
			}
		}
		r.trace = append(r.trace, fmt.Sprintf("deliver %d: %+v", r.receiver.Load(), first))
	case 26: // redelivered
		_, l, _ := r.do("notifications", "GET", "/v1/notifications?size=5", "", nil)
		list, _ := l["notifications"].([]any)
		if len(list) > 0 {
			n := list[rapid.IntRange(0, len(list)-1).Draw(rt, "notification")].(map[string]any)
			r.do("redeliver", "POST", "/v1/notifications/"+n["id"].(string)+"/redeliver", "", nil)
		}
	case 27: // the sweeps
		for i, sweep := range []func(*kassa.Ledger) (int, error){
			func(l *kassa.Ledger) (int, error) { return l.SweepIdempotency(ctx, 1000) },
			func(l *kassa.Ledger) (int, error) { return l.SweepNotifications(ctx, 1000) },
			func(l *kassa.Ledger) (int, error) { return l.SweepAuthorizations(ctx, 1000) },
		} {
			var counts []int
			for _, e := range r.envs {
				n, err := sweep(e.ledger)
				if err != nil {
					rt.Fatalf("%s: sweep: %v", e.name, err)
				}
				counts = append(counts, n)
			}
			if slices.Max(counts) != slices.Min(counts) {
				rt.Fatalf("sweeps removed %v", counts)
			}
			r.trace = append(r.trace, fmt.Sprintf("sweep %s: %v", []string{"idempotency", "notifications", "authorizations"}[i], counts))
		}
	case 30: // the buyer on the hosted checkout page
		// Before the copy only: an approval mints a random token, which
		// each server would mint its own of.
		if len(r.m.sessions) == 0 || len(r.envs) > 1 {
			return
		}
		s := r.m.sessions[rapid.IntRange(0, len(r.m.sessions)-1).Draw(rt, "session")]
		_, got, _ := r.do("getSession", "GET", s[0]+"/"+s[1], "", nil)
		link, _ := got["checkoutUrl"].(string)
		u, err := url.Parse(strings.TrimPrefix(link, "http://kassa"))
		if link == "" || err != nil {
			return
		}
		_, _, page := r.do("checkoutPage", "GET", u.RequestURI(), "", nil)
		terms := ""
		if m := cfTerms.FindStringSubmatch(page.body); m != nil {
			terms = m[1]
		}
		form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {rapid.SampledFrom([]string{"5560000001", "5560000027"}).Draw(rt, "company")},
			"firstName": {"A"}, "lastName": {"B"}, "email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"},
			"paymentMethod": {"invoice"}, "action": {rapid.SampledFrom([]string{"approve", "approve", "decline"}).Draw(rt, "action")}, "terms": {terms}}
		r.do("checkoutSubmit", "POST", u.Path, form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		_, got, _ = r.do("getSession", "GET", s[0]+"/"+s[1], "", nil)
		if tok, _ := got["authorizationToken"].(string); tok != "" && !slices.Contains(r.m.tokens, tok) {
			r.m.tokens = append(r.m.tokens, tok)
		}
	case 31: // a risk decision on an order on hold
		r.do("risk", "POST", "/sandbox/v1/orders/"+r.pick(r.m.orders, "order")+"/risk",
			fmt.Sprintf(`{"decision":%q}`, rapid.SampledFrom([]string{"approve", "deny"}).Draw(rt, "decision")), nil)
	case 28, 29: // an Idempotency-Key again
		if len(r.m.keyed) == 0 {
			return
		}
		k := r.m.keyed[rapid.IntRange(0, len(r.m.keyed)-1).Draw(rt, "replay")]
		r.replay(k)
	}
}

// next makes, for every merchant, the next of each numbered thing: an
// order captured (the next invoice number) and refunded (the next credit
// note), a settlement run (the next settlement reference) and the
// notifications they announce (the delivery log's next entries), and sends
// its oldest stored key again. Right after the copy, these are what a copy
// that lost a series' place would get wrong.
func (r *cfRun) next() {
	for _, m := range r.merchants {
		r.m = m
		minted := len(m.tokens)
		r.mint()
		if len(m.tokens) == minted {
			// The draw named the buyer the sandbox declines for credit:
			// no token, and the last one, if any, is spent already. A
			// merchant that had none made the index below -1.
			continue
		}
		body := `{"country":"SE","currency":"SEK","locale":"sv-SE","storeId":"s1","orderLines":[{"description":"Next","quantity":2,"unitPrice":5000,"vat":2500}]}`
		code, o, _ := r.do("nextCreate", "POST", "/v1/authorization-tokens/"+m.tokens[len(m.tokens)-1]+"/order", body, nil)
		if code != 200 {
			continue // a declined buyer: the next mint draws another
		}
		id := o["orderId"].(string)
		m.orders = append(m.orders, id)
		if m.ack {
			r.do("nextAcknowledge", "POST", "/v1/orders/"+id+"/acknowledge", "", nil)
		}
		if code, o, _ = r.do("nextCapture", "POST", "/v1/orders/"+id+"/capture", "", nil); code == 200 {
			m.captured = append(m.captured, id)
			r.do("nextRefund", "POST", "/v1/orders/"+id+"/refund/"+ledgerIDs(o, "captured")[0], "", nil)
		}
		r.pages("nextNotifications", "/v1/notifications?size=2", "notifications")
		if len(m.keyed) > 0 {
			r.replay(m.keyed[0])
		}
	}
	r.do("nextSettle", "POST", "/sandbox/v1/settlements/run", "", nil)
	r.pages("nextSettlements", "/v1/settlements?size=2", "settlements")
}

// replay sends a keyed request again; within the key's lifetime the answer
// to one that succeeded is its first, byte for byte.
func (r *cfRun) replay(k cfKeyed) {
	_, _, a := r.do("replay", k.method, k.path, k.body, map[string]string{"Idempotency-Key": k.key})
	if k.first.status < 300 && r.now().Sub(k.at) < 23*time.Hour && (a.status != k.first.status || a.body != k.first.body) {
		r.t.Fatalf("replay of %s %s %s answered %d\n%s\nnot its first answer %d\n%s", k.key, k.method, k.path, a.status, a.body, k.first.status, k.first.body)
	}
}

func (r *cfRun) deliveryOptions() kassa.DeliveryOptions {
	// A lease of a nanosecond, and the clock moved on before each run: a
	// PostgreSQL store judges leases on the database's own clock
	// (storage.SharedClock), not on the test's, so a message a run claimed
	// and left unposted would come back at once on bolt and only after the
	// lease in real time on PostgreSQL.
	return kassa.DeliveryOptions{AllowPrivateNetworks: true, Parallel: 1, RandN: func(n int64) int64 { return n / 2 }, WallClock: r.now,
		Lease: time.Nanosecond}
}

// pages reads every page of a list, following its cursor, and answers the
// items of the named array.
func (r *cfRun) pages(op, path, items string) []map[string]any {
	var out []map[string]any
	for range 1000 {
		code, b, _ := r.do(op, "GET", path, "", nil)
		if code != 200 {
			return out
		}
		list, _ := b[items].([]any)
		for _, x := range list {
			out = append(out, x.(map[string]any))
		}
		next, param := "", ""
		if c, _ := b["nextCursor"].(string); c != "" {
			next, param = c, "cursor"
		} else if c, _ := b["nextFromId"].(string); c != "" {
			next, param = c, "fromId"
		}
		if next == "" {
			return out
		}
		base, query, _ := strings.Cut(path, "?")
		v, _ := url.ParseQuery(query)
		v.Set(param, next)
		path = base + "?" + v.Encode()
	}
	r.t.Fatalf("%s: more than 1000 pages", path)
	return nil
}

var cfTerms = regexp.MustCompile(`name="terms" value="([0-9a-f]+)"`)

var cfLink = regexp.MustCompile(`http://kassa(/(?:documents|checkout)/[^"\\]+)`)

// readAll reads everything the API offers of every merchant, on every
// server, and replays every stored key.
func (r *cfRun) readAll() {
	at := func(h int) string {
		return url.QueryEscape(r.now().Add(time.Duration(h) * time.Hour).Format(time.RFC3339Nano))
	}
	for _, m := range r.merchants {
		r.m = m
		var orderQueries []string
		for _, q := range []string{"", "status=uncaptured", "status=partiallyCaptured", "status=fullyCaptured", "status=cancelled", "status=expired",
			"status=partiallyRefunded", "status=fullyRefunded", "status=unacknowledged", "status=fullyCaptured,cancelled", "statusNot=expired,cancelled",
			"statusAnd=fullyCaptured,partiallyRefunded", "storeId=s1", "storeId=s2", "paymentMethodCategory=invoice", "paymentMethodCategory=card",
			"merchantReference=PO-1", "merchantReference=PO-R3", "q=PO", "q=Item", "createdFrom=" + at(-30), "createdTo=" + at(-30),
			"expiresFrom=" + at(24), "expiresTo=" + at(24*10)} {
			orderQueries = append(orderQueries, q)
		}
		for i, q := range orderQueries {
			size := []int{1, 2, 3, 100}[i%4]
			r.pages("listOrders", fmt.Sprintf("/v1/orders?size=%d&%s", size, q), "orders")
		}
		all := r.pages("listOrders", "/v1/orders?size=100", "orders")
		for _, o := range all {
			id, _ := o["orderId"].(string)
			if id == "" {
				id, _ = o["id"].(string)
			}
			r.do("getOrder", "GET", "/v1/orders/"+id, "", nil)
			r.do("orderPaymentStatus", "GET", "/v1/orders/"+id+"/paymentstatus", "", nil)
			r.do("paymentStatus", "GET", "/v1/paymentstatus?orderId="+id, "", nil)
			for _, link := range cfLink.FindAllStringSubmatch(strings.ReplaceAll(r.rawOrder(id), `\u0026`, "&"), -1) {
				r.do("document", "GET", link[1], "", nil)
			}
		}
		for _, tok := range m.ctokens {
			r.do("getCustomerToken", "GET", "/v1/customer-tokens/"+tok, "", nil)
		}
		for i, q := range []string{"", "state=created", "state=authorized", "state=cancelled", "source=checkout", "source=payment", "storeId=s2",
			"merchantReference=PO-1", "createdFrom=" + at(-30), "updatedTo=" + at(-30)} {
			r.pages("listSessions", fmt.Sprintf("/v1/sessions?size=%d&%s", []int{1, 2, 100}[i%3], q), "sessions")
		}
		for _, s := range m.sessions {
			_, b, _ := r.do("getSession", "GET", s[0]+"/"+s[1], "", nil)
			r.do("sessionStatus", "GET", "/v1/paymentstatus?sessionId="+s[1], "", nil)
			if link, _ := b["checkoutUrl"].(string); strings.HasPrefix(link, "http://kassa/") {
				r.do("checkoutPage", "GET", strings.TrimPrefix(link, "http://kassa"), "", nil)
			}
		}
		settlements := r.pages("listSettlements", "/v1/settlements?size=1", "settlements")
		for _, q := range []string{"storeId=s1", "currency=SEK", "createdFrom=" + at(-30), "createdTo=" + at(-30)} {
			r.pages("listSettlements", "/v1/settlements?size=2&"+q, "settlements")
		}
		for _, s := range settlements {
			id := s["id"].(string)
			r.do("getSettlement", "GET", "/v1/settlements/"+id, "", nil)
			r.pages("settlementTx", "/v1/settlements/"+id+"/tx?size=2", "transactions")
			r.do("exportSettlement", "GET", "/v1/settlements/"+id+"/export.csv", "", nil)
			if ref, _ := s["reference"].(string); ref != "" {
				r.pages("listSettlements", "/v1/settlements?reference="+url.QueryEscape(ref), "settlements")
			}
		}
		for _, n := range r.pages("notifications", "/v1/notifications?size=3", "notifications") {
			r.do("notification", "GET", "/v1/notifications/"+n["id"].(string), "", nil)
		}
		r.do("settings", "GET", "/v1/notification-settings", "", nil)
		for _, k := range m.keyed {
			r.replay(k)
		}
	}
}

// rawOrder is the original's answer to GET /v1/orders/{id}, unchanged
// (its document links whole).
func (r *cfRun) rawOrder(id string) string {
	req := httptest.NewRequest("GET", "http://kassa/v1/orders/"+id, nil)
	req.Header.Set("Authorization", r.m.auth)
	w := httptest.NewRecorder()
	r.envs[0].h.ServeHTTP(w, req)
	return w.Body.String()
}

func TestCopiesAnswerAsTheOriginal(t *testing.T) {
	t.Setenv("KASSA_KEY", "")
	dbURL := os.Getenv("KASSA_TEST_DATABASE_URL")
	if dbURL == "" {
		t.Log("KASSA_TEST_DATABASE_URL not set: the backup's copy only, not store copy's")
	}
	var receiver atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.WriteHeader(int(receiver.Load()))
	}))
	defer hook.Close()
	ctx := context.Background()
	statuses := map[string]map[int]int{}
	defer func() {
		if testing.Verbose() {
			for _, op := range slices.Sorted(maps.Keys(statuses)) {
				t.Logf("%-20s %v", op, statuses[op])
			}
		}
	}()
	rapidrun.Check(t, 3, func(rt *rapid.T, seq int) {
		var wall atomic.Int64
		wall.Store(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC).UnixNano())
		now := func() time.Time { return time.Unix(0, wall.Load()).UTC() }
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			rt.Fatal(err)
		}
		key, err := loadKey(dir)
		if err != nil {
			rt.Fatal(err)
		}
		src, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: now, NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		orig := newCFEnv("bolt", src, key, "b-")
		biz := &cfRun{t: rt, envs: []*cfEnv{orig}, wall: &wall, now: now, receiver: &receiver, statuses: statuses}
		for i := range 2 {
			ack := rapid.Bool().Draw(rt, "ack")
			creds, _, err := orig.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: fmt.Sprintf("M%d", i), ClientID: fmt.Sprintf("m%d", i),
				ClientSecret: fmt.Sprintf("m%d-secret-0123456789", i), RequireAck: ack,
				FeeBasisPoints: rapid.Int64Range(0, 300).Draw(rt, "bp"), FeeFixedPerCapture: rapid.Int64Range(0, 500).Draw(rt, "fixed")})
			if err != nil {
				rt.Fatal(err)
			}
			if _, err := orig.ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: hook.URL + fmt.Sprintf("/m%d", i), Events: []string{"order.*", "session.authorized", "document.resent"}}); err != nil {
				rt.Fatal(err)
			}
			biz.merchants = append(biz.merchants, &cfMerchant{id: creds.MerchantID, ack: ack, auth: "Basic " + basicCreds(creds.ClientID, fmt.Sprintf("m%d-secret-0123456789", i))})
		}
		for range rapid.IntRange(*copySteps/2, *copySteps).Draw(rt, "steps") {
			biz.step()
		}

		// The backup, online, unpacked into a new data directory.
		var archive bytes.Buffer
		if err := writeBackup(&archive, dir, src); err != nil {
			rt.Fatal(err)
		}
		restoredDir := filepath.Join(t.TempDir(), "restored")
		if err := os.MkdirAll(restoredDir, 0o700); err != nil {
			rt.Fatal(err)
		}
		untar(t, archive.Bytes(), restoredDir)
		restoredKey, err := loadKey(restoredDir)
		if err != nil || !bytes.Equal(restoredKey, key) {
			rt.Fatalf("the restored key differs (%v)", err)
		}
		restored, err := bolt.Open(filepath.Join(restoredDir, "kassa.db"), bolt.Options{Clock: now, NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer restored.Close()
		copies := []*cfEnv{newCFEnv("restored", restored, key, "")}

		// kassa store copy of the stopped original into PostgreSQL.
		if dbURL != "" {
			if err := src.Close(); err != nil {
				rt.Fatal(err)
			}
			pgURL := pgtest.FreshSchema(t)
			var out, errb bytes.Buffer
			if code := run([]string{"store", "copy", "--data", dir, "--database-url", pgURL}, &out, &errb); code != 0 {
				rt.Fatalf("store copy: %d\n%s\n%s", code, out.String(), errb.String())
			}
			if src, err = bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: now, NoSync: true}); err != nil {
				rt.Fatal(err)
			}
			orig = newCFEnv("bolt", src, key, "")
			pg, err := postgres.Open(ctx, pgURL, postgres.Options{Clock: now, MaxConns: 4})
			if err != nil {
				rt.Fatal(err)
			}
			defer pg.Close()
			pgKey, err := pg.SigningKey(ctx, bytes.Repeat([]byte{9}, 32), false)
			if err != nil || !bytes.Equal(pgKey, key) {
				rt.Fatalf("PostgreSQL's signing key differs (%v)", err)
			}
			copies = append(copies, newCFEnv("postgres", pg, key, ""))
		}
		defer src.Close()
		biz.envs = append([]*cfEnv{orig}, copies...)
		for _, e := range biz.envs {
			e.ids.prefix, e.ids.n = "a-", map[string]int{}
		}
		biz.readAll()
		biz.next()
		for range rapid.IntRange(*copySteps/4, *copySteps/2).Draw(rt, "after") {
			biz.step()
		}
		biz.readAll()
	})
}

func basicCreds(id, secret string) string {
	return base64.StdEncoding.EncodeToString([]byte(id + ":" + secret))
}
