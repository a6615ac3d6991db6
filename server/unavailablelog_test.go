package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// downStore fails every transaction with the error it holds, as a store
// whose database is down (or read-only, or out of disk) does.
type downStore struct {
	storage.Store
	err atomic.Pointer[error]
}

func (d *downStore) fail(err error) {
	if err == nil {
		d.err.Store(nil)
		return
	}
	d.err.Store(&err)
}

func (d *downStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if p := d.err.Load(); p != nil {
		return *p
	}
	return d.Store.Update(ctx, fn)
}

func (d *downStore) View(ctx context.Context, fn func(storage.Tx) error) error {
	if p := d.err.Load(); p != nil {
		return *p
	}
	return d.Store.View(ctx, fn)
}

// serveDirect serves one request on h in this goroutine, so that every line
// the request logs (its access line last) is written when it returns.
func serveDirect(h http.Handler, method, path, auth, id string) int {
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("Authorization", auth)
	r.Header.Set("X-Request-Id", id)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// linesOf returns the lines of logs with message msg.
func linesOf(t *testing.T, logs *logBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// TestUnavailableIsLoggedOncePerCauseAndWindow: a store outage answers
// every request 503 store_unavailable, and clients retry in a loop; each
// answer logged a warn line with its cause besides its access line, which
// filled a disk with 103 732 lines in 25 s. Now the first answer of a cause
// is logged with the cause and its request id, the others of the next
// minute (on the server's clock, here a fake one) are counted, and the next
// line says how many; a request on a route that failed, answered again,
// says once that the store is available, with the count since the last
// line. Every request still has its access line, with its status, code and
// request id.
func TestUnavailableIsLoggedOncePerCauseAndWindow(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	st := &downStore{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, false, clock, st, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e.srv.failures.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := e.srv.Handler()

	down := &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database cannot be reached; nothing was done, retry shortly", Err: fmt.Errorf("dial tcp: connection refused")}
	readOnly := &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database is read-only (a standby?); nothing was done, retry shortly", Err: fmt.Errorf("SQLSTATE 25006")}
	st.fail(down)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if code := serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("down-%d", i)); code != http.StatusServiceUnavailable {
				t.Errorf("request %d with the store down: %d, want 503", i, code)
			}
		})
	}
	wg.Wait()
	warned := linesOf(t, logs, "unavailable")
	if len(warned) != 1 {
		t.Fatalf("%d requests answered 503 for one cause logged %d unavailable lines, want 1", n, len(warned))
	}
	if w := warned[0]; w["level"] != "WARN" || w["err"] != down.Error() || w["requestId"] == "" || w["notLogged"] != nil || w["failingFor"] != nil {
		t.Errorf("the first unavailable line: %v, want WARN with the cause and a request id, and neither a count nor a duration", w)
	}
	access := map[string]bool{}
	for _, l := range linesOf(t, logs, "request") {
		if l["status"] == 503.0 && l["code"] == "store_unavailable" {
			access[l["requestId"].(string)] = true
		}
	}
	for i := range n {
		if !access[fmt.Sprintf("down-%d", i)] {
			t.Fatalf("no access line with status 503 and code store_unavailable for request down-%d", i)
		}
	}

	// The metrics count every one of them.
	e.srv.metrics.mu.Lock()
	counted := e.srv.metrics.requests[reqKey{"GET", "/v1/orders", http.StatusServiceUnavailable}]
	e.srv.metrics.mu.Unlock()
	if counted != n {
		t.Errorf("kassa_http_requests_total of the 503s: %d, want %d", counted, n)
	}

	// Another cause is logged at once, and counted apart.
	st.fail(readOnly)
	for i := range 10 {
		serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("ro-%d", i))
	}
	if warned = linesOf(t, logs, "unavailable"); len(warned) != 2 || warned[1]["err"] != readOnly.Error() || warned[1]["requestId"] != "ro-0" {
		t.Fatalf("a second cause: %v, want one more line with it, of ro-0", warned)
	}

	// The window ended: the next answer of the first cause is logged,
	// with how many were not.
	st.fail(down)
	advance(unavailableEvery)
	serveDirect(h, "GET", "/v1/orders", e.auth, "down-late")
	if warned = linesOf(t, logs, "unavailable"); len(warned) != 3 || warned[2]["notLogged"] != float64(n-1) ||
		warned[2]["failingFor"] != "1m0s" || warned[2]["requestId"] != "down-late" {
		t.Fatalf("after the window: %v, want a third line with notLogged %d and failingFor 1m0s", warned, n-1)
	}
	for i := range 5 {
		serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("down-more-%d", i))
	}

	// The store is back: one line per cause says so, with its count; the
	// routes that answer no longer log anything but their access lines.
	st.fail(nil)
	advance(10 * time.Second)
	for i := range 20 {
		if code := serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("up-%d", i)); code != http.StatusOK {
			t.Fatalf("with the store back: %d", code)
		}
	}
	again := linesOf(t, logs, "available again")
	if len(again) != 2 {
		t.Fatalf("recovery lines: %v, want one per cause", again)
	}
	byCause := map[string]map[string]any{}
	for _, l := range again {
		byCause[l["cause"].(string)] = l
	}
	if l := byCause[down.Code+": "+down.Message]; l == nil || l["level"] != "INFO" || l["notLogged"] != 5.0 || l["failedFor"] != "1m10s" {
		t.Errorf("recovery of the first cause: %v, want INFO, notLogged 5, failedFor 1m10s", again)
	}
	if l := byCause[readOnly.Code+": "+readOnly.Message]; l == nil || l["notLogged"] != 9.0 {
		t.Errorf("recovery of the second cause: %v, want notLogged 9", again)
	}
	if warned = linesOf(t, logs, "unavailable"); len(warned) != 3 {
		t.Errorf("unavailable lines after the recovery: %d, want 3", len(warned))
	}

	// It comes and goes: a failure is logged when none was in the last
	// window, and a recovery only after a logged failure, so flapping adds
	// at most two lines a window (here none: the last line was 10 s ago).
	for i := range 50 {
		st.fail(down)
		serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("flap-down-%d", i))
		st.fail(nil)
		serveDirect(h, "GET", "/v1/orders", e.auth, fmt.Sprintf("flap-up-%d", i))
	}
	if w, a := len(linesOf(t, logs, "unavailable")), len(linesOf(t, logs, "available again")); w != 3 || a != 2 {
		t.Errorf("a store flapping 50 times within the window of its last line: %d unavailable lines and %d recoveries, want 3 and 2", w, a)
	}
	st.fail(down)
	advance(unavailableEvery)
	serveDirect(h, "GET", "/v1/orders", e.auth, "flap-late")
	if warned = linesOf(t, logs, "unavailable"); len(warned) != 4 || warned[3]["notLogged"] != 50.0 {
		t.Errorf("after the flapping's window: %v, want a line with notLogged 50", warned)
	}
}

// TestNotReadyIsLoggedOncePerWindow: /readyz takes no credentials and is on
// the API's port, and each failing one logged an error line: probes of
// every balancer, or anyone calling it in a loop, wrote one a call for as
// long as the store was down. Now as a 503 answer's cause: once a window,
// with the count, and once when it answers ready again.
func TestNotReadyIsLoggedOncePerWindow(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	var down atomic.Bool
	down.Store(true)
	e := newEnvOn(t, false, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Ready = func(context.Context) error {
			if down.Load() {
				return fmt.Errorf("database down")
			}
			return nil
		}
	})
	h, ops := e.srv.Handler(), e.srv.OpsHandler()
	for i := range 100 {
		hh := h
		if i%2 == 1 {
			hh = ops
		}
		if code := serveDirect(hh, "GET", "/readyz", "", fmt.Sprintf("probe-%d", i)); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz with the store down: %d", code)
		}
	}
	if l := linesOf(t, logs, "not ready"); len(l) != 1 || l[0]["level"] != "ERROR" || l[0]["err"] != "database down" || l[0]["requestId"] != "probe-0" {
		t.Fatalf("not-ready lines of 100 probes: %v, want one, of probe-0, with the reason", l)
	}
	down.Store(false)
	for i := range 3 {
		serveDirect(h, "GET", "/readyz", "", fmt.Sprintf("up-%d", i))
	}
	if l := linesOf(t, logs, "ready again"); len(l) != 1 || l[0]["notLogged"] != 99.0 {
		t.Fatalf("ready-again lines: %v, want one with notLogged 99", l)
	}
}

// TestUnavailableEndsOnlyOnItsRoute: a cause ends when a route that failed
// with it answers 2xx, not when another route does: /healthz, which reads
// no store, answers 200 through a store outage, and probes call it every
// few seconds. Once every cause has ended a success no longer locks
// (active is back to 0).
func TestUnavailableEndsOnlyOnItsRoute(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	st := &downStore{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, false, clock, st, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	h := e.srv.Handler()

	st.fail(&fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database cannot be reached; nothing was done, retry shortly"})
	if code := serveDirect(h, "GET", "/v1/orders", e.auth, "down-0"); code != http.StatusServiceUnavailable {
		t.Fatalf("with the store down: %d, want 503", code)
	}
	for i := range 3 {
		if code := serveDirect(h, "GET", "/healthz", "", fmt.Sprintf("health-%d", i)); code != http.StatusOK {
			t.Fatalf("/healthz with the store down: %d, want 200", code)
		}
	}
	if l := linesOf(t, logs, "available again"); len(l) != 0 {
		t.Fatalf("/healthz answering 200 through the outage: %v, want no recovery line", l)
	}
	if n := e.srv.failures.active.Load(); n != 1 {
		t.Fatalf("causes failing after /healthz answered: %d, want 1", n)
	}
	serveDirect(h, "GET", "/v1/orders", e.auth, "down-1")

	st.fail(nil)
	if code := serveDirect(h, "GET", "/v1/orders", e.auth, "up-0"); code != http.StatusOK {
		t.Fatalf("with the store back: %d", code)
	}
	if l := linesOf(t, logs, "available again"); len(l) != 1 || l[0]["requestId"] != "up-0" || l[0]["notLogged"] != 1.0 {
		t.Fatalf("recovery lines: %v, want one, of up-0, with notLogged 1", l)
	}
	if n := e.srv.failures.active.Load(); n != 0 {
		t.Errorf("causes failing once the route answered again: %d, want 0", n)
	}
}

// TestFailureLogBoundsItsCauses: causes are told apart up to maxCauses;
// the failures of any more share one entry, logged once a window, so that
// a store whose messages varied could neither grow the map without bound
// nor log a line a request.
func TestFailureLogBoundsItsCauses(t *testing.T) {
	logs := &logBuffer{}
	f := newFailureLog(slog.New(slog.NewJSONHandler(logs, nil)))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range maxCauses + 10 {
		f.failed(ctx, fmt.Sprintf("cause %d", i), "GET /v1/orders", slog.LevelWarn, "unavailable", "available again")
	}
	if n := len(linesOf(t, logs, "unavailable")); n != maxCauses+1 {
		t.Errorf("%d causes logged %d lines, want %d: one each up to maxCauses and one for the rest", maxCauses+10, n, maxCauses+1)
	}
	if len(f.causes) != maxCauses+1 || f.causes["other causes"] == nil || f.causes["other causes"].unlogged != 9 {
		t.Errorf("causes held: %d, want %d, the last 10 as other causes with 9 not logged", len(f.causes), maxCauses+1)
	}
	f.succeeded(ctx, "GET /v1/orders")
	if n := len(linesOf(t, logs, "available again")); n != maxCauses+1 || f.active.Load() != 0 {
		t.Errorf("recovery: %d lines, %d still failing; want %d and 0", n, f.active.Load(), maxCauses+1)
	}
}
