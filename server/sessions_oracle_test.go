package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The sessions oracle: a model of what comes before an order, written from
// the interface spec, shared/design.md, docs/sessions.md, docs/decisions.md,
// docs/errors.md and the README's sandbox section alone (not from session/,
// token/ or the root package): checkout and payment sessions (create,
// update, cancel, the buyer's approval or decline on the hosted checkout,
// expiry, the state read and every timestamp), the authorization tokens an
// approval or the sandbox mints (one order or customer token each, the
// approved ceiling with the 0-total rule, expiry, withdrawal), customer
// tokens (read, orders, revocation) and the session list's filters. Random
// sequences through the real router are compared with it after every step:
// each answer's status and code, then a fresh read of every session and
// customer token, and the order each token made (amount, store, reference,
// buyer, the token it names).
//
// Each sequence has a merchant of its own (the sandbox's merchant route),
// so its lists hold its sessions alone. It runs rapid's 100 sequences by
// default (about a second); a long run by hand, with the count of each
// operation's answers:
// go test ./server -run TestSessionsOracle -v -rapid.checks=5000

// tokenLife is an authorization token's life (design.md: default 60
// minutes); a session's authorizationExpiresAt is its approval plus it.
const tokenLife = 60 * time.Minute

type soSession struct {
	id, source, store, ref, ext string
	excl                        bool // vatMode exclVat
	lines                       []oLine
	total, vat                  int64
	// stored is the state the session's changes left: created,
	// authorized, completed or cancelled; expired is read from the time
	// (docs/sessions.md).
	stored                                 string
	created, updated, expires              time.Time
	authorizedAt, authExpires, completedAt time.Time
	cancelledAt                            time.Time
	declined                               bool // by the buyer, not the merchant
	tok                                    *soToken
	buyer, method                          string
	orderID, customerToken                 string
}

// state is the session's state as read at now: a created session past its
// expiresAt, or an authorized one past its authorizationExpiresAt, is
// expired ("from then on it reads expired").
func (s *soSession) state(now time.Time) string {
	switch {
	case s.stored == "created" && !now.Before(s.expires):
		return "expired"
	case s.stored == "authorized" && !now.Before(s.authExpires):
		return "expired"
	}
	return s.stored
}

type soToken struct {
	id       string
	sess     *soSession // nil: minted by the sandbox
	approved int64
	stated   bool // the approval states an amount (a session's always does, 0 included)
	expires  time.Time
	used     bool
	gone     bool // withdrawn (DELETE of it or of its session)
	buyer    string
	method   string
}

type soCustomerToken struct {
	id, store, buyer, method string
	revoked                  bool
}

type soEnv struct {
	e     *sessionEnv
	wall  *atomic.Int64
	auth  string
	stats map[string]int
	steps int
	seq   int

	sessions []*soSession
	tokens   []*soToken
	ctokens  []*soCustomerToken
	orders   int
	keys     int
	keyed    []oKeyed // order requests sent with a key and made
}

func (x *soEnv) now() time.Time { return time.Unix(0, x.wall.Load()).UTC() }

func (x *soEnv) send(method, path, body string) oAnswer {
	return oracleSend(x.e, x.auth, method, path, body, "")
}

func TestSessionsOracle(t *testing.T) {
	e, wall := oracleServer(t)
	x := &soEnv{e: e, wall: wall, stats: map[string]int{}}
	rapid.Check(t, func(rt *rapid.T) {
		startSequence(rt, wall)
		x.seq++
		x.sessions, x.tokens, x.ctokens, x.keyed = nil, nil, nil, nil
		x.newMerchant(rt)
		x.run(rt)
	})
	logStats(t, x.stats)
	t.Logf("%d steps, %d orders", x.steps, x.orders)
}

// newMerchant makes the sequence's own merchant, whose lists start empty,
// and sends its requests as it.
func (x *soEnv) newMerchant(rt *rapid.T) {
	code, _, m := x.e.do("POST", "/sandbox/v1/merchants", `{}`, x.e.auth)
	if code != 201 {
		rt.Fatalf("merchant: %d %v", code, m)
	}
	x.auth = basic(m["clientId"].(string), m["clientSecret"].(string))
}

// tick moves the clock a little, so that each change has a time of its own.
func (x *soEnv) tick(rt *rapid.T) {
	x.wall.Add(rapid.Int64Range(1, int64(time.Second)).Draw(rt, "tick"))
}

func (x *soEnv) base(s *soSession) string {
	if s.source == "payment" {
		return "/v1/payment-sessions/"
	}
	return "/v1/sessions/"
}

// pick draws one of the sequence's sessions (nil when none).
func (x *soEnv) pick(rt *rapid.T) *soSession {
	if len(x.sessions) == 0 {
		return nil
	}
	return x.sessions[rapid.IntRange(0, len(x.sessions)-1).Draw(rt, "session")]
}

func (x *soEnv) run(rt *rapid.T) {
	n := rapid.IntRange(1, 40).Draw(rt, "steps")
	last := -1
	for range n {
		x.steps++
		op := rapid.IntRange(0, 16).Draw(rt, "op")
		if len(x.sessions) == 0 && op != 5 {
			op = 0
		}
		if last != 11 { // after a move to an expiry's instant, the step is at it
			x.tick(rt)
		}
		last = op
		what, a := x.step(rt, op)
		if what != "" {
			x.stats[fmt.Sprintf("%s → %d %v", what, a.code, a.body["code"])]++
		}
		x.checkAll(rt, what)
	}
}

func (x *soEnv) step(rt *rapid.T, op int) (string, oAnswer) {
	now := x.now()
	switch op {
	case 0: // create a session
		opt := ""
		s := &soSession{source: rapid.SampledFrom([]string{"checkout", "payment"}).Draw(rt, "source"),
			store: rapid.SampledFrom([]string{"", "s1", "s2"}).Draw(rt, "store"),
			ref:   rapid.SampledFrom([]string{"", "PO-1", "PO-2"}).Draw(rt, "ref")}
		s.excl = rapid.IntRange(0, 2).Draw(rt, "exclVat") == 0
		if rapid.IntRange(0, 3).Draw(rt, "free") == 0 {
			// A session of 0: the approval states 0 (decisions.md).
			s.lines = []oLine{oLine{desc: "Free sample", qty: rapid.Int64Range(1, 3).Draw(rt, "qty"), vat: 2500, excl: s.excl}.computed()}
		} else {
			s.lines = drawLines(rt, "lines", 1, s.excl)
		}
		if s.excl {
			opt += `,"vatMode":"exclVat"`
		}
		s.total, s.vat = sums(s.lines)
		life := 24 * time.Hour
		minutes := ""
		if rapid.Bool().Draw(rt, "expiresIn") {
			m := rapid.SampledFrom([]int64{1, 5, 30, 90, 10080}).Draw(rt, "minutes")
			life = time.Duration(m) * time.Minute
			minutes = fmt.Sprintf(`,"expiresInMinutes":%d`, m)
		}
		if s.store != "" {
			opt += fmt.Sprintf(`,"storeId":%q`, s.store)
		}
		if s.ref != "" {
			opt += fmt.Sprintf(`,"merchantReference":%q`, s.ref)
		}
		if rapid.Bool().Draw(rt, "external") {
			s.ext = fmt.Sprintf("ext-%d-%d", x.seq, len(x.sessions))
			opt += fmt.Sprintf(`,"externalSessionId":%q`, s.ext)
		}
		path := map[string]string{"checkout": "/v1/sessions", "payment": "/v1/payment-sessions"}[s.source]
		a := x.send("POST", path, fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":%s%s%s}`, linesJSON(s.lines, false), minutes, opt))
		if !totalsOK(s.lines) {
			expect(rt, "create session with sums out of bounds", a, 400, "validation_failed")
			return "create session (sums out of bounds)", a
		}
		if a.code != 201 {
			rt.Fatalf("create session: %d %v", a.code, a.body)
		}
		s.id = a.body["id"].(string)
		if loc := a.hdr.Get("Location"); loc != path+"/"+s.id {
			rt.Fatalf("create session: Location %q", loc)
		}
		s.stored, s.created, s.updated, s.expires = "created", now, now, now.Add(life)
		x.sessions = append(x.sessions, s)
		x.compare(rt, "create session", s, a.body)
		return "create " + s.source + " session", a

	case 1: // the merchant updates the session: reference, sometimes lines
		s := x.pick(rt)
		ref := rapid.SampledFrom([]string{"PO-1", "PO-2", "PO-3"}).Draw(rt, "ref")
		body := fmt.Sprintf(`{"merchantReference":%q}`, ref)
		var ls []oLine
		if rapid.Bool().Draw(rt, "newLines") {
			ls = drawLines(rt, "lines", 1, s.excl)
			body = fmt.Sprintf(`{"merchantReference":%q,"orderLines":%s}`, ref, linesJSON(ls, false))
		}
		route := x.base(s)
		wrong := false
		if s.source == "checkout" && rapid.IntRange(0, 5).Draw(rt, "wrongRoute") == 0 {
			// "/v1/payment-sessions/{id} only reaches payment sessions".
			route, wrong = "/v1/payment-sessions/", true
		}
		a := x.send("POST", route+s.id, body)
		st := s.state(now)
		switch {
		case wrong:
			expect(rt, "update a checkout session on the payment route", a, 404, "session_not_found")
		case ls != nil && !totalsOK(ls):
			// The body is checked before the session's state.
			expect(rt, "update with sums out of bounds", a, 400, "validation_failed")
		case st != "created":
			expect(rt, "update a "+st+" session", a, 409, "session_"+st)
		default:
			expect(rt, "update", a, 200)
			s.ref, s.updated = ref, now
			if ls != nil {
				s.lines = ls
				s.total, s.vat = sums(ls)
			}
			x.compare(rt, "update", s, a.body)
		}
		return "update session (" + st + ")", a

	case 2: // the merchant cancels the session
		s := x.pick(rt)
		route := x.base(s)
		if rapid.Bool().Draw(rt, "checkoutRoute") {
			route = "/v1/sessions/" // reaches either source
		}
		a := x.send("DELETE", route+s.id, "")
		st := s.state(now)
		switch st {
		case "created", "authorized":
			expect(rt, "cancel a "+st+" session", a, 200)
			x.cancel(s, now)
			x.compare(rt, "cancel", s, a.body)
		default:
			expect(rt, "cancel a "+st+" session", a, 409, "session_"+st)
		}
		return "cancel session (" + st + ")", a

	case 3, 4: // the buyer approves or declines on the hosted checkout
		s := x.pick(rt)
		st := s.state(now)
		if op == 4 {
			code := x.submit(rt, s, "decline", "5560000001", "invoice", "")
			what := "decline (" + st + ")"
			if code != http.StatusSeeOther {
				rt.Fatalf("%s: %d", what, code)
			}
			if st == "created" {
				s.stored, s.cancelledAt, s.updated, s.declined = "cancelled", now, now, true
			}
			return what, oAnswer{code: code}
		}
		buyer := rapid.SampledFrom([]string{"5560000001", "5560000001", "5560000019"}).Draw(rt, "buyer")
		method := rapid.SampledFrom([]string{"invoice", "card"}).Draw(rt, "method")
		terms := ""
		if st == "created" {
			terms = x.terms(rt, s)
		}
		code := x.submit(rt, s, "approve", buyer, method, terms)
		what := fmt.Sprintf("approve %s by %s (%s)", method, buyer, st)
		switch {
		case st != "created":
			if code != http.StatusSeeOther { // the page shows the state
				rt.Fatalf("%s: %d", what, code)
			}
		case buyer == "5560000019" && method == "invoice":
			// README: declined for credit on invoice; the page says so.
			if code != http.StatusUnprocessableEntity {
				rt.Fatalf("%s: %d, the model has it declined for credit", what, code)
			}
		default:
			if code != http.StatusSeeOther {
				rt.Fatalf("%s: %d", what, code)
			}
			s.stored, s.authorizedAt, s.updated, s.authExpires = "authorized", now, now, now.Add(tokenLife)
			s.buyer, s.method = buyer, method
			got := x.getSession(rt, s)
			tok, _ := got["authorizationToken"].(string)
			if tok == "" {
				rt.Fatalf("%s: no authorizationToken: %v", what, got)
			}
			s.tok = &soToken{id: tok, sess: s, approved: s.total, stated: true, expires: s.authExpires, buyer: buyer, method: method}
			x.tokens = append(x.tokens, s.tok)
		}
		return what, oAnswer{code: code}

	case 5: // the sandbox mints a token: a buyer who completed checkout
		buyer := rapid.SampledFrom([]string{"5560000001", "5560000001", "5560000019"}).Draw(rt, "buyer")
		method := rapid.SampledFrom([]string{"invoice", "card"}).Draw(rt, "method")
		tk := &soToken{buyer: buyer, method: method, expires: now.Add(tokenLife)}
		amount := ""
		if rapid.Bool().Draw(rt, "amount") {
			tk.stated = true
			tk.approved = rapid.SampledFrom([]int64{0, 1, 100, 25000}).Draw(rt, "approved")
			amount = fmt.Sprintf(`,"amount":%d`, tk.approved)
		}
		a := x.send("POST", "/sandbox/v1/authorization-tokens", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE",
			"customer":{"companyId":%q},"paymentMethod":{"type":%q}%s}`, buyer, method, amount))
		what := fmt.Sprintf("mint %s by %s", method, buyer)
		if tk.stated && tk.approved == 0 {
			// The sandbox takes an amount of 1 or more (a 0 approval
			// comes from a session of 0).
			expect(rt, what+" of 0", a, 400, "validation_failed")
			return what + " of 0", a
		}
		if buyer == "5560000019" && method == "invoice" {
			expect(rt, what, a, 402, "credit_declined")
			return what, a
		}
		if a.code != 201 {
			rt.Fatalf("%s: %d %v", what, a.code, a.body)
		}
		tk.id = a.body["authorizationToken"].(string)
		if exp, err := time.Parse(time.RFC3339Nano, a.body["expiresAt"].(string)); err != nil || !exp.Equal(tk.expires) {
			rt.Fatalf("%s: expiresAt %v, the model %v", what, a.body["expiresAt"], tk.expires)
		}
		x.tokens = append(x.tokens, tk)
		return what, a

	case 6, 7: // an order, or a customer token, from an authorization token
		tk := x.pickToken(rt)
		if tk == nil {
			return "", oAnswer{}
		}
		st := x.tokenState(tk, now)
		if op == 7 {
			a := x.send("POST", "/v1/authorization-tokens/"+tk.id+"/customer-token",
				`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{}}`)
			what := "customer token from a token (" + st + ")"
			if !x.tokenRefused(rt, what, st, a) {
				expect(rt, what, a, 200)
				ct := &soCustomerToken{id: a.body["customerToken"].(string), buyer: tk.buyer, method: tk.method}
				if tk.sess != nil {
					ct.store = tk.sess.store
				}
				x.ctokens = append(x.ctokens, ct)
				x.use(tk, now, "", ct.id)
			}
			return what, a
		}
		// The amount: what the approval states, one minor unit more, or
		// less; or no lines and no total, which takes a session's lines.
		amount := rapid.SampledFrom([]int64{0, 1, 100, 25000, 1_000_000}).Draw(rt, "amount")
		switch rapid.IntRange(0, 3).Draw(rt, "edge") {
		case 0:
			amount = tk.approved
		case 1:
			amount = tk.approved + 1
		}
		body := fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":%d}`, amount)
		takesLines := tk.sess != nil && rapid.Bool().Draw(rt, "sessionLines")
		if takesLines {
			amount = tk.sess.total
			body = `{"country":"SE","currency":"SEK","locale":"sv-SE"}`
		}
		if rapid.IntRange(0, 9).Draw(rt, "otherCountry") == 0 {
			// docs/sessions.md: country and currency must be the
			// approval's. Refused, and the token is not used.
			a := x.send("POST", "/v1/authorization-tokens/"+tk.id+"/order", `{"country":"NO","currency":"NOK","locale":"nb-NO","totalOrderAmount":0}`)
			what := "order from a token in another country (" + st + ")"
			if a.code < 400 || a.code >= 500 {
				rt.Fatalf("%s: %d %v", what, a.code, a.body)
			}
			return what, a
		}
		key := ""
		if rapid.Bool().Draw(rt, "keyed") {
			x.keys++
			key = fmt.Sprintf("so-%d-%d", x.seq, x.keys)
		}
		a := oracleSend(x.e, x.auth, "POST", "/v1/authorization-tokens/"+tk.id+"/order", body, key)
		if key != "" && a.code == 200 {
			x.keyed = append(x.keyed, oKeyed{key, "POST", "/v1/authorization-tokens/" + tk.id + "/order", body, a.code, a.raw})
		}
		what := "order from a token (" + st + ")"
		if x.tokenRefused(rt, what, st, a) {
			return what, a
		}
		if tk.stated && amount > tk.approved {
			expect(rt, fmt.Sprintf("order of %d on an approval of %d", amount, tk.approved), a, 400, "authorization_exceeded")
			return what + " above the approval", a
		}
		if takesLines && !tk.stated {
			rt.Fatalf("model: a minted token has no lines")
		}
		expect(rt, fmt.Sprintf("order of %d on an approval of %d (stated %v)", amount, tk.approved, tk.stated), a, 200)
		id := a.body["orderId"].(string)
		x.use(tk, now, id, "")
		store, ref := "", ""
		if tk.sess != nil {
			store, ref = tk.sess.store, tk.sess.ref
		}
		x.checkOrder(rt, what, id, amount, store, ref, tk.buyer, tk.method, tk.id)
		if tk.sess != nil {
			// docs/sessions.md: an order sent without vatMode from an
			// exclVat session is exclVat; with the session's lines, they are
			// the lines the buyer approved.
			o := x.send("GET", "/v1/orders/"+id, "").body
			mode := map[bool]string{false: "inclVat", true: "exclVat"}[tk.sess.excl]
			if o["vatMode"] != mode {
				rt.Fatalf("%s: the order's vatMode %v, the session's %s", what, o["vatMode"], mode)
			}
			if takesLines {
				ls := lines(o["uncaptured"])
				if len(ls) != len(tk.sess.lines) {
					rt.Fatalf("%s: %d lines, the session has %d", what, len(ls), len(tk.sess.lines))
				}
				for i, v := range ls {
					if l := readLine(v, tk.sess.excl); !sameLine(l, tk.sess.lines[i]) {
						rt.Fatalf("%s: line %d reads %+v, the session's %+v", what, i, l, tk.sess.lines[i])
					}
				}
			}
		}
		if takesLines {
			return what + " with the session's lines", a
		}
		return what, a

	case 8: // withdraw an authorization token
		tk := x.pickToken(rt)
		if tk == nil {
			return "", oAnswer{}
		}
		st := x.tokenState(tk, now)
		a := x.send("DELETE", "/v1/authorization-tokens/"+tk.id, "")
		what := "withdraw a token (" + st + ")"
		switch st {
		case "gone":
			expect(rt, what, a, 404, "authorization_token_not_found")
		case "used":
			expect(rt, what, a, 409, "authorization_token_used")
		default:
			// decisions.md: an unused or expired token is withdrawn (204);
			// an authorized session goes with its token.
			if a.code != 204 {
				rt.Fatalf("%s: %d %v", what, a.code, a.body)
			}
			tk.gone = true
			if s := tk.sess; s != nil && s.state(now) == "authorized" {
				x.cancel(s, now)
			}
		}
		return what, a

	case 9: // an order from a customer token
		if len(x.ctokens) == 0 {
			return "", oAnswer{}
		}
		ct := x.ctokens[rapid.IntRange(0, len(x.ctokens)-1).Draw(rt, "ctoken")]
		amount := rapid.SampledFrom([]int64{0, 1, 100, 25000, 1_000_000}).Draw(rt, "amount")
		a := x.send("POST", "/v1/customer-tokens/"+ct.id+"/order", fmt.Sprintf(`{"country":"SE","currency":"SEK","totalOrderAmount":%d}`, amount))
		if ct.revoked {
			expect(rt, "order from a revoked customer token", a, 409, "customer_token_revoked")
			return "order from a customer token (revoked)", a
		}
		// decisions.md: a customer token states no amount, whatever its
		// approval stated.
		expect(rt, fmt.Sprintf("order of %d from a customer token", amount), a, 200)
		x.orders++
		x.checkOrder(rt, "order from a customer token", a.body["orderId"].(string), amount, ct.store, "", ct.buyer, ct.method, ct.id)
		return "order from a customer token", a

	case 10: // revoke a customer token
		if len(x.ctokens) == 0 {
			return "", oAnswer{}
		}
		ct := x.ctokens[rapid.IntRange(0, len(x.ctokens)-1).Draw(rt, "ctoken")]
		a := x.send("DELETE", "/v1/customer-tokens/"+ct.id, "")
		expect(rt, "revoke", a, 200)
		ct.revoked = true
		x.compareCustomerToken(rt, "revoke", ct, a.body)
		return "revoke a customer token", a

	case 11: // time passes, sometimes to the nanosecond of an expiry
		var d time.Duration
		if rapid.Bool().Draw(rt, "toExpiry") {
			var at []time.Time
			for _, s := range x.sessions {
				at = append(at, s.expires)
				if !s.authExpires.IsZero() {
					at = append(at, s.authExpires)
				}
			}
			for _, tk := range x.tokens {
				at = append(at, tk.expires)
			}
			t := at[rapid.IntRange(0, len(at)-1).Draw(rt, "expiry")]
			d = t.Sub(now) + time.Duration(rapid.SampledFrom([]int64{-1, 0, 0, 1}).Draw(rt, "off"))
		} else {
			d = time.Duration(rapid.SampledFrom([]int64{1, 30, 59, 61, 24 * 60, 8 * 24 * 60}).Draw(rt, "minutes")) * time.Minute
		}
		if d > 0 {
			x.wall.Add(int64(d))
		}
		return "", oAnswer{}

	case 12: // the session list, with filters, paged
		return x.list(rt)

	case 13: // the scheduled tasks run (authorization-token expiry among them)
		a := x.send("POST", "/sandbox/v1/jobs/tasks", "")
		expect(rt, "tasks", a, 200)
		return "tasks", a

	case 15: // an order request sent again with its Idempotency-Key
		if len(x.keyed) == 0 {
			return "", oAnswer{}
		}
		k := x.keyed[rapid.IntRange(0, len(x.keyed)-1).Draw(rt, "keyed")]
		a := oracleSend(x.e, x.auth, "POST", k.path, k.body, k.key)
		if a.code != k.code || !bytes.Equal(a.raw, k.raw) || a.hdr.Get("Idempotent-Replayed") != "true" {
			rt.Fatalf("replay of %s: %d %s (replayed %q), first %d %s", k.path, a.code, a.raw, a.hdr.Get("Idempotent-Replayed"), k.code, k.raw)
		}
		return "replay an order from a token", a

	case 16: // two orders from one usable token at once: one is made
		tk := x.pickToken(rt)
		if tk == nil || x.tokenState(tk, now) != "usable" {
			return "", oAnswer{}
		}
		body := `{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":0}`
		var wg sync.WaitGroup
		answers := make([]oAnswer, 2)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = x.send("POST", "/v1/authorization-tokens/"+tk.id+"/order", body)
			}()
		}
		wg.Wait()
		if answers[0].code != 200 {
			answers[0], answers[1] = answers[1], answers[0]
		}
		expect(rt, "the first of two orders at once", answers[0], 200)
		expect(rt, "the second of two orders at once", answers[1], 409, "authorization_token_used")
		id := answers[0].body["orderId"].(string)
		x.use(tk, now, id, "")
		store, ref := "", ""
		if tk.sess != nil {
			store, ref = tk.sess.store, tk.sess.ref
		}
		x.checkOrder(rt, "two orders at once", id, 0, store, ref, tk.buyer, tk.method, tk.id)
		return "two orders from a token at once", answers[1]

	case 14: // reads by other names: external id, order id, another merchant
		s := x.pick(rt)
		if s.ext != "" {
			a := x.send("GET", x.base(s)+"external:"+s.ext, "")
			expect(rt, "get by external id", a, 200)
			x.compare(rt, "get by external id", s, a.body)
		}
		if s.orderID != "" {
			// The spec: GET /v1/sessions/{id} takes an order id.
			a := x.send("GET", "/v1/sessions/"+s.orderID, "")
			expect(rt, "get by order id", a, 200)
			x.compare(rt, "get by order id", s, a.body)
		}
		code, _, p := x.e.do("GET", "/v1/sessions/"+s.id, "", x.e.other)
		if code != 404 || p["code"] != "session_not_found" {
			rt.Fatalf("another merchant reads the session: %d %v", code, p)
		}
		a := x.send("GET", "/v1/paymentstatus?sessionId="+s.id, "")
		expect(rt, "payment status", a, 200)
		want := map[string]string{"created": "pending", "authorized": "authorized", "cancelled": "cancelled", "expired": "expired"}[s.state(now)]
		if want != "" && a.body["status"] != want {
			rt.Fatalf("payment status of a %s session: %v, the model %s", s.state(now), a.body["status"], want)
		}
		return "reads", a
	}
	return "", oAnswer{}
}

func (x *soEnv) cancel(s *soSession, now time.Time) {
	s.stored, s.cancelledAt, s.updated = "cancelled", now, now
	if s.tok != nil && !s.tok.used {
		s.tok.gone = true // the other goes too (docs/sessions.md)
	}
}

// use marks the token used by an order or a customer token, which completes
// its session.
func (x *soEnv) use(tk *soToken, now time.Time, orderID, ctoken string) {
	tk.used = true
	if orderID != "" {
		x.orders++
	}
	if s := tk.sess; s != nil {
		s.stored, s.completedAt, s.updated, s.orderID, s.customerToken = "completed", now, now, orderID, ctoken
	}
}

func (x *soEnv) pickToken(rt *rapid.T) *soToken {
	if len(x.tokens) == 0 {
		return nil
	}
	return x.tokens[rapid.IntRange(0, len(x.tokens)-1).Draw(rt, "token")]
}

// tokenState: gone (withdrawn), used, expired, or usable.
func (x *soEnv) tokenState(tk *soToken, now time.Time) string {
	switch {
	case tk.gone:
		return "gone"
	case tk.used:
		return "used"
	case !now.Before(tk.expires):
		return "expired"
	}
	return "usable"
}

// tokenRefused checks a refusal the token's state predicts, and says
// whether there was one.
func (x *soEnv) tokenRefused(rt *rapid.T, what, st string, a oAnswer) bool {
	rt.Helper()
	switch st {
	case "gone":
		expect(rt, what, a, 404, "authorization_token_not_found")
	case "used":
		expect(rt, what, a, 409, "authorization_token_used")
	case "expired":
		expect(rt, what, a, 409, "authorization_token_expired")
	default:
		return false
	}
	return true
}

func (x *soEnv) checkOrder(rt *rapid.T, what, id string, amount int64, store, ref, buyer, method, tokenID string) {
	rt.Helper()
	a := x.send("GET", "/v1/orders/"+id, "")
	expect(rt, what+": get order", a, 200)
	o := a.body
	c := o["customer"].(map[string]any)
	pm := o["paymentMethod"].(map[string]any)
	tok, _ := o["token"].(map[string]any)
	if minor(o["orderAmount"]) != float64(amount) || o["storeId"] != store || o["merchantReference"] != ref ||
		c["companyId"] != buyer || pm["type"] != method || tok["tokenId"] != tokenID {
		rt.Fatalf("%s: the order reads amount %v store %q reference %q buyer %v method %v token %v; the model %d %q %q %s %s %s",
			what, minor(o["orderAmount"]), o["storeId"], o["merchantReference"], c["companyId"], pm["type"], tok["tokenId"],
			amount, store, ref, buyer, method, tokenID)
	}
}

// terms reads the digest of the terms the buyer's page shows.
func (x *soEnv) terms(rt *rapid.T, s *soSession) string {
	a := x.send("GET", x.base(s)+s.id, "")
	expect(rt, "get session for its link", a, 200)
	return x.e.checkoutTerms(a.body["checkoutUrl"].(string))
}

func (x *soEnv) submit(rt *rapid.T, s *soSession, action, buyer, method, terms string) int {
	a := x.send("GET", x.base(s)+s.id, "")
	expect(rt, "get session for its link", a, 200)
	u, _ := url.Parse(a.body["checkoutUrl"].(string))
	form := url.Values{"sig": {u.Query().Get("sig")}, "companyId": {buyer}, "firstName": {"A"}, "lastName": {"B"},
		"email": {"a@b.se"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {method},
		"action": {action}, "terms": {terms}}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(x.e.ts.URL+u.Path, form)
	if err != nil {
		rt.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (x *soEnv) getSession(rt *rapid.T, s *soSession) map[string]any {
	a := x.send("GET", x.base(s)+s.id, "")
	expect(rt, "get session", a, 200)
	return a.body
}

// checkAll reads every session and customer token afresh and compares.
func (x *soEnv) checkAll(rt *rapid.T, what string) {
	for _, s := range x.sessions {
		x.compare(rt, what+": get", s, x.getSession(rt, s))
	}
	for _, ct := range x.ctokens {
		a := x.send("GET", "/v1/customer-tokens/"+ct.id, "")
		expect(rt, what+": get customer token", a, 200)
		x.compareCustomerToken(rt, what, ct, a.body)
	}
}

func (x *soEnv) compareCustomerToken(rt *rapid.T, what string, ct *soCustomerToken, got map[string]any) {
	rt.Helper()
	want := map[bool]string{false: "active", true: "revoked"}[ct.revoked]
	pm, _ := got["paymentMethod"].(map[string]any)
	if got["tokenId"] != ct.id || got["state"] != want || got["storeId"] != ct.store || got["companyId"] != ct.buyer || pm["type"] != ct.method {
		rt.Fatalf("%s: customer token reads %v; the model state %s store %q buyer %s method %s", what, got, want, ct.store, ct.buyer, ct.method)
	}
}

func ts(rt *rapid.T, got map[string]any, field string) (time.Time, bool) {
	v, ok := got[field].(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		rt.Fatalf("%s %q: %v", field, v, err)
	}
	return t, true
}

// compare checks a session record against the model.
func (x *soEnv) compare(rt *rapid.T, what string, s *soSession, got map[string]any) {
	rt.Helper()
	now := x.now()
	fail := func(format string, args ...any) {
		rt.Helper()
		rt.Fatalf("%s: session %s (%s, stored %s): %s", what, s.id, s.state(now), s.stored, fmt.Sprintf(format, args...))
	}
	if got["id"] != s.id || got["source"] != s.source || got["state"] != s.state(now) {
		fail("reads id %v source %v state %v", got["id"], got["source"], got["state"])
	}
	if got["storeId"] != s.store || got["merchantReference"] != s.ref {
		fail("reads store %q reference %q, the model %q %q", got["storeId"], got["merchantReference"], s.store, s.ref)
	}
	if minor(got["totalOrderAmount"]) != float64(s.total) || minor(got["totalOrderVatAmount"]) != float64(s.vat) ||
		minor(got["totalOrderAmountExclVat"]) != float64(s.total-s.vat) {
		fail("reads totals %v/%v, the model %d/%d", minor(got["totalOrderAmount"]), minor(got["totalOrderVatAmount"]), s.total, s.vat)
	}
	gl := got["orderLines"].([]any)
	if len(gl) != len(s.lines) {
		fail("reads %d lines, the model %d", len(gl), len(s.lines))
	}
	for i, v := range gl {
		if l := readLine(v, s.excl); !sameLine(l, s.lines[i]) {
			fail("line %d reads %+v, the model %+v", i, l, s.lines[i])
		}
	}
	times := []struct {
		field string
		want  time.Time
	}{{"createdAt", s.created}, {"updatedAt", s.updated}, {"expiresAt", s.expires},
		{"authorizedAt", s.authorizedAt}, {"authorizationExpiresAt", s.authExpires},
		{"completedAt", s.completedAt}, {"cancelledAt", s.cancelledAt}}
	for _, tt := range times {
		t, ok := ts(rt, got, tt.field)
		if ok != !tt.want.IsZero() || (ok && !t.Equal(tt.want)) {
			fail("%s reads %v, the model %v", tt.field, got[tt.field], tt.want)
		}
	}
	tok, _ := got["authorizationToken"].(string)
	if (s.tok == nil) != (tok == "") || (s.tok != nil && tok != s.tok.id) {
		fail("authorizationToken %q", tok)
	}
	if got["orderId"] != nil && got["orderId"] != s.orderID || got["orderId"] == nil && s.orderID != "" {
		fail("orderId %v, the model %q", got["orderId"], s.orderID)
	}
	if got["customerToken"] != nil && got["customerToken"] != s.customerToken || got["customerToken"] == nil && s.customerToken != "" {
		fail("customerToken %v, the model %q", got["customerToken"], s.customerToken)
	}
	if s.buyer != "" {
		b, _ := got["buyer"].(map[string]any)
		pm, _ := got["paymentMethod"].(map[string]any)
		if b["companyId"] != s.buyer || pm["type"] != s.method {
			fail("buyer %v paymentMethod %v, the model %s %s", got["buyer"], got["paymentMethod"], s.buyer, s.method)
		}
	} else if got["buyer"] != nil || got["paymentMethod"] != nil {
		fail("buyer %v paymentMethod %v before an approval", got["buyer"], got["paymentMethod"])
	}
	if (got["declineReason"] != nil) != (s.stored == "cancelled") {
		fail("declineReason %v", got["declineReason"])
	}
}

// list compares a filtered, paged session list with the model.
func (x *soEnv) list(rt *rapid.T) (string, oAnswer) {
	now := x.now()
	var q []string
	var states, sources, stores, refs []string
	if rapid.Bool().Draw(rt, "byState") {
		states = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"created", "authorized", "completed", "cancelled", "expired"}), 1, 2, rapid.ID[string]).Draw(rt, "states")
		q = append(q, "state="+strings.Join(states, ","))
	}
	if rapid.IntRange(0, 2).Draw(rt, "bySource") == 0 {
		sources = []string{rapid.SampledFrom([]string{"checkout", "payment"}).Draw(rt, "source")}
		q = append(q, "source="+sources[0])
	}
	if rapid.IntRange(0, 2).Draw(rt, "byStore") == 0 {
		stores = []string{rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "store")}
		q = append(q, "storeId="+stores[0])
	}
	if rapid.IntRange(0, 2).Draw(rt, "byRef") == 0 {
		refs = []string{rapid.SampledFrom([]string{"PO-1", "PO-2", "PO-3"}).Draw(rt, "ref")}
		q = append(q, "merchantReference="+refs[0])
	}
	// timeBound draws, one time in odds, a From or To filter of field at
	// one session's time there.
	timeBound := func(label, field string, odds int, at func(*soSession) time.Time) (from, to time.Time) {
		if len(x.sessions) == 0 || rapid.IntRange(0, odds-1).Draw(rt, label) != 0 {
			return
		}
		s := x.sessions[rapid.IntRange(0, len(x.sessions)-1).Draw(rt, "bound")]
		if rapid.Bool().Draw(rt, "from") {
			from = at(s)
			q = append(q, field+"From="+url.QueryEscape(from.Format(time.RFC3339Nano)))
		} else {
			to = at(s)
			q = append(q, field+"To="+url.QueryEscape(to.Format(time.RFC3339Nano)))
		}
		return
	}
	updFrom, updTo := timeBound("byUpdated", "updated", 3, func(s *soSession) time.Time { return s.updated })
	createdFrom, createdTo := timeBound("byCreated", "created", 4, func(s *soSession) time.Time { return s.created })
	var orderIDs []string
	if rapid.IntRange(0, 3).Draw(rt, "byOrder") == 0 {
		for _, s := range x.sessions {
			if s.orderID != "" && rapid.Bool().Draw(rt, "orderId") {
				orderIDs = append(orderIDs, s.orderID)
			}
		}
		if orderIDs != nil {
			q = append(q, "orderId="+strings.Join(orderIDs, ","))
		}
	}
	// q: a case-insensitive substring of id, merchantReference,
	// externalSessionId or orderId (docs/sessions.md).
	text := ""
	if len(x.sessions) > 0 && rapid.IntRange(0, 3).Draw(rt, "byText") == 0 {
		s := x.sessions[rapid.IntRange(0, len(x.sessions)-1).Draw(rt, "textOf")]
		from := []string{s.id, s.ref, s.ext, s.orderID}[rapid.IntRange(0, 3).Draw(rt, "textField")]
		if from == "" {
			from = "po-"
		}
		i := rapid.IntRange(0, len(from)-1).Draw(rt, "textStart")
		text = from[i:min(len(from), i+rapid.IntRange(1, 8).Draw(rt, "textLen"))]
		if rapid.Bool().Draw(rt, "upper") {
			text = strings.ToUpper(text)
		}
		q = append(q, "q="+url.QueryEscape(text))
	}
	var want []string
	for i := len(x.sessions) - 1; i >= 0; i-- { // newest first
		s := x.sessions[i]
		lower := strings.ToLower(text)
		if (text == "" || strings.Contains(strings.ToLower(s.id), lower) || strings.Contains(strings.ToLower(s.ref), lower) ||
			strings.Contains(strings.ToLower(s.ext), lower) || strings.Contains(strings.ToLower(s.orderID), lower)) &&
			(createdFrom.IsZero() || !s.created.Before(createdFrom)) && (createdTo.IsZero() || s.created.Before(createdTo)) &&
			(orderIDs == nil || slices.Contains(orderIDs, s.orderID)) &&
			(states == nil || slices.Contains(states, s.state(now))) && (sources == nil || slices.Contains(sources, s.source)) &&
			(stores == nil || slices.Contains(stores, s.store)) && (refs == nil || slices.Contains(refs, s.ref)) &&
			(updFrom.IsZero() || !s.updated.Before(updFrom)) && (updTo.IsZero() || s.updated.Before(updTo)) {
			want = append(want, s.id)
		}
	}
	size := rapid.IntRange(1, 4).Draw(rt, "size")
	var got []string
	from := ""
	var a oAnswer
	for pages := 0; pages < 100; pages++ {
		path := "/v1/sessions?" + strings.Join(append(slices.Clone(q), fmt.Sprintf("size=%d", size)), "&")
		if from != "" {
			path += "&fromId=" + from
		}
		a = x.send("GET", path, "")
		expect(rt, "list "+path, a, 200)
		for _, v := range a.body["sessions"].([]any) {
			got = append(got, v.(map[string]any)["id"].(string))
		}
		next, _ := a.body["nextFromId"].(string)
		if next == "" {
			break
		}
		from = next
	}
	if !slices.Equal(got, want) {
		rt.Fatalf("list %v: %v, the model %v", q, got, want)
	}
	return fmt.Sprintf("list (%d filters)", len(q)), a
}
