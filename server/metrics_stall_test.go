package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage/memory"
)

// stalledWriter is a client that sent GET /metrics and reads nothing: once
// the kernel's buffers are full, each write of the answer waits (up to the
// listener's write timeout, 60 s in kassa serve).
type stalledWriter struct {
	header  http.Header
	writing chan struct{} // closed at the first write
	once    sync.Once
	release chan struct{}
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	return len(p), nil
}

// TestSlowScrapeStallsNothing: the registry wrote /metrics to the client
// under its lock, which every request (counted as it ends) and every store
// commit (timed) takes: one client reading /metrics slowly, or not at all,
// held every other request of the server, and every write, for as long as
// its write waited. On the API's port without --ops-addr anyone can be that
// client. The page is now rendered under the lock and sent after it.
func TestSlowScrapeStallsNothing(t *testing.T) {
	st := memory.New(time.Now)
	metrics := NewMetrics()
	srv := New(Config{Ledger: kassa.New(InstrumentStore(st, metrics), kassa.Options{}), Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef")})
	h := srv.Handler()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))

	slow := &stalledWriter{header: http.Header{}, writing: make(chan struct{}), release: make(chan struct{})}
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		h.ServeHTTP(slow, httptest.NewRequest("GET", "/metrics", nil))
	}()
	defer func() { close(slow.release); <-scraped }()
	<-slow.writing

	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		metrics.ObserveCommit(time.Millisecond)
		done <- rec.Code
	}()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("/healthz %d during a slow scrape", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request and a commit waited for a scrape whose client does not read")
	}
	// The page the slow client is sent is whole, and the next one counts
	// the request made meanwhile.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `kassa_http_requests_total{method="GET",route="/healthz",status="200"} 2`) ||
		!strings.Contains(rec.Body.String(), "kassa_store_commit_duration_seconds_count 1\n") {
		t.Fatalf("metrics after the slow scrape:\n%s", rec.Body.String())
	}
}
