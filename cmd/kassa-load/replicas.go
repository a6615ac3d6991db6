package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// replicas runs N "kassa serve --store postgres" processes on one database
// and drives contended traffic across them: captures and refunds of the same
// order sent to different replicas at once, and the same Idempotency-Key sent
// to two replicas at once. With -kill one replica is SIGKILLed mid-run; its
// unanswered requests (and any answered outcome_unknown) are retried, with
// their keys, on the others. Afterwards
// every order must match the tally to the minor unit (read through a replica
// started after the run, so no cache of the run answers), the server must hold
// no order the tally does not, and a key answered twice must have answered
// the same bytes (executed once, replayed once).
// With -recourse (recourse.go) invoices are also paid in part, recoursed
// and refunded after the recourse, settlement runs go to several replicas
// at once throughout, and every capture's payout over all settlements must
// be what the docs say (docs/settlements.md).
func replicas(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kassa-load replicas", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "path to the kassa binary")
	dbURL := fs.String("database-url", os.Getenv("KASSA_DATABASE_URL"), "PostgreSQL URL (KASSA_DATABASE_URL)")
	n := fs.Int("replicas", 3, "kassa processes on the one database")
	conc := fs.Int("concurrency", 8, "concurrent order flows")
	dur := fs.Duration("duration", 10*time.Second, "how long to run")
	kill := fs.Bool("kill", true, "SIGKILL the last replica half way through")
	recourses := fs.Bool("recourse", true, "also pay, recourse and refund after recourse some invoices, run settlements on several replicas at once throughout, and check every capture's payout over all settlements")
	port := fs.Int("port", 0, "first TCP port of the replicas (one each, on 127.0.0.1); 0: any free ones")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *dur <= 0 || *dur > time.Hour || *bin == "" || *dbURL == "" || *n < 2 || *n > 8 || *conc < 1 || *port < 0 || *port > 65535-8 {
		fmt.Fprintln(stderr, "usage: kassa-load replicas -bin PATH -database-url URL [-replicas 3] [-concurrency 8] [-duration 10s] [-kill] [-recourse] [-port N]")
		return 2
	}
	cl, err := startCluster(*bin, *dbURL, *n, *port, "replicas", "replicas-secret-123")
	if err != nil {
		fmt.Fprintln(stderr, "kassa-load replicas:", err)
		return 1
	}
	defer cl.stop()
	since := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	run := &contended{cl: cl, tl: newTally(), answers: map[string][]byte{}, recourse: *recourses}
	var runs sync.WaitGroup
	if *recourses {
		runs.Go(func() { run.settleRuns(ctx) })
	}
	if *kill {
		go func() {
			time.Sleep(*dur / 2)
			if *recourses {
				run.runOn(*n - 1) // a settlement run in flight on the replica killed
				time.Sleep(time.Duration(mrand.IntN(20)) * time.Millisecond)
			}
			cl.kill(*n - 1)
			fmt.Fprintf(stdout, "killed replica %d (%s) at %s\n", *n-1, cl.bases[*n-1], (*dur / 2).Round(time.Millisecond))
		}()
	}
	var wg sync.WaitGroup
	for i := range *conc {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for seq := 0; ctx.Err() == nil; seq++ {
				run.flow(rng, fmt.Sprintf("rep-%d-%d-%d", time.Now().UnixNano(), i, seq))
			}
		})
	}
	wg.Wait()
	runs.Wait()
	retried := run.settlePending()
	// Checked through a replica started now: one that served the run
	// answers reads from its caches of rendered orders, where an answer
	// the server gave but never stored could still be found.
	if err := cl.add(*bin, storeArgs("postgres", *dbURL)); err != nil {
		fmt.Fprintln(stderr, "kassa-load replicas: a replica to check through:", err)
		return 1
	}
	c := cl.client(len(cl.bases) - 1)
	bad := verify(context.Background(), c, run.tl, stdout)
	bad += invariants(context.Background(), c, run.tl, stdout)
	bad += untallied(context.Background(), c, run.tl, since, stdout)
	if *recourses {
		bad += run.verifyPayouts(context.Background(), c, stdout)
	}
	fmt.Fprintf(stdout, "replicas: %d processes, %d orders, %d captures, %d refunds; %d same-key pairs sent to two replicas (%d both answered, compared in differing replays); %d unanswered requests retried on another replica; %d mismatches, %d differing replays\n",
		*n, len(run.tl.orders), run.captures.Load(), run.refunds.Load(), run.dupPairs.Load(), run.dupBoth.Load(), retried, bad, run.differ.Load())
	if u := run.unknown.Load(); u > 0 {
		fmt.Fprintf(stdout, "%d requests answered outcome_unknown, retried with their keys among those\n", u)
	}
	if bad > 0 || run.differ.Load() > 0 || run.failed.Load() > 0 || run.extras.Load() > 0 {
		fmt.Fprintf(stdout, "FAILED: %d mismatches, %d differing replays, %d unexpected answers, %d payments taken after a recourse\n", bad, run.differ.Load(), run.failed.Load(), run.extras.Load())
		return 1
	}
	return 0
}

// cluster is N kassa processes sharing one database and one signing key.
type cluster struct {
	mu    sync.Mutex
	cmds  []*exec.Cmd
	bases []string
	alive []bool
	dirs  []string
	id    string
	sec   string
}

// port, if not 0, is the first of the replicas' ports, one each.
func startCluster(bin, dbURL string, n, port int, id, secret string) (*cluster, error) {
	// No KASSA_KEY: the replicas share the signing key through the database
	// (the first one's), so an access token is valid on every replica, and
	// across the scale command's steps on one database.
	cl := &cluster{id: id, sec: secret}
	// One at a time: the first creates the merchant, the others find it.
	for i := range n {
		args := storeArgs("postgres", dbURL)
		if port != 0 {
			args = append(args, "--addr", fmt.Sprintf("127.0.0.1:%d", port+i)) // the last --addr counts
		}
		if err := cl.add(bin, args); err != nil {
			cl.stop()
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return cl, nil
}

// add starts one more replica with args and returns once it serves; its
// index is the last.
func (cl *cluster) add(bin string, args []string) error {
	dir, err := os.MkdirTemp("", "kassa-replica")
	if err != nil {
		return err
	}
	cmd, base, err := startKassa(bin, filepath.Join(dir, "data"), cl.id, cl.sec, args...)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.cmds, cl.bases, cl.alive, cl.dirs = append(cl.cmds, cmd), append(cl.bases, base), append(cl.alive, true), append(cl.dirs, dir)
	return nil
}

func (cl *cluster) client(i int) *client { return newClient(cl.bases[i], cl.id, cl.sec, 64) }

// live returns the indexes of the replicas still running.
func (cl *cluster) live() []int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []int
	for i, a := range cl.alive {
		if a {
			out = append(out, i)
		}
	}
	return out
}

func (cl *cluster) kill(i int) {
	cl.mu.Lock()
	cl.alive[i] = false
	cl.mu.Unlock()
	cl.cmds[i].Process.Signal(syscall.SIGKILL)
	cl.cmds[i].Wait()
}

func (cl *cluster) stop() {
	for i, cmd := range cl.cmds {
		if cl.alive[i] {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		os.RemoveAll(cl.dirs[i])
	}
}

// contended is the multi-replica workload and its bookkeeping.
type contended struct {
	cl      *cluster
	clients sync.Map // replica index → *client
	tl      *tally

	mu      sync.Mutex
	answers map[string][]byte // idempotency key → the first 2xx body
	pending []pendingCall

	captures, refunds, dupPairs, dupBoth, differ, failed atomic.Int64
	// unknown counts the keyed requests answered outcome_unknown, each
	// retried with its key like an unanswered one.
	unknown atomic.Int64

	// With -recourse (recourse.go).
	recourse                                                 bool
	payments, recoursed, refused, runsMade, runsSent, extras atomic.Int64
	paid                                                     map[string]int64 // capture → payments acknowledged (under mu)
}

type pendingCall struct {
	method, path, key string
	body              any
	onOK              func(response)
	refusable         bool
}

func (r *contended) clientOf(i int) *client {
	if c, ok := r.clients.Load(i); ok {
		return c.(*client)
	}
	c, _ := r.clients.LoadOrStore(i, r.cl.client(i))
	return c.(*client)
}

// pick returns a live replica, the k-th in rotation.
func (r *contended) pick(k int) int {
	live := r.cl.live()
	return live[k%len(live)]
}

// send makes one request on replica i. A 2xx applies onOK once per key,
// however many replicas answered it; a lost answer or an in-progress 409
// queues the call for a retry with the same key.
func (r *contended) send(i int, method, path string, body any, key string, onOK func(response)) (response, bool) {
	return r.sendOr(i, method, path, body, key, false, onOK)
}

// sendOr is send where, if refusable, a 409 action_not_available is an
// expected answer (the operation raced one that made it unavailable): not
// applied, and no failure.
func (r *contended) sendOr(i int, method, path string, body any, key string, refusable bool, onOK func(response)) (response, bool) {
	resp, err := r.clientOf(i).do(context.Background(), method, path, body, key)
	// outcome_unknown: the replica's COMMIT lost its answer and the
	// database could not say in time (a pooler or the database restarting
	// under the run); the answer asks for the request again with its key,
	// as for one never answered.
	unknown := err == nil && resp.status == 500 && bytes.Contains(resp.body, []byte(`"code":"outcome_unknown"`))
	if unknown && key != "" {
		r.unknown.Add(1)
	}
	switch {
	case err != nil, resp.status == 409 && bytes.Contains(resp.body, []byte("idempotency_request_in_progress")), unknown && key != "":
		if key != "" {
			r.mu.Lock()
			r.pending = append(r.pending, pendingCall{method, path, key, body, onOK, refusable})
			r.mu.Unlock()
		}
		return resp, false
	case refusable && resp.status == 409 && bytes.Contains(resp.body, []byte("action_not_available")):
		r.refused.Add(1)
		return resp, false
	case resp.status/100 != 2:
		r.failed.Add(1)
		fmt.Fprintf(os.Stderr, "unexpected %d on %s %s: %s\n", resp.status, method, path, resp.body)
		return resp, false
	}
	r.accept(key, resp, onOK)
	return resp, true
}

// accept records a 2xx: the first for a key is applied to the tally; any
// later one must carry the same body (a replay).
func (r *contended) accept(key string, resp response, onOK func(response)) {
	if key == "" {
		if onOK != nil {
			onOK(resp)
		}
		return
	}
	r.mu.Lock()
	first, seen := r.answers[key]
	if !seen {
		r.answers[key] = resp.body
	}
	r.mu.Unlock()
	if seen {
		if !bytes.Equal(first, resp.body) {
			r.differ.Add(1)
		}
		return
	}
	if onOK != nil {
		onOK(resp)
	}
}

// both sends the same keyed request to two replicas at once and reports
// whether either answered 2xx.
func (r *contended) both(a, b int, method, path string, body any, key string, onOK func(response)) bool {
	return r.bothOr(a, b, method, path, body, key, false, onOK)
}

func (r *contended) bothOr(a, b int, method, path string, body any, key string, refusable bool, onOK func(response)) bool {
	r.dupPairs.Add(1)
	var wg sync.WaitGroup
	var okA, okB bool
	wg.Go(func() { _, okA = r.sendOr(a, method, path, body, key, refusable, onOK) })
	wg.Go(func() { _, okB = r.sendOr(b, method, path, body, key, refusable, onOK) })
	wg.Wait()
	if okA && okB {
		r.dupBoth.Add(1)
	}
	return okA || okB
}

// flow: one order, created on one replica, captured line by line from
// several replicas at once (one capture also sent twice with one key),
// fully captured with one key on two replicas, then refunded from two
// replicas at once.
func (r *contended) flow(rng *mrand.Rand, prefix string) {
	k := rng.IntN(64)
	var tok string
	if _, ok := r.send(r.pick(k), "POST", "/sandbox/v1/authorization-tokens", map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE",
		"customer": map[string]any{"companyId": "5560000001"}}, "", func(resp response) {
		var b struct{ AuthorizationToken string }
		json.Unmarshal(resp.body, &b)
		tok = b.AuthorizationToken
	}); !ok {
		return
	}
	lines := make([]any, 6)
	var total int64
	for i := range lines {
		l := line(rng, i)
		total += int64(l["quantity"].(int) * l["unitPrice"].(int))
		lines[i] = l
	}
	var id string
	r.send(r.pick(k+1), "POST", "/v1/authorization-tokens/"+tok+"/order", map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE",
		"orderLines": lines}, prefix+"-create", func(resp response) {
		var b struct{ OrderID string }
		json.Unmarshal(resp.body, &b)
		id = b.OrderID
		r.tl.apply(id, func(e *expect) { e.uncaptured = total })
	})
	if id == "" {
		return
	}
	resp, ok := r.send(r.pick(k+2), "GET", "/v1/orders/"+id, nil, "", nil)
	var o apiOrder
	if !ok || json.Unmarshal(resp.body, &o) != nil || len(o.Uncaptured.OrderLines) != len(lines) {
		return
	}
	// Four single-line captures at once, each to another replica; the first
	// twice. If any is left unanswered (a replica died) the flow stops here,
	// so that its retry later still finds its line uncaptured.
	var wg sync.WaitGroup
	var unanswered atomic.Bool
	for j, l := range o.Uncaptured.OrderLines[:4] {
		body := map[string]any{"orderLines": []any{map[string]any{"id": l.ID}}, "totalCaptureAmount": l.TotalAmount}
		key := fmt.Sprintf("%s-pc%d", prefix, j)
		amount := l.TotalAmount
		apply := func(response) {
			r.captures.Add(1)
			r.tl.apply(id, func(e *expect) { e.captured += amount; e.uncaptured -= amount; e.captures++ })
		}
		wg.Go(func() {
			ok := false
			if j == 0 {
				ok = r.both(r.pick(k+j), r.pick(k+j+1), "POST", "/v1/orders/"+id+"/partialcapture", body, key, apply)
			} else {
				_, ok = r.send(r.pick(k+j), "POST", "/v1/orders/"+id+"/partialcapture", body, key, apply)
			}
			if !ok {
				unanswered.Store(true)
			}
		})
	}
	wg.Wait()
	if unanswered.Load() {
		return
	}
	var rest int64
	for _, l := range o.Uncaptured.OrderLines[4:] {
		rest += l.TotalAmount
	}
	if !r.both(r.pick(k), r.pick(k+1), "POST", "/v1/orders/"+id+"/capture", nil, prefix+"-fc", func(resp response) {
		r.captures.Add(1)
		r.tl.apply(id, func(e *expect) { e.captured += rest; e.uncaptured -= rest; e.captures++ })
	}) {
		return
	}
	resp, ok = r.send(r.pick(k+2), "GET", "/v1/orders/"+id, nil, "", nil)
	if !ok || json.Unmarshal(resp.body, &o) != nil || len(o.Captured) < 2 {
		return
	}
	// Two refunds on two captures at once, from two replicas; one sent twice.
	// At 0 % VAT: a refund may not give back more VAT than its capture
	// invoiced, and a capture's lines may all be at 0 %.
	// Less than the capture holds: a refund of all that is left is its last
	// and must credit each VAT rate exactly, which a line at 0 % does not.
	for j := range 2 {
		key := fmt.Sprintf("%s-pr%d", prefix, j)
		amount := min(100, o.Captured[j].TotalOrderAmount.MinorUnits-1)
		if amount <= 0 {
			continue
		}
		body := refundBody(o.Captured[j].LedgerID, amount)
		path := "/v1/orders/" + id + "/partialrefund/" + o.Captured[j].LedgerID
		apply := r.refunded(id, amount)
		wg.Go(func() {
			if j == 0 {
				r.both(r.pick(k+j), r.pick(k+j+2), "POST", path, body, key, apply)
			} else {
				r.send(r.pick(k+j), "POST", path, body, key, apply)
			}
		})
	}
	wg.Wait()
	if r.recourse {
		r.recourseFlow(rng, prefix, k, id, o)
	}
}

// settlePending retries every unanswered or in-progress call with its key on
// a live replica until it gets a definite answer.
func (r *contended) settlePending() int {
	retried := 0
	for round := 0; round < 20; round++ {
		r.mu.Lock()
		todo := r.pending
		r.pending = nil
		r.mu.Unlock()
		if len(todo) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
		for j, p := range todo {
			retried++
			r.sendOr(r.pick(j), p.method, p.path, p.body, p.key, p.refusable, p.onOK)
		}
	}
	r.mu.Lock()
	left := len(r.pending)
	r.mu.Unlock()
	if left > 0 {
		r.failed.Add(int64(left))
	}
	return retried
}
