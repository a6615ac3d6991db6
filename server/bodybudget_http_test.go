package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
)

// budgetAnswer is what a request sent in the background was answered.
type budgetAnswer struct {
	code                      int
	retryAfter, problem, body string
	replayed                  bool
}

// createIn creates an order from tok in the background, its body read from
// body and declared length bytes long (-1: chunked).
func (e *sessionEnv) createIn(ctx context.Context, tok, key string, body io.Reader, length int64) <-chan budgetAnswer {
	return e.createAs(ctx, e.auth, tok, key, body, length, nil)
}

// createAs is createIn with the credentials auth and the headers hdr.
func (e *sessionEnv) createAs(ctx context.Context, auth, tok, key string, body io.Reader, length int64, hdr map[string]string) <-chan budgetAnswer {
	out := make(chan budgetAnswer, 1)
	r, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/authorization-tokens/"+tok+"/order", body)
	r.ContentLength = length
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", auth)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	go func() {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			out <- budgetAnswer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p struct{ Code string }
		json.Unmarshal(b, &p)
		out <- budgetAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), problem: p.Code, body: string(b),
			replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	}()
	return out
}

// heldBody is a request body the test sends when it likes: until then the
// server waits for it.
type heldBody struct {
	pr  *io.PipeReader
	pw  *io.PipeWriter
	doc string
}

func newHeldBody(t *testing.T, doc string) *heldBody {
	pr, pw := io.Pipe()
	// A test that fails while the server waits for the body lets it go.
	t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) })
	return &heldBody{pr, pw, doc}
}

// sendFrom writes the body from its byte i on.
func (h *heldBody) sendFrom(i int) {
	go func() {
		io.WriteString(h.pw, h.doc[i:])
		h.pw.Close()
	}()
}

func pending(t *testing.T, what string, c <-chan budgetAnswer) {
	t.Helper()
	select {
	case a := <-c:
		t.Fatalf("%s was answered while it should wait: %+v", what, a)
	default:
	}
}

// gatedStore is a store whose writes wait while it is shut, until it is
// opened, whatever becomes of their request's context (which the store then
// answers as it does): a request that has taken its share of the body
// budget holds it there for as long as the test likes. With expire, a
// write let through also waits for its request's context to end (its
// store timeout), so that its answer does not hang on the order in which
// the requests' timers fire.
type gatedStore struct {
	storage.Store
	expire bool
	mu     sync.Mutex
	gate   chan struct{} // nil: open
}

// shut holds the writes from now on; a test that fails with them held
// opens it as it ends, before its server is closed, which waits for them.
func (s *gatedStore) shut(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	t.Cleanup(s.open)
}

func (s *gatedStore) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *gatedStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
		if s.expire {
			<-ctx.Done()
		}
	}
	return s.Store.Update(ctx, fn)
}

// mintAs mints an authorization token with the credentials auth.
func (e *sessionEnv) mintAs(auth string) string {
	e.t.Helper()
	code, _, b := e.req("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"customer":{"companyId":"5560000001"},"paymentMethod":{"type":"invoice"}}`, auth, nil)
	if code != 201 {
		e.t.Fatalf("mint: %d %v", code, b)
	}
	return b["authorizationToken"].(string)
}

// readStarted serves e's server on a listener of its own, where the body of
// a request with the header X-Read-Started is watched: the name of the
// header is sent on the channel answered once the server first reads it.
func (e *sessionEnv) readStarted(t *testing.T) (*sessionEnv, <-chan string) {
	started := make(chan string, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get("X-Read-Started"); name != "" {
			r.Body = &watchedBody{ReadCloser: r.Body, first: func() { started <- name }}
		}
		e.srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	watched := *e
	watched.ts = ts
	return &watched, started
}

// watchedBody calls first as it is first read.
type watchedBody struct {
	io.ReadCloser
	once  sync.Once
	first func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.once.Do(b.first)
	return b.ReadCloser.Read(p)
}

// TestBodyBudgetSlowBodiesHoldNothing: requests whose bodies are still
// arriving, declared larger than the whole body budget, take none of it
// (they hold only what they have sent, as without the budget), so another
// merchant's small request is served at once, not kept waiting until the
// store timeout refuses it; each slow body, once it has come, is served in
// its turn.
func TestBodyBudgetSlowBodiesHoldNothing(t *testing.T) {
	n := int64(len(orderBody))
	// The store timeout is only what a request kept waiting would run
	// into: none should be, and the slow bodies finish well within it.
	e := newEnvOn(t, false, NewClock(true), openStore(t, nil), func(c *Config) { c.BodyMemory = n; c.StoreTimeout = 5 * time.Second })
	w, started := e.readStarted(t)
	ctx := t.Context() // ends the requests of a test that fails
	// 64 KiB each, the order padded with JSON whitespace: 64 times the
	// budget, which a share taken as declared would have taken whole.
	slow := orderBody + strings.Repeat(" ", 64<<10-len(orderBody))
	var bodies []*heldBody
	var answers []<-chan budgetAnswer
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	otherTok := e.mintAs(e.other)
	for i, tok := range toks {
		h := newHeldBody(t, slow)
		a := w.createAs(ctx, e.auth, tok, "", h.pr, int64(len(slow)), map[string]string{"X-Read-Started": fmt.Sprint(i)})
		// Part of the body, then nothing until the test says.
		go io.WriteString(h.pw, slow[:n])
		bodies, answers = append(bodies, h), append(answers, a)
	}
	readStarted := func() {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not start reading a slow body")
		}
	}
	readStarted()
	if a := <-e.createAs(ctx, e.other, otherTok, "", strings.NewReader(orderBody), n, nil); a.code != 200 {
		t.Fatalf("another merchant's small request while slow bodies arrive: %+v", a)
	}
	readStarted()
	readStarted()
	waitFor(t, e.srv.budget, 0, 0)
	for i, a := range answers {
		pending(t, fmt.Sprintf("slow body %d", i), a)
	}
	for i, h := range bodies {
		h.sendFrom(int(n))
		if a := <-answers[i]; a.code != 200 {
			t.Fatalf("slow body %d once sent: %+v", i, a)
		}
	}
	waitFor(t, e.srv.budget, 0, 0)
	if _, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); len(b["orders"].([]any)) != 3 {
		t.Fatalf("the slow merchant's orders: %v, want 3", b)
	}
}

// TestBodyBudgetQueuesBodiesPastIt: with the body budget taken by two
// requests whose bodies have been read and which wait for the store, a
// third request, its body read, waits for its share before it is decoded,
// while requests without a body (a read) and requests refused before their
// body (no credentials) are answered at once; once the store goes on, each
// is served, the waiter once a share is free, and nothing stays held.
func TestBodyBudgetQueuesBodiesPastIt(t *testing.T) {
	n := int64(len(orderBody))
	st := &gatedStore{Store: openStore(t, nil)}
	e := newEnvOn(t, false, NewClock(true), st, func(c *Config) { c.BodyMemory = 2 * n })
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	ctx := t.Context() // ends the requests of a test that fails
	st.shut(t)
	a1 := e.createIn(ctx, toks[0], "h1", strings.NewReader(orderBody), n)
	a2 := e.createIn(ctx, toks[1], "h2", strings.NewReader(orderBody), -1)
	waitFor(t, e.srv.budget, 2*n, 0)
	w := e.createIn(ctx, toks[2], "w", strings.NewReader(orderBody), n)
	waitFor(t, e.srv.budget, 2*n, 1)
	pending(t, "a request with a body past the budget", w)

	if code, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); code != 200 {
		t.Fatalf("a read while the budget is taken: %d %v", code, b)
	}
	if code, _, b := e.req("POST", "/v1/authorization-tokens/"+toks[2]+"/order", orderBody, basic("m1", "wrong"), nil); code != 401 {
		t.Fatalf("a body with wrong credentials while the budget is taken: %d %v", code, b)
	}
	waitFor(t, e.srv.budget, 2*n, 1)
	pending(t, "a request with a body past the budget", w)

	st.open()
	for what, a := range map[string]<-chan budgetAnswer{"the first holder": a1, "the second holder": a2, "the waiter": w} {
		if got := <-a; got.code != 200 {
			t.Fatalf("%s once the store went on: %+v", what, got)
		}
	}
	waitFor(t, e.srv.budget, 0, 0)
	if _, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); len(b["orders"].([]any)) != 3 {
		t.Fatalf("orders made: %v, want 3", b)
	}
}

// TestBodyBudgetRefusesPastTheStoreTimeout: a request that has not got its
// share of the budget when the store timeout passes is answered 503
// server_busy with Retry-After, not 408 (its body came in time), having done
// nothing, while the one holding the share, waiting for the store, is
// store_unavailable. Sent again with its Idempotency-Key once the budget is
// free, the refused request makes its order once.
func TestBodyBudgetRefusesPastTheStoreTimeout(t *testing.T) {
	n := int64(len(orderBody))
	st := &gatedStore{Store: openStore(t, nil), expire: true}
	e := newEnvOn(t, false, NewClock(true), st, func(c *Config) { c.BodyMemory = n; c.StoreTimeout = time.Second })
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	ctx := t.Context() // ends the requests of a test that fails
	st.shut(t)
	ah := e.createIn(ctx, toks[0], "h", strings.NewReader(orderBody), n)
	waitFor(t, e.srv.budget, n, 0)
	w := e.createIn(ctx, toks[1], "w", strings.NewReader(orderBody), n)
	waitFor(t, e.srv.budget, n, 1)
	if a := <-w; a.code != 503 || a.problem != "server_busy" || a.retryAfter != "1" {
		t.Fatalf("a request that waited for the budget past the store timeout: %+v", a)
	}
	waitFor(t, e.srv.budget, n, 0)
	st.open()
	if a := <-ah; a.code != 503 || a.problem != "store_unavailable" {
		t.Fatalf("the holder, waiting for the store past the store timeout: %+v", a)
	}
	waitFor(t, e.srv.budget, 0, 0)
	if _, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); len(b["orders"].([]any)) != 0 {
		t.Fatalf("orders made by refused requests: %v", b)
	}
	for i, want := range []bool{false, true} {
		a := <-e.createIn(ctx, toks[1], "w", strings.NewReader(orderBody), n)
		if a.code != 200 || a.replayed != want {
			t.Fatalf("the refused request sent again (%d): %+v, want 200 replayed %v", i, a, want)
		}
	}
	if _, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); len(b["orders"].([]any)) != 1 {
		t.Fatalf("orders after the retries: %v, want 1", b)
	}
	waitFor(t, e.srv.budget, 0, 0)
}

// TestBodyBudgetLateBodyIs408: a body still arriving when the store timeout
// passes is the client's slowness, 408 request_timeout, with the budget
// configured as without it: it took no share, and nothing was done.
func TestBodyBudgetLateBodyIs408(t *testing.T) {
	n := int64(len(orderBody))
	const timeout = 100 * time.Millisecond
	e := newEnvOn(t, false, NewClock(true), openStore(t, nil), func(c *Config) { c.BodyMemory = n; c.StoreTimeout = timeout })
	u := e.untimed(t)
	tok := u.mint("5560000001", "invoice")
	a := e.createIn(t.Context(), tok, "", &lateBody{rest: orderBody, pause: 5 * timeout}, n)
	waitFor(t, e.srv.budget, 0, 0)
	if got := <-a; got.code != 408 || got.problem != "request_timeout" {
		t.Fatalf("a body that arrived after the store timeout: %+v", got)
	}
	waitFor(t, e.srv.budget, 0, 0)
	if code, _, b := u.req("GET", "/v1/orders", "", e.auth, nil); code != 200 || len(b["orders"].([]any)) != 0 {
		t.Fatalf("orders made by a late body: %d %v", code, b)
	}
}

// TestBodyBudgetWeights: a body takes the bytes read, whether its length
// was declared or it came chunked (not the body limit), JSON whitespace
// included; one larger than the whole budget takes all of it and is served
// alone, not refused for ever.
func TestBodyBudgetWeights(t *testing.T) {
	n := int64(len(orderBody))
	padded := orderBody + strings.Repeat("\n", 1000)
	for _, c := range []struct {
		name           string
		budget, length int64
		body           string
		want           int64
	}{
		{"declared", 10 << 10, n, orderBody, n},
		{"chunked", 10 << 10, -1, orderBody, n},
		{"whitespace", 10 << 10, -1, padded, n + 1000},
		{"larger than the budget", n / 2, n, orderBody, n / 2},
		{"chunked, larger than the budget", n / 2, -1, orderBody, n / 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &gatedStore{Store: openStore(t, nil)}
			e := newEnvOn(t, false, NewClock(true), st, func(cfg *Config) { cfg.BodyMemory = c.budget; cfg.MaxBodyBytes = 4 << 10 })
			tok := e.mint("5560000001", "invoice")
			st.shut(t)
			a := e.createIn(t.Context(), tok, "", strings.NewReader(c.body), c.length)
			waitFor(t, e.srv.budget, c.want, 0)
			st.open()
			if got := <-a; got.code != 200 {
				t.Fatalf("answer: %+v", got)
			}
			waitFor(t, e.srv.budget, 0, 0)
		})
	}
}

// panicky is a store whose next Update panics when armed.
type panicky struct {
	storage.Store
	armed chan struct{}
}

func (s *panicky) Update(ctx context.Context, fn func(storage.Tx) error) error {
	select {
	case <-s.armed:
		panic("store panic")
	default:
	}
	return s.Store.Update(ctx, fn)
}

// TestBodyBudgetGivenBackOnEveryEnd: whatever ends a request that took its
// share (an answer, a refusal of its body or of the request, a client gone
// while it waits for the store, a panic), the share is given back; a client
// gone halfway through its body, or while it waits for its share, takes
// none.
func TestBodyBudgetGivenBackOnEveryEnd(t *testing.T) {
	n := int64(len(orderBody))
	gated := &gatedStore{Store: openStore(t, nil)}
	st := &panicky{Store: gated, armed: make(chan struct{}, 1)}
	e := newEnvOn(t, false, NewClock(true), st, func(c *Config) { c.BodyMemory = n })
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	tok := toks[0]
	ctx := t.Context() // ends the requests of a test that fails
	post := func(body, ctype string) (int, string) {
		r, _ := http.NewRequest("POST", e.ts.URL+"/v1/authorization-tokens/"+tok+"/order", strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Authorization", e.auth)
		code, _, b := e.send(r)
		return code, fmt.Sprint(b["code"])
	}
	for _, c := range []struct {
		name, body, ctype string
		code              int
		problem           string
	}{
		{"malformed", `{"country":`, "application/json", 400, "malformed_json"},
		{"invalid", `{"country":"XX"}`, "application/json", 400, "validation_failed"},
		{"media type", orderBody, "text/plain", 415, "unsupported_media_type"},
		{"unknown token", orderBody, "application/json", 404, "authorization_token_not_found"},
	} {
		if c.name == "unknown token" {
			r, _ := http.NewRequest("POST", e.ts.URL+"/v1/authorization-tokens/nope/order", strings.NewReader(c.body))
			r.Header.Set("Content-Type", c.ctype)
			r.Header.Set("Authorization", e.auth)
			code, _, b := e.send(r)
			if code != c.code || b["code"] != c.problem {
				t.Fatalf("%s: %d %v", c.name, code, b)
			}
		} else if code, problem := post(c.body, c.ctype); code != c.code || problem != c.problem {
			t.Fatalf("%s: %d %s, want %d %s", c.name, code, problem, c.code, c.problem)
		}
		waitFor(t, e.srv.budget, 0, 0)
	}
	// A client gone halfway through its body: it held nothing.
	cctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	a := e.createIn(cctx, tok, "", pr, n)
	pw.Write([]byte(orderBody[:n/2]))
	waitFor(t, e.srv.budget, 0, 0)
	cancel()
	pw.CloseWithError(errors.New("gone"))
	<-a
	waitFor(t, e.srv.budget, 0, 0)
	// A client gone while its request holds its share, waiting for the
	// store, and one gone while it waits for its share behind it.
	gated.shut(t)
	hctx, hcancel := context.WithCancel(ctx)
	ah := e.createIn(hctx, toks[1], "", strings.NewReader(orderBody), n)
	waitFor(t, e.srv.budget, n, 0)
	wctx, wcancel := context.WithCancel(ctx)
	aw := e.createIn(wctx, toks[2], "", strings.NewReader(orderBody), n)
	waitFor(t, e.srv.budget, n, 1)
	wcancel()
	<-aw
	waitFor(t, e.srv.budget, n, 0)
	hcancel()
	gated.open()
	<-ah
	waitFor(t, e.srv.budget, 0, 0)
	// A panic while the share is held.
	st.armed <- struct{}{}
	if code, problem := post(orderBody, "application/json"); code != 500 || problem != "internal" {
		t.Fatalf("a panic: %d %s", code, problem)
	}
	waitFor(t, e.srv.budget, 0, 0)
	// And the budget serves on.
	if code, problem := post(orderBody, "application/json"); code != 200 {
		t.Fatalf("after every end: %d %s", code, problem)
	}
	waitFor(t, e.srv.budget, 0, 0)
}
