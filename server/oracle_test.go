package server

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/storage/memory"
)

// The oracle: a small model of one order, written from the interface spec,
// shared/design.md, docs/decisions.md and docs/errors.md alone (not from
// order/, capture/, refund/ or money/), that predicts what each request
// through the real router must answer (accepted, or which 4xx and code) and
// what the order must then read: its four amounts to the minor unit, its
// statuses, the events appended (type and amount), the lines left in
// `uncaptured` and those of each capture and refund. Random sequences of
// operations on random orders are compared with it after every step.
//
// It runs rapid's 100 sequences by default (under a second); a long run by
// hand, with the count of each operation's answers:
// go test ./server -run TestOracle -v -rapid.checks=6000

// oLine is an order line as the merchant sends it; id is the server's,
// learnt from the answer that made the line.
type oLine struct {
	id, desc, typ    string
	qty, unit, disc  int64
	vat              int64
	total, vatAmount int64 // as the model computes them
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

// computed fills the line's totals by design.md's inclVat arithmetic:
// totalAmount = quantity × (unitPrice − unitDiscountAmount),
// totalVatAmount = totalAmount − round(totalAmount × 10000 / (10000 + vat)).
func (l oLine) computed() oLine {
	l.total = l.qty * (l.unit - l.disc)
	l.vatAmount = l.total - roundHalfAway(l.total*10000, 10000+l.vat)
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

func sums(ls []oLine) (total, vat int64) {
	for _, l := range ls {
		total += l.total
		vat += l.vatAmount
	}
	return
}

// byRate sums amount and VAT per VAT rate.
func byRate(ls []oLine) map[int64][2]int64 {
	m := map[int64][2]int64{}
	for _, l := range ls {
		s := m[l.vat]
		s[0] += l.total
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
}

type oEvent struct {
	typ    string
	amount int64
}

type oOrder struct {
	id           string
	approved     int64 // the ceiling an edit may raise the authorization to
	authorized   int64
	capturedSum  int64 // every capture counts against the authorization
	uncaptured   []oLine
	captures     []*oCapture
	refunds      []oRefund
	unacked      bool // advance invoice: no capture before acknowledgement
	cancelled    bool
	created      time.Time
	expiresAt    time.Time
	now          func() time.Time
	reference    string
	events       []oEvent
	hadCustomers int
}

func (o *oOrder) capturedAmount() int64 {
	var s int64
	for _, c := range o.captures {
		s += c.amount
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

func (o *oOrder) uncapturedAmount() int64 {
	t, _ := sums(o.uncaptured)
	return t
}

// statuses the order must read.
func (o *oOrder) statuses() []string {
	var st []string
	captured := len(o.captures) > 0
	// kassa reads `uncaptured` ("not yet captured") of lines: it holds
	// while some line is, beside partiallyCaptured.
	if len(o.uncaptured) > 0 {
		st = append(st, "uncaptured")
	}
	switch {
	case !captured && o.cancelled:
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
			a, _ := c.left()
			left += a
		}
		if left == 0 && len(o.uncaptured) == 0 {
			st = append(st, "fullyRefunded")
		} else {
			st = append(st, "partiallyRefunded")
		}
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

func (o *oOrder) open() bool { return !o.cancelled && !o.unacked && !o.expired() }

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
}

type oAnswer struct {
	code int
	body map[string]any
}

func (x *oracleEnv) send(method, path, body string) oAnswer {
	code, _, b := x.e.req(method, path, body, x.e.auth, nil)
	return oAnswer{code, b}
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
func readLine(v any) oLine {
	m := v.(map[string]any)
	l := oLine{id: fmt.Sprint(m["id"]), desc: m["description"].(string), qty: num(m["quantity"]),
		unit: num(m["unitPrice"]), vat: num(m["vat"]), total: num(m["totalAmount"]), vatAmount: num(m["totalVatAmount"])}
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
	unc := got["uncaptured"].(map[string]any)
	ul := lines(unc)
	if len(ul) != len(m.uncaptured) {
		rt.Fatalf("%s: %d uncaptured lines, model %d", what, len(ul), len(m.uncaptured))
	}
	for i, v := range ul {
		l := readLine(v)
		if !sameLine(m.uncaptured[i], l) {
			rt.Fatalf("%s: uncaptured line %d %+v, model %+v", what, i, l, m.uncaptured[i])
		}
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
			if l := readLine(v); !sameLine(mc.lines[j], l) {
				rt.Fatalf("%s: capture %d line %d %+v, model %+v", what, i, j, l, mc.lines[j])
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
			rl = append(rl, readLine(l))
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

func drawLine(rt *rapid.T, n int) oLine {
	l := oLine{desc: fmt.Sprintf("Item %d", n),
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

func drawLines(rt *rapid.T, name string, from int) []oLine {
	n := rapid.IntRange(1, 5).Draw(rt, name)
	var ls []oLine
	for i := range n {
		ls = append(ls, drawLine(rt, from+i))
	}
	return ls
}

// totalsOK: design.md and decisions.md, the sums of the lines each lie
// within 0..1000000000.
func totalsOK(ls []oLine) bool {
	t, v := sums(ls)
	return t >= 0 && v >= 0 && t-v >= 0 && t <= 1e9
}

func TestOracle(t *testing.T) {
	clock := NewClock(true)
	var wall atomic.Int64
	clock.wall = func() time.Time { return time.Unix(0, wall.Load()) }
	x := &oracleEnv{e: newEnvOn(t, false, clock, memory.New(clock.Now), nil), wall: &wall, stats: map[string]int{}}
	rapid.Check(t, func(rt *rapid.T) {
		// Each sequence has an order of its own, so each may start the
		// clock afresh: moves do not add up over the sequences.
		wall.Store(time.Date(2026, 3, 10, 9, 30, 0, 0, time.UTC).UnixNano() + rapid.Int64Range(0, int64(48*time.Hour)).Draw(rt, "start"))
		x.run(rt)
	})
	var keys []string
	for k := range x.stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%6d %s", x.stats[k], k)
	}
	t.Logf("%d steps", x.steps)
}

func (x *oracleEnv) create(rt *rapid.T) *oOrder {
	for {
		m := &oOrder{now: func() time.Time { return time.Unix(0, x.wall.Load()).UTC() }}
		m.uncaptured = drawLines(rt, "lines", 1)
		total, vat := sums(m.uncaptured)
		pm := rapid.SampledFrom([]string{"invoice", "card", "advanceInvoice"}).Draw(rt, "paymentMethod")
		amount := ""
		m.approved = total
		if rapid.Bool().Draw(rt, "approvedAbove") && total >= 0 {
			m.approved = total + rapid.Int64Range(1, 50000).Draw(rt, "headroom")
			amount = fmt.Sprintf(`,"amount":%d`, m.approved)
		}
		a := x.send("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"companyId":"5560000001"},"paymentMethod":{"type":%q}%s}`, pm, amount))
		if a.code != 201 {
			rt.Fatalf("mint: %d %v", a.code, a.body)
		}
		totals := ""
		if rapid.Bool().Draw(rt, "sendTotals") {
			totals = fmt.Sprintf(`,"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":%d`, total, total-vat, vat)
		}
		a = x.send("POST", "/v1/authorization-tokens/"+a.body["authorizationToken"].(string)+"/order",
			fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":%s%s}`, linesJSON(m.uncaptured, false), totals))
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
		} else {
			m.events = append(m.events, oEvent{"readyForCapture", 0})
		}
		got := x.e.get(m.id)
		created, err := time.Parse(time.RFC3339Nano, got["createdAt"].(string))
		if err != nil || !created.Equal(m.now()) {
			rt.Fatalf("createdAt %v (%v), the clock reads %v", got["createdAt"], err, m.now())
		}
		m.created, m.expiresAt = created, created.Add(28*24*time.Hour)
		x.check(rt, "create", m, got)
		return m
	}
}

func (x *oracleEnv) run(rt *rapid.T) {
	m := x.create(rt)
	path := "/v1/orders/" + m.id
	next := 100
	steps := rapid.IntRange(1, 30).Draw(rt, "steps")
	for step := range steps {
		var a oAnswer
		var what string
		switch op := rapid.IntRange(0, 13).Draw(rt, "op"); op {
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
				l = oLine{desc: fmt.Sprintf("Item %d", next), qty: 1, unit: r + rapid.Int64Range(0, 1).Draw(rt, "over"),
					vat: rapid.SampledFrom(oracleRates).Draw(rt, "vat")}.computed()
			} else if len(m.uncaptured) > 0 && rapid.Bool().Draw(rt, "copy") {
				l = m.uncaptured[rapid.IntRange(0, len(m.uncaptured)-1).Draw(rt, "of")]
				l.id = ""
				l.qty = rapid.Int64Range(1, l.qty).Draw(rt, "part")
				l = l.computed()
			} else {
				next++
				l = drawLine(rt, next)
			}
			total, vat := sums([]oLine{l})
			what = fmt.Sprintf("capture without id of %+v", l)
			a = x.send("POST", path+"/partialcapture", fmt.Sprintf(`{"orderLines":[%s],"totalCaptureAmount":%d}`, l.json(false), max(total, 0)))
			if !m.partialCaptureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			if total < 0 {
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
			m.captures = append(m.captures, &oCapture{lines: []oLine{l}, amount: total, vat: vat, refunded: map[int64][2]int64{}})
			m.events = append(m.events, oEvent{"partialCapture", total})
		case 0: // acknowledge
			what = "acknowledge"
			a = x.send("POST", path+"/acknowledge", "")
			// decisions.md: only while unacknowledged, neither cancelled nor expired.
			if m.unacked && !m.cancelled && !m.expired() {
				expect(rt, what, a, 200)
				m.unacked = false
				m.events = append(m.events, oEvent{"acknowledge", 0}, oEvent{"readyForCapture", 0})
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
			sent := total
			if rapid.IntRange(0, 5).Draw(rt, "mismatch") == 0 {
				sent = total + rapid.SampledFrom([]int64{-1, 1, 100}).Draw(rt, "off")
			}
			what = fmt.Sprintf("partial capture of %v (%d, sent %d)", idx, total, sent)
			a = x.send("POST", path+"/partialcapture", fmt.Sprintf(`{"orderLines":%s,"totalCaptureAmount":%d}`, linesJSON(pick, true), max(sent, 0)))
			if !m.partialCaptureOffered() {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			var probs []string
			if max(sent, 0) != total {
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
				total, _ := sums(m.uncaptured)
				body = fmt.Sprintf(`{"orderLines":%s,"totalCaptureAmount":%d}`, linesJSON(m.uncaptured, true), max(total, 0))
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
			if left < 2 || len(c.lines) == 0 {
				continue // the last unit is decisions.md's special case
			}
			idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(c.lines)-1), 1, len(c.lines), rapid.ID[int]).Draw(rt, "refundPick")
			sort.Ints(idx)
			var rl []oLine
			for _, i := range idx {
				l := c.lines[i]
				l.id = ""
				l.qty = rapid.Int64Range(1, l.qty).Draw(rt, "refundQty")
				rl = append(rl, l.computed())
			}
			total, vat := sums(rl)
			note := rapid.SampledFrom([]string{"", "damaged"}).Draw(rt, "note")
			noteJSON := ""
			if note != "" {
				noteJSON = fmt.Sprintf(`,"note":%q`, note)
			}
			what = fmt.Sprintf("partial refund of %v on capture %d (%d, vat %d; left %d)", rl, ci, total, vat, left)
			a = x.send("POST", path+"/partialrefund/"+c.ledgerID, fmt.Sprintf(`{"orderLines":%s,"totalRefundAmount":%d%s}`, linesJSON(rl, false), max(total, 0), noteJSON))
			probs := m.refundProblems(c, rl)
			if total < 0 {
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
			m.refunds = append(m.refunds, oRefund{amount: total, vat: vat, rates: rates, note: note})
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
			if left <= 0 {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			rates := map[int64][2]int64{}
			for k, s := range byRate(c.lines) {
				r := c.refunded[k]
				rates[k] = [2]int64{s[0] - r[0], s[1] - r[1]}
				c.refunded[k] = s
			}
			m.refunds = append(m.refunds, oRefund{amount: left, vat: leftVat, rates: rates})
			m.events = append(m.events, oEvent{"fullRefund", left})
		case 7: // cancel
			what = "cancel"
			a = x.send("DELETE", path, "")
			if m.cancelled || len(m.uncaptured) == 0 {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			released := m.uncapturedAmount()
			m.uncaptured = nil
			m.cancelled = true
			m.events = append(m.events, oEvent{"cancel", released})
		case 8: // extend expiry
			what = "extend expiry"
			a = x.send("POST", path+"/extendexpiry", "")
			if m.cancelled || m.expired() || len(m.uncaptured) == 0 {
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
			if m.cancelled || m.expired() || len(m.uncaptured) == 0 {
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
			if newAuth > m.authorized {
				m.events = append(m.events, oEvent{"authorize", newAuth})
			}
			m.authorized = newAuth
		case 10: // set reference
			ref := fmt.Sprintf("PO-%d", step)
			what = "set reference"
			a = x.send("POST", path+"/reference", fmt.Sprintf(`{"reference":%q}`, ref))
			expect(rt, what, a, 200)
			m.reference = ref
			m.events = append(m.events, oEvent{"setReference", 0})
		case 11: // edit customer
			what = "edit customer"
			a = x.send("POST", path+"/customer", `{"phone":"+46701234567"}`)
			// decisions.md: a cancelled or expired order with nothing
			// captured is closed; one with a capture keeps editCustomer.
			if (m.cancelled || m.expired()) && len(m.captures) == 0 {
				expect(rt, what, a, 409, "action_not_available")
				break
			}
			expect(rt, what, a, 200)
			m.events = append(m.events, oEvent{"editCustomer", 0})
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
	m.captures = append(m.captures, &oCapture{lines: ls, amount: total, vat: vat, refunded: map[int64][2]int64{}})
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
		for k, s := range byRate(c.lines) {
			r := c.refunded[k]
			if h := have[k]; h != [2]int64{s[0] - r[0], s[1] - r[1]} {
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
		nl = append(nl, drawLine(rt, *next))
	}
	if len(nl) == 0 {
		*next++
		nl = append(nl, drawLine(rt, *next))
	}
	return nl
}
