package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// The oracle: a small model of one order, written from the interface spec,
// shared/design.md, docs/decisions.md, docs/errors.md, docs/settlements.md
// and the README's sandbox routes alone (not from order/, capture/, refund/
// or money/), that predicts what each request through the real router must
// answer (accepted, or which 4xx and code) and what the order must then
// read: its four amounts to the minor unit, its statuses, the events
// appended (type and amount), the lines left in `uncaptured` and those of
// each capture and refund with their unitPriceNetDecimal, each capture's
// sub-order status and the refund, void and recourse actions it offers.
// Random sequences of operations on random orders are compared with it
// after every step.
//
// Orders are inclVat or exclVat (the VAT of each line rounded on its own),
// paid by invoice, advance invoice or card, and some are of the sandbox's
// possibleFraud buyer (onHold until the risk review approves or denies
// them). Beside the order operations, a step may be the buyer paying a
// capture (sandbox), a void, a recourse, the risk decision, or an
// Idempotency-Key at work: the order operations are sent with a key at
// random, and a later step replays one that succeeded (byte for byte, also
// with its body re-formatted), sends its key with another request (422), or
// takes a key whose request was refused for a new one (refusals store
// nothing).
//
// It runs rapid's 100 sequences by default (about a second); a long run by
// hand, with the count of each operation's answers:
// go test ./server -run TestOracle -v -rapid.checks=20000

// oLine is an order line as the merchant sends it; id is the server's,
// learnt from the answer that made the line.
type oLine struct {
	id, desc, typ    string
	qty, unit, disc  int64
	vat              int64
	total, vatAmount int64 // as the model computes them
	// excl: the order's vatMode is exclVat, where unitPrice and totalAmount
	// exclude VAT (design.md).
	excl bool
}

// gross is the line's amount including VAT: its totalAmount in inclVat,
// totalAmount plus its VAT in exclVat (decisions.md: money figures include
// VAT in either mode).
func (l oLine) gross() int64 {
	if l.excl {
		return l.total + l.vatAmount
	}
	return l.total
}

// netDecimal is unitPriceNetDecimal (decisions.md): the unit price excluding
// VAT in major units with four decimals, "79.9920" for 99.99 at 25 %.
func (l oLine) netDecimal() string {
	n := l.unit * 100 // in ten-thousandths of a major unit
	if !l.excl {
		n = roundHalfAway(n*10000, 10000+l.vat)
	}
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s%d.%04d", sign, n/10000, n%10000)
}

// roundHalfAway is n/d rounded half away from zero (d > 0).
func roundHalfAway(n, d int64) int64 {
	q, r := n/d, n%d
	if r < 0 {
		r = -r
	}
	if 2*r >= d {
		if n < 0 {
			q--
		} else {
			q++
		}
	}
	return q
}

// computed fills the line's totals by design.md's arithmetic:
// totalAmount = quantity × (unitPrice − unitDiscountAmount), and in inclVat
// totalVatAmount = totalAmount − round(totalAmount × 10000 / (10000 + vat)),
// in exclVat totalVatAmount = round(totalAmount × vat / 10000), each line's
// VAT rounded on its own (decisions.md).
func (l oLine) computed() oLine {
	l.total = l.qty * (l.unit - l.disc)
	if l.excl {
		l.vatAmount = roundHalfAway(l.total*l.vat, 10000)
	} else {
		l.vatAmount = l.total - roundHalfAway(l.total*10000, 10000+l.vat)
	}
	return l
}

func (l oLine) json(withID bool) string {
	if withID {
		return fmt.Sprintf(`{"id":%q}`, l.id)
	}
	typ := ""
	if l.typ != "" {
		typ = fmt.Sprintf(`,"type":%q`, l.typ)
	}
	disc := ""
	if l.disc != 0 {
		disc = fmt.Sprintf(`,"unitDiscountAmount":%d`, l.disc)
	}
	return fmt.Sprintf(`{"description":%q,"quantity":%d,"unitPrice":%d,"vat":%d%s%s}`, l.desc, l.qty, l.unit, l.vat, disc, typ)
}

func linesJSON(ls []oLine, withID bool) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.json(withID))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// sums is the lines' amount including VAT and their VAT.
func sums(ls []oLine) (total, vat int64) {
	for _, l := range ls {
		total += l.gross()
		vat += l.vatAmount
	}
	return
}

// sent is the sum of the lines' totalAmount, which totalCaptureAmount and
// totalRefundAmount must equal: net in exclVat (decisions.md).
func sent(ls []oLine) (s int64) {
	for _, l := range ls {
		s += l.total
	}
	return
}

// byRate sums amount including VAT and VAT per VAT rate.
func byRate(ls []oLine) map[int64][2]int64 {
	m := map[int64][2]int64{}
	for _, l := range ls {
		s := m[l.vat]
		s[0] += l.gross()
		s[1] += l.vatAmount
		m[l.vat] = s
	}
	return m
}

type oCapture struct {
	ledgerID string
	lines    []oLine
	amount   int64
	vat      int64
	// refunded per VAT rate: amount and VAT credited so far.
	refunded map[int64][2]int64
	refQty   map[int]int64 // quantity of each line refunded by partial refunds
	paid     int64         // by the buyer (the sandbox's payments)
	refunds  int           // how many refunds credited it
	voided   bool
	recourse bool
}

// owed is what the buyer still owes on the capture: captured − refunded −
// paid (docs/settlements.md's claim); below 0 when a credit followed payment.
func (c *oCapture) owed() int64 {
	a, _ := c.left()
	return a - c.paid
}

// leftByRate is what is left to credit at each rate the capture invoiced
// or a refund credited: at a goodwill refund's own rate (decisions.md), what
// is left is below zero.
func (c *oCapture) leftByRate() map[int64][2]int64 {
	m := byRate(c.lines)
	for k, r := range c.refunded {
		s := m[k]
		m[k] = [2]int64{s[0] - r[0], s[1] - r[1]}
	}
	return m
}

func (c *oCapture) left() (amount, vat int64) {
	amount, vat = c.amount, c.vat
	for _, s := range c.refunded {
		amount -= s[0]
		vat -= s[1]
	}
	return
}

type oRefund struct {
	amount, vat int64
	rates       map[int64][2]int64
	note        string
	// of is the index of the capture it credits; lines are the lines it
	// was sent with (a partial refund), the capture's lines (a full
	// refund of a capture nothing was refunded of), or nil for a full
	// refund after partial ones, which credits what is left per rate
	// (decisions.md): TestDocumentsOracle reads them.
	of    int
	lines []oLine
}

type oEvent struct {
	typ    string
	amount int64
}

type oOrder struct {
	id          string
	excl        bool   // vatMode exclVat
	card        bool   // paid when captured: no invoice to pay, void or recourse
	advance     bool   // advance invoice: due on its issue date
	held        bool   // onHold: possibleFraud, under review
	denied      bool   // fraudDeny: the review denied it
	uncLedger   string // the uncaptured sub-order's ledgerId
	approved    int64  // the ceiling an edit may raise the authorization to
	authorized  int64
	capturedSum int64 // every capture counts against the authorization
	uncaptured  []oLine
	captures    []*oCapture
	refunds     []oRefund
	unacked     bool // advance invoice: no capture before acknowledgement
	cancelled   bool
	created     time.Time
	expiresAt   time.Time
	now         func() time.Time
	reference   string
	events      []oEvent
}

// capturedAmount: a voided capture's amount leaves it (design.md).
func (o *oOrder) capturedAmount() int64 {
	var s int64
	for _, c := range o.captures {
		if !c.voided {
			s += c.amount
		}
	}
	return s
}

func (o *oOrder) refundedAmount() int64 {
	var s int64
	for _, r := range o.refunds {
		s += r.amount
	}
	return s
}

// cancel is a cancel of what is uncaptured, by the order or by its
// uncaptured ledger: refused when nothing is left to release.
func (o *oOrder) cancel(rt *rapid.T, what string, a oAnswer) {
	if o.cancelled || len(o.uncaptured) == 0 {
		expect(rt, what, a, 409, "action_not_available")
		return
	}
	expect(rt, what, a, 200)
	o.events = append(o.events, oEvent{"cancel", o.uncapturedAmount()})
	o.uncaptured = nil
	o.cancelled = true
}

func (o *oOrder) uncapturedAmount() int64 {
	t, _ := sums(o.uncaptured)
	return t
}

// statuses the order must read.
func (o *oOrder) statuses() []string {
	var st []string
	// A voided capture's amount leaves capturedAmount (design.md): it
	// no longer counts as captured.
	captured := slices.ContainsFunc(o.captures, func(c *oCapture) bool { return !c.voided })
	// kassa reads `uncaptured` ("not yet captured") of lines: it holds
	// while some line is, beside partiallyCaptured.
	if len(o.uncaptured) > 0 {
		st = append(st, "uncaptured")
	}
	// Every capture voided and nothing left uncaptured: nothing is
	// captured and nothing can be, which kassa reads as cancelled.
	allVoided := !captured && len(o.captures) > 0 && len(o.uncaptured) == 0
	switch {
	case !captured && (o.cancelled || allVoided):
		st = append(st, "cancelled")
	case !captured:
	case len(o.uncaptured) == 0:
		st = append(st, "fullyCaptured")
	default:
		st = append(st, "partiallyCaptured")
	}
	if len(o.refunds) > 0 {
		left := int64(0)
		for _, c := range o.captures {
			if a, _ := c.left(); !c.voided {
				left += a
			}
		}
		if left == 0 && len(o.uncaptured) == 0 {
			st = append(st, "fullyRefunded")
		} else {
			st = append(st, "partiallyRefunded")
		}
	}
	// decisions.md: fullyPaid once the buyer paid something and no live
	// capture still owes money; a capture with nothing to pay neither counts
	// as paid nor keeps the order partiallyPaid.
	paid, owing := false, false
	for _, c := range o.captures {
		if c.voided {
			continue
		}
		paid = paid || c.paid > 0
		owing = owing || c.owed() > 0
	}
	if paid && owing {
		st = append(st, "partiallyPaid")
	} else if paid {
		st = append(st, "fullyPaid")
	}
	if o.held {
		st = append(st, "onHold")
	}
	if o.denied {
		st = append(st, "fraudDeny")
	}
	if o.unacked {
		st = append(st, "unacknowledged")
	}
	if o.expired() {
		st = append(st, "expired")
	}
	if o.captureOffered() || o.partialCaptureOffered() {
		st = append(st, "readyForCapture")
	}
	sort.Strings(st)
	return st
}

// expired: decisions.md, the order expires 28 days after creation unless
// extended; time alone brings it. An order with nothing left uncaptured
// (cancelled, or captured in full) has nothing left to expire.
func (o *oOrder) expired() bool {
	return !o.cancelled && len(o.uncaptured) > 0 && o.now().After(o.expiresAt)
}

func (o *oOrder) open() bool {
	return !o.cancelled && !o.unacked && !o.expired() && !o.held && !o.denied
}

// voidable: decisions.md, void is offered on a captured invoice (not a card
// receipt) that has no refund, no payment and no recourse.
func (c *oCapture) voidable(card bool) bool {
	return !card && !c.voided && c.refunds == 0 && c.paid == 0 && !c.recourse
}

// recoursable: decisions.md, recourseOrderInvoice on an invoice with a claim
// left to hand back (captured − refunded − paid > 0), once.
func (c *oCapture) recoursable(card bool) bool {
	return !card && !c.voided && !c.recourse && c.owed() > 0
}

// subStatuses is what a capture's sub-order status must read.
func (c *oCapture) subStatuses(card bool) []string {
	var st []string
	if c.voided {
		st = append(st, "void")
	}
	if c.recourse {
		st = append(st, "recourse")
	}
	if c.paid > 0 {
		if c.owed() > 0 {
			st = append(st, "partiallyPaid")
		} else {
			st = append(st, "fullyPaid")
		}
	}
	sort.Strings(st)
	return st
}

func (o *oOrder) remainingAuth() int64 { return o.authorized - o.capturedSum }

// captureProblems lists the codes a capture of ls may be refused with
// (design.md, decisions.md, errors.md), empty when it must be accepted.
func (o *oOrder) captureProblems(ls []oLine) []string {
	total, vat := sums(ls)
	var p []string
	if total < 0 {
		p = append(p, "capture_amount_negative")
	}
	if vat < 0 || vat > total {
		p = append(p, "capture_vat_out_of_bounds")
	}
	if total > o.remainingAuth() {
		p = append(p, "capture_exceeds_authorization")
	}
	return p
}

// captureOffered: the whole remainder is a capturable invoice that fits.
func (o *oOrder) captureOffered() bool {
	return o.open() && len(o.uncaptured) > 0 && len(o.captureProblems(o.uncaptured)) == 0
}

func (o *oOrder) partialCaptureOffered() bool {
	return o.open() && len(o.uncaptured) > 0 && o.remainingAuth() > 0
}

// oracleEnv drives one server and compares it with the model.
type oracleEnv struct {
	e     *sessionEnv
	wall  *atomic.Int64  // the server's wall clock, which only the test moves
	stats map[string]int // operation and answer → count, logged with -v
	steps int
	keys  int // Idempotency-Keys handed out, so that each is new

	// The step's Idempotency-Key ("" for none), and the last request sent
	// with one, to record when it succeeds.
	key  string
	last oKeyed
	// Keys whose request succeeded, and keys whose request was refused
	// (which store nothing, so they are free for another request).
	done []oKeyed
	free []string

	// after, when set, runs after the order is created and after every
	// step, with the model as it then is (TestNotificationsOracle).
	after func(rt *rapid.T, m *oOrder, what string)
	// locale is the orders' locale; "" is sv-SE.
	locale string
}

// oKeyed is a request sent with an Idempotency-Key and its answer.
type oKeyed struct {
	key, method, path, body string
	code                    int
	raw                     []byte
}

type oAnswer struct {
	code int
	body map[string]any
	raw  []byte
	hdr  http.Header
}

// send sends a request, with the step's Idempotency-Key if it has one.
func (x *oracleEnv) send(method, path, body string) oAnswer {
	a := x.sendKey(method, path, body, x.key)
	if x.key != "" {
		x.last = oKeyed{x.key, method, path, body, a.code, a.raw}
	}
	return a
}

func (x *oracleEnv) sendKey(method, path, body, key string) oAnswer {
	return oracleSend(x.e, x.e.auth, method, path, body, key)
}

// oracleSend sends one request of the oracles to e's server, with auth as
// the Authorization header and key ("" for none) as the Idempotency-Key.
func oracleSend(e *sessionEnv, auth, method, path, body, key string) oAnswer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, e.ts.URL+path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", auth)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return oAnswer{resp.StatusCode, b, raw, resp.Header}
}

// expect checks the answer against the prediction: codes empty means 200;
// otherwise the status and one of the codes.
func expect(rt *rapid.T, what string, a oAnswer, status int, codes ...string) {
	rt.Helper()
	if a.code >= 500 {
		rt.Fatalf("%s: %d %v", what, a.code, a.body)
	}
	if status == 200 {
		if a.code != 200 {
			rt.Fatalf("%s: the model accepts it, the server answered %d %v %v", what, a.code, a.body["code"], a.body["errors"])
		}
		return
	}
	if a.code != status || (len(codes) > 0 && !slices.Contains(codes, fmt.Sprint(a.body["code"]))) {
		rt.Fatalf("%s: the model refuses it with %d %v, the server answered %d %v %v", what, status, codes, a.code, a.body["code"], a.body["errors"])
	}
}

func num(v any) int64 { return int64(v.(float64)) }

// readLine is an OutputOrderLine as the model compares it.
func readLine(v any, excl bool) oLine {
	m := v.(map[string]any)
	l := oLine{id: fmt.Sprint(m["id"]), desc: m["description"].(string), qty: num(m["quantity"]),
		unit: num(m["unitPrice"]), vat: num(m["vat"]), total: num(m["totalAmount"]), vatAmount: num(m["totalVatAmount"]), excl: excl}
	if d, ok := m["unitDiscountAmount"]; ok {
		l.disc = num(d)
	}
	if t, ok := m["type"].(string); ok {
		l.typ = t
	}
	return l
}

func sameLine(a, b oLine) bool {
	a.id, b.id = "", ""
	if a.typ == "" {
		a.typ = b.typ // a type left out is the server's default
	}
	return a == b
}

func checkNet(rt *rapid.T, what string, v any, l oLine) {
	rt.Helper()
	if got := v.(map[string]any)["unitPriceNetDecimal"]; got != l.netDecimal() {
		rt.Fatalf("%s: unitPriceNetDecimal %v, model %s (unitPrice %d, vat %d)", what, got, l.netDecimal(), l.unit, l.vat)
	}
}

func checkSub(rt *rapid.T, what string, sub map[string]any, amount, vat int64) {
	rt.Helper()
	if got := minor(sub["totalOrderAmount"]); int64(got) != amount {
		rt.Fatalf("%s: totalOrderAmount %v, model %d", what, got, amount)
	}
	if got := minor(sub["totalOrderVatAmount"]); int64(got) != vat {
		rt.Fatalf("%s: totalOrderVatAmount %v, model %d", what, got, vat)
	}
	if got := minor(sub["totalOrderAmountExclVat"]); int64(got) != amount-vat {
		rt.Fatalf("%s: totalOrderAmountExclVat %v, model %d", what, got, amount-vat)
	}
}

// check compares the order the server reads with the model.
func (x *oracleEnv) check(rt *rapid.T, what string, m *oOrder, got map[string]any) {
	rt.Helper()
	for _, f := range []struct {
		name string
		want int64
	}{{"orderAmount", m.capturedAmount() + m.uncapturedAmount()}, {"capturedAmount", m.capturedAmount()},
		{"refundedAmount", m.refundedAmount()}, {"uncapturedAmount", m.uncapturedAmount()}} {
		if g := int64(minor(got[f.name])); g != f.want {
			rt.Fatalf("%s: %s %d, model %d", what, f.name, g, f.want)
		}
	}
	var st []string
	for _, s := range got["status"].([]any) {
		st = append(st, s.(string))
	}
	sort.Strings(st)
	if want := m.statuses(); !slices.Equal(st, want) {
		rt.Fatalf("%s: status %v, model %v", what, st, want)
	}
	ev := events(got)
	if len(ev) != len(m.events) {
		var g []string
		for _, e := range ev {
			g = append(g, fmt.Sprintf("%s:%v", e["type"], minor(e["amount"])))
		}
		rt.Fatalf("%s: events %v, model %v", what, g, m.events)
	}
	for i, e := range ev {
		if e["type"] != m.events[i].typ || int64(minor(e["amount"])) != m.events[i].amount {
			rt.Fatalf("%s: event %d is %v %v, model %v", what, i, e["type"], minor(e["amount"]), m.events[i])
		}
	}
	if got["updatedAt"] != ev[len(ev)-1]["createdAt"] {
		rt.Fatalf("%s: updatedAt %v is not the last event's %v", what, got["updatedAt"], ev[len(ev)-1]["createdAt"])
	}
	if exp, err := time.Parse(time.RFC3339Nano, got["expiresAt"].(string)); err != nil || !exp.Equal(m.expiresAt) {
		rt.Fatalf("%s: expiresAt %v, model %v", what, got["expiresAt"], m.expiresAt)
	}
	if got["merchantReference"] != m.reference {
		rt.Fatalf("%s: merchantReference %v, model %q", what, got["merchantReference"], m.reference)
	}
	if mode := map[bool]string{false: "inclVat", true: "exclVat"}[m.excl]; got["vatMode"] != mode {
		rt.Fatalf("%s: vatMode %v, model %s", what, got["vatMode"], mode)
	}
	unc := got["uncaptured"].(map[string]any)
	if id, _ := unc["ledgerId"].(string); m.uncLedger == "" {
		m.uncLedger = id
	} else if id != m.uncLedger {
		rt.Fatalf("%s: uncaptured ledgerId %v, was %s", what, id, m.uncLedger)
	}
	ul := lines(unc)
	if len(ul) != len(m.uncaptured) {
		rt.Fatalf("%s: %d uncaptured lines, model %d", what, len(ul), len(m.uncaptured))
	}
	for i, v := range ul {
		l := readLine(v, m.excl)
		if !sameLine(m.uncaptured[i], l) {
			rt.Fatalf("%s: uncaptured line %d %+v, model %+v", what, i, l, m.uncaptured[i])
		}
		checkNet(rt, fmt.Sprintf("%s: uncaptured line %d", what, i), v, m.uncaptured[i])
		if m.uncaptured[i].id != "" && l.id != m.uncaptured[i].id {
			rt.Fatalf("%s: uncaptured line %d has id %s, was %s", what, i, l.id, m.uncaptured[i].id)
		}
		m.uncaptured[i].id = l.id
	}
	ut, uv := sums(m.uncaptured)
	checkSub(rt, what+": uncaptured", unc, ut, uv)
	caps, _ := got["captured"].([]any)
	if len(caps) != len(m.captures) {
		rt.Fatalf("%s: %d captures, model %d", what, len(caps), len(m.captures))
	}
	for i, v := range caps {
		c, mc := v.(map[string]any), m.captures[i]
		if mc.ledgerID == "" {
			mc.ledgerID = c["ledgerId"].(string)
		} else if c["ledgerId"] != mc.ledgerID {
			rt.Fatalf("%s: capture %d is %v, was %s", what, i, c["ledgerId"], mc.ledgerID)
		}
		checkSub(rt, fmt.Sprintf("%s: capture %d", what, i), c, mc.amount, mc.vat)
		cl := lines(c)
		if len(cl) != len(mc.lines) {
			rt.Fatalf("%s: capture %d has %d lines, model %d", what, i, len(cl), len(mc.lines))
		}
		for j, v := range cl {
			if l := readLine(v, m.excl); !sameLine(mc.lines[j], l) {
				rt.Fatalf("%s: capture %d line %d %+v, model %+v", what, i, j, l, mc.lines[j])
			}
			checkNet(rt, fmt.Sprintf("%s: capture %d line %d", what, i, j), v, mc.lines[j])
		}
		var st []string
		for _, s := range c["status"].([]any) {
			st = append(st, s.(string))
		}
		sort.Strings(st)
		if want := mc.subStatuses(m.card); !slices.Equal(st, want) {
			rt.Fatalf("%s: capture %d status %v, model %v", what, i, st, want)
		}
		// The spec's rule 2: what the model accepts on the capture is what
		// its availableActions offer.
		left, _ := mc.left()
		has := actions(c)
		for _, want := range []struct {
			action  string
			offered bool
		}{{"refund", left > 0 && !mc.voided}, {"void", mc.voidable(m.card)}, {"recourseOrderInvoice", mc.recoursable(m.card)},
			{"partialRefund", left > 1 && !mc.voided}} {
			if want.action == "partialRefund" && left == 1 && !mc.voided {
				continue // decisions.md's last unit: offered or not by its VAT
			}
			if slices.Contains(has, want.action) != want.offered {
				rt.Fatalf("%s: capture %d offers %v, model: %s %v", what, i, has, want.action, want.offered)
			}
		}
	}
	refs, _ := got["refunded"].([]any)
	if len(refs) != len(m.refunds) {
		rt.Fatalf("%s: %d refunds, model %d", what, len(refs), len(m.refunds))
	}
	for i, v := range refs {
		r, mr := v.(map[string]any), m.refunds[i]
		checkSub(rt, fmt.Sprintf("%s: refund %d", what, i), r, mr.amount, mr.vat)
		var rl []oLine
		for _, l := range lines(r) {
			rl = append(rl, readLine(l, m.excl))
		}
		gr := byRate(rl)
		for k, s := range gr {
			if s == [2]int64{} {
				delete(gr, k)
			}
		}
		want := map[int64][2]int64{}
		for k, s := range mr.rates {
			if s != [2]int64{} {
				want[k] = s
			}
		}
		if fmt.Sprint(gr) != fmt.Sprint(want) {
			rt.Fatalf("%s: refund %d by rate %v, model %v", what, i, gr, want)
		}
		if r["note"] != mr.note {
			rt.Fatalf("%s: refund %d note %v, model %q", what, i, r["note"], mr.note)
		}
	}
}

var oracleRates = []int64{0, 600, 1200, 2500, 1, 999, 1750, 2499, 10000}

func drawLine(rt *rapid.T, n int, excl bool) oLine {
	l := oLine{desc: fmt.Sprintf("Item %d", n), excl: excl,
		qty:  rapid.SampledFrom([]int64{1, 1, 2, 3, 7, 13, 99}).Draw(rt, "qty"),
		unit: rapid.OneOf(rapid.Int64Range(0, 20), rapid.Int64Range(1, 30000), rapid.SampledFrom([]int64{1, 3, 5, 7, 33, 99, 101, 12345})).Draw(rt, "unit"),
		vat:  rapid.SampledFrom(oracleRates).Draw(rt, "vat"),
		typ:  rapid.SampledFrom([]string{"", "physical", "service"}).Draw(rt, "type"),
	}
	if l.unit > 0 && rapid.IntRange(0, 4).Draw(rt, "discounted") == 0 {
		l.disc = rapid.Int64Range(0, l.unit).Draw(rt, "disc")
	}
	if rapid.IntRange(0, 7).Draw(rt, "discountLine") == 0 {
		// A discount line: negative, which can take sums below zero.
		l.typ, l.qty, l.unit, l.disc = "discount", 1, -rapid.Int64Range(1, 5000).Draw(rt, "off"), 0
	}
	return l.computed()
}

func drawLines(rt *rapid.T, name string, from int, excl bool) []oLine {
	n := rapid.IntRange(1, 5).Draw(rt, name)
	var ls []oLine
	for i := range n {
		ls = append(ls, drawLine(rt, from+i, excl))
	}
	return ls
}

// totalsOK: design.md and decisions.md, the sums of the lines each lie
// within 0..1000000000.
func totalsOK(ls []oLine) bool {
	t, v := sums(ls)
	return t >= 0 && v >= 0 && t-v >= 0 && t <= 1e9
}

// oracleServer is a server on the memory store whose wall clock the
// oracles set (wall, in Unix nanoseconds).
func oracleServer(t *testing.T) (*sessionEnv, *atomic.Int64) {
	return oracleServerOn(t, func(now func() time.Time) storage.Store { return memory.New(now) })
}

// oracleServerOn is oracleServer on the store open makes.
func oracleServerOn(t *testing.T, open func(now func() time.Time) storage.Store) (*sessionEnv, *atomic.Int64) {
	clock := NewClock(true)
	wall := new(atomic.Int64)
	clock.wall = func() time.Time { return time.Unix(0, wall.Load()) }
	return newEnvOn(t, false, clock, open(clock.Now), nil), wall
}

// startSequence sets the wall clock of a new sequence within two days of
// 2026-03-10 09:30 UTC. Each sequence has records of its own, so each may
// start the clock afresh: moves do not add up over the sequences.
func startSequence(rt *rapid.T, wall *atomic.Int64) {
	wall.Store(time.Date(2026, 3, 10, 9, 30, 0, 0, time.UTC).UnixNano() + rapid.Int64Range(0, int64(48*time.Hour)).Draw(rt, "start"))
}

// logStats logs how often each step got each answer (go test -v).
func logStats(t *testing.T, stats map[string]int) {
	keys := slices.Sorted(maps.Keys(stats))
	for _, k := range keys {
		t.Logf("%6d %s", stats[k], k)
	}
}

func TestOracle(t *testing.T) {
	e, wall := oracleServer(t)
	x := &oracleEnv{e: e, wall: wall, stats: map[string]int{}}
	rapid.Check(t, func(rt *rapid.T) {
		startSequence(rt, wall)
		x.run(rt)
	})
	logStats(t, x.stats)
	t.Logf("%d steps", x.steps)
}

func (x *oracleEnv) create(rt *rapid.T) *oOrder {
	for {
		m := &oOrder{now: func() time.Time { return time.Unix(0, x.wall.Load()).UTC() }}
		m.excl = rapid.Bool().Draw(rt, "exclVat")
		m.uncaptured = drawLines(rt, "lines", 1, m.excl)
		total, vat := sums(m.uncaptured)
		pm := rapid.SampledFrom([]string{"invoice", "card", "advanceInvoice"}).Draw(rt, "paymentMethod")
		m.card, m.advance = pm == "card", pm == "advanceInvoice"
		// README's fixtures: 5560000035 is tagged possibleFraud, its
		// orders start onHold.
		m.held = rapid.IntRange(0, 4).Draw(rt, "held") == 0
		buyer := map[bool]string{false: "5560000001", true: "5560000035"}[m.held]
		amount := ""
		m.approved = total
		if rapid.Bool().Draw(rt, "approvedAbove") && total >= 0 {
			m.approved = total + rapid.Int64Range(1, 50000).Draw(rt, "headroom")
			amount = fmt.Sprintf(`,"amount":%d`, m.approved)
		}
		locale := cmp.Or(x.locale, "sv-SE")
		a := x.send("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":%q,
			"customer":{"companyId":%q},"paymentMethod":{"type":%q}%s}`, locale, buyer, pm, amount))
		if a.code != 201 {
			rt.Fatalf("mint: %d %v", a.code, a.body)
		}
		totals := ""
		if rapid.Bool().Draw(rt, "sendTotals") {
			totals = fmt.Sprintf(`,"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":%d`, total, total-vat, vat)
		}
		mode := ""
		if m.excl {
			mode = `,"vatMode":"exclVat"`
		}
		a = x.send("POST", "/v1/authorization-tokens/"+a.body["authorizationToken"].(string)+"/order",
			fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":%q,"orderLines":%s%s%s}`, locale, linesJSON(m.uncaptured, false), totals, mode))
		if !totalsOK(m.uncaptured) {
			expect(rt, "create with sums out of bounds", a, 400, "validation_failed")
			continue
		}
		expect(rt, "create", a, 200)
		m.id = a.body["orderId"].(string)
		m.authorized = total
		m.events = []oEvent{{"create", total}}
		if pm == "advanceInvoice" {
			m.unacked = true
		} else if !m.held {
			// decisions.md: an order on hold is not ready for capture
			// until the review approves it.
			m.events = append(m.events, oEvent{"readyForCapture", 0})
		}
		got := x.e.get(m.id)
		created, err := time.Parse(time.RFC3339Nano, got["createdAt"].(string))
		if err != nil || !created.Equal(m.now()) {
			rt.Fatalf("createdAt %v (%v), the clock reads %v", got["createdAt"], err, m.now())
		}
		m.created, m.expiresAt = created, created.Add(28*24*time.Hour)
		x.check(rt, "create", m, got)
		if x.after != nil {
			x.after(rt, m, "create")
		}
		return m
	}
}

// keyed: the operations the spec (and design.md: acknowledge, cancel)
// takes an Idempotency-Key on.
var keyed = map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true, 13: true}

func (x *oracleEnv) run(rt *rapid.T) {
	x.done, x.free, x.key = nil, nil, ""
	m := x.create(rt)
	path := "/v1/orders/" + m.id
	next := 100
	steps := rapid.IntRange(1, 30).Draw(rt, "steps")
	for step := range steps {
		var a oAnswer
		var what string
		op := rapid.IntRange(0, 20).Draw(rt, "op")
		x.key, x.last = "", oKeyed{}
		if keyed[op] && rapid.IntRange(0, 2).Draw(rt, "keyed") == 0 {
			if len(x.free) > 0 && rapid.Bool().Draw(rt, "freeKey") {
				x.key = x.free[len(x.free)-1]
				x.free = x.free[:len(x.free)-1]
			} else {
				x.keys++
				x.key = fmt.Sprintf("oracle-%d", x.keys)
			}
		}
		switch op {
		case 12: // time passes
			h := rapid.SampledFrom([]int64{1, 20, 24 * 7, 24 * 27, 24 * 40}).Draw(rt, "hours")
			x.wall.Add(h * int64(time.Hour))
			what = fmt.Sprintf("after %dh", h)
			a = oAnswer{code: 0}
		case 13: // partial capture of a line without id: uncaptured stays as it was
			var l oLine
			if r := m.remainingAuth(); r >= 0 && rapid.IntRange(0, 3).Draw(rt, "edge") == 0 {
				// What is left of the authorization, or one minor unit more.
				next++
				l = oLine{desc: fmt.Sprintf("Item %d", next), qty: 1, excl: m.excl, vat: rapid.SampledFrom(oracleRates).Draw(rt, "vat")}
				if m.excl {
					// The net unit price whose gross is nearest r.
					r = roundHalfAway(r*10000, 10000+l.vat)
				}
				l.unit = r + rapid.Int64Range(0, 1).Draw(rt, "over")
				l = l.computed()
			} else if len(m.uncaptured) > 0 && rapid.Bool().Draw(rt, "copy") {
				l = m.uncaptured[rapid.IntRange(0, len(m.uncaptured)-1).Draw(rt, "of")]
				l.id = ""
				l.qty = rapid.Int64Range(1, l.qty).Draw(rt, "part")
				l = l.computed()
			} else {
				next++
				l = drawLine(rt, next, m.excl)
			}
			total, vat := sums([]oLine{l})
			what = fmt.Sprintf("capture without id of %+v", l)
			a = x.send("POST", path+"/partialcapture", fmt.Sprintf(`{"orderLines":[%s],"totalCaptureAmount":%d}`, l.json(false), max(l.total, 0)))
			if !m.partialCaptureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			if l.total < 0 {
				// 0 was sent: a mismatch as well as a negative capture.
				expect(rt, what, a, 400, "capture_amount_mismatch", "capture_amount_negative")
				break
			}
			if p := m.captureProblems([]oLine{l}); len(p) > 0 {
				expect(rt, what, a, 400, p...)
				break
			}
			expect(rt, what, a, 200)
			m.capturedSum += total
			m.captures = append(m.captures, &oCapture{lines: []oLine{l}, amount: total, vat: vat, refunded: map[int64][2]int64{}, refQty: map[int]int64{}})
			m.events = append(m.events, oEvent{"partialCapture", total})
		case 0: // acknowledge
			what = "acknowledge"
			a = x.send("POST", path+"/acknowledge", "")
			// decisions.md: only while unacknowledged, neither cancelled nor expired.
			if m.unacked && !m.cancelled && !m.expired() {
				expect(rt, what, a, 200)
				m.unacked = false
				m.events = append(m.events, oEvent{"acknowledge", 0})
				// decisions.md: readyForCapture appears when capture becomes
				// possible, which on hold is at the approval.
				if !m.held && !m.denied {
					m.events = append(m.events, oEvent{"readyForCapture", 0})
				}
			} else {
				expect(rt, what, a, 409, "action_not_available")
			}
		case 1, 2: // partial capture by ids
			if len(m.uncaptured) == 0 {
				what = "partial capture with nothing uncaptured"
				a = x.send("POST", path+"/partialcapture", `{"orderLines":[{"description":"x","quantity":1,"unitPrice":1,"vat":0}],"totalCaptureAmount":1}`)
				if m.partialCaptureOffered() {
					rt.Fatalf("model offers a partial capture with no lines")
				}
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(m.uncaptured)-1), 1, len(m.uncaptured), rapid.ID[int]).Draw(rt, "pick")
			sort.Ints(idx)
			var pick []oLine
			for _, i := range idx {
				pick = append(pick, m.uncaptured[i])
			}
			total, vat := sums(pick)
			lineSum := sent(pick)
			sending := lineSum
			if rapid.IntRange(0, 5).Draw(rt, "mismatch") == 0 {
				sending = lineSum + rapid.SampledFrom([]int64{-1, 1, 100}).Draw(rt, "off")
			}
			what = fmt.Sprintf("partial capture of %v (%d, sent %d)", idx, total, sending)
			a = x.send("POST", path+"/partialcapture", fmt.Sprintf(`{"orderLines":%s,"totalCaptureAmount":%d}`, linesJSON(pick, true), max(sending, 0)))
			if !m.partialCaptureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			var probs []string
			if max(sending, 0) != lineSum {
				probs = append(probs, "capture_amount_mismatch")
			}
			probs = append(probs, m.captureProblems(pick)...)
			if len(probs) > 0 {
				expect(rt, what, a, 400, probs...)
				break
			}
			expect(rt, what, a, 200)
			m.capture(pick, total, vat)
			m.events = append(m.events, oEvent{"partialCapture", total})
		case 3: // full capture without body, or with every line in the body
			body := ""
			what = "full capture"
			if rapid.Bool().Draw(rt, "withBody") && len(m.uncaptured) > 0 {
				body = fmt.Sprintf(`{"orderLines":%s,"totalCaptureAmount":%d}`, linesJSON(m.uncaptured, true), max(sent(m.uncaptured), 0))
				what = "full capture naming every line"
			}
			a = x.send("POST", path+"/capture", body)
			if !m.captureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			total, vat := sums(m.uncaptured)
			m.capture(slices.Clone(m.uncaptured), total, vat)
			m.events = append(m.events, oEvent{"fullCapture", total})
		case 4: // full capture of some lines: the rest is released
			if len(m.uncaptured) == 0 {
				continue
			}
			idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(m.uncaptured)-1), 1, len(m.uncaptured), rapid.ID[int]).Draw(rt, "pick")
			sort.Ints(idx)
			var pick, rest []oLine
			for i, l := range m.uncaptured {
				if slices.Contains(idx, i) {
					pick = append(pick, l)
				} else {
					rest = append(rest, l)
				}
			}
			total, vat := sums(pick)
			what = fmt.Sprintf("final capture of %v (%d)", idx, total)
			a = x.send("POST", path+"/capture", fmt.Sprintf(`{"orderLines":%s}`, linesJSON(pick, true)))
			if !m.open() || m.remainingAuth() <= 0 && !m.captureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			if !m.captureOffered() {
				// Whether a final capture of some lines is offered when the
				// whole remainder is not capturable: accept either answer,
				// and learn which.
				if a.code == 409 {
					break
				}
			}
			if p := m.captureProblems(pick); len(p) > 0 {
				expect(rt, what, a, 400, p...)
				break
			}
			expect(rt, what, a, 200)
			released, _ := sums(rest)
			m.capture(pick, total, vat)
			m.uncaptured = nil
			m.events = append(m.events, oEvent{"fullCapture", total})
			if len(rest) > 0 {
				// decisions.md: any remainder is released, recorded as a
				// cancel event, also when it sums to 0.
				m.events = append(m.events, oEvent{"cancel", released})
			}
		case 5: // partial refund of captured lines, whole or in part
			if len(m.captures) == 0 {
				continue
			}
			ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "capture")
			c := m.captures[ci]
			left, _ := c.left()
			if (left < 2 && !c.voided) || len(c.lines) == 0 {
				continue // the last unit is decisions.md's special case
			}
			idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(c.lines)-1), 1, len(c.lines), rapid.ID[int]).Draw(rt, "refundPick")
			sort.Ints(idx)
			var rl []oLine
			var qs []int64
			// Either some units of some lines, or every unit not yet
			// refunded: the last refund, where each line's VAT rounded on
			// its own may leave a rate a minor unit off what is left there.
			rest := rapid.IntRange(0, 2).Draw(rt, "rest") == 0
			if rest {
				idx = idx[:0]
				for i := range c.lines {
					idx = append(idx, i)
				}
			}
			for _, i := range idx {
				l := c.lines[i]
				l.id = ""
				if rest {
					if l.qty = l.qty - c.refQty[i]; l.qty <= 0 {
						continue
					}
				} else {
					l.qty = rapid.Int64Range(1, l.qty).Draw(rt, "refundQty")
				}
				rl = append(rl, l.computed())
				qs = append(qs, l.qty)
			}
			if len(rl) == 0 {
				continue
			}
			total, vat := sums(rl)
			note := rapid.SampledFrom([]string{"", "damaged"}).Draw(rt, "note")
			noteJSON := ""
			if note != "" {
				noteJSON = fmt.Sprintf(`,"note":%q`, note)
			}
			what = fmt.Sprintf("partial refund of %v on capture %d (%d, vat %d; left %d)", rl, ci, total, vat, left)
			a = x.send("POST", path+"/partialrefund/"+c.ledgerID, fmt.Sprintf(`{"orderLines":%s,"totalRefundAmount":%d%s}`, linesJSON(rl, false), max(sent(rl), 0), noteJSON))
			if c.voided {
				// A voided invoice owes nothing: there is nothing to credit.
				// The body's own sum check may come first.
				if sent(rl) < 0 && a.code == 400 {
					expect(rt, what, a, 400, "refund_amount_mismatch")
				} else {
					expect(rt, what, a, 409, "action_not_available")
				}
				break
			}
			probs := m.refundProblems(c, rl)
			if sent(rl) < 0 {
				probs = append(probs, "refund_amount_mismatch") // 0 was sent
			}
			if len(probs) > 0 {
				expect(rt, what, a, 400, probs...)
				break
			}
			expect(rt, what, a, 200)
			rates := byRate(rl)
			for k, s := range rates {
				r := c.refunded[k]
				c.refunded[k] = [2]int64{r[0] + s[0], r[1] + s[1]}
			}
			if rest {
				idx = slices.DeleteFunc(idx, func(i int) bool { return c.lines[i].qty-c.refQty[i] <= 0 })
			}
			for j, i := range idx {
				c.refQty[i] += qs[j]
			}
			c.refunds++
			m.refunds = append(m.refunds, oRefund{amount: total, vat: vat, rates: rates, note: note, of: ci, lines: rl})
			m.events = append(m.events, oEvent{"partialRefund", total})
		case 6: // full refund
			if len(m.captures) == 0 {
				continue
			}
			ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "capture")
			c := m.captures[ci]
			left, leftVat := c.left()
			what = fmt.Sprintf("full refund of capture %d (left %d)", ci, left)
			a = x.send("POST", path+"/refund/"+c.ledgerID, "")
			if left <= 0 || c.voided {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			var rl []oLine
			if c.refunds == 0 {
				rl = slices.Clone(c.lines)
			}
			rates := map[int64][2]int64{}
			for k, s := range c.leftByRate() {
				rates[k] = s
				r := c.refunded[k]
				c.refunded[k] = [2]int64{r[0] + s[0], r[1] + s[1]}
			}
			c.refunds++
			m.refunds = append(m.refunds, oRefund{amount: left, vat: leftVat, rates: rates, of: ci, lines: rl})
			m.events = append(m.events, oEvent{"fullRefund", left})
		case 7: // cancel
			what = "cancel"
			a = x.send("DELETE", path, "")
			m.cancel(rt, what, a)
		case 8: // extend expiry
			what = "extend expiry"
			a = x.send("POST", path+"/extendexpiry", "")
			// decisions.md: a fraudDeny order offers nothing but reads (and
			// cancel).
			if m.cancelled || m.expired() || len(m.uncaptured) == 0 || m.denied {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			// decisions.md: to the end (23:59:59 UTC) of the day one period
			// from now, never earlier, capped at creation + 180 days; a call
			// that changes nothing appends no event.
			d := m.now().Add(28 * 24 * time.Hour)
			to := time.Date(d.Year(), d.Month(), d.Day(), 23, 59, 59, 0, time.UTC)
			if limit := m.created.Add(180 * 24 * time.Hour); to.After(limit) {
				to = limit
			}
			if to.After(m.expiresAt) {
				m.expiresAt = to
				m.events = append(m.events, oEvent{"extendExpiry", 0})
			}
		case 9: // edit order: change, add, remove uncaptured lines
			nl := m.editedLines(rt, &next)
			total, vat := sums(nl)
			what = fmt.Sprintf("edit to %d lines (%d)", len(nl), total)
			a = x.send("POST", path, fmt.Sprintf(`{"orderLines":%s,"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":%d}`,
				linesJSON(nl, false), max(total, 0), max(total-vat, 0), max(vat, 0)))
			if !totalsOK(nl) {
				// The body's own checks come before the order's state.
				expect(rt, what, a, 400, "validation_failed")
				break
			}
			// An expired order offers no capture (design.md), so no edit
			// towards one either.
			if m.cancelled || m.expired() || len(m.uncaptured) == 0 || m.denied {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			newAuth := m.capturedSum + total
			if newAuth > m.approved {
				expect(rt, what, a, 400, "authorization_exceeded")
				break
			}
			expect(rt, what, a, 200)
			m.uncaptured = nl
			m.events = append(m.events, oEvent{"edit", total})
			// decisions.md: on an order on hold the authorization is still
			// pending; the approval's authorize event carries the amount as
			// edited.
			if newAuth > m.authorized && !m.held {
				m.events = append(m.events, oEvent{"authorize", newAuth})
			}
			m.authorized = newAuth
		case 10: // set reference
			ref := fmt.Sprintf("PO-%d", step)
			what = "set reference"
			a = x.send("POST", path+"/reference", fmt.Sprintf(`{"reference":%q}`, ref))
			// decisions.md: refused only for a fraudDeny order.
			if m.denied {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			m.reference = ref
			m.events = append(m.events, oEvent{"setReference", 0})
		case 11: // edit customer
			what = "edit customer"
			a = x.send("POST", path+"/customer", `{"phone":"+46701234567"}`)
			// decisions.md: a cancelled or expired order with nothing
			// captured is closed; one with a capture keeps editCustomer.
			// decisions.md: "with a live capture": a voided one is not.
			live := slices.ContainsFunc(m.captures, func(c *oCapture) bool { return !c.voided })
			if (m.cancelled || m.expired() || len(m.uncaptured) == 0) && !live || m.denied {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			m.events = append(m.events, oEvent{"editCustomer", 0})
		case 14: // the buyer pays (part of) a capture: sandbox
			if len(m.captures) == 0 {
				continue
			}
			ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "capture")
			c := m.captures[ci]
			owed := c.owed()
			amt := rapid.SampledFrom([]int64{1, owed, owed, owed - 1, owed + 1, owed / 2, 0, -1}).Draw(rt, "pay")
			what = fmt.Sprintf("payment of %d on capture %d (owed %d)", amt, ci, owed)
			a = x.send("POST", "/sandbox/v1/orders/"+m.id+"/ledgers/"+c.ledgerID+"/payments", fmt.Sprintf(`{"amount":%d}`, amt))
			// decisions.md: nothing is owed on a card receipt, nor collected
			// on a recoursed invoice (409); a voided invoice owes nothing.
			closed := m.card || c.voided || c.recourse
			switch {
			case amt <= 0 && closed:
				expect(rt, what, a, a.code, "validation_failed", "action_not_available")
			case amt <= 0:
				expect(rt, what, a, 400, "validation_failed")
			case closed:
				expect(rt, what, a, 409, "action_not_available")
			case amt > owed:
				// A payment of more than is owed is refused.
				expect(rt, what, a, 400, "validation_failed")
			default:
				expect(rt, what, a, 200)
				c.paid += amt
				m.events = append(m.events, oEvent{"paid", amt})
			}
		case 15: // void a capture: DELETE /v1/orders/{id}/{ledgerId}
			if len(m.captures) == 0 {
				continue
			}
			ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "capture")
			c := m.captures[ci]
			what = fmt.Sprintf("void capture %d", ci)
			a = x.send("DELETE", path+"/"+c.ledgerID, "")
			// decisions.md: offered on a captured invoice that has no refund,
			// no payment and no recourse.
			if !c.voidable(m.card) {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			c.voided = true
			m.events = append(m.events, oEvent{"cancel", c.amount})
		case 16: // recourse an invoice
			if len(m.captures) == 0 {
				continue
			}
			ci := rapid.IntRange(0, len(m.captures)-1).Draw(rt, "capture")
			c := m.captures[ci]
			what = fmt.Sprintf("recourse capture %d (owed %d)", ci, c.owed())
			a = x.send("POST", path+"/recourse/"+c.ledgerID, `{"reason":"unpaid"}`)
			// decisions.md: on an invoice with a claim left (captured −
			// refunded − paid > 0), once; no event.
			if !c.recoursable(m.card) {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			c.recourse = true
		case 17: // the risk review decides: sandbox
			approve := rapid.Bool().Draw(rt, "approve")
			what = fmt.Sprintf("risk approve=%v", approve)
			a = x.send("POST", "/sandbox/v1/orders/"+m.id+"/risk", fmt.Sprintf(`{"decision":%q}`, map[bool]string{false: "deny", true: "approve"}[approve]))
			if !m.held || m.cancelled || m.expired() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			m.held = false
			if approve {
				m.events = append(m.events, oEvent{"authorize", m.authorized})
				if !m.unacked {
					m.events = append(m.events, oEvent{"readyForCapture", 0})
				}
			} else {
				m.denied = true
			}
		case 18: // replay a request that succeeded under a key
			if len(x.done) == 0 {
				continue
			}
			k := x.done[rapid.IntRange(0, len(x.done)-1).Draw(rt, "replay")]
			body := k.body
			if reformat := rapid.Bool().Draw(rt, "reformat"); reformat && strings.HasPrefix(body, "{") {
				// decisions.md: the fingerprint is the decoded body, so a
				// re-formatted identical body is the same request.
				body = "{ \n" + body[1:]
			}
			what = fmt.Sprintf("replay of %s %s", k.method, k.path)
			a = x.sendKey(k.method, k.path, body, k.key)
			if a.code != k.code || !bytes.Equal(a.raw, k.raw) || a.hdr.Get("Idempotent-Replayed") != "true" {
				rt.Fatalf("%s: %d %q replayed=%q, first answer %d %s", what, a.code, a.raw, a.hdr.Get("Idempotent-Replayed"), k.code, k.raw)
			}
			a.code = 0 // the model is unchanged: compare the read alone
		case 19: // a key used again for another request
			if len(x.done) == 0 {
				continue
			}
			k := x.done[rapid.IntRange(0, len(x.done)-1).Draw(rt, "reuse")]
			what = "reused key"
			a = x.sendKey("POST", path+"/reference", fmt.Sprintf(`{"reference":"PO-reuse-%d"}`, step), k.key)
			expect(rt, what, a, 422, "idempotency_key_reused")
		case 20: // cancel the remainder by its ledger
			what = "cancel uncaptured ledger"
			a = x.send("DELETE", path+"/"+m.uncLedger, "")
			m.cancel(rt, what, a)
		}
		if x.key != "" {
			if x.last.code == 200 {
				if x.last.raw == nil || len(x.done) > 1000 {
					rt.Fatalf("keyed answer not recorded")
				}
				x.done = append(x.done, x.last)
			} else if x.last.code != 0 {
				// decisions.md: refusals store nothing, so the key is free.
				x.free = append(x.free, x.key)
			}
		}
		x.steps++
		f := strings.Fields(what)
		key := strings.Join(f[:min(2, len(f))], " ")
		if a.code == 200 {
			x.stats[key+" 200"]++
			x.check(rt, what+" (answer)", m, a.body)
		} else {
			x.stats[fmt.Sprintf("%s %d %v", key, a.code, a.body["code"])]++
		}
		x.check(rt, what+" (read)", m, x.e.get(m.id))
		if x.after != nil {
			x.after(rt, m, what)
		}
	}
}

// capture moves ls from uncaptured (when they are its lines) into a new capture.
func (m *oOrder) capture(ls []oLine, total, vat int64) {
	var rest []oLine
	for _, u := range m.uncaptured {
		if !slices.ContainsFunc(ls, func(l oLine) bool { return l.id == u.id }) {
			rest = append(rest, u)
		}
	}
	m.uncaptured = rest
	m.capturedSum += total
	m.captures = append(m.captures, &oCapture{lines: ls, amount: total, vat: vat, refunded: map[int64][2]int64{}, refQty: map[int]int64{}})
}

// refundProblems: docs/errors.md's refund codes for a partial refund of rl.
func (m *oOrder) refundProblems(c *oCapture, rl []oLine) []string {
	total, vat := sums(rl)
	left, leftVat := c.left()
	var p []string
	if total <= 0 {
		p = append(p, "refund_amount_invalid")
	}
	// errors.md: "in total or in VAT"; kassa reads the VAT bound both ways
	// (a credit note's VAT lies between 0 and what is left to credit), so a
	// refund may not charge VAT back either.
	if total > left || vat > max(0, leftVat) || vat < min(0, leftVat) {
		p = append(p, "refund_exceeds_captured")
	}
	if total == left {
		// The last refund closes every rate exactly.
		have := byRate(rl)
		for k, s := range c.leftByRate() {
			if h := have[k]; h != s {
				p = append(p, "refund_vat_mismatch")
				break
			}
		}
	} else if vat > total {
		p = append(p, "refund_vat_out_of_bounds")
	}
	return p
}

// editedLines draws the uncaptured lines after an edit: some kept, some
// changed, some removed, some added.
func (m *oOrder) editedLines(rt *rapid.T, next *int) []oLine {
	var nl []oLine
	for _, l := range m.uncaptured {
		switch rapid.IntRange(0, 3).Draw(rt, "editLine") {
		case 0: // removed
		case 1: // quantity changed
			l.id = ""
			l.qty = rapid.SampledFrom([]int64{1, 2, 5}).Draw(rt, "newQty")
			nl = append(nl, l.computed())
		default:
			l.id = ""
			nl = append(nl, l)
		}
	}
	for range rapid.IntRange(0, 2).Draw(rt, "added") {
		*next++
		nl = append(nl, drawLine(rt, *next, m.excl))
	}
	if len(nl) == 0 {
		*next++
		nl = append(nl, drawLine(rt, *next, m.excl))
	}
	return nl
}
