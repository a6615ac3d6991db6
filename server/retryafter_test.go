package server

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestRetryAfterDefersTheNextAttempt: a receiver answering 503 with
// Retry-After gets the next attempt no sooner than it asked, while the
// schedule alone would retry within a minute.
func TestRetryAfterDefersTheNextAttempt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value func() string
	}{
		{"seconds", func() string { return "3600" }},
		{"date", func() string { return time.Now().Add(time.Hour).UTC().Format(http.TimeFormat) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t)
			var mu sync.Mutex
			posts, busy := 0, true
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				posts++
				if busy {
					w.Header().Set("Retry-After", tc.value())
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer rcv.Close()
			if code, _, _ := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.create"]}`, e.auth, nil); code != 200 {
				t.Fatalf("set: %d", code)
			}
			e.order("5560000001", "invoice")
			before := e.clock.Now()
			if code, _, s := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil); code != 200 || s["retrying"] == 0.0 {
				t.Fatalf("deliver: %d %v", code, s)
			}
			code, _, page := e.req("GET", "/v1/notifications", "", e.auth, nil)
			if code != 200 {
				t.Fatalf("list %d", code)
			}
			for _, n := range page["notifications"].([]any) {
				next, err := time.Parse(time.RFC3339Nano, n.(map[string]any)["nextAttemptAt"].(string))
				if err != nil || next.Before(before.Add(59*time.Minute)) {
					t.Fatalf("next attempt at %v (%v), %v after the failure; want an hour on", next, err, next.Sub(before))
				}
			}
			mu.Lock()
			busy, posts = false, 0
			mu.Unlock()
			e.clock.Advance(30 * time.Minute)
			e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
			mu.Lock()
			if posts != 0 {
				t.Errorf("posted %d times before the Retry-After", posts)
			}
			mu.Unlock()
			e.clock.Advance(31 * time.Minute)
			if code, _, s := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil); code != 200 || s["delivered"] == 0.0 {
				t.Fatalf("after the Retry-After: %d %v", code, s)
			}
		})
	}
}
