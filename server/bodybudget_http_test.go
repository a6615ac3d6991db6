package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	return e.createWith(http.DefaultClient, ctx, tok, key, body, length, nil)
}

// createWith is createIn through client, with the headers hdr.
func (e *sessionEnv) createWith(client *http.Client, ctx context.Context, tok, key string, body io.Reader, length int64, hdr map[string]string) <-chan budgetAnswer {
	out := make(chan budgetAnswer, 1)
	r, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/authorization-tokens/"+tok+"/order", body)
	r.ContentLength = length
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", e.auth)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	go func() {
		resp, err := client.Do(r)
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
// server, which has taken the body's share of the budget, waits for it.
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

// send writes the whole body.
func (h *heldBody) send() {
	go func() {
		io.WriteString(h.pw, h.doc)
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

// TestBodyBudgetQueuesBodiesPastIt: with the body budget taken by two
// requests whose bodies are still coming, a third request with a body waits
// for its share without its body being read, while requests without one
// (a read) and requests refused before their body (no credentials) are
// answered at once; as the bodies come, each request is served, the waiter
// once a share is free, and nothing stays held.
func TestBodyBudgetQueuesBodiesPastIt(t *testing.T) {
	n := int64(len(orderBody))
	e := newEnvOn(t, false, NewClock(true), openStore(t, nil), func(c *Config) { c.BodyMemory = 2 * n })
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	ctx := context.Background()
	h1, h2 := newHeldBody(t, orderBody), newHeldBody(t, orderBody)
	a1 := e.createIn(ctx, toks[0], "h1", h1.pr, n)
	a2 := e.createIn(ctx, toks[1], "h2", h2.pr, n)
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

	h1.send()
	if a := <-a1; a.code != 200 {
		t.Fatalf("the first held body once sent: %+v", a)
	}
	if a := <-w; a.code != 200 {
		t.Fatalf("the waiting request once a share was free: %+v", a)
	}
	pending(t, "a request whose body has not come", a2)
	h2.send()
	if a := <-a2; a.code != 200 {
		t.Fatalf("the second held body once sent: %+v", a)
	}
	waitFor(t, e.srv.budget, 0, 0)
	if _, _, b := e.req("GET", "/v1/orders", "", e.auth, nil); len(b["orders"].([]any)) != 3 {
		t.Fatalf("orders made: %v, want 3", b)
	}
}

// TestBodyBudgetRefusesPastTheStoreTimeout: a request that has not got its
// share of the budget when the store timeout passes is answered 503
// server_busy with Retry-After, having done nothing, its body unread; sent
// again with its Idempotency-Key once the budget is free, it makes its
// order once.
func TestBodyBudgetRefusesPastTheStoreTimeout(t *testing.T) {
	n := int64(len(orderBody))
	e := newEnvOn(t, false, NewClock(true), openStore(t, nil), func(c *Config) { c.BodyMemory = n; c.StoreTimeout = time.Second })
	toks := []string{e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")}
	ctx := context.Background()
	h := newHeldBody(t, orderBody)
	ah := e.createIn(ctx, toks[0], "h", h.pr, n)
	waitFor(t, e.srv.budget, n, 0)
	// Its body is never read: it is sent with "Expect: 100-continue", so
	// the client sends it only once the server starts reading it, from a
	// reader that fails if it is read.
	unread := &failingReader{}
	expecting := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
	w := e.createWith(expecting, ctx, toks[1], "w", unread, n, map[string]string{"Expect": "100-continue"})
	if a := <-w; a.code != 503 || a.problem != "server_busy" || a.retryAfter != "1" {
		t.Fatalf("a request that waited for the budget past the store timeout: %+v", a)
	}
	if unread.read {
		t.Fatal("the refused request's body was read")
	}
	// The held body, late past the store timeout, is refused as late.
	h.send()
	if a := <-ah; a.code != 408 || a.problem != "request_timeout" {
		t.Fatalf("the held body, sent after the store timeout: %+v", a)
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

// failingReader is a body that must not be read.
type failingReader struct{ read bool }

func (r *failingReader) Read([]byte) (int, error) {
	r.read = true
	return 0, errors.New("read")
}

// TestBodyBudgetWeights: a body takes its declared length; one of unknown
// length (chunked) the body limit; one declared larger than the whole
// budget takes all of it and is served alone, not refused for ever.
func TestBodyBudgetWeights(t *testing.T) {
	n := int64(len(orderBody))
	for _, c := range []struct {
		name           string
		budget, length int64
		want           int64
	}{
		{"declared", 10 << 10, n, n},
		{"chunked", 10 << 10, -1, 4 << 10},
		{"larger than the budget", n / 2, n, n / 2},
		{"chunked, larger than the budget", 1 << 10, -1, 1 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvOn(t, false, NewClock(true), openStore(t, nil), func(cfg *Config) { cfg.BodyMemory = c.budget; cfg.MaxBodyBytes = 4 << 10 })
			tok := e.mint("5560000001", "invoice")
			h := newHeldBody(t, orderBody)
			a := e.createIn(context.Background(), tok, "", h.pr, c.length)
			waitFor(t, e.srv.budget, c.want, 0)
			h.send()
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
// halfway through its body, a panic), the share is given back.
func TestBodyBudgetGivenBackOnEveryEnd(t *testing.T) {
	n := int64(len(orderBody))
	st := &panicky{Store: openStore(t, nil), armed: make(chan struct{}, 1)}
	e := newEnvOn(t, false, NewClock(true), st, func(c *Config) { c.BodyMemory = n })
	tok := e.mint("5560000001", "invoice")
	ctx := context.Background()
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
	// A client gone halfway through its body.
	cctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	a := e.createIn(cctx, tok, "", pr, n)
	pw.Write([]byte(orderBody[:n/2]))
	waitFor(t, e.srv.budget, n, 0)
	cancel()
	pw.CloseWithError(errors.New("gone"))
	<-a
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
