package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Operations of the mix, in the order a worker runs them on each order.
var opNames = []string{"mint", "create", "get", "list", "partialCapture", "fullCapture", "partialRefund"}

// mutations are the durable order changes counted for the throughput target.
var mutations = map[string]bool{"create": true, "partialCapture": true, "fullCapture": true, "partialRefund": true}

// stats collects latencies per operation.
type stats struct {
	mu  sync.Mutex
	lat map[string][]time.Duration
	err map[string]int
	n   atomic.Int64
}

func newStats() *stats { return &stats{lat: map[string][]time.Duration{}, err: map[string]int{}} }

func (s *stats) ok(op string, d time.Duration) {
	s.mu.Lock()
	s.lat[op] = append(s.lat[op], d)
	s.mu.Unlock()
	s.n.Add(1)
}

func (s *stats) fail(op string) {
	s.mu.Lock()
	s.err[op]++
	s.mu.Unlock()
}

// pct is the nearest-rank percentile of sorted ds: the smallest value that
// at least p of them do not exceed. The epsilon keeps a product such as
// 0.95 × 100, a hair above 95 in binary, from taking the rank above.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(ds)) - 1e-9))
	return ds[min(len(ds), max(rank, 1))-1]
}

func (s *stats) report(w io.Writer, elapsed time.Duration) (mutationsPerSec float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "%-16s %8s %9s %9s %9s %9s %9s %6s\n", "operation", "count", "per s", "p50", "p95", "p99", "max", "errors")
	var muts int
	for _, op := range opNames {
		ds := s.lat[op]
		slices.Sort(ds)
		if mutations[op] {
			muts += len(ds)
		}
		fmt.Fprintf(w, "%-16s %8d %9.1f %9s %9s %9s %9s %6d\n", op, len(ds), float64(len(ds))/elapsed.Seconds(),
			pct(ds, .5).Round(10*time.Microsecond), pct(ds, .95).Round(10*time.Microsecond), pct(ds, .99).Round(10*time.Microsecond),
			pct(ds, 1).Round(10*time.Microsecond), s.err[op])
	}
	mps := float64(muts) / elapsed.Seconds()
	fmt.Fprintf(w, "durable order mutations through HTTP: %.1f/s\n", mps)
	return mps
}

// expect is what the tool's own tally says an order must show.
type expect struct {
	captured, refunded, uncaptured int64
	captures, refunds              int
}

// tally records only what the server acknowledged with 2xx.
type tally struct {
	mu     sync.Mutex
	orders map[string]*expect
	// acks is a uniform sample (a reservoir) of the keyed mutations
	// answered 2xx, of the acked ones seen so far, for replays.
	acks  []acked
	acked int
}

// acked is a keyed mutation the server answered 2xx, and a digest of that
// answer: sent again with its key it must be replayed, the same bytes.
type acked struct {
	op, method, path, key string
	body                  any
	status                int
	sum                   [sha256.Size]byte
}

// ackSample bounds the acknowledged mutations kept for replays: a run of
// an hour acknowledges millions, and each keeps its request body.
const ackSample = 1000

// ack records a keyed mutation answered 2xx, answered answer: the first
// ackSample are kept, then each replaces a kept one with the chance that
// keeps the sample uniform (reservoir sampling). rng is the caller's own.
// The answer is digested only when kept: past the first ackSample, most
// are not, and the load tool's CPU is taken from the server it measures.
func (t *tally) ack(a acked, answer []byte, rng *rand.Rand) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acked++
	i := len(t.acks)
	if i >= ackSample {
		if i = rng.IntN(t.acked); i >= ackSample {
			return
		}
	}
	a.sum = sha256.Sum256(answer)
	if i == len(t.acks) {
		t.acks = append(t.acks, a)
	} else {
		t.acks[i] = a
	}
}

// ackCount is how many keyed mutations were answered 2xx so far.
func (t *tally) ackCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked
}

func newTally() *tally { return &tally{orders: map[string]*expect{}} }

func (t *tally) apply(id string, f func(e *expect)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.orders[id]
	if e == nil {
		e = &expect{}
		t.orders[id] = e
	}
	f(e)
}

// pending is a mutation sent but not answered: after a crash it is retried
// with the same Idempotency-Key, which must replay or execute it once.
type pending struct {
	op, method, path, key string
	body                  any
	onOK                  func(response)
	// sent is when the request was sent; answered, whether an answer (a
	// 5xx) came back. One sent before a kill and not answered was in
	// flight at the kill (inFlightAt).
	sent     time.Time
	answered bool
}

// inFlightAt counts the requests of lost that were in flight at kill: sent
// before it, and never answered.
func inFlightAt(lost []pending, kill time.Time) int {
	n := 0
	for _, p := range lost {
		if !p.answered && p.sent.Before(kill) {
			n++
		}
	}
	return n
}

// worker runs the realistic flow on fresh orders until ctx ends.
type worker struct {
	c      *client
	st     *stats
	tl     *tally
	rng    *rand.Rand
	id     int
	gets   int
	lists  int
	seq    int
	lostMu *sync.Mutex
	lost   *[]pending
}

func (w *worker) key(op string) string {
	w.seq++
	return fmt.Sprintf("load-%d-%d-%d-%s", time.Now().UnixNano(), w.id, w.seq, op)
}

// call sends a request, timing it; a lost answer is remembered for retry.
func (w *worker) call(ctx context.Context, op, method, path string, body any, key string, want int, onOK func(response)) bool {
	start := time.Now()
	// The request itself is never cancelled: a mutation cut off mid-flight
	// would leave its outcome unknown to the tally.
	r, err := w.c.do(context.Background(), method, path, body, key)
	// A 5xx may have been applied: a balancer answers 502 or 504 for a
	// request whose answer it lost, and kassa 500 a write whose COMMIT lost
	// its answer. Like a lost connection, it is an unknown outcome, which
	// the request's key settles when sent again.
	if key != "" && (errors.Is(err, errNoAnswer) || err == nil && r.status >= 500) {
		w.lostMu.Lock()
		*w.lost = append(*w.lost, pending{op: op, method: method, path: path, key: key, body: body, onOK: onOK,
			sent: start, answered: err == nil})
		w.lostMu.Unlock()
	}
	if err != nil {
		if ctx.Err() == nil {
			w.st.fail(op)
		}
		return false
	}
	if r.status != want {
		w.st.fail(op)
		return false
	}
	w.st.ok(op, time.Since(start))
	if key != "" {
		w.tl.ack(acked{op: op, method: method, path: path, key: key, body: body, status: r.status}, r.body, w.rng)
	}
	if onOK != nil {
		onOK(r)
	}
	return true
}

func line(rng *rand.Rand, i int) map[string]any {
	return map[string]any{"description": fmt.Sprintf("Item %d", i), "quantity": 1 + rng.IntN(5),
		"unitPrice": 100 * (1 + rng.IntN(2000)), "vat": []int{0, 600, 1200, 2500}[rng.IntN(4)], "type": "physical"}
}

func (w *worker) flow(ctx context.Context) {
	var tok string
	if !w.call(ctx, "mint", "POST", "/sandbox/v1/authorization-tokens", map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE",
		"customer": map[string]any{"companyId": "5560000001"}}, "", 201, func(r response) {
		var b struct{ AuthorizationToken string }
		json.Unmarshal(r.body, &b)
		tok = b.AuthorizationToken
	}) {
		return
	}
	n := 3 + w.rng.IntN(18)
	ls := make([]any, n)
	var total int64
	for i := range ls {
		l := line(w.rng, i)
		total += int64(l["quantity"].(int) * l["unitPrice"].(int))
		ls[i] = l
	}
	var id string
	create := map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "storeId": fmt.Sprint("store-", w.id%4),
		"reference": fmt.Sprint("load-", w.id), "orderLines": ls}
	if !w.call(ctx, "create", "POST", "/v1/authorization-tokens/"+tok+"/order", create, w.key("create"), 200, func(r response) {
		var b struct{ OrderID string }
		json.Unmarshal(r.body, &b)
		id = b.OrderID
		w.tl.apply(id, func(e *expect) { e.uncaptured = total })
	}) {
		return
	}
	var o apiOrder
	for i := 0; i < w.gets; i++ {
		w.call(ctx, "get", "GET", "/v1/orders/"+id, nil, "", 200, func(r response) { json.Unmarshal(r.body, &o) })
	}
	if o.ID == "" {
		return
	}
	for i := 0; i < w.lists; i++ {
		w.call(ctx, "list", "GET", fmt.Sprintf("/v1/orders?storeId=store-%d&status=uncaptured&size=20", w.id%4), nil, "", 200, nil)
	}
	// Partial capture of the first half of the lines, by id.
	half := o.Uncaptured.OrderLines[:len(o.Uncaptured.OrderLines)/2]
	var sum int64
	var sel []any
	for _, l := range half {
		sel = append(sel, map[string]any{"id": l.ID})
		sum += l.TotalAmount
	}
	if !w.call(ctx, "partialCapture", "POST", "/v1/orders/"+id+"/partialcapture",
		map[string]any{"orderLines": sel, "totalCaptureAmount": sum}, w.key("pc"), 200, func(response) {
			w.tl.apply(id, func(e *expect) { e.captured += sum; e.uncaptured -= sum; e.captures++ })
		}) {
		return
	}
	rest := o.UncapturedAmount.MinorUnits - sum
	if !w.call(ctx, "fullCapture", "POST", "/v1/orders/"+id+"/capture", nil, w.key("fc"), 200, func(r response) {
		w.tl.apply(id, func(e *expect) { e.captured += rest; e.uncaptured -= rest; e.captures++ })
		json.Unmarshal(r.body, &o)
	}) {
		return
	}
	if len(o.Captured) == 0 {
		return
	}
	// Less than the capture holds: a refund of all that is left is its last
	// and must credit each VAT rate exactly, which a line at 0 % does not.
	refund := min(sum-1, 1000)
	if refund <= 0 {
		return
	}
	// At 0 % VAT: a refund may not give back more VAT than its capture
	// invoiced, and a capture's lines may all be at 0 %.
	w.call(ctx, "partialRefund", "POST", "/v1/orders/"+id+"/partialrefund/"+o.Captured[0].LedgerID,
		map[string]any{"orderLines": []any{map[string]any{"description": "Return", "quantity": 1, "unitPrice": refund, "vat": 0}},
			"totalRefundAmount": refund}, w.key("pr"), 200, func(response) {
			w.tl.apply(id, func(e *expect) { e.refunded += refund; e.refunds++ })
		})
}

// retryLost sends each request of lost again with its Idempotency-Key, which
// replays one that was applied or applies it once, and tallies each now
// answered 2xx; settled are those, with their answers, for replays. A 409
// idempotency_request_in_progress is sent again a few times (about 1.5 s in
// all): the key's first request may still be ending (on PostgreSQL, the
// commit of a server just killed). open counts those still without a 2xx,
// each a line on out: their outcome stays unknown (a refusal now may follow
// an earlier success whose answer was lost only if the key's record is
// gone, which a run within the idempotency TTL does not see). unanswered is
// the first that got no answer at all, which the crash test, retrying on a
// server it has just restarted, takes for a failure.
func retryLost(ctx context.Context, c *client, lost []pending, out io.Writer) (settled []acked, replayed, open int, unanswered error) {
	for _, p := range lost {
		var r response
		var err error
		for try := 0; ; try++ {
			r, err = c.do(ctx, p.method, p.path, p.body, p.key)
			if err != nil || r.status != 409 || !bytes.Contains(r.body, []byte("idempotency_request_in_progress")) || try == 4 {
				break
			}
			time.Sleep(100 << try * time.Millisecond)
		}
		if err != nil && unanswered == nil {
			unanswered = fmt.Errorf("retry %s: %w", p.op, err)
		}
		if err != nil || r.status/100 != 2 {
			if err != nil {
				fmt.Fprintf(out, "UNSETTLED retry of %s %s (key %s): %v\n", p.op, p.path, p.key, err)
			} else {
				fmt.Fprintf(out, "UNSETTLED retry of %s %s (key %s): %d, neither replayed nor run: %s\n", p.op, p.path, p.key, r.status, short(r.body))
			}
			open++
			continue
		}
		settled = append(settled, acked{op: p.op, method: p.method, path: p.path, key: p.key, body: p.body,
			status: r.status, sum: sha256.Sum256(r.body)})
		if r.hdr.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
		if p.onOK != nil {
			p.onOK(r)
		}
	}
	return settled, replayed, open, unanswered
}

// verify reads every tallied order and compares it to the tally to the minor unit.
func verify(ctx context.Context, c *client, tl *tally, out io.Writer) (bad int) {
	ids := make([]string, 0, len(tl.orders))
	for id := range tl.orders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e := tl.orders[id]
		r, err := c.do(ctx, "GET", "/v1/orders/"+id, nil, "")
		if err != nil || r.status != 200 {
			fmt.Fprintf(out, "MISMATCH %s: cannot read (%v %d)\n", id, err, r.status)
			bad++
			continue
		}
		var o apiOrder
		json.Unmarshal(r.body, &o)
		got := expect{captured: o.CapturedAmount.MinorUnits, refunded: o.RefundedAmount.MinorUnits,
			uncaptured: o.UncapturedAmount.MinorUnits, captures: len(o.Captured), refunds: len(o.Refunded)}
		if got != *e || o.OrderAmount.MinorUnits != o.CapturedAmount.MinorUnits+o.UncapturedAmount.MinorUnits {
			fmt.Fprintf(out, "MISMATCH %s: server %+v, tally %+v\n", id, got, *e)
			bad++
		}
	}
	fmt.Fprintf(out, "verified %d orders against the tally: %d mismatches\n", len(ids), bad)
	return bad
}

// replays sends every sampled acknowledged mutation (tally.ack) again with
// its key: each must be answered as it was (the same status and bytes)
// and marked Idempotent-Replayed. A key that runs its request again (a
// capture refused the second time, a refund made twice), or replays
// other bytes (another capture's id), breaks what a client retrying after
// a lost answer relies on; verify sees neither, as a run whose answers
// all arrived sends no key twice. Within the idempotency TTL (24 h) only,
// which every run of the tool is.
func replays(ctx context.Context, c *client, tl *tally, out io.Writer) (checked, bad int) {
	tl.mu.Lock()
	acks := slices.Clone(tl.acks)
	tl.mu.Unlock()
	return replayAll(ctx, c, acks, out)
}

// replayAll is replays of acks.
func replayAll(ctx context.Context, c *client, acks []acked, out io.Writer) (checked, bad int) {
	for _, a := range acks {
		r, err := c.do(ctx, a.method, a.path, a.body, a.key)
		switch {
		case err != nil:
			fmt.Fprintf(out, "MISMATCH replay of %s %s (key %s): %v\n", a.op, a.path, a.key, err)
		case r.status != a.status || r.hdr.Get("Idempotent-Replayed") != "true":
			fmt.Fprintf(out, "MISMATCH replay of %s %s (key %s): %d, Idempotent-Replayed %q; first answered %d: %s\n",
				a.op, a.path, a.key, r.status, r.hdr.Get("Idempotent-Replayed"), a.status, short(r.body))
		case sha256.Sum256(r.body) != a.sum:
			fmt.Fprintf(out, "MISMATCH replay of %s %s (key %s): other bytes than the first answer: %s\n", a.op, a.path, a.key, short(r.body))
		default:
			checked++
			continue
		}
		bad++
	}
	return checked, bad
}

// short is the start of an answer, for a mismatch line: an order is
// kilobytes long, and its first fields (ids, status) tell one from another.
func short(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 240 {
		return string(b[:240]) + "…"
	}
	return string(b)
}

// untallied lists the orders created since since and reports each one the
// tally does not hold: an order the server created without acknowledging
// it (an error answered after the commit), or created twice (a retry with
// the create's key that ran again instead of replaying). verify cannot see
// either: it reads only the orders the tally names. Only for a run that
// retried every unanswered create with its key, on a merchant no one else
// uses (crash, replicas). since is truncated to the second, as the list's
// createdFrom takes it.
func untallied(ctx context.Context, c *client, tl *tally, since time.Time, out io.Writer) (bad int) {
	q := "/v1/orders?size=1000&createdFrom=" + url.QueryEscape(since.UTC().Truncate(time.Second).Format(time.RFC3339))
	listed := 0
	for cursor := ""; ; {
		path := q
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := c.do(ctx, "GET", path, nil, "")
		var page struct {
			Orders []struct {
				ID string `json:"id"`
			} `json:"orders"`
			NextCursor string `json:"nextCursor"`
		}
		if err != nil || r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			fmt.Fprintf(out, "MISMATCH: cannot list the orders (%v %d)\n", err, r.status)
			return bad + 1
		}
		for _, o := range page.Orders {
			if _, ok := tl.orders[o.ID]; !ok {
				fmt.Fprintf(out, "MISMATCH %s: the server holds an order no acknowledged create made\n", o.ID)
				bad++
				continue
			}
			listed++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if listed != len(tl.orders) {
		fmt.Fprintf(out, "MISMATCH: the order list shows %d of the %d orders acknowledged\n", listed, len(tl.orders))
		bad++
	}
	return bad
}

// acknowledged counts what the tally holds: orders, captures and refunds.
// A run that acknowledged none of a kind has checked nothing about it.
func (t *tally) acknowledged() (orders, captures, refunds int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.orders {
		captures += e.captures
		refunds += e.refunds
	}
	return len(t.orders), captures, refunds
}

// runLoad drives concurrency workers for d and reports.
func runLoad(ctx context.Context, c *client, concurrency int, d time.Duration, gets, lists int, tl *tally, lost *[]pending, progress io.Writer) (*stats, time.Duration) {
	st := newStats()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	var lostMu sync.Mutex
	start := time.Now()
	for i := 0; i < concurrency; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := &worker{c: c, st: st, tl: tl, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))), id: i,
				gets: gets, lists: lists, lostMu: &lostMu, lost: lost}
			for ctx.Err() == nil {
				w.flow(ctx)
			}
		}(i)
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(progress, "[%5.1fs] %d requests, %.0f/s\n", el.Seconds(), st.n.Load(), float64(st.n.Load())/el.Seconds())
			}
		}
	}()
	wg.Wait()
	close(done)
	return st, time.Since(start)
}

func parseMix(s string) (gets, lists int, err error) {
	gets, lists = 1, 1
	if s == "" {
		return
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v) // all of it: Sscan would read "1x" as 1
		if !ok || err != nil || n < 0 || n > 100 {
			return 0, 0, fmt.Errorf("bad -mix element %q (want get=N,list=N)", part)
		}
		switch k {
		case "get":
			gets = n
		case "list":
			lists = n
		default:
			return 0, 0, fmt.Errorf("unknown -mix operation %q (get, list)", k)
		}
	}
	if gets < 1 {
		return 0, 0, errors.New("-mix get must be at least 1: the flow reads each order")
	}
	return
}
