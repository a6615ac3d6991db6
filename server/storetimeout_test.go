package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestStoreTimeoutOnALockedOrder: with an order's row locked elsewhere (a
// transaction left open in psql, a stuck replica), captures of it give up at
// the store timeout with 503 store_unavailable and Retry-After, having done
// nothing, instead of waiting as long as their clients do; more of them than
// the pool has connections no longer keep every other order, merchant and
// /readyz waiting; and once the lock is gone the same request, with its key,
// captures once.
func TestStoreTimeoutOnALockedOrder(t *testing.T) {
	e, locked, other, tx := lockedOrderEnv(t, time.Second)
	id := locked["id"].(string)
	ctx := context.Background()
	// Released at last in any case, so that a server that waits for the
	// lock fails this test instead of hanging it.
	var once sync.Once
	released := make(chan struct{})
	unlock := func() { once.Do(func() { tx.Rollback(ctx); close(released) }) }
	safety := time.AfterFunc(20*time.Second, unlock)
	defer safety.Stop()
	defer unlock()

	const captures = 8 // twice the pool
	type answer struct {
		code                int
		retryAfter, problem string
	}
	answers := make([]answer, captures)
	var wg sync.WaitGroup
	for i := range captures {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, map[string]string{"Idempotency-Key": fmt.Sprint("cap-", i)})
			answers[i] = answer{code, h.Get("Retry-After"), fmt.Sprint(b["code"])}
		}()
	}
	wg.Wait()
	select {
	case <-released:
		t.Fatal("the captures were answered only once the lock was released")
	default:
	}
	for i, a := range answers {
		if a.code != http.StatusServiceUnavailable || a.problem != "store_unavailable" || a.retryAfter != "1" {
			t.Errorf("capture %d of the locked order: %d %s Retry-After %q, want 503 store_unavailable with Retry-After", i, a.code, a.problem, a.retryAfter)
		}
	}
	// The lock is still held; everyone else is served.
	if code, _, b := e.req("GET", "/v1/orders/"+other, "", e.auth, nil); code != 200 {
		t.Errorf("another order while the lock is held: %d %v", code, b)
	}
	if code, _, b := e.req("GET", "/v1/orders", "", e.other, nil); code != 200 {
		t.Errorf("another merchant's list while the lock is held: %d %v", code, b)
	}
	if code, _, b := e.req("GET", "/readyz", "", "", nil); code != 200 {
		t.Errorf("/readyz while the lock is held: %d %v", code, b)
	}

	unlock()
	if o := e.get(id); minor(o["capturedAmount"]) != 0 || minor(o["uncapturedAmount"]) != minor(locked["orderAmount"]) {
		t.Fatalf("captures that timed out changed the order: captured %v, uncaptured %v", o["capturedAmount"], o["uncapturedAmount"])
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, map[string]string{"Idempotency-Key": "cap-0"}); code != 200 {
		t.Fatalf("the same capture sent again: %d %v", code, b)
	}
	if o := e.get(id); minor(o["capturedAmount"]) != minor(locked["orderAmount"]) || len(o["captured"].([]any)) != 1 {
		t.Fatalf("after the retry: captured %v in %d captures, want the order amount once", o["capturedAmount"], len(o["captured"].([]any)))
	}
}

// TestWaitersOfALockedOrderLeaveThePoolToOthers: requests piling up on one
// order whose row is locked elsewhere take one database connection between
// them, not one each: while they wait, other orders, other merchants and
// /readyz are served at once rather than when the waiters give up.
func TestWaitersOfALockedOrderLeaveThePoolToOthers(t *testing.T) {
	e, locked, other, _ := lockedOrderEnv(t, 3*time.Second)
	id := locked["id"].(string)

	var answered sync.WaitGroup
	waiting := make(chan struct{})
	for i := range 8 { // twice the pool
		answered.Add(1)
		go func() {
			defer answered.Done()
			e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":12500,"vat":2500}],"totalCaptureAmount":12500}`,
				e.auth, map[string]string{"Idempotency-Key": fmt.Sprint("pc-", i)})
		}()
	}
	go func() { answered.Wait(); close(waiting) }()
	time.Sleep(300 * time.Millisecond) // the captures are waiting on the lock by then
	check := answeredWhileWaiting(t, waiting, "the locked order")
	code, _, b := e.req("GET", "/v1/orders/"+other, "", e.auth, nil)
	check("another order", code, b)
	code, _, b = e.req("GET", "/v1/orders", "", e.other, nil)
	check("another merchant's list", code, b)
	code, _, b = e.req("GET", "/readyz", "", "", nil)
	check("/readyz", code, b)
	answered.Wait()
}

// TestSandboxJobsOutliveTheStoreTimeout: the sandbox's job endpoints run a
// whole background job through HTTP (notification POSTs of up to 10 s each,
// many transactions), which the per-request store timeout cut midway: a
// receiver slower than the timeout made POST /sandbox/v1/jobs/notifications
// answer 500 and left its notifications pending, to be posted again.
func TestSandboxJobsOutliveTheStoreTimeout(t *testing.T) {
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, openStore(t, clock.Now), func(c *Config) { c.StoreTimeout = time.Second })
	var received atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		received.Add(1)
	}))
	defer rcv.Close()
	if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("set: %d %v", code, b)
	}
	e.order("5560000001", "invoice")
	code, _, stats := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	if code != 200 || stats["delivered"] != 2.0 || received.Load() != 2 {
		t.Fatalf("deliver behind a receiver slower than the store timeout: %d %v, %d received", code, stats, received.Load())
	}
	_, _, page := e.req("GET", "/v1/notifications?size=50", "", e.auth, nil)
	for _, n := range page["notifications"].([]any) {
		if st := n.(map[string]any)["status"]; st != "delivered" {
			t.Fatalf("notification %v after the job", st)
		}
	}
}

// lockedOrderEnv is a server on a fresh PostgreSQL schema with a pool of 4
// connections and the store timeout given, whose /readyz reads the store,
// and two orders of merchant m1: locked, whose row a transaction of another
// connection holds FOR UPDATE until the test ends (or rolls tx back), and
// the other's id.
func lockedOrderEnv(t *testing.T, storeTimeout time.Duration) (e *sessionEnv, locked map[string]any, other string, tx pgx.Tx) {
	t.Helper()
	dbURL := pgtest.FreshSchema(t)
	ctx := context.Background()
	clock := NewClock(true)
	st, err := postgres.Open(ctx, dbURL, postgres.Options{Clock: clock.Now, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e = newEnvOn(t, false, clock, st, func(c *Config) {
		c.StoreTimeout = storeTimeout
		c.Ready = func(ctx context.Context) error {
			return st.View(ctx, func(tx storage.Tx) error {
				if _, err := tx.GetMerchant("readyz"); err != nil && !fault.Is(err, fault.NotFound) {
					return err
				}
				return nil
			})
		}
	})
	locked = e.order("5560000001", "invoice")
	other = e.order("5560000001", "invoice")["id"].(string)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if tx, err = conn.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, locked["id"]); err != nil {
		t.Fatal(err)
	}
	return e, locked, other, tx
}

// TestWaitersOfALockedDocumentRowLeaveThePoolToOthers: captures of many
// orders of one merchant, all waiting for its invoice-number row that is
// locked elsewhere (a transaction left open, a stuck replica), take one
// database connection between them, not one each: while they wait, other
// merchants and /readyz are served at once rather than when the waiters
// give up. Once the lock is gone, every capture that answered 503 did
// nothing, and a capture that answered 200 took one number.
func TestWaitersOfALockedDocumentRowLeaveThePoolToOthers(t *testing.T) {
	e, first, _, tx := lockedOrderEnv(t, 3*time.Second)
	ctx := context.Background()
	tx.Rollback(ctx) // the order itself is free; its merchant's invoice row will not be
	// The first capture makes the invoice row; then it is locked elsewhere.
	if code, _, b := e.req("POST", "/v1/orders/"+first["id"].(string)+"/capture", "", e.auth, nil); code != 200 {
		t.Fatalf("first capture: %d %v", code, b)
	}
	const captures = 8 // twice the pool
	ids := make([]string, captures)
	for i := range ids {
		ids[i] = e.order("5560000001", "invoice")["id"].(string)
	}
	lock, err := tx.Conn().Begin(ctx) // a connection on the test's schema
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if tag, err := lock.Exec(ctx, `SELECT 1 FROM sequences WHERE series = 'invoice' FOR UPDATE`); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lock the invoice row: %v %v", tag, err)
	}

	var answered sync.WaitGroup
	waiting := make(chan struct{})
	codes := make([]int, captures)
	for i, id := range ids {
		answered.Add(1)
		go func() {
			defer answered.Done()
			codes[i], _, _ = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, map[string]string{"Idempotency-Key": fmt.Sprint("cap-", i)})
		}()
	}
	go func() { answered.Wait(); close(waiting) }()
	time.Sleep(300 * time.Millisecond) // the captures are waiting on the lock by then
	check := answeredWhileWaiting(t, waiting, "the locked invoice row")
	code, _, b := e.req("GET", "/v1/orders", "", e.other, nil)
	check("another merchant's list", code, b)
	code, _, b = e.req("GET", "/readyz", "", "", nil)
	check("/readyz", code, b)
	answered.Wait()
	lock.Rollback(ctx)

	// The row was locked all along: each capture gave up, having done nothing.
	for i, id := range ids {
		if n := len(e.get(id)["captured"].([]any)); codes[i] != http.StatusServiceUnavailable || n != 0 {
			t.Errorf("capture %d of the locked invoice row answered %d and left %d captures", i, codes[i], n)
		}
	}
	// And took no number: the next capture takes the second.
	for i, id := range ids[:2] {
		if code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, map[string]string{"Idempotency-Key": fmt.Sprint("cap-", i)}); code != 200 {
			t.Fatalf("capture %d sent again once the lock is gone: %d %v", i, code, b)
		}
	}
	for i, id := range ids[:2] {
		if ref := e.get(id)["captured"].([]any)[0].(map[string]any)["documentReference"]; ref != fmt.Sprintf("INV-%08d", 2+i) {
			t.Errorf("capture %d sent again took invoice %v, want INV-%08d", i, ref, 2+i)
		}
	}
}

// answeredWhileWaiting checks an answer given while requests wait on a lock
// (locked names it): 200, and before waiting is closed, which it is once
// the waiters have been answered.
func answeredWhileWaiting(t *testing.T, waiting <-chan struct{}, locked string) func(what string, code int, b map[string]any) {
	return func(what string, code int, b map[string]any) {
		t.Helper()
		select {
		case <-waiting:
			t.Errorf("%s was answered (%d) only once the waiters on %s gave up", what, code, locked)
		default:
			if code != 200 {
				t.Errorf("%s while the waiters wait: %d %v", what, code, b)
			}
		}
	}
}

// lateBody is a request body whose second half comes only after pause, as
// from a client on a slow link.
type lateBody struct {
	rest  string
	pause time.Duration
	sent  bool // the first half
}

func (b *lateBody) Read(p []byte) (int, error) {
	if b.rest == "" {
		return 0, io.EOF
	}
	part := b.rest
	if !b.sent {
		part = part[:len(part)/2]
	} else {
		time.Sleep(b.pause)
	}
	n := copy(p, part)
	b.rest, b.sent = b.rest[n:], true
	return n, nil
}

// TestStoreTimeoutPassedWhileTheBodyArrived: the store timeout counts from
// the start of the request, so a body still arriving when it passes leaves
// no time for the store. That is the client's slowness, not the store's:
// it is answered 408 request_timeout, as a body cut by the read timeout is,
// not 503 store_unavailable, whose detail blamed a lock or a busy database
// connection and logged a warning that sent an operator after a store that
// was fine. Nothing was done, and the same request with its key, sent in
// time, creates the order once.
func TestStoreTimeoutPassedWhileTheBodyArrived(t *testing.T) {
	clock := NewClock(true)
	const timeout = 100 * time.Millisecond
	e := newEnvOn(t, false, clock, openStore(t, clock.Now), func(c *Config) { c.StoreTimeout = timeout })
	u := e.untimed(t)
	tok := u.mint("5560000001", "invoice")
	path := "/v1/authorization-tokens/" + tok + "/order"
	r, _ := http.NewRequest("POST", e.ts.URL+path, &lateBody{rest: orderBody, pause: 5 * timeout})
	r.ContentLength = int64(len(orderBody))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", e.auth)
	r.Header.Set("Idempotency-Key", "slow-1")
	code, h, b := e.send(r)
	if code != http.StatusRequestTimeout || b["code"] != "request_timeout" || h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a body that arrived after the store timeout: %d %v %v, want 408 request_timeout", code, h.Get("Content-Type"), b)
	}
	code, _, b = u.req("POST", path, orderBody, e.auth, map[string]string{"Idempotency-Key": "slow-1"})
	if code != 200 || b["orderId"] == nil {
		t.Fatalf("the same request sent in time: %d %v", code, b)
	}
	_, _, page := u.req("GET", "/v1/orders", "", e.auth, nil)
	if n := len(page["orders"].([]any)); n != 1 {
		t.Fatalf("%d orders after a refused and an accepted create, want 1", n)
	}
}

// untimed is e's API served again, on e's ledger and configuration but
// without the store timeout, for the requests that set a test up and check
// its outcome: under a store timeout of 100 ms they were answered 503
// store_unavailable themselves on a loaded machine (PostgreSQL, -race), and
// the test failed on its setup, not on the request it is about.
func (e *sessionEnv) untimed(t *testing.T) *sessionEnv {
	cfg := e.srv.cfg
	cfg.StoreTimeout = 0
	srv := New(cfg)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	u := *e
	u.ts, u.srv = ts, srv
	return &u
}

// slowReads is a store whose read transactions, once armed, take pause
// after they have begun, as a bbolt read does that waits for the file to be
// remapped: begun in time, it does not watch the request's deadline.
type slowReads struct {
	storage.Store
	pause atomic.Int64
}

func (s *slowReads) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.View(ctx, func(tx storage.Tx) error {
		time.Sleep(time.Duration(s.pause.Load()))
		return fn(tx)
	})
}

// TestStoreTimeoutPassedBeforeTheBody: a store timeout that passed while the
// request waited for the store before its body was read (the merchant's read
// when it authenticates) is the store's slowness: 503 store_unavailable, as
// it was before a body late past the store timeout became 408. The body,
// sent whole at once, was answered 408 request_timeout ("did not arrive in
// time"), blaming the client and hiding the store's slowness from the
// operator.
func TestStoreTimeoutPassedBeforeTheBody(t *testing.T) {
	clock := NewClock(true)
	const timeout = 100 * time.Millisecond
	st := &slowReads{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, false, clock, st, func(c *Config) { c.StoreTimeout = timeout })
	tok := e.untimed(t).mint("5560000001", "invoice")
	st.pause.Store(int64(2 * timeout))
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+tok+"/order", orderBody, e.auth, map[string]string{"Idempotency-Key": "slow-store-1"})
	st.pause.Store(0)
	if code != http.StatusServiceUnavailable || b["code"] != "store_unavailable" {
		t.Fatalf("a body sent at once, the store slow before it was read: %d %v, want 503 store_unavailable", code, b)
	}
}
