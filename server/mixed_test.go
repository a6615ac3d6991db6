package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// The mixed driver: every order operation fired at once at a few orders (so
// that they collide), through one bbolt server and two PostgreSQL replicas
// on one schema, with and without Idempotency-Keys, the same key sent to two
// replicas at once and replayed afterwards. Every 2xx body, and every order
// at the end, must hold the money invariants to the minor unit, and every
// executed request must be in the orders exactly once.
//
// KASSA_MIX_RUNS (runs per store, default 6), KASSA_MIX_SEED (seed offset) and
// KASSA_MIX_DEBUG (log every refusal) tune a run; PostgreSQL takes part when
// KASSA_TEST_DATABASE_URL is set.

// mixReplica is one server (its own ledger, caches and clock) on a store.
type mixReplica struct {
	url    string
	ledger *kassa.Ledger
}

type mixCluster struct {
	name     string
	reps     []*mixReplica
	auth     string
	merchant string
}

func newMixReplica(t *testing.T, st storage.Store) *mixReplica {
	clock := NewClock(true)
	var srv *Server
	ledger := kassa.New(st, kassa.Options{
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	ts := httptest.NewUnstartedServer(nil)
	srv = New(Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef"),
		Sandbox: true, Clock: clock, BaseURL: "http://" + ts.Listener.Addr().String()})
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return &mixReplica{url: ts.URL, ledger: ledger}
}

func mixClusters(t *testing.T) []*mixCluster {
	var out []*mixCluster
	b, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	out = append(out, &mixCluster{name: "bolt", reps: []*mixReplica{newMixReplica(t, b)}})
	if os.Getenv("KASSA_TEST_DATABASE_URL") != "" {
		u := pgtest.FreshSchema(t)
		pg := &mixCluster{name: "postgres"}
		for range 2 {
			st, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 6})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			pg.reps = append(pg.reps, newMixReplica(t, st))
		}
		out = append(out, pg)
	}
	for _, c := range out {
		for _, r := range c.reps {
			creds, _, err := r.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "mix", ClientSecret: "mix-secret"})
			if err != nil {
				t.Fatal(err)
			}
			c.merchant = creds.MerchantID
		}
		c.auth = basic("mix", "mix-secret")
	}
	return out
}

func (c *mixCluster) do(rep int, method, path string, body any, key string) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.reps[rep%len(c.reps)].url+path, rd)
	req.Header.Set("Authorization", c.auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The parts of the order record the checks read.
type mMoney struct {
	MinorUnits int64 `json:"minorUnits"`
}
type mLine struct {
	ID                 string `json:"id"`
	Description        string `json:"description"`
	Quantity           int64  `json:"quantity"`
	TotalAmount        int64  `json:"totalAmount"`
	TotalVatAmount     int64  `json:"totalVatAmount"`
	UnitPrice          int64  `json:"unitPrice"`
	UnitDiscountAmount int64  `json:"unitDiscountAmount"`
	Vat                int64  `json:"vat"`
}
type mSub struct {
	LedgerID          string                  `json:"ledgerId"`
	AvailableActions  []struct{ Type string } `json:"availableActions"`
	DocumentReference string                  `json:"documentReference"`
	OrderLines        []mLine                 `json:"orderLines"`
	Status            []string                `json:"status"`
	Gross             mMoney                  `json:"totalOrderAmount"`
	Net               mMoney                  `json:"totalOrderAmountExclVat"`
	VAT               mMoney                  `json:"totalOrderVatAmount"`
}
type mOrder struct {
	ID            string                `json:"id"`
	Status        []string              `json:"status"`
	VatMode       string                `json:"vatMode"`
	PaymentMethod struct{ Type string } `json:"paymentMethod"`
	OrderAmount   mMoney                `json:"orderAmount"`
	Captured      mMoney                `json:"capturedAmount"`
	Refunded      mMoney                `json:"refundedAmount"`
	UncapturedAmt mMoney                `json:"uncapturedAmount"`
	Captures      []mSub                `json:"captured"`
	Refunds       []mSub                `json:"refunded"`
	Uncaptured    mSub                  `json:"uncaptured"`
	Events        []struct {
		LedgerID string `json:"ledgerId"`
		Type     string `json:"type"`
		Amount   mMoney `json:"amount"`
	} `json:"events"`
}

func (s *mSub) offers(a string) bool {
	return slices.ContainsFunc(s.AvailableActions, func(x struct{ Type string }) bool { return x.Type == a })
}

// checkSnapshot checks one order record on its own: every figure against
// its lines, the order's amounts against its sub-orders, every capture and
// refund against exactly one event, line ids unique, statuses against the
// amounts.
func checkSnapshot(o *mOrder) []string {
	var bad []string
	badf := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	sub := func(what string, s *mSub) {
		var sum, vat int64
		for _, l := range s.OrderLines {
			if l.TotalAmount != l.Quantity*(l.UnitPrice-l.UnitDiscountAmount) {
				badf("%s line %s: totalAmount %d != %d×(%d−%d)", what, l.ID, l.TotalAmount, l.Quantity, l.UnitPrice, l.UnitDiscountAmount)
			}
			sum += l.TotalAmount
			vat += l.TotalVatAmount
		}
		if vat != s.VAT.MinorUnits || s.Net.MinorUnits+s.VAT.MinorUnits != s.Gross.MinorUnits {
			badf("%s: vat %d (lines %d), net %d + vat != gross %d", what, s.VAT.MinorUnits, vat, s.Net.MinorUnits, s.Gross.MinorUnits)
		}
		if (o.VatMode == "exclVat" && sum != s.Net.MinorUnits) || (o.VatMode != "exclVat" && sum != s.Gross.MinorUnits) {
			badf("%s: lines sum %d, gross %d net %d (%s)", what, sum, s.Gross.MinorUnits, s.Net.MinorUnits, o.VatMode)
		}
	}
	sub("uncaptured", &o.Uncaptured)
	var captured, live, refunded int64
	ids := map[string]string{}
	seenLine := func(where string, s *mSub) {
		for _, l := range s.OrderLines {
			if prev, ok := ids[l.ID]; ok {
				badf("line %s in %s and %s", l.ID, prev, where)
			}
			ids[l.ID] = where
		}
	}
	seenLine("uncaptured", &o.Uncaptured)
	events := func(ledger string, types ...string) (n int, amount int64) {
		for _, e := range o.Events {
			if e.LedgerID == ledger && slices.Contains(types, e.Type) {
				n++
				amount = e.Amount.MinorUnits
			}
		}
		return
	}
	for i := range o.Captures {
		c := &o.Captures[i]
		sub("capture "+c.LedgerID, c)
		seenLine("capture "+c.LedgerID, c)
		void := slices.Contains(c.Status, "void")
		if !void {
			captured += c.Gross.MinorUnits
			live++
		}
		if n, a := events(c.LedgerID, "partialCapture", "fullCapture"); n != 1 || a != c.Gross.MinorUnits {
			badf("capture %s of %d: %d capture events (last %d)", c.LedgerID, c.Gross.MinorUnits, n, a)
		}
		if n, a := events(c.LedgerID, "cancel"); (n == 1) != void || (void && a != c.Gross.MinorUnits) || n > 1 {
			badf("capture %s void %v: %d cancel events (last %d)", c.LedgerID, void, n, a)
		}
	}
	for i := range o.Refunds {
		r := &o.Refunds[i]
		sub("refund "+r.LedgerID, r)
		seenLine("refund "+r.LedgerID, r)
		refunded += r.Gross.MinorUnits
		if r.Gross.MinorUnits <= 0 {
			badf("refund %s of %d", r.LedgerID, r.Gross.MinorUnits)
		}
		if n, a := events(r.LedgerID, "partialRefund", "fullRefund"); n != 1 || a != r.Gross.MinorUnits {
			badf("refund %s of %d: %d refund events (last %d)", r.LedgerID, r.Gross.MinorUnits, n, a)
		}
	}
	for _, e := range o.Events {
		switch e.Type {
		case "partialCapture", "fullCapture":
			if !slices.ContainsFunc(o.Captures, func(s mSub) bool { return s.LedgerID == e.LedgerID }) {
				badf("capture event for no capture %s", e.LedgerID)
			}
		case "partialRefund", "fullRefund":
			if !slices.ContainsFunc(o.Refunds, func(s mSub) bool { return s.LedgerID == e.LedgerID }) {
				badf("refund event for no refund %s", e.LedgerID)
			}
		}
	}
	unc := o.Uncaptured.Gross.MinorUnits
	if o.Captured.MinorUnits != captured || o.UncapturedAmt.MinorUnits != unc || o.Refunded.MinorUnits != refunded ||
		o.OrderAmount.MinorUnits != captured+unc {
		badf("amounts: order %d captured %d uncaptured %d refunded %d; sub-orders give %d %d %d %d",
			o.OrderAmount.MinorUnits, o.Captured.MinorUnits, o.UncapturedAmt.MinorUnits, o.Refunded.MinorUnits, captured+unc, captured, unc, refunded)
	}
	if refunded > captured {
		badf("refunded %d > captured %d", refunded, captured)
	}
	has := func(s string) bool { return slices.Contains(o.Status, s) }
	hasUnc := len(o.Uncaptured.OrderLines) > 0
	want := map[string]bool{
		"uncaptured":        hasUnc,
		"cancelled":         !hasUnc && live == 0,
		"partiallyCaptured": hasUnc && live > 0,
		"fullyCaptured":     !hasUnc && live > 0,
		"fullyRefunded":     refunded > 0 && refunded >= captured && !hasUnc,
		"partiallyRefunded": refunded > 0 && !(refunded >= captured && !hasUnc),
	}
	for s, w := range want {
		if has(s) != w {
			badf("status %v: %s should be %v (uncaptured lines %v, live captures %d, captured %d, refunded %d)", o.Status, s, w, hasUnc, live, captured, refunded)
		}
	}
	u := &o.Uncaptured
	if (u.offers("capture") || u.offers("partialCapture") || u.offers("editOrder")) && !hasUnc {
		badf("uncaptured offers %v with no lines", u.AvailableActions)
	}
	if has("readyForCapture") != u.offers("partialCapture") && hasUnc {
		badf("readyForCapture %v but partialCapture offered %v", has("readyForCapture"), u.offers("partialCapture"))
	}
	return bad
}

// mixExec is one executed request: the first 2xx of a key, or a 2xx
// without one.
type mixExec struct {
	op, orderID, key, ledger string
	want                     int64 // the gross a capture or refund was sent for; -1 unknown
	made                     string
}

type mixRun struct {
	t     *testing.T
	c     *mixCluster
	ids   []string
	mu    sync.Mutex
	first map[string][]byte // key → first 2xx body
	reqOf map[string]mixReq // key → the request sent with it
	execs []mixExec
	retry []mixReq
	// jobCaptures are the captures no request made: the auto-capture job's.
	jobCaptures int64

	sent, ok, refused, pairs, differ, replays, autoCaptured atomic.Int64
	byOp                                                    sync.Map // op → *[2]atomic.Int64 {sent, ok}
}

type mixReq struct {
	op, orderID, method, path, key, ledger string
	body                                   any
	want                                   int64
}

// snapshot reads the order on a random replica.
func (r *mixRun) snapshot(rng *rand.Rand, id string) *mOrder {
	code, b := r.c.do(rng.IntN(8), "GET", "/v1/orders/"+id, nil, "")
	var o mOrder
	if code != 200 || json.Unmarshal(b, &o) != nil {
		r.t.Errorf("%s: get %s: %d %s", r.c.name, id, code, b)
		return nil
	}
	return &o
}

// editTotals gives an edit body for lines in the order's mode.
func editBody(mode string, lines []map[string]any) map[string]any {
	raw, _ := json.Marshal(lines)
	var ins []order.LineInput
	json.Unmarshal(raw, &ins)
	var f fault.Fields
	built := order.BuildLines(&f, "orderLines", ins, money.VATMode(mode), order.NoIDs{})
	t := order.SumLines(built, money.VATMode(mode))
	return map[string]any{"orderLines": lines, "totalOrderAmount": t.Gross, "totalOrderAmountExclVat": t.Net, "totalOrderVatAmount": t.VAT}
}

// mixWeights draws the operations: those that close the uncaptured part
// (cancel, full captures) rarely, so that edits and captures of lines meet.
var mixWeights = strings.Fields(`edit edit edit edit edit editCustomer paymentMethod paymentMethod reference extendExpiry
	void void acknowledge acknowledge acknowledge partialCaptureByID partialCaptureByID partialCaptureByID
	partialCaptureNoID partialCaptureNoID partialRefund partialRefund partialRefund refund refund resend
	cancel capture captureLines pay pay recourse autocapture`)

// plan builds a request for op from a (possibly stale) snapshot; ok false
// when the snapshot gives nothing to aim at.
func plan(rng *rand.Rand, op string, o *mOrder) (mixReq, bool) {
	base := "/v1/orders/" + o.ID
	q := mixReq{op: op, orderID: o.ID, want: -1}
	unc := o.Uncaptured.OrderLines
	incl := o.VatMode != "exclVat"
	pickCapture := func() (mSub, bool) {
		if len(o.Captures) == 0 {
			return mSub{}, false
		}
		return o.Captures[rng.IntN(len(o.Captures))], true
	}
	switch op {
	case "edit":
		var lines []map[string]any
		for _, l := range unc {
			if rng.IntN(4) == 0 {
				continue
			}
			lines = append(lines, map[string]any{"description": l.Description, "quantity": max(1, l.Quantity+int64(rng.IntN(3)-1)),
				"unitPrice": l.UnitPrice, "vat": l.Vat})
		}
		if len(lines) == 0 || rng.IntN(3) == 0 {
			lines = append(lines, map[string]any{"description": "added", "quantity": 1 + rng.IntN(3), "unitPrice": 100 + rng.IntN(900),
				"vat": []int{0, 600, 1200, 2500}[rng.IntN(4)]})
		}
		q.method, q.path, q.body = "POST", base, editBody(o.VatMode, lines)
	case "editCustomer":
		q.method, q.path, q.body = "POST", base+"/customer", map[string]any{"email": fmt.Sprintf("a%d@example.se", rng.IntN(100)), "reference1": "r"}
	case "paymentMethod":
		q.method, q.path, q.body = "POST", base+"/paymentmethod", map[string]any{"paymentMethod": map[string]any{"provider": "service", "type": "advanceInvoice"}}
	case "reference":
		q.method, q.path, q.body = "POST", base+"/reference", map[string]any{"reference": fmt.Sprintf("PO-%d", rng.IntN(1000))}
	case "extendExpiry":
		q.method, q.path = "POST", base+"/extendexpiry"
	case "cancel":
		q.method, q.path = "DELETE", base
	case "void":
		c, ok := pickCapture()
		if !ok {
			return q, false
		}
		q.method, q.path, q.ledger = "DELETE", base+"/"+c.LedgerID, c.LedgerID
	case "acknowledge":
		q.method, q.path = "POST", base+"/acknowledge"
	case "partialCaptureByID", "captureLines":
		if len(unc) == 0 {
			return q, false
		}
		l := unc[rng.IntN(len(unc))]
		q.body = map[string]any{"orderLines": []any{map[string]any{"id": l.ID}}, "totalCaptureAmount": l.TotalAmount}
		if incl {
			q.want = l.TotalAmount
		}
		q.method, q.path = "POST", base+"/partialcapture"
		if op == "captureLines" {
			q.path = base + "/capture"
		}
	case "partialCaptureNoID":
		if len(unc) == 0 {
			return q, false
		}
		l := unc[rng.IntN(len(unc))]
		amount := 1 + rng.Int64N(max(1, l.UnitPrice))
		q.body = map[string]any{"orderLines": []any{map[string]any{"description": l.Description, "quantity": 1, "unitPrice": amount, "vat": l.Vat}},
			"totalCaptureAmount": amount}
		if incl {
			q.want = amount
		}
		q.method, q.path = "POST", base+"/partialcapture"
	case "capture":
		q.method, q.path = "POST", base+"/capture"
	case "partialRefund":
		c, ok := pickCapture()
		if !ok || len(c.OrderLines) == 0 {
			return q, false
		}
		l := c.OrderLines[rng.IntN(len(c.OrderLines))]
		amount := 1 + rng.Int64N(max(1, min(l.UnitPrice, 3000)))
		q.body = map[string]any{"orderLines": []any{map[string]any{"description": "Return", "quantity": 1, "unitPrice": amount, "vat": l.Vat}},
			"totalRefundAmount": amount, "note": "n"}
		if incl {
			q.want = amount
		}
		q.method, q.path, q.ledger = "POST", base+"/partialrefund/"+c.LedgerID, c.LedgerID
	case "refund":
		c, ok := pickCapture()
		if !ok {
			return q, false
		}
		q.method, q.path, q.ledger = "POST", base+"/refund/"+c.LedgerID, c.LedgerID
	case "pay":
		c, ok := pickCapture()
		if !ok {
			return q, false
		}
		q.want = 1 + rng.Int64N(max(1, c.Gross.MinorUnits))
		q.method, q.path, q.ledger, q.body = "POST", "/sandbox/v1/orders/"+o.ID+"/ledgers/"+c.LedgerID+"/payments", c.LedgerID, map[string]any{"amount": q.want}
	case "recourse":
		c, ok := pickCapture()
		if !ok {
			return q, false
		}
		q.method, q.path, q.ledger, q.body = "POST", base+"/recourse/"+c.LedgerID, c.LedgerID, map[string]any{"reason": "unpaid"}
	case "autocapture":
		q.method, q.path = "POST", "/sandbox/v1/jobs/autocapture"
	case "resend":
		c, ok := pickCapture()
		if !ok {
			return q, false
		}
		q.method, q.path = "POST", base+"/document/"+c.LedgerID+"/resend"
	}
	return q, true
}

func (r *mixRun) count(op string, ok bool) {
	v, _ := r.byOp.LoadOrStore(op, new([2]atomic.Int64))
	c := v.(*[2]atomic.Int64)
	c[0].Add(1)
	if ok {
		c[1].Add(1)
	}
}

// send makes one request on replica rep and books its answer.
func (r *mixRun) send(rep int, q mixReq) {
	r.sent.Add(1)
	code, b := r.c.do(rep, q.method, q.path, q.body, q.key)
	r.count(q.op, code/100 == 2)
	switch {
	case code == 409 && bytes.Contains(b, []byte("idempotency_request_in_progress")):
		r.mu.Lock()
		r.retry = append(r.retry, q)
		r.mu.Unlock()
		return
	case code >= 500 || code == 0:
		r.t.Errorf("%s: %s %s: %d %s", r.c.name, q.method, q.path, code, b)
		return
	case code/100 != 2:
		r.refused.Add(1)
		if os.Getenv("KASSA_MIX_DEBUG") != "" {
			r.t.Logf("%s %s %s: %d %s", q.op, q.method, q.path, code, b)
		}
		return
	}
	r.ok.Add(1)
	if q.op == "autocapture" {
		var n struct{ Captured int64 }
		json.Unmarshal(b, &n)
		r.autoCaptured.Add(n.Captured)
		return
	}
	var o mOrder
	if q.op != "resend" {
		if err := json.Unmarshal(b, &o); err != nil {
			r.t.Errorf("%s: %s %s: %v %s", r.c.name, q.method, q.path, err, b)
			return
		}
		for _, p := range checkSnapshot(&o) {
			r.t.Errorf("%s: answer of %s %s: %s", r.c.name, q.op, q.path, p)
		}
		// Read after write on another replica: the answer's events are
		// all there (the log only grows).
		if code, b2 := r.c.do(rep+1, "GET", "/v1/orders/"+q.orderID, nil, ""); code == 200 {
			var now mOrder
			json.Unmarshal(b2, &now)
			if len(now.Events) < len(o.Events) {
				r.t.Errorf("%s: %s answered %d events; a read after it on replica %d shows %d", r.c.name, q.op, len(o.Events), (rep+1)%len(r.c.reps), len(now.Events))
			}
			for i := range min(len(now.Events), len(o.Events)) {
				if now.Events[i] != o.Events[i] {
					r.t.Errorf("%s: event %d of %s differs on a later read: %+v, then %+v", r.c.name, i, q.orderID, o.Events[i], now.Events[i])
					break
				}
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.key != "" {
		if first, seen := r.first[q.key]; seen {
			if !bytes.Equal(first, b) {
				r.differ.Add(1)
				r.t.Errorf("%s: key %s answered twice, differently:\n%s\n%s", r.c.name, q.key, first, b)
			}
			return
		}
		r.first[q.key] = b
		r.reqOf[q.key] = q
	}
	e := mixExec{op: q.op, orderID: q.orderID, key: q.key, ledger: q.ledger, want: q.want}
	// The answer is the order as the operation left it: what it made is
	// the last capture or refund.
	switch q.op {
	case "partialCaptureByID", "partialCaptureNoID", "capture", "captureLines":
		e.made = o.Captures[len(o.Captures)-1].LedgerID
	case "partialRefund", "refund":
		e.made = o.Refunds[len(o.Refunds)-1].LedgerID
	}
	r.execs = append(r.execs, e)
}

func (r *mixRun) worker(seed uint64, w, steps int) {
	rng := rand.New(rand.NewPCG(seed, uint64(w)))
	for i := range steps {
		id := r.ids[rng.IntN(len(r.ids))]
		o := r.snapshot(rng, id)
		if o == nil {
			return
		}
		op := mixWeights[rng.IntN(len(mixWeights))]
		if (op == "cancel" || op == "capture" || op == "captureLines") && rng.IntN(3) != 0 {
			op = "edit"
		}
		q, ok := plan(rng, op, o)
		if !ok {
			continue
		}
		rep := rng.IntN(8)
		if rng.IntN(10) < 6 {
			q.key = fmt.Sprintf("%s-%d-%d-%d", r.c.name, seed, w, i)
		}
		if q.key != "" && rng.IntN(6) == 0 {
			// The same key with two different requests at once: one runs,
			// the other is refused (reused or in progress), never both.
			q2, ok := plan(rng, mixWeights[rng.IntN(len(mixWeights))], o)
			if ok && q2.op != "autocapture" && q2.path != q.path {
				q2.key = q.key
				r.pairs.Add(1)
				var wg sync.WaitGroup
				wg.Go(func() { r.send(rep, q) })
				wg.Go(func() { r.send(rep+1, q2) })
				wg.Wait()
				continue
			}
		}
		if q.key != "" && rng.IntN(3) == 0 {
			// The same key to two replicas at once.
			r.pairs.Add(1)
			var wg sync.WaitGroup
			wg.Go(func() { r.send(rep, q) })
			wg.Go(func() { r.send(rep+1, q) })
			wg.Wait()
			continue
		}
		r.send(rep, q)
	}
}

func (r *mixRun) settle(rng *rand.Rand) {
	for range 20 {
		r.mu.Lock()
		todo := r.retry
		r.retry = nil
		r.mu.Unlock()
		if len(todo) == 0 {
			return
		}
		for _, q := range todo {
			r.send(rng.IntN(8), q)
		}
	}
	r.t.Errorf("%s: keys still in progress after retries", r.c.name)
}

// replay sends every key again, to some replica: the first 2xx answer must
// come back byte for byte; a key refused the first time may run now, once.
func (r *mixRun) replay(rng *rand.Rand) {
	r.mu.Lock()
	keys := make([]string, 0, len(r.first))
	for k := range r.first {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		q := r.reqOf[k]
		r.replays.Add(1)
		code, b := r.c.do(rng.IntN(8), q.method, q.path, q.body, k)
		if code/100 != 2 || !bytes.Equal(b, r.first[k]) {
			r.t.Errorf("%s: replay of %s (%s %s): %d, differs from the first answer:\n%s\n%s", r.c.name, k, q.method, q.path, code, r.first[k], b)
		}
		// The key with another request is refused, and changes nothing.
		other := q
		other.method, other.path, other.body = "POST", "/v1/orders/"+q.orderID+"/reference", map[string]any{"reference": "reuse-" + k}
		if q.op == "reference" {
			other.path, other.body = "/v1/orders/"+q.orderID+"/customer", map[string]any{"email": "reuse@example.se"}
		}
		if code, b := r.c.do(rng.IntN(8), other.method, other.path, other.body, k); code/100 == 2 || !bytes.Contains(b, []byte("idempotency_key_reused")) {
			r.t.Errorf("%s: key %s reused for another request: %d %s", r.c.name, k, code, b)
		}
	}
}

// final checks every order at the end against the tally of executed
// requests, and the replicas against one another.
func (r *mixRun) final(invoices, credits *[]int) (captures, refunds int) {
	ctx := context.Background()
	for _, id := range r.ids {
		var bodies [][]byte
		for rep := range r.c.reps {
			code, b := r.c.do(rep, "GET", "/v1/orders/"+id, nil, "")
			if code != 200 {
				r.t.Fatalf("%s: get %s: %d %s", r.c.name, id, code, b)
			}
			bodies = append(bodies, bytes.ReplaceAll(b, []byte(r.c.reps[rep].url), []byte("<base>")))
		}
		for i := 1; i < len(bodies); i++ {
			if !bytes.Equal(bodies[0], bodies[i]) {
				r.t.Errorf("%s: order %s reads differently on replicas 0 and %d:\n%s\n%s", r.c.name, id, i, bodies[0], bodies[i])
			}
		}
		var o mOrder
		json.Unmarshal(bodies[0], &o)
		for _, p := range checkSnapshot(&o) {
			r.t.Errorf("%s: final %s: %s", r.c.name, id, p)
		}
		io, _, err := r.c.reps[0].ledger.GetOrder(ctx, r.c.merchant, id)
		if err != nil {
			r.t.Fatal(err)
		}
		a := io.Amounts()
		if a.Consumed > io.AuthorizedAmount || io.AuthorizedAmount > io.ApprovedAmount {
			r.t.Errorf("%s: %s consumed %d, authorized %d, approved %d", r.c.name, id, a.Consumed, io.AuthorizedAmount, io.ApprovedAmount)
		}
		gross := map[string]int64{}
		for i := range io.Captured {
			c := &io.Captured[i]
			t := order.SumLines(c.Lines, io.VATMode)
			gross[c.ID] = t.Gross
			var rf order.Totals
			for j := range io.Refunded {
				if io.Refunded[j].RefundOf == c.ID {
					s := order.SumLines(io.Refunded[j].Lines, io.VATMode)
					rf.Gross, rf.VAT = rf.Gross+s.Gross, rf.VAT+s.VAT
					if c.Void() {
						r.t.Errorf("%s: %s: voided capture %s has refund %s", r.c.name, id, c.ID, io.Refunded[j].ID)
					}
				}
			}
			if rf.Gross > t.Gross || rf.VAT > t.VAT {
				r.t.Errorf("%s: %s: capture %s of %d (vat %d) refunded %d (vat %d)", r.c.name, id, c.ID, t.Gross, t.VAT, rf.Gross, rf.VAT)
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(c.DocumentReference, "INV-"))
			*invoices = append(*invoices, n)
		}
		for i := range io.Refunded {
			g := order.SumLines(io.Refunded[i].Lines, io.VATMode).Gross
			gross[io.Refunded[i].ID] = g
			if _, ok := gross[io.Refunded[i].RefundOf]; !ok {
				r.t.Errorf("%s: %s: refund %s of no capture %s", r.c.name, id, io.Refunded[i].ID, io.Refunded[i].RefundOf)
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(io.Refunded[i].DocumentReference, "CN-"))
			*credits = append(*credits, n)
		}
		// Every executed request is in the order exactly once.
		count := map[string]int{}
		made := map[string]bool{}
		for _, e := range r.execs {
			if e.orderID != id {
				continue
			}
			count[e.op]++
			if e.made != "" {
				if made[e.made] {
					r.t.Errorf("%s: %s: two executed requests answered with %s as what they made", r.c.name, id, e.made)
				}
				made[e.made] = true
				g, ok := gross[e.made]
				if !ok {
					r.t.Errorf("%s: %s: %s (key %q) made %s, not in the order", r.c.name, id, e.op, e.key, e.made)
				} else if e.want >= 0 && g != e.want {
					r.t.Errorf("%s: %s: %s (key %q) sent for %d made %s of %d", r.c.name, id, e.op, e.key, e.want, e.made, g)
				}
			}
			if e.op == "void" && !io.Ledger(e.ledger).Void() {
				r.t.Errorf("%s: %s: void of %s answered 2xx but it is not void", r.c.name, id, e.ledger)
			}
		}
		paid := map[string]int64{}
		for _, e := range r.execs {
			if e.orderID == id && e.op == "pay" {
				paid[e.ledger] += e.want
			}
		}
		var paidEvents int64
		for _, e := range io.Events {
			if e.Type == order.EventPaid {
				paidEvents += e.Amount
			}
		}
		var paidAll, paidSum int64
		for i := range io.Captured {
			c := &io.Captured[i]
			paidAll += c.Paid
			paidSum += paid[c.ID]
			if c.Paid != paid[c.ID] {
				r.t.Errorf("%s: %s: capture %s paid %d, payments answered 2xx %d", r.c.name, id, c.ID, c.Paid, paid[c.ID])
			}
		}
		if paidEvents != paidAll {
			r.t.Errorf("%s: %s: paid events %d, captures paid %d", r.c.name, id, paidEvents, paidAll)
		}
		caps := count["partialCaptureByID"] + count["partialCaptureNoID"] + count["capture"] + count["captureLines"]
		for i := range io.Captured {
			if !made[io.Captured[i].ID] {
				caps++ // the auto-capture job's
				r.jobCaptures++
			}
		}
		refs := count["partialRefund"] + count["refund"]
		captures += caps
		refunds += refs
		if caps != len(io.Captured) || refs != len(io.Refunded) {
			r.t.Errorf("%s: %s: %d captures and %d refunds executed, order has %d and %d", r.c.name, id, caps, refs, len(io.Captured), len(io.Refunded))
		}
		evs := map[order.EventType]int{}
		voids := 0
		for _, e := range io.Events {
			evs[e.Type]++
		}
		for i := range io.Captured {
			if io.Captured[i].Void() {
				voids++
			}
		}
		for _, c := range []struct {
			op string
			n  int
		}{{"edit", evs[order.EventEdit]}, {"editCustomer", evs[order.EventEditCustomer]}, {"reference", evs[order.EventSetReference]},
			{"acknowledge", evs[order.EventAcknowledge]}, {"paymentMethod", evs[order.EventEditPaymentMethod]}, {"void", voids}} {
			if count[c.op] != c.n {
				r.t.Errorf("%s: %s: %d %s executed, order shows %d", r.c.name, id, count[c.op], c.op, c.n)
			}
		}
		if (count["cancel"] == 1) != io.Cancelled || count["cancel"] > 1 {
			r.t.Errorf("%s: %s: %d cancels executed, cancelled %v", r.c.name, id, count["cancel"], io.Cancelled)
		}
	}
	return captures, refunds
}

// gapless checks one series per merchant, whatever replica took the number.
func gapless(t *testing.T, cluster, name string, ns []int) {
	sort.Ints(ns)
	for i, n := range ns {
		if n != i+1 {
			t.Errorf("%s: %s numbers %v are not 1..%d", cluster, name, ns, len(ns))
			return
		}
	}
}

// mixOrder creates an order of n lines at mixed rates, with headroom for
// edits to raise it.
func mixOrder(t *testing.T, c *mixCluster, rng *rand.Rand, mode string) string {
	var lines []map[string]any
	var total int64
	for i := range 3 + rng.IntN(5) {
		q, u := 1+rng.IntN(3), 500+rng.IntN(20000)
		total += int64(q * u)
		lines = append(lines, map[string]any{"description": fmt.Sprintf("item %d", i), "quantity": q, "unitPrice": u,
			"vat": []int{0, 600, 1200, 2500}[rng.IntN(4)]})
	}
	code, b := c.do(0, "POST", "/sandbox/v1/authorization-tokens", map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE",
		"customer": map[string]any{"companyId": "5560000001"}, "amount": total*2 + 100000}, "")
	var tok struct{ AuthorizationToken string }
	if code != 201 || json.Unmarshal(b, &tok) != nil {
		t.Fatalf("%s: mint: %d %s", c.name, code, b)
	}
	body := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": lines}
	if rng.IntN(2) == 0 {
		body["autoCapture"] = map[string]any{"enabled": true, "delayMinutes": 0}
	}
	if mode != "" {
		body["vatMode"] = mode
	}
	code, b = c.do(1, "POST", "/v1/authorization-tokens/"+tok.AuthorizationToken+"/order", body, "")
	var made struct{ OrderID string }
	if code != 200 || json.Unmarshal(b, &made) != nil {
		t.Fatalf("%s: create: %d %s", c.name, code, b)
	}
	return made.OrderID
}

func TestMixedOperationsCollide(t *testing.T) {
	runs, workers, steps := 6, 4, 30
	if testing.Short() {
		runs = 2
	}
	if s := os.Getenv("KASSA_MIX_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	offset := uint64(0)
	if s := os.Getenv("KASSA_MIX_SEED"); s != "" {
		offset, _ = strconv.ParseUint(s, 10, 64)
	}
	for _, c := range mixClusters(t) {
		var sent, ok, refused, pairs, replays, captures, refunds int64
		ops := map[string][2]int64{}
		var invoices, credits []int
		var jobs int64
		for run := range runs {
			seed := offset + uint64(run) + 1
			rng := rand.New(rand.NewPCG(seed, 99))
			r := &mixRun{t: t, c: c, first: map[string][]byte{}, reqOf: map[string]mixReq{}}
			for i := range 3 {
				r.ids = append(r.ids, mixOrder(t, c, rng, []string{"", "inclVat", "exclVat"}[i]))
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() { r.worker(seed, w, steps) })
			}
			wg.Wait()
			r.settle(rng)
			r.send(0, mixReq{op: "autocapture", method: "POST", path: "/sandbox/v1/jobs/autocapture"}) // none left due for the next run
			r.replay(rng)
			cp, rf := r.final(&invoices, &credits)
			jobs += r.jobCaptures
			if r.jobCaptures != r.autoCaptured.Load() {
				t.Errorf("%s: the job reported %d captures, orders show %d no request made", c.name, r.autoCaptured.Load(), r.jobCaptures)
			}
			sent, ok, refused, pairs, replays = sent+r.sent.Load(), ok+r.ok.Load(), refused+r.refused.Load(), pairs+r.pairs.Load(), replays+r.replays.Load()
			captures, refunds = captures+int64(cp), refunds+int64(rf)
			r.byOp.Range(func(k, v any) bool {
				c := v.(*[2]atomic.Int64)
				e := ops[k.(string)]
				ops[k.(string)] = [2]int64{e[0] + c[0].Load(), e[1] + c[1].Load()}
				return true
			})
			if t.Failed() {
				break
			}
		}
		gapless(t, c.name, "invoice", invoices)
		gapless(t, c.name, "credit note", credits)
		t.Logf("%s (%d replicas): %d runs × %d workers × %d steps on 3 orders: %d requests, %d 2xx, %d refused (collisions), %d same-key pairs, %d replays; %d captures (%d by the auto-capture job), %d refunds executed",
			c.name, len(c.reps), runs, workers, steps, sent, ok, refused, pairs, replays, captures, jobs, refunds)
		t.Logf("%s per op (sent/2xx): %v", c.name, ops)
	}
}

// TestMixedSequenceSameOnEveryStore: one seeded sequence of mixed operations,
// sent one at a time, answers the same on bbolt and PostgreSQL, ids and
// times aside.
func TestMixedSequenceSameOnEveryStore(t *testing.T) {
	cs := mixClusters(t)
	if len(cs) < 2 {
		t.Skip("KASSA_TEST_DATABASE_URL not set: nothing to compare bbolt with")
	}
	for seed := uint64(1); seed <= 4; seed++ {
		var traces [2][]string
		for i, c := range cs {
			rng := rand.New(rand.NewPCG(seed, 7))
			id := mixOrder(t, c, rng, []string{"", "exclVat"}[seed%2])
			norm := newNormalizer()
			for step := range 60 {
				code, b := c.do(0, "GET", "/v1/orders/"+id, nil, "")
				var o mOrder
				if code != 200 || json.Unmarshal(b, &o) != nil {
					t.Fatalf("%s: get: %d %s", c.name, code, b)
				}
				op := mixWeights[rng.IntN(len(mixWeights))]
				q, ok := plan(rng, op, &o)
				if !ok {
					traces[i] = append(traces[i], fmt.Sprintf("%d %s: nothing to aim at", step, op))
					continue
				}
				code, b = c.do(step, q.method, q.path, q.body, "")
				traces[i] = append(traces[i], fmt.Sprintf("%d %s %s %s → %d %s", step, op, q.method, norm.text(q.path), code, norm.json(b)))
			}
		}
		for s := range traces[0] {
			if traces[0][s] != traces[1][s] {
				t.Fatalf("seed %d step %d:\nbolt:     %s\npostgres: %s", seed, s, traces[0][s], traces[1][s])
			}
		}
	}
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z$`)
	tokRE  = regexp.MustCompile(`^at_[A-Z0-9]+$`)
)

// normalizer names ids by their order of appearance and drops times and
// signed links, so that two stores' answers compare.
type normalizer struct{ ids map[string]string }

func newNormalizer() *normalizer { return &normalizer{ids: map[string]string{}} }

func (n *normalizer) text(s string) string {
	return uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := n.ids[id]; !ok {
			n.ids[id] = fmt.Sprintf("<id%d>", len(n.ids))
		}
		return n.ids[id]
	})
}

func (n *normalizer) json(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return n.text(string(b))
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "documentUrl")
			delete(x, "requestId")
			if _, ok := x["orderReference"]; ok {
				x["orderReference"] = "<ref>"
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys) // ids are named in a fixed order
			for _, k := range keys {
				x[k] = walk(x[k])
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if timeRE.MatchString(x) || tokRE.MatchString(x) {
				return "<t>"
			}
			return n.text(x)
		}
		return v
	}
	out, _ := json.Marshal(walk(v))
	return string(out)
}
