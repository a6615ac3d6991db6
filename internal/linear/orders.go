package linear

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The order model: one order of lines at 25 % VAT, every amount a multiple
// of 2500 minor units (so that every VAT figure is exact and a partial
// refund of 2500 never trips a rounding rule), captured line by line or in
// full, refunded by 2500 or in full per capture, cancelled, edited (its
// remainder replaced by new lines) and given new references, read by GET
// and by the order list. A state is what the order's response shows of
// that: the lines left uncaptured, each capture with its lines, each
// refund, the reference, the four amounts and the statuses.

// Line is an order line as the model keeps it.
type Line struct {
	ID     string
	Amount int64
}

// Capture is a capture and what has been refunded of it.
type Capture struct {
	ID       string
	Lines    []string
	Amount   int64
	Refunded int64
}

// OrderState is the model's order. Step never modifies one in place.
type OrderState struct {
	Unc       []Line
	Caps      []Capture
	Refunds   []Line
	Reference string
}

// OrderIn is a request. Kind is get, list, capture (one line by id),
// captureAll, refund (2500 of a capture), refundAll, cancel, edit (the
// remainder becomes lines of Amounts) or reference.
type OrderIn struct {
	Kind    string
	Replica int
	Line    Line   // capture
	Capture string // refund, refundAll
	Amounts []int64
	Ref     string
}

func (in OrderIn) String() string {
	s := fmt.Sprintf("%s@%d", in.Kind, in.Replica)
	switch in.Kind {
	case "capture":
		s += fmt.Sprintf(" %s:%d", in.Line.ID, in.Line.Amount)
	case "refund", "refundAll":
		s += " " + in.Capture
	case "edit":
		s += fmt.Sprint(" ", in.Amounts)
	case "reference":
		s += " " + in.Ref
	}
	return s
}

// OrderOut is an answer: its status, its problem's code, and the order it
// shows (Obs, the projection the model compares) with the ids a change
// made, which the model takes for the ones it creates.
type OrderOut struct {
	Status     int
	Code       string
	Obs        string
	NewCapture string
	NewRefund  string
	NewLines   []string
}

func (o OrderOut) String() string {
	if o.Code != "" {
		return fmt.Sprintf("%d %s", o.Status, o.Code)
	}
	return fmt.Sprintf("%d {%s}", o.Status, o.Obs)
}

func cloneState(s OrderState) OrderState {
	s.Unc = slices.Clone(s.Unc)
	s.Caps = slices.Clone(s.Caps)
	s.Refunds = slices.Clone(s.Refunds)
	return s
}

func sum(ls []Line) (t int64) {
	for _, l := range ls {
		t += l.Amount
	}
	return t
}

// statuses are order.Statuses for the orders the model makes (invoice, no
// hold, no payment, never expired).
func (s OrderState) statuses() []string {
	var st []string
	var captured int64
	for _, c := range s.Caps {
		captured += c.Amount
	}
	refunded := sum(s.Refunds)
	unc := len(s.Unc) > 0
	if !unc && len(s.Caps) == 0 {
		st = append(st, "cancelled")
	}
	if unc {
		st = append(st, "uncaptured", "readyForCapture")
	}
	if len(s.Caps) > 0 {
		if unc {
			st = append(st, "partiallyCaptured")
		} else {
			st = append(st, "fullyCaptured")
		}
	}
	if refunded > 0 {
		if refunded >= captured && !unc {
			st = append(st, "fullyRefunded")
		} else {
			st = append(st, "partiallyRefunded")
		}
	}
	slices.Sort(st)
	return st
}

// Obs is the projection of s an order response must equal.
func (s OrderState) Obs() string {
	var b strings.Builder
	b.WriteString("unc=")
	for _, l := range s.Unc {
		fmt.Fprintf(&b, "%s:%d,", l.ID, l.Amount)
	}
	b.WriteString(" caps=")
	var captured int64
	for _, c := range s.Caps {
		fmt.Fprintf(&b, "%s%v:%d,", c.ID, c.Lines, c.Amount)
		captured += c.Amount
	}
	b.WriteString(" refunds=")
	for _, r := range s.Refunds {
		fmt.Fprintf(&b, "%s:%d,", r.ID, r.Amount)
	}
	u := sum(s.Unc)
	fmt.Fprintf(&b, " ref=%q amounts=%d/%d/%d/%d status=%s", s.Reference, captured+u, captured, sum(s.Refunds), u,
		strings.Join(s.statuses(), ","))
	return b.String()
}

// Summary is the projection of s the order's row in a list must equal.
func (s OrderState) Summary() string {
	var captured int64
	for _, c := range s.Caps {
		captured += c.Amount
	}
	return fmt.Sprintf("ref=%q total=%d status=%s", s.Reference, captured+sum(s.Unc), strings.Join(s.statuses(), ","))
}

func has(ids []string, id string) bool { return slices.Contains(ids, id) }

// OrderModel is the sequential order, from init.
func OrderModel(init OrderState) Model[OrderState, OrderIn, OrderOut] {
	return Model[OrderState, OrderIn, OrderOut]{
		Init: func() OrderState { return init },
		Key:  func(s OrderState) string { return s.Obs() },
		Step: step,
	}
}

// refused is whether out is a refusal for the order's state (or the
// request's numbers), not a server fault or a malformed request. A capture
// by the id of a line no longer uncaptured names that id as an unknown
// line (validation_failed, field orderLines[0].id).
func refused(in OrderIn, out OrderOut) bool {
	return out.Status == http.StatusConflict ||
		out.Status == http.StatusBadRequest && (out.Code != "validation_failed" || in.Kind == "capture")
}

func step(s OrderState, in OrderIn, out OrderOut) (OrderState, bool) {
	accept := func(n OrderState) (OrderState, bool) {
		return n, out.Status == http.StatusOK && out.Obs == n.Obs()
	}
	refuse := func() (OrderState, bool) { return s, refused(in, out) }
	switch in.Kind {
	case "get":
		return s, out.Status == http.StatusOK && out.Obs == s.Obs()
	case "list":
		return s, out.Status == http.StatusOK && out.Obs == s.Summary()
	case "reference":
		n := cloneState(s)
		n.Reference = in.Ref
		return accept(n)
	case "capture", "captureAll":
		var take []Line
		if in.Kind == "captureAll" {
			take = s.Unc
		} else if i := slices.IndexFunc(s.Unc, func(l Line) bool { return l.ID == in.Line.ID }); i >= 0 && s.Unc[i].Amount == in.Line.Amount {
			take = s.Unc[i : i+1]
		}
		if len(take) == 0 || out.NewCapture == "" {
			return refuse()
		}
		n := cloneState(s)
		c := Capture{ID: out.NewCapture, Amount: sum(take)}
		for _, l := range take {
			c.Lines = append(c.Lines, l.ID)
		}
		n.Unc = slices.DeleteFunc(n.Unc, func(l Line) bool { return has(c.Lines, l.ID) })
		n.Caps = append(n.Caps, c)
		return accept(n)
	case "refund", "refundAll":
		i := slices.IndexFunc(s.Caps, func(c Capture) bool { return c.ID == in.Capture })
		if i < 0 || out.NewRefund == "" {
			return refuse()
		}
		amount, left := int64(2500), s.Caps[i].Amount-s.Caps[i].Refunded
		if in.Kind == "refundAll" {
			amount = left
		}
		if left < amount || amount == 0 {
			return refuse()
		}
		n := cloneState(s)
		n.Caps[i].Refunded += amount
		n.Refunds = append(n.Refunds, Line{out.NewRefund, amount})
		return accept(n)
	case "cancel":
		if len(s.Unc) == 0 {
			return refuse()
		}
		n := cloneState(s)
		n.Unc = nil
		return accept(n)
	case "edit":
		if len(s.Unc) == 0 || len(out.NewLines) != len(in.Amounts) {
			return refuse()
		}
		n := cloneState(s)
		n.Unc = nil
		for i, a := range in.Amounts {
			n.Unc = append(n.Unc, Line{out.NewLines[i], a})
		}
		return accept(n)
	}
	return s, false
}

// The parts of an order response the model reads.
type rMoney struct {
	MinorUnits int64 `json:"minorUnits"`
}
type rLine struct {
	ID          string `json:"id"`
	TotalAmount int64  `json:"totalAmount"`
}
type rSub struct {
	LedgerID   string  `json:"ledgerId"`
	OrderLines []rLine `json:"orderLines"`
	Total      rMoney  `json:"totalOrderAmount"`
}
type rOrder struct {
	ID                string   `json:"id"`
	MerchantReference string   `json:"merchantReference"`
	Status            []string `json:"status"`
	OrderAmount       rMoney   `json:"orderAmount"`
	Captured          rMoney   `json:"capturedAmount"`
	Refunded          rMoney   `json:"refundedAmount"`
	UncapturedAmount  rMoney   `json:"uncapturedAmount"`
	Captures          []rSub   `json:"captured"`
	Refunds           []rSub   `json:"refunded"`
	Uncaptured        rSub     `json:"uncaptured"`
}

// observe reads an order response as the model's projection, and the
// state it shows (lines by their own amounts; refunds per capture are not
// shown, and a client's view does not need them).
func observe(o *rOrder) (string, OrderState) {
	var s OrderState
	for _, l := range o.Uncaptured.OrderLines {
		s.Unc = append(s.Unc, Line{l.ID, l.TotalAmount})
	}
	for _, c := range o.Captures {
		mc := Capture{ID: c.LedgerID, Amount: c.Total.MinorUnits}
		for _, l := range c.OrderLines {
			mc.Lines = append(mc.Lines, l.ID)
		}
		s.Caps = append(s.Caps, mc)
	}
	for _, r := range o.Refunds {
		s.Refunds = append(s.Refunds, Line{r.LedgerID, r.Total.MinorUnits})
	}
	s.Reference = o.MerchantReference
	var b strings.Builder
	b.WriteString("unc=")
	for _, l := range s.Unc {
		fmt.Fprintf(&b, "%s:%d,", l.ID, l.Amount)
	}
	b.WriteString(" caps=")
	for _, c := range s.Caps {
		fmt.Fprintf(&b, "%s%v:%d,", c.ID, c.Lines, c.Amount)
	}
	b.WriteString(" refunds=")
	for _, r := range s.Refunds {
		fmt.Fprintf(&b, "%s:%d,", r.ID, r.Amount)
	}
	st := slices.Clone(o.Status)
	slices.Sort(st)
	fmt.Fprintf(&b, " ref=%q amounts=%d/%d/%d/%d status=%s", o.MerchantReference, o.OrderAmount.MinorUnits, o.Captured.MinorUnits,
		o.Refunded.MinorUnits, o.UncapturedAmount.MinorUnits, strings.Join(st, ","))
	return b.String(), s
}

// Cluster is the servers a history is recorded through: replicas of one
// store, each base URL one, and the Authorization header of a merchant.
type Cluster struct {
	Bases []string
	Auth  string
}

// Workload sizes a recording.
type Workload struct {
	Orders, Clients, OpsPerOrder int
	Seed                         uint64
}

// History is one order's operations.
type History struct {
	Order string
	Init  OrderState
	Ops   []Op[OrderIn, OrderOut]
}

// Check checks the history against the order model.
func (h History) Check() (Result, string) { return Check(OrderModel(h.Init), h.Ops) }

type recorder struct {
	c      Cluster
	http   *http.Client
	clock  atomic.Int64
	mu     sync.Mutex
	hist   map[string]*History
	orders []string
	refs   atomic.Int64
	err    error
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// send makes one request and reads its answer: the status, a problem's
// code, and the body.
func (r *recorder) send(ctx context.Context, replica int, method, path string, body any) (int, string, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.c.Bases[replica]+path, rd)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Authorization", r.c.Auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, err
	}
	var p struct{ Code string }
	if resp.StatusCode >= 300 {
		json.Unmarshal(b, &p)
	}
	return resp.StatusCode, p.Code, b, nil
}

var initialLines = []int64{10000, 7500, 5000, 12500}

func (r *recorder) create(ctx context.Context) (string, error) {
	code, _, b, err := r.send(ctx, 0, "POST", "/sandbox/v1/authorization-tokens", map[string]any{"country": "SE", "currency": "SEK",
		"locale": "sv-SE", "customer": map[string]any{"companyId": "5560000001"}, "amount": 200000})
	var tok struct{ AuthorizationToken string }
	if err != nil || code != http.StatusCreated || json.Unmarshal(b, &tok) != nil {
		return "", fmt.Errorf("mint a token: %d %s %v", code, b, err)
	}
	var lines []map[string]any
	for i, a := range initialLines {
		lines = append(lines, map[string]any{"description": fmt.Sprint("item ", i), "quantity": 1, "unitPrice": a, "vat": 2500})
	}
	code, _, b, err = r.send(ctx, 0, "POST", "/v1/authorization-tokens/"+tok.AuthorizationToken+"/order",
		map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": lines})
	var made struct{ OrderID string }
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &made) != nil {
		return "", fmt.Errorf("create an order: %d %s %v", code, b, err)
	}
	return made.OrderID, nil
}

// Record creates w.Orders orders through the first replica, then lets
// w.Clients clients send w.OpsPerOrder operations per order at once, each
// to a replica and an order drawn at random, and returns each order's
// history. An answer no history can hold (a transport error, a 5xx, a body
// that is not an order) is an error.
func Record(ctx context.Context, c Cluster, w Workload) ([]History, error) {
	r := &recorder{c: c, http: &http.Client{}, hist: map[string]*History{}}
	for range w.Orders {
		id, err := r.create(ctx)
		if err != nil {
			return nil, err
		}
		code, _, b, err := r.send(ctx, 0, "GET", "/v1/orders/"+id, nil)
		var o rOrder
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &o) != nil {
			return nil, fmt.Errorf("read order %s: %d %s %v", id, code, b, err)
		}
		_, init := observe(&o)
		r.orders = append(r.orders, id)
		r.hist[id] = &History{Order: id, Init: init}
	}
	total := w.Orders * w.OpsPerOrder
	var wg sync.WaitGroup
	for cl := range w.Clients {
		n := total / w.Clients
		if cl < total%w.Clients {
			n++
		}
		wg.Go(func() { r.client(ctx, cl, n, rand.New(rand.NewPCG(w.Seed, uint64(cl)))) })
	}
	wg.Wait()
	if r.err != nil {
		return nil, r.err
	}
	var out []History
	for _, id := range r.orders {
		out = append(out, *r.hist[id])
	}
	return out, nil
}

var kinds = []struct {
	kind   string
	weight int
}{{"get", 24}, {"list", 8}, {"capture", 14}, {"captureAll", 2}, {"refund", 14}, {"refundAll", 5},
	{"cancel", 2}, {"edit", 12}, {"reference", 12}}

func pick(rng *rand.Rand) string {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k.kind
		}
		n -= k.weight
	}
	panic("unreachable")
}

// client sends n operations. It draws their arguments from what it last
// saw of each order, which other clients may since have changed: a stale
// choice is refused, and the model must agree.
func (r *recorder) client(ctx context.Context, cl, n int, rng *rand.Rand) {
	view := map[string]OrderState{}
	for id, h := range r.hist {
		view[id] = h.Init
	}
	for range n {
		id := r.orders[rng.IntN(len(r.orders))]
		v := view[id]
		in := OrderIn{Kind: pick(rng), Replica: rng.IntN(len(r.c.Bases))}
		method, path := "POST", "/v1/orders/"+id
		var body any
		switch in.Kind {
		case "get":
			method = "GET"
		case "list":
			method, path = "GET", "/v1/orders?size=100"
		case "capture":
			if len(v.Unc) == 0 {
				in.Kind, method = "get", "GET"
				break
			}
			in.Line = v.Unc[rng.IntN(len(v.Unc))]
			path += "/partialcapture"
			body = map[string]any{"orderLines": []map[string]any{{"id": in.Line.ID}}, "totalCaptureAmount": in.Line.Amount}
		case "captureAll":
			path += "/capture"
		case "refund", "refundAll":
			if len(v.Caps) == 0 {
				in.Kind, method = "get", "GET"
				break
			}
			in.Capture = v.Caps[rng.IntN(len(v.Caps))].ID
			if in.Kind == "refund" {
				path += "/partialrefund/" + in.Capture
				body = map[string]any{"orderLines": []map[string]any{{"description": "credit", "quantity": 1, "unitPrice": 2500, "vat": 2500}},
					"totalRefundAmount": 2500}
			} else {
				path += "/refund/" + in.Capture
			}
		case "cancel":
			method = "DELETE"
		case "edit":
			var lines []map[string]any
			var t int64
			for i := range 1 + rng.IntN(3) {
				a := 2500 * int64(1+rng.IntN(4))
				in.Amounts = append(in.Amounts, a)
				t += a
				lines = append(lines, map[string]any{"description": fmt.Sprint("edited ", i), "quantity": 1, "unitPrice": a, "vat": 2500})
			}
			body = map[string]any{"orderLines": lines, "totalOrderAmount": t, "totalOrderAmountExclVat": t / 5 * 4, "totalOrderVatAmount": t / 5}
		case "reference":
			in.Ref = fmt.Sprint("ref-", r.refs.Add(1))
			path += "/reference"
			body = map[string]any{"reference": in.Ref}
		}
		call := r.clock.Add(1)
		code, problem, b, err := r.send(ctx, in.Replica, method, path, body)
		ret := r.clock.Add(1)
		if err != nil || code >= 500 {
			r.fail(fmt.Errorf("client %d: %v on order %s: %d %s %v", cl, in, id, code, b, err))
			return
		}
		if in.Kind == "list" {
			r.list(cl, call, ret, in, code, b)
			continue
		}
		out := OrderOut{Status: code, Code: problem}
		if code == http.StatusOK {
			var o rOrder
			if err := json.Unmarshal(b, &o); err != nil || o.ID != id {
				r.fail(fmt.Errorf("client %d: %v on order %s: not the order: %s", cl, in, id, b))
				return
			}
			var seen OrderState
			out.Obs, seen = observe(&o)
			view[id] = seen
			if len(seen.Caps) > 0 {
				out.NewCapture = seen.Caps[len(seen.Caps)-1].ID
			}
			if len(seen.Refunds) > 0 {
				out.NewRefund = seen.Refunds[len(seen.Refunds)-1].ID
			}
			for _, l := range seen.Unc {
				out.NewLines = append(out.NewLines, l.ID)
			}
		}
		r.add(id, Op[OrderIn, OrderOut]{Client: cl, Call: call, Return: ret, In: in, Out: out})
	}
}

func (r *recorder) add(id string, op Op[OrderIn, OrderOut]) {
	r.mu.Lock()
	r.hist[id].Ops = append(r.hist[id].Ops, op)
	r.mu.Unlock()
}

// list records a list as a read of each order's row.
func (r *recorder) list(cl int, call, ret int64, in OrderIn, code int, b []byte) {
	var page struct {
		Orders []struct {
			ID                string   `json:"id"`
			MerchantReference string   `json:"merchantReference"`
			Status            []string `json:"status"`
			TotalOrderAmount  rMoney   `json:"totalOrderAmount"`
		} `json:"orders"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &page) != nil {
		r.fail(fmt.Errorf("client %d: list: %d %s", cl, code, b))
		return
	}
	rows := map[string]string{}
	for _, o := range page.Orders {
		st := slices.Clone(o.Status)
		slices.Sort(st)
		rows[o.ID] = fmt.Sprintf("ref=%q total=%d status=%s", o.MerchantReference, o.TotalOrderAmount.MinorUnits, strings.Join(st, ","))
	}
	for _, id := range r.orders {
		obs, ok := rows[id]
		if !ok {
			obs = "missing from the list"
		}
		r.add(id, Op[OrderIn, OrderOut]{Client: cl, Call: call, Return: ret, In: in, Out: OrderOut{Status: code, Obs: obs}})
	}
}

// Tally counts the answers of hs by kind and status (a list once per
// order it read), for a test to log: a workload whose changes were all
// refused would check little.
func Tally(hs []History) map[string]int {
	m := map[string]int{}
	for _, h := range hs {
		for _, op := range h.Ops {
			m[fmt.Sprint(op.In.Kind, " ", op.Out.Status)]++
		}
	}
	return m
}

// Verify records w on c (Record) and checks every order's history: an
// error names the first order whose history is not linearizable (or could
// not be decided) with the search's report. It returns the Tally.
func Verify(ctx context.Context, c Cluster, w Workload) (map[string]int, error) {
	hs, err := Record(ctx, c, w)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if res, why := h.Check(); res != Ok {
			return nil, fmt.Errorf("order %s (%d operations): %v\n%s", h.Order, len(h.Ops), res, why)
		}
	}
	return Tally(hs), nil
}
