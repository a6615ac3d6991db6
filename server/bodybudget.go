package server

import (
	"container/list"
	"context"
	"net/http"
	"sync"

	"github.com/kassahq/kassa/fault"
)

// bodyBudget bounds the request bodies the server holds decoded at once, in
// bytes (Config.BodyMemory): a weighted semaphore, first come first served,
// so that a large body is not passed over for ever by small ones. A request
// takes its share once its body has been read in full, weighted by the bytes
// read, before it is decoded, and gives it back when it ends.
//
// Bytes of body stand for the memory a request holds while it is decoded
// and waits for the store: measured on a 1000-line order (296 KB), the
// decoded request and its validated lines are twice the body, and with
// decoding's garbage and the collector's headroom the process grew by 1.5
// to 2.3 MB per request in flight. Bounded only by the connections
// (--max-connections × --max-body-mb), clients creating large orders
// faster than the store commits them grew the process until it was killed,
// taking every merchant down with it (docs/decisions.md).
//
// The share is taken after the read, not before: a body still arriving
// holds only the bytes sent so far, once, bounded by the connections and
// the body limit as before the budget, and a client that sends slowly (an
// authenticated one may trickle bodies until the read timeout) must not
// hold shares while it does, or a few such connections would keep every
// other request waiting and refused.
type bodyBudget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiting list.List // of *budgetWaiter, in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the share is granted
}

func newBodyBudget(size int64) *bodyBudget { return &bodyBudget{size: size} }

// acquire waits for n bytes of the budget, at most the whole of it (a body
// larger than the budget is served alone), and returns the bytes taken, to
// give back with release. When ctx ends first it takes nothing and returns
// ctx's error.
func (b *bodyBudget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 0), b.size)
	b.mu.Lock()
	if b.waiting.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	e := b.waiting.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Granted as ctx ended: given back, as the request will not read
		// its body.
		b.used -= n
	default:
		b.waiting.Remove(e)
	}
	// Whoever waited behind it may fit now.
	b.grant()
	return 0, ctx.Err()
}

// release gives back n bytes taken by acquire.
func (b *bodyBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("server: body budget released more than was taken")
	}
	b.grant()
}

// grant hands their shares to the waiters at the front that fit, in order;
// b.mu is held.
func (b *bodyBudget) grant() {
	for e := b.waiting.Front(); e != nil; e = b.waiting.Front() {
		w := e.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiting.Remove(e)
		close(w.ready)
	}
}

// holdBody takes n bytes of the body budget, the length of r's body as
// read, for the rest of the request (Server.serve gives it back as the
// request ends, however it ends). A request that does not get it before the
// store timeout is refused with server_busy, its body read but not decoded
// and nothing done; one whose client leaves first ends as the client's.
func (s *Server) holdBody(w http.ResponseWriter, r *http.Request, n int64) error {
	rec, ok := w.(*statusRecorder)
	if s.budget == nil || !ok || rec.held != 0 {
		return nil
	}
	n, err := s.budget.acquire(r.Context(), n)
	if err != nil {
		return &fault.Error{Kind: fault.Unavailable, Code: "server_busy",
			Message: "the server holds as many request bodies as it may at once (kassa serve --body-memory-mb); nothing was done, retry shortly",
			Err:     err}
	}
	rec.held = n
	return nil
}
