package server

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa"
)

// The tokens oracle: a model of the authorization token's life and of the
// customer tokens made from one, written from the interface spec,
// shared/design.md, the README's sandbox section, docs/errors.md and
// docs/decisions.md alone (not from token/, sandbox/ or tokens.go). Tokens
// are minted by the sandbox with or without a buyer (the README's fixtures:
// approved, declined for credit, advance invoice only, possibleFraud), a
// payment method and an approved amount; each is turned into an order or a
// customer token (once: a second use answers authorization_token_used, and
// two sent at once make one order exactly), withdrawn (DELETE), or left to
// expire on the test clock (at expiresAt it is expired, the nanosecond
// before it is not), with the token-expiry job run at random. The retention
// sweep (Ledger.SweepAuthorizations, which kassa serve runs each minute)
// removes, and the model counts, the tokens whose expiresAt is more than
// kassa.DefaultAuthorizationRetention ago; such a token answers as one
// never minted, while a create-order replayed under its Idempotency-Key
// answers byte for byte as it first did, and the orders and customer tokens
// it made go on: their buyer, payment method and risk standing, and the
// ceiling an edit may raise the authorization to (the approved amount; the
// order total where none was stated, and for every order of a customer
// token). Every answer's status and code is compared with the model, and
// every order and customer token the model knows is read afresh after each
// step.
//
// Each sequence has a merchant of its own; the sweep is the server's, so
// the model keeps every sequence's tokens to count what it removes. It runs
// rapid's 100 sequences by default (about a second); a long run by hand,
// with the count of each operation's answers:
// go test ./server -run TestTokensOracle -v -rapid.checks=5000

// toBuyers are the README's fixtures the model mints for, and "" for a
// token minted without a customer.
var toBuyers = []string{"5560000001", "5560000001", "5560000019", "5560000027", "5560000035", ""}

type toToken struct {
	id       string
	buyer    string // companyId; "" when minted without a customer
	email    string // the buyer's email the mint stated ("" none)
	method   string
	stated   bool // the mint stated an amount
	approved int64
	expires  time.Time
	usedBy   string // the order id or customer token id it made
	withdrawn,
	removed bool // by the retention sweep
}

type toOrder struct {
	id, buyer, email, method, token string
	amount                          int64 // the order's total now
	approved                        int64 // the ceiling of an edit
	held, unacked                   bool
	created, expires                time.Time
}

// expired: decisions.md, 28 days after creation unless extended, read from
// the time (an order past its expiresAt offers no edit).
func (o *toOrder) expired(now time.Time) bool { return now.After(o.expires) }

type toCustomerToken struct {
	id, buyer, email, method string
	revoked                  bool
}

type toEnv struct {
	soEnv
	all     []*toToken // every sequence's tokens: the sweep is the server's
	tokens  []*toToken // this sequence's
	orders  []*toOrder
	ctokens []*toCustomerToken
	keyed   []oKeyed
	made    int
}

func TestTokensOracle(t *testing.T) {
	// On PostgreSQL when the HTTP tests run there (KASSA_TEST_STORE=postgres):
	// the sweep and the token's row lock are the store's own.
	e, wall := settlementsOracleServer(t)
	x := &toEnv{soEnv: soEnv{e: e, wall: wall, stats: map[string]int{}}}
	rapid.Check(t, func(rt *rapid.T) {
		startSequence(rt, wall)
		x.seq++
		x.tokens, x.orders, x.ctokens, x.keyed = nil, nil, nil, nil
		x.newMerchant(rt)
		x.run(rt)
	})
	logStats(t, x.stats)
	t.Logf("%d steps, %d orders", x.steps, x.made)
}

func (x *toEnv) run(rt *rapid.T) {
	n := rapid.IntRange(1, 40).Draw(rt, "steps")
	last := -1
	for range n {
		x.steps++
		op := rapid.IntRange(0, 15).Draw(rt, "op")
		if len(x.tokens) == 0 {
			op = 0
		}
		if last != 5 { // after a move to an instant, the step is at it
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

// state is the token's state at now: removed (answers as never minted),
// withdrawn, used, expired (at its expiresAt and after), or usable.
func (tk *toToken) state(now time.Time) string {
	switch {
	case tk.removed:
		return "removed"
	case tk.withdrawn:
		return "withdrawn"
	case tk.usedBy != "":
		return "used"
	case !now.Before(tk.expires):
		return "expired"
	}
	return "usable"
}

// refused checks the refusal the token's state predicts for its use, and
// says whether there was one.
func (x *toEnv) refused(rt *rapid.T, what string, tk *toToken, st string, a oAnswer) bool {
	rt.Helper()
	switch st {
	case "removed", "withdrawn":
		expect(rt, what, a, 404, "authorization_token_not_found")
	case "used":
		expect(rt, what, a, 409, "authorization_token_used")
		// decisions.md: authorization_token_used names what it made.
		if d, _ := a.body["detail"].(string); !strings.Contains(d, tk.usedBy) {
			rt.Fatalf("%s: detail %q does not name %s", what, d, tk.usedBy)
		}
	case "expired":
		expect(rt, what, a, 409, "authorization_token_expired")
	default:
		return false
	}
	return true
}

func (x *toEnv) pickToken(rt *rapid.T) *toToken {
	return x.tokens[rapid.IntRange(0, len(x.tokens)-1).Draw(rt, "token")]
}

const toOrderBody = `{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":%d%s}`

func (x *toEnv) step(rt *rapid.T, op int) (string, oAnswer) {
	now := x.now()
	switch op {
	case 0: // the sandbox mints a token: a buyer who completed checkout
		tk := &toToken{buyer: rapid.SampledFrom(toBuyers).Draw(rt, "buyer"), expires: now.Add(tokenLife)}
		asked := rapid.SampledFrom([]string{"", "invoice", "card", "advanceInvoice"}).Draw(rt, "method")
		var fields []string
		if tk.buyer != "" {
			customer := fmt.Sprintf(`"companyId":%q`, tk.buyer)
			if rapid.Bool().Draw(rt, "email") {
				tk.email = "buyer@example.se"
				customer += fmt.Sprintf(`,"email":%q`, tk.email)
			}
			fields = append(fields, `"customer":{`+customer+`}`)
		}
		if asked != "" {
			fields = append(fields, fmt.Sprintf(`"paymentMethod":{"type":%q}`, asked))
		}
		if rapid.Bool().Draw(rt, "amount") {
			tk.stated, tk.approved = true, rapid.SampledFrom([]int64{1, 100, 25000}).Draw(rt, "approved")
			fields = append(fields, fmt.Sprintf(`"amount":%d`, tk.approved))
		}
		body := `{"country":"SE","currency":"SEK","locale":"sv-SE"`
		for _, f := range fields {
			body += "," + f
		}
		a := x.send("POST", "/sandbox/v1/authorization-tokens", body+"}")
		// The docs name no default method; the sandbox's is invoice.
		tk.method = cmp.Or(asked, "invoice")
		what := fmt.Sprintf("mint %s for %q", tk.method, tk.buyer)
		switch {
		case tk.buyer == "5560000019" && tk.method == "invoice":
			expect(rt, what, a, 402, "credit_declined") // README: declined for credit
			return what, a
		case tk.buyer == "5560000027":
			tk.method = "advanceInvoice" // README: approved only for advanceInvoice
		}
		if a.code != 201 {
			rt.Fatalf("%s: %d %v", what, a.code, a.body)
		}
		tk.id = a.body["authorizationToken"].(string)
		if exp, err := time.Parse(time.RFC3339Nano, a.body["expiresAt"].(string)); err != nil || !exp.Equal(tk.expires) {
			rt.Fatalf("%s: expiresAt %v, the model %v", what, a.body["expiresAt"], tk.expires)
		}
		x.tokens = append(x.tokens, tk)
		x.all = append(x.all, tk)
		return what, a

	case 1: // an order from a token
		tk := x.pickToken(rt)
		st := tk.state(now)
		amount := rapid.SampledFrom([]int64{0, 1, 100, 25000, 1_000_000}).Draw(rt, "amount")
		if tk.stated && rapid.Bool().Draw(rt, "edge") {
			amount = tk.approved + rapid.Int64Range(-1, 1).Draw(rt, "off")
		}
		// The merchant's customer data lies over the buyer's: an email
		// replaces the token's, the buyer's number in another form is the
		// buyer (decisions.md), another company is refused.
		overlay, email, buyer, other := "", tk.email, tk.buyer, false
		switch rapid.IntRange(0, 5).Draw(rt, "overlay") {
		case 0:
			overlay, email = `,"customer":{"email":"merchant@example.se"}`, "merchant@example.se"
		case 1:
			if tk.buyer != "" {
				overlay = fmt.Sprintf(`,"customer":{"companyId":%q}`, tk.buyer[:6]+"-"+tk.buyer[6:])
			}
		case 2:
			// A token minted without a buyer authorized no company: the
			// merchant's is the order's.
			overlay, other = `,"customer":{"companyId":"5560000043"}`, tk.buyer != ""
			if !other {
				buyer = "5560000043"
			}
		}
		path := "/v1/authorization-tokens/" + tk.id + "/order"
		body := fmt.Sprintf(toOrderBody, amount, overlay)
		if rapid.IntRange(0, 9).Draw(rt, "otherMerchant") == 0 {
			// Another merchant's token is unknown, and stays unused.
			a := oracleSend(x.e, x.e.auth, "POST", path, body, "")
			expect(rt, "an order from another merchant's token", a, 404, "authorization_token_not_found")
			return "order from another merchant's token", a
		}
		key := ""
		if rapid.Bool().Draw(rt, "keyed") {
			x.keys++
			key = fmt.Sprintf("to-%d-%d", x.seq, x.keys)
		}
		a := oracleSend(x.e, x.auth, "POST", path, body, key)
		what := "order from a token (" + st + ")"
		if other {
			// decisions.md: another company than the authorized buyer is
			// refused, whatever else is wrong; the token stays as it was.
			if a.code < 400 || a.code >= 500 || (st == "usable" && a.code != 400) {
				rt.Fatalf("%s for another company: %d %v", what, a.code, a.body)
			}
			return what + " for another company", a
		}
		if key != "" && a.code == 200 {
			x.keyed = append(x.keyed, oKeyed{key, "POST", path, body, a.code, a.raw})
		}
		if x.refused(rt, what, tk, st, a) {
			return what, a
		}
		if tk.stated && amount > tk.approved {
			expect(rt, fmt.Sprintf("%s of %d on an approval of %d", what, amount, tk.approved), a, 400, "authorization_exceeded")
			return what + " above the approval", a
		}
		expect(rt, fmt.Sprintf("%s of %d on an approval of %d (stated %v)", what, amount, tk.approved, tk.stated), a, 200)
		x.made++
		o := &toOrder{id: a.body["orderId"].(string), buyer: buyer, email: email, method: tk.method, token: tk.id,
			amount: amount, approved: amount, held: tk.buyer == "5560000035", unacked: tk.method == "advanceInvoice",
			created: now, expires: now.Add(28 * 24 * time.Hour)}
		if tk.stated {
			o.approved = tk.approved
		}
		tk.usedBy = o.id
		x.orders = append(x.orders, o)
		return what, a

	case 2: // a customer token from a token
		tk := x.pickToken(rt)
		st := tk.state(now)
		overlay, email := "", tk.email
		if rapid.Bool().Draw(rt, "overlay") {
			overlay, email = `"email":"merchant@example.se"`, "merchant@example.se"
		}
		a := x.send("POST", "/v1/authorization-tokens/"+tk.id+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{`+overlay+`}}`)
		what := "customer token from a token (" + st + ")"
		if x.refused(rt, what, tk, st, a) {
			return what, a
		}
		expect(rt, what, a, 200)
		ct := &toCustomerToken{id: a.body["customerToken"].(string), buyer: tk.buyer, email: email, method: tk.method}
		tk.usedBy = ct.id
		x.ctokens = append(x.ctokens, ct)
		return what, a

	case 3: // withdraw a token
		tk := x.pickToken(rt)
		st := tk.state(now)
		a := x.send("DELETE", "/v1/authorization-tokens/"+tk.id, "")
		what := "withdraw a token (" + st + ")"
		switch st {
		case "removed", "withdrawn":
			expect(rt, what, a, 404, "authorization_token_not_found")
		case "used":
			expect(rt, what, a, 409, "authorization_token_used")
		default:
			// decisions.md: an unused or expired token is withdrawn, 204
			// and no body.
			if a.code != 204 || len(a.raw) != 0 {
				rt.Fatalf("%s: %d %s", what, a.code, a.raw)
			}
			tk.withdrawn = true
		}
		return what, a

	case 4: // two orders from one token at once: one is made, or neither
		tk := x.pickToken(rt)
		st := tk.state(now)
		var wg sync.WaitGroup
		answers := make([]oAnswer, 2)
		for i := range answers {
			wg.Go(func() {
				answers[i] = x.send("POST", "/v1/authorization-tokens/"+tk.id+"/order", fmt.Sprintf(toOrderBody, 0, ""))
			})
		}
		wg.Wait()
		what := "two orders from a token at once (" + st + ")"
		if st != "usable" {
			for _, a := range answers {
				x.refused(rt, what, tk, st, a)
			}
			return what, answers[1]
		}
		if answers[0].code != 200 {
			answers[0], answers[1] = answers[1], answers[0]
		}
		expect(rt, what+": the first", answers[0], 200)
		o := &toOrder{id: answers[0].body["orderId"].(string), buyer: tk.buyer, email: tk.email, method: tk.method, token: tk.id,
			held: tk.buyer == "5560000035", unacked: tk.method == "advanceInvoice", created: now, expires: now.Add(28 * 24 * time.Hour)}
		if tk.stated {
			o.approved = tk.approved
		}
		tk.usedBy = o.id
		x.made++
		x.orders = append(x.orders, o)
		x.refused(rt, what+": the second", tk, "used", answers[1])
		return what, answers[1]

	case 5: // time passes: to a token's expiry or the end of its retention, to the nanosecond
		var d time.Duration
		tk := x.pickToken(rt)
		switch rapid.IntRange(0, 3).Draw(rt, "move") {
		case 0:
			d = tk.expires.Sub(now) + time.Duration(rapid.Int64Range(-1, 1).Draw(rt, "off"))
		case 1:
			d = tk.expires.Add(kassa.DefaultAuthorizationRetention).Sub(now) + time.Duration(rapid.Int64Range(-1, 1).Draw(rt, "off"))
		default:
			d = time.Duration(rapid.SampledFrom([]int64{1, 59, 61, 24 * 60, 27 * 24 * 60}).Draw(rt, "minutes")) * time.Minute
		}
		if d > 0 {
			x.wall.Add(int64(d))
		}
		return "", oAnswer{}

	case 6: // the scheduled tasks run: token expiry among them
		a := x.send("POST", "/sandbox/v1/jobs/tasks", "")
		expect(rt, "tasks", a, 200)
		if num(a.body["failed"]) != 0 {
			rt.Fatalf("tasks: %v", a.body)
		}
		return "tasks", a

	case 7: // the retention sweep
		want := 0
		for _, tk := range x.all {
			if !tk.removed && now.Sub(tk.expires) > kassa.DefaultAuthorizationRetention {
				tk.removed = true
				want++
			}
		}
		n, err := x.e.ledger.SweepAuthorizations(context.Background(), rapid.IntRange(1, 3).Draw(rt, "limit"))
		if err != nil || n != want {
			rt.Fatalf("the sweep removed %d (%v); the model %d", n, err, want)
		}
		return fmt.Sprintf("sweep (%d)", min(want, 2)), oAnswer{code: 200}

	case 8: // a create-order sent again with its Idempotency-Key, or the key with another request
		if len(x.keyed) == 0 {
			return "", oAnswer{}
		}
		k := x.keyed[rapid.IntRange(0, len(x.keyed)-1).Draw(rt, "keyed")]
		if rapid.IntRange(0, 3).Draw(rt, "reuse") == 0 {
			a := oracleSend(x.e, x.auth, "POST", k.path, strings.Replace(k.body, `"totalOrderAmount":`, `"totalOrderAmount":1`, 1), k.key)
			expect(rt, "the key with another body", a, 422, "idempotency_key_reused")
			return "key with another body", a
		}
		a := oracleSend(x.e, x.auth, "POST", k.path, k.body, k.key)
		if a.code != k.code || !bytes.Equal(a.raw, k.raw) || a.hdr.Get("Idempotent-Replayed") != "true" {
			rt.Fatalf("replay of %s: %d %s (replayed %q), first %d %s", k.path, a.code, a.raw, a.hdr.Get("Idempotent-Replayed"), k.code, k.raw)
		}
		return "replay an order from a token", a

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
		// decisions.md: a customer token states no amount; each order is
		// judged by the buyer's standing kept on the token.
		expect(rt, fmt.Sprintf("order of %d from a customer token", amount), a, 200)
		x.made++
		x.orders = append(x.orders, &toOrder{id: a.body["orderId"].(string), buyer: ct.buyer, email: ct.email, method: ct.method,
			token: ct.id, amount: amount, approved: amount, held: ct.buyer == "5560000035", unacked: ct.method == "advanceInvoice",
			created: now, expires: now.Add(28 * 24 * time.Hour)})
		return "order from a customer token", a

	case 10: // revoke a customer token
		if len(x.ctokens) == 0 {
			return "", oAnswer{}
		}
		ct := x.ctokens[rapid.IntRange(0, len(x.ctokens)-1).Draw(rt, "ctoken")]
		if rapid.IntRange(0, 4).Draw(rt, "otherMerchant") == 0 {
			a := oracleSend(x.e, x.e.auth, "DELETE", "/v1/customer-tokens/"+ct.id, "", "")
			expect(rt, "revoke another merchant's customer token", a, 404, "customer_token_not_found")
			return "revoke another merchant's customer token", a
		}
		a := x.send("DELETE", "/v1/customer-tokens/"+ct.id, "")
		expect(rt, "revoke", a, 200)
		ct.revoked = true
		x.compareCustomerToken(rt, "revoke", ct, a.body)
		return "revoke a customer token", a

	case 11, 12: // edit an order: its authorization to the ceiling, one more, or less
		if len(x.orders) == 0 {
			return "", oAnswer{}
		}
		o := x.orders[rapid.IntRange(0, len(x.orders)-1).Draw(rt, "order")]
		amount := rapid.SampledFrom([]int64{o.approved, o.approved + 1, max(o.approved-1, 0), 0}).Draw(rt, "to")
		a := x.send("POST", "/v1/orders/"+o.id, fmt.Sprintf(`{"orderLines":[{"description":"Goods","quantity":1,"unitPrice":%d,"vat":0}],`+
			`"totalOrderAmount":%d,"totalOrderAmountExclVat":%d,"totalOrderVatAmount":0}`, amount, amount, amount))
		what := "edit an order"
		switch {
		case o.expired(now):
			expect(rt, what+" past its expiry", a, 409, "action_not_available")
			return what + " (expired)", a
		case amount > o.approved:
			expect(rt, fmt.Sprintf("%s to %d, its ceiling %d", what, amount, o.approved), a, 400, "authorization_exceeded")
			return what + " above its ceiling", a
		}
		expect(rt, fmt.Sprintf("%s to %d, its ceiling %d", what, amount, o.approved), a, 200)
		o.amount = amount
		return what, a

	case 13: // extend an order's expiry, so that it outlives its token
		if len(x.orders) == 0 {
			return "", oAnswer{}
		}
		o := x.orders[rapid.IntRange(0, len(x.orders)-1).Draw(rt, "order")]
		a := x.send("POST", "/v1/orders/"+o.id+"/extendexpiry", "")
		if o.expired(now) {
			expect(rt, "extend an expired order", a, 409, "action_not_available")
			return "extend expiry (expired)", a
		}
		expect(rt, "extend expiry", a, 200)
		d := now.Add(28 * 24 * time.Hour)
		to := time.Date(d.Year(), d.Month(), d.Day(), 23, 59, 59, 0, time.UTC)
		if limit := o.created.Add(180 * 24 * time.Hour); to.After(limit) {
			to = limit
		}
		if to.After(o.expires) {
			o.expires = to
		}
		return "extend expiry", a

	case 14: // another merchant reads a customer token
		if len(x.ctokens) == 0 {
			return "", oAnswer{}
		}
		ct := x.ctokens[rapid.IntRange(0, len(x.ctokens)-1).Draw(rt, "ctoken")]
		a := oracleSend(x.e, x.e.auth, "GET", "/v1/customer-tokens/"+ct.id, "", "")
		expect(rt, "another merchant reads a customer token", a, 404, "customer_token_not_found")
		a = oracleSend(x.e, x.e.auth, "POST", "/v1/customer-tokens/"+ct.id+"/order", `{"country":"SE","currency":"SEK","totalOrderAmount":1}`, "")
		expect(rt, "another merchant orders from a customer token", a, 404, "customer_token_not_found")
		return "another merchant's customer token", a

	case 15: // the expiry job marks orders past their expiresAt
		a := x.send("POST", "/sandbox/v1/jobs/expire", "")
		expect(rt, "expiry job", a, 200)
		return "expiry job", a
	}
	return "", oAnswer{}
}

// checkAll reads every order and customer token of the sequence afresh and
// compares them with the model.
func (x *toEnv) checkAll(rt *rapid.T, what string) {
	rt.Helper()
	now := x.now()
	for _, o := range x.orders {
		a := x.send("GET", "/v1/orders/"+o.id, "")
		expect(rt, what+": get order", a, 200)
		g := a.body
		c, _ := g["customer"].(map[string]any)
		pm, _ := g["paymentMethod"].(map[string]any)
		tok, _ := g["token"].(map[string]any)
		email, _ := c["email"].(string)
		company, _ := c["companyId"].(string)
		if minor(g["orderAmount"]) != float64(o.amount) || company != o.buyer || email != o.email || pm["type"] != o.method || tok["tokenId"] != o.token {
			rt.Fatalf("%s: order %s reads amount %v buyer %q email %q method %v token %v; the model %d %q %q %s %s",
				what, o.id, minor(g["orderAmount"]), company, email, pm["type"], tok["tokenId"], o.amount, o.buyer, o.email, o.method, o.token)
		}
		var status []string
		for _, s := range g["status"].([]any) {
			status = append(status, s.(string))
		}
		if slices.Contains(status, "onHold") != o.held || slices.Contains(status, "unacknowledged") != o.unacked ||
			slices.Contains(status, "expired") && !o.expired(now) {
			rt.Fatalf("%s: order %s reads status %v; the model held %v unacknowledged %v expired %v", what, o.id, status, o.held, o.unacked, o.expired(now))
		}
		if exp, _ := ts(rt, g, "expiresAt"); !exp.Equal(o.expires) {
			rt.Fatalf("%s: order %s expires %v; the model %v", what, o.id, exp, o.expires)
		}
	}
	for _, ct := range x.ctokens {
		a := x.send("GET", "/v1/customer-tokens/"+ct.id, "")
		expect(rt, what+": get customer token", a, 200)
		x.compareCustomerToken(rt, what, ct, a.body)
	}
}

func (x *toEnv) compareCustomerToken(rt *rapid.T, what string, ct *toCustomerToken, got map[string]any) {
	rt.Helper()
	want := map[bool]string{false: "active", true: "revoked"}[ct.revoked]
	pm, _ := got["paymentMethod"].(map[string]any)
	if got["tokenId"] != ct.id || got["state"] != want || got["storeId"] != "" || got["companyId"] != ct.buyer ||
		got["email"] != ct.email || pm["type"] != ct.method {
		rt.Fatalf("%s: customer token reads %v; the model state %s buyer %q email %q method %s", what, got, want, ct.buyer, ct.email, ct.method)
	}
}
