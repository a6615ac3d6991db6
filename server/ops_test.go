package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// logBuffer collects a server's JSON log lines; the handlers log from the
// requests' goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the records logged so far, decoded.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestPanicIsLoggedOnceWithItsRequestID: a handler that panics is answered
// 500 as a problem document quoting the request id, and the log holds one
// error line for it, carrying that id and the stack, so that an operator
// given the id finds the cause.
func TestPanicIsLoggedOnceWithItsRequestID(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Ready = func(context.Context) error { panic("boom in a handler") }
	})
	code, h, b := e.req("GET", "/readyz", "", "", map[string]string{"X-Request-Id": "trace-panic-1"})
	if code != 500 || b["code"] != "internal" || b["requestId"] != "trace-panic-1" || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("panic answered %d %v %v", code, h, b)
	}
	var errorLines []map[string]any
	for _, l := range logs.lines(t) {
		if l["level"] == "ERROR" {
			errorLines = append(errorLines, l)
		}
	}
	if len(errorLines) != 1 {
		t.Fatalf("%d error lines for one panic, want 1: %v", len(errorLines), errorLines)
	}
	l := errorLines[0]
	if l["requestId"] != "trace-panic-1" || !strings.Contains(l["panic"].(string), "boom in a handler") || !strings.Contains(l["stack"].(string), "goroutine ") {
		t.Fatalf("panic logged as %v", l)
	}
}

// TestErrorLinesCarryTheRequestID: whatever a handler logs about a request
// (here /readyz with the store down) carries its request id.
func TestErrorLinesCarryTheRequestID(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Ready = func(context.Context) error { return errors.New("database down") }
	})
	if code, _, _ := e.req("GET", "/readyz", "", "", map[string]string{"X-Request-Id": "trace-ready-1"}); code != 503 {
		t.Fatalf("/readyz with the store down: %d", code)
	}
	found := false
	for _, l := range logs.lines(t) {
		if l["msg"] == "not ready" {
			found = true
			if l["requestId"] != "trace-ready-1" {
				t.Errorf("not-ready line without the request id: %v", l)
			}
		}
	}
	if !found {
		t.Fatal("no not-ready line")
	}
}

// exportFails fails the reads of a settlement's transactions while on, as
// a store that became unavailable between the settlement's lookup and its
// export would.
type exportFails struct {
	storage.Store
	on atomic.Bool
}

func (s *exportFails) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.View(ctx, func(tx storage.Tx) error { return fn(failingTx{tx, &s.on}) })
}

type failingTx struct {
	storage.Tx
	on *atomic.Bool
}

func (t failingTx) SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error) {
	if t.on.Load() {
		return nil, "", fault.New(fault.Unavailable, "store_unavailable", "the store is unavailable")
	}
	return t.Tx.SettlementTransactions(merchantID, settlementID, fromID, size)
}

// TestFailedSettlementExportIsNoEmptyFile: an export the store fails is
// answered with the failure, not 200 with an empty CSV an accounting
// import would take for a settlement without transactions.
func TestFailedSettlementExportIsNoEmptyFile(t *testing.T) {
	clock := NewClock(true)
	st := &exportFails{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, true, clock, st, nil)
	id := e.order("5560000001", "invoice")["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil); code != 200 {
		t.Fatalf("capture %d %v", code, b)
	}
	_, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
	sid := run["settlements"].([]any)[0].(map[string]any)["id"].(string)

	st.on.Store(true)
	resp, body := e.export(t, sid)
	if resp.StatusCode != 503 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") ||
		resp.Header.Get("Content-Disposition") != "" || !strings.Contains(string(body), `"store_unavailable"`) {
		t.Fatalf("export with the store failing: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `route="/v1/settlements/:settlementId/export.csv",status="503"} 1`) {
		t.Fatalf("metrics after the failed export:\n%s", m)
	}
}

// TestAccessLogNamesTheRefusal: the access line of a refused request names
// the problem's code (or the OAuth error), so that an operator can tell
// refusals of one status apart; a success names none.
func TestAccessLogNamesTheRefusal(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	e.req("GET", "/v1/orders/nope", "", e.auth, map[string]string{"X-Request-Id": "r-404"})
	e.req("GET", "/v1/orders", "", e.auth, map[string]string{"X-Request-Id": "r-200"})
	r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", basic("nobody", "wrong-secret-123"))
	r.Header.Set("X-Request-Id", "r-oauth")
	e.send(r)
	want := map[string]string{"r-404": "order_not_found", "r-200": "", "r-oauth": "invalid_client"}
	for _, l := range logs.lines(t) {
		id, _ := l["requestId"].(string)
		if w, ok := want[id]; ok && l["msg"] == "request" {
			code, has := l["code"]
			if w == "" && has {
				t.Errorf("access line of the success %s carries a code: %q", id, code)
			} else if w != "" && code != w {
				t.Errorf("access line of %s: code %v, want %q", id, code, w)
			}
			delete(want, id)
		}
	}
	if len(want) != 0 {
		t.Fatalf("no access lines for %v", want)
	}
}

// outage fails every transaction while on, as a database that went away.
type outage struct {
	storage.Store
	on atomic.Bool
}

func (s *outage) View(ctx context.Context, fn func(storage.Tx) error) error {
	if s.on.Load() {
		return fault.New(fault.Unavailable, "store_unavailable", "the database cannot be reached")
	}
	return s.Store.View(ctx, fn)
}

func (s *outage) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if s.on.Load() {
		return fault.New(fault.Unavailable, "store_unavailable", "the database cannot be reached")
	}
	return s.Store.Update(ctx, fn)
}

// TestCheckoutPageDuringAStoreOutage: the buyer's page, while the store is
// down, is answered 503 with Retry-After and logged as the outage it is, as
// the API's routes are, not 500 and an error line an alert on server
// errors would page someone for as a bug.
func TestCheckoutPageDuringAStoreOutage(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	st := &outage{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, true, clock, st, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	code, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "store-1", "PO-1", "ext-1"), e.auth)
	if code != 201 {
		t.Fatalf("session %d %v", code, s)
	}
	st.on.Store(true)
	resp, err := http.Get(s["checkoutUrl"].(string))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("checkout page during an outage: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	for _, l := range logs.lines(t) {
		if l["level"] == "ERROR" {
			t.Errorf("an outage logged as an error: %v", l)
		}
	}
}

// TestDrainTurnsReadyzOnly: once Drain is called (kassa serve
// --shutdown-delay, on SIGTERM) /readyz answers 503 draining, without an
// error line, while the API is served as before.
func TestDrainTurnsReadyzOnly(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	if code, _, b := e.req("GET", "/readyz", "", "", nil); code != 200 || b["status"] != "ready" {
		t.Fatalf("/readyz before the drain: %d %v", code, b)
	}
	e.srv.Drain()
	if code, _, b := e.req("GET", "/readyz", "", "", nil); code != 503 || b["status"] != "draining" {
		t.Fatalf("/readyz while draining: %d %v", code, b)
	}
	if code, _, b := e.req("GET", "/healthz", "", "", nil); code != 200 || b["status"] != "ok" {
		t.Fatalf("/healthz while draining: %d %v", code, b)
	}
	if o := e.order("5560000001", "invoice"); o["orderId"] == nil && o["id"] == nil {
		t.Fatalf("an order while draining: %v", o)
	}
	for _, l := range logs.lines(t) {
		if l["level"] == "ERROR" {
			t.Errorf("an error line while draining: %v", l)
		}
	}
}

// brokenWriter is a client connection that fails every write, as one whose
// client hung up mid-answer does.
type brokenWriter struct{ h http.Header }

func (b *brokenWriter) Header() http.Header { return b.h }
func (b *brokenWriter) WriteHeader(int)     {}
func (b *brokenWriter) Write([]byte) (int, error) {
	return 0, errors.New("write tcp 127.0.0.1:8080->127.0.0.1:50000: write: broken pipe")
}

// TestSettlementExportCutByItsClientIsNoServerError: an export whose client
// stops reading is the client's doing, logged at info for the operator who
// is asked about a short file, not as an error to be paged about.
func TestSettlementExportCutByItsClientIsNoServerError(t *testing.T) {
	logs := &logBuffer{}
	clock := NewClock(true)
	e := newEnvOn(t, true, clock, openStore(t, clock.Now), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	id := e.order("5560000001", "invoice")["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil); code != 200 {
		t.Fatalf("capture %d %v", code, b)
	}
	_, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
	sid := run["settlements"].([]any)[0].(map[string]any)["id"].(string)

	r := httptest.NewRequest("GET", "/v1/settlements/"+sid+"/export.csv", nil)
	r.Header.Set("Authorization", e.auth)
	e.srv.Handler().ServeHTTP(&brokenWriter{h: http.Header{}}, r)
	found := false
	for _, l := range logs.lines(t) {
		if l["msg"] == "settlement export cut short" {
			found = true
			if l["level"] != "INFO" || !strings.Contains(fmt.Sprint(l["err"]), "broken pipe") {
				t.Errorf("the cut export logged as %v", l)
			}
		}
		if l["level"] == "ERROR" {
			t.Errorf("an error line for the client's hang-up: %v", l)
		}
	}
	if !found {
		t.Fatalf("no line for the cut export: %v", logs.lines(t))
	}
}

// TestCommitHistogramCountsCommitsOnly: the store's commit latency counts
// the Updates that committed; one its function refused (a capture of the
// wrong amount, rolled back at once) would pull the histogram toward zero.
func TestCommitHistogramCountsCommitsOnly(t *testing.T) {
	m := NewMetrics()
	st := InstrumentStore(memory.New(time.Now), m)
	refused := fault.Invalidf("totalCaptureAmount", "must equal the sum of the lines")
	if err := st.Update(context.Background(), func(storage.Tx) error { return refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if err := st.Update(context.Background(), func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1"})
	}); err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	m.WriteTo(&page)
	if !strings.Contains(page.String(), "kassa_store_commit_duration_seconds_count 1\n") {
		t.Fatalf("after one refused and one committed Update:\n%s", page.String())
	}
}

// TestCommitHistogramSkipsUpdatesThatWroteNothing: a notification run that
// finds nothing due (two a second on an idle server) is an Update whose
// function only read; the store commits nothing for it (bbolt rolls it
// back), and counted it would pull the commit latency toward zero and make
// most of the series noise on a quiet server.
func TestCommitHistogramSkipsUpdatesThatWroteNothing(t *testing.T) {
	m := NewMetrics()
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, InstrumentStore(openStore(t, clock.Now), m), func(c *Config) { c.Metrics = m })
	commits := func() string {
		var page bytes.Buffer
		m.WriteTo(&page)
		for line := range strings.SplitSeq(page.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "kassa_store_commit_duration_seconds_count "); ok {
				return v
			}
		}
		t.Fatalf("no commit count:\n%s", page.String())
		return ""
	}
	start := commits()
	for range 5 {
		if _, err := e.ledger.DeliverNotifications(context.Background(), kassa.DeliveryOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := commits(); got != start {
		t.Fatalf("five notification runs with nothing due: commit count %s → %s, want no change", start, got)
	}
	// A write is still counted, once.
	e.mint("5560000001", "invoice")
	if got, want := commits(), fmt.Sprint(mustAtoi(t, start)+1); got != want {
		t.Fatalf("after a minted token: commit count %s, want %s", got, want)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWriteTxSeesEveryWrite: every storage.Tx method that is not a reader
// named here is counted by writeTx, so a write method added to storage.Tx
// cannot go uncounted (its Updates would drop out of the commit histogram)
// without this test saying so.
func TestWriteTxSeesEveryWrite(t *testing.T) {
	readers := map[string]bool{"Now": true, "GetMerchant": true, "GetMerchantByClientID": true, "ListMerchants": true,
		"HasMerchants": true, "GetOrder": true, "OrderVersion": true, "ListOrders": true, "OrdersExpiringBefore": true,
		"GetAuthorization": true, "GetCustomerToken": true, "GetSession": true, "GetSessionByExternalID": true,
		"GetSessionByOrderID": true, "ListSessions": true, "PendingSettlementItems": true, "QueuedSettlementItems": true,
		"GetSettlement": true, "ListSettlements": true, "SettlementTransactions": true, "DueTasks": true,
		"GetIdempotency": true, "PendingOutbox": true, "GetOutbox": true, "ListOutbox": true}
	txType := reflect.TypeFor[storage.Tx]()
	wt := reflect.TypeFor[*writeTx]()
	for i := range txType.NumMethod() {
		name := txType.Method(i).Name
		m, ok := wt.MethodByName(name)
		if !ok {
			t.Fatalf("*writeTx lacks %s", name)
		}
		file, _ := runtime.FuncForPC(m.Func.Pointer()).FileLine(m.Func.Pointer())
		own := strings.HasSuffix(file, "ops.go")
		if readers[name] == own {
			t.Errorf("storage.Tx.%s: a reader here %v, counted by writeTx %v (%s): a write must be counted, a reader listed", name, readers[name], own, file)
		}
	}
}

// sharedTx is a transaction of a store whose replicas share a clock.
type sharedTx struct {
	storage.Tx
	now time.Time
}

func (s sharedTx) SharedNow() (time.Time, error) { return s.now, nil }

type fnStore struct {
	storage.Store
	tx storage.Tx
}

func (f fnStore) Update(_ context.Context, fn func(storage.Tx) error) error { return fn(f.tx) }

// TestInstrumentedStoreKeepsTheSharedClock: the notification deliverer asks
// a PostgreSQL transaction for the clock replicas share; the instrumented
// store's transaction must still answer it.
func TestInstrumentedStoreKeepsTheSharedClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	st := InstrumentStore(fnStore{tx: sharedTx{now: at}}, NewMetrics())
	var got time.Time
	st.Update(context.Background(), func(tx storage.Tx) error {
		if sc, ok := tx.(storage.SharedClock); ok {
			got, _ = sc.SharedNow()
		}
		return nil
	})
	if !got.Equal(at) {
		t.Fatalf("shared clock through the instrumented store: %v, want %v", got, at)
	}
	var plain bool
	InstrumentStore(fnStore{tx: struct{ storage.Tx }{}}, NewMetrics()).Update(context.Background(), func(tx storage.Tx) error {
		_, plain = tx.(storage.SharedClock)
		return nil
	})
	if plain {
		t.Fatal("a transaction without a shared clock got one")
	}
}

// slowStore makes every Update take at least delay before it runs.
type slowStore struct {
	storage.Store
	delay time.Duration
}

func (s slowStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	time.Sleep(s.delay)
	return s.Store.Update(ctx, fn)
}

// TestLatencyHistogramsTimeTheWholeRequestAndCommit: with a store whose
// writes take 30 ms, a token minted through the API lands above the 25 ms
// bucket in both its route's request latency and the commit latency, and a
// read of no write stays in the request histogram alone. Only lower bounds
// are asserted: the store's sleep guarantees them, while an upper one would
// be a wall-clock threshold a loaded machine can pass.
func TestLatencyHistogramsTimeTheWholeRequestAndCommit(t *testing.T) {
	m := NewMetrics()
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, InstrumentStore(slowStore{openStore(t, clock.Now), 30 * time.Millisecond}, m), func(c *Config) { c.Metrics = m })
	before := scrape(t, http.DefaultClient, e.ts.URL+"/metrics") // the merchants' commits made
	e.mint("5560000001", "invoice")
	e.req("GET", "/healthz", "", "", nil)
	ex := scrape(t, http.DefaultClient, e.ts.URL+"/metrics")
	for k, want := range map[string]float64{
		`kassa_http_request_duration_seconds_bucket{le="0.025",route="/sandbox/v1/authorization-tokens"}`: 0,
		`kassa_http_request_duration_seconds_bucket{le="+Inf",route="/sandbox/v1/authorization-tokens"}`:  1,
		`kassa_store_commit_duration_seconds_bucket{le="0.025"}`:                                          0,
		`kassa_store_commit_duration_seconds_bucket{le="+Inf"}`:                                           1,
		`kassa_http_request_duration_seconds_bucket{le="+Inf",route="/healthz"}`:                          1,
	} {
		if got, ok := ex.samples[k]; !ok || got-before.samples[k] != want {
			t.Errorf("%s grew by %v (%v), want %v", k, got-before.samples[k], ok, want)
		}
	}
	if s := ex.samples["kassa_store_commit_duration_seconds_sum{}"] - before.samples["kassa_store_commit_duration_seconds_sum{}"]; s < 0.03 {
		t.Errorf("commit latency sum %v, want at least the store's 30 ms", s)
	}
}
