package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestReplicasRetryAnOutcomeUnknownWithItsKey: a replica whose COMMIT lost
// its answer and that cannot ask the database in time (a pooler or the
// database restarting under it) answers 500 outcome_unknown, which tells
// the client to send the request again with its key. The replicas command
// took that answer for a failure, not applied: a capture that had
// committed was left out of the tally and verify reported a mismatch kassa
// had not made (seen restarting PgBouncer under a run). It is now retried
// with its key after the run like an unanswered request, and tallied once
// from the replayed answer; other 5xx answers stay unexpected.
func TestReplicasRetryAnOutcomeUnknownWithItsKey(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		retried    bool
	}{
		{"outcome_unknown", `{"type":"https://kassa.dev/problems/outcome_unknown","status":500,"code":"outcome_unknown"}`, true},
		{"internal", `{"type":"https://kassa.dev/problems/internal","status":500,"code":"internal"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Idempotency-Key") != "k-pc" {
					t.Errorf("request without its key: %q", r.Header.Get("Idempotency-Key"))
				}
				if calls.Add(1) == 1 {
					// Applied; the store could not confirm it.
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(http.StatusInternalServerError)
					w.Write([]byte(tc.body))
					return
				}
				w.Header().Set("Idempotent-Replayed", "true")
				w.Write([]byte(`{"captureId":"c1"}`))
			}))
			defer srv.Close()
			r := &contended{cl: &cluster{bases: []string{srv.URL}, alive: []bool{true}, id: "id", sec: "secret"},
				tl: newTally(), answers: map[string][]byte{}}
			var applied int
			if _, ok := r.send(0, "POST", "/v1/orders/o1/partialcapture", map[string]any{}, "k-pc", func(response) { applied++ }); ok {
				t.Fatal("a 500 answered as applied")
			}
			retried := r.settlePending()
			want, wantRetries, wantFailed := 0, 0, int64(1)
			if tc.retried {
				want, wantRetries, wantFailed = 1, 1, 0
			}
			if applied != want || retried != wantRetries || r.failed.Load() != wantFailed || int(calls.Load()) != 1+wantRetries {
				t.Fatalf("applied %d times, %d retries, %d failed, %d requests; want %d, %d, %d, %d",
					applied, retried, r.failed.Load(), calls.Load(), want, wantRetries, wantFailed, 1+wantRetries)
			}
		})
	}
}
