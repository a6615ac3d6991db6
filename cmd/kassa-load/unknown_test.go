package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestUnknownOutcomesAreRetriedWithTheirKeys: a load balancer that loses the
// answer of a capture kassa applied answers it 502 with a page of its own;
// so may kassa 500 a write whose COMMIT lost its answer. The tool must not
// take such a failure for "not applied": it retries the request with its
// Idempotency-Key after the run, which replays the applied capture, and
// tallies it, so verify finds what the server holds. Before, only a lost
// connection was kept for a retry, and the normal mode retried nothing:
// the capture was missing from the tally and verify reported a mismatch
// kassa had not made.
func TestUnknownOutcomesAreRetriedWithTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		retry  bool
	}{
		{"balancer 502", http.StatusBadGateway, "text/html", true},
		{"balancer 504", http.StatusGatewayTimeout, "text/html", true},
		{"kassa 500 internal", http.StatusInternalServerError, "application/problem+json", true},
		{"kassa 409", http.StatusConflict, "application/problem+json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var applied, calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Idempotency-Key") != "k-pc" {
					t.Errorf("request without its key: %q", r.Header.Get("Idempotency-Key"))
				}
				if calls.Add(1) == 1 {
					if tc.status != http.StatusConflict {
						applied.Add(1) // applied; its answer is lost on the way
					}
					w.Header().Set("Content-Type", tc.ctype)
					w.WriteHeader(tc.status)
					return
				}
				if applied.Load() > 0 {
					w.Header().Set("Idempotent-Replayed", "true")
				} else {
					applied.Add(1)
				}
				w.Write([]byte(`{}`))
			}))
			defer srv.Close()
			c := newClient(srv.URL, "id", "secret", 1)
			tl := newTally()
			var lost []pending
			w := &worker{c: c, st: newStats(), tl: tl, lostMu: &sync.Mutex{}, lost: &lost}
			ok := w.call(context.Background(), "partialCapture", "POST", "/v1/orders/o1/partialcapture", map[string]any{}, "k-pc", 200,
				func(response) { tl.apply("o1", func(e *expect) { e.captured += 500; e.captures++ }) })
			if ok {
				t.Fatal("a failed request counted as acknowledged")
			}
			if !tc.retry {
				if len(lost) != 0 {
					t.Fatalf("a refusal kassa answered was kept as an unknown outcome: %d", len(lost))
				}
				return
			}
			if len(lost) != 1 {
				t.Fatalf("%d requests kept for a retry, want 1", len(lost))
			}
			settled, replayed, open, unanswered := retryLost(context.Background(), c, lost, io.Discard)
			if len(settled) != 1 || replayed != 1 || open != 0 || unanswered != nil {
				t.Errorf("retryLost = %d settled, %d replayed, %d open, %v; want 1, 1, 0, nil", len(settled), replayed, open, unanswered)
			}
			if e := tl.orders["o1"]; e == nil || e.captured != 500 || e.captures != 1 {
				t.Errorf("tally after the retry: %+v, want the capture of 500 once", e)
			}
			if n := applied.Load(); n != 1 {
				t.Errorf("server applied the capture %d times", n)
			}
		})
	}
}
