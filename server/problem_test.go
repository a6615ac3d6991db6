package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kassahq/kassa/fault"
)

// TestUnavailableAnswers503: a store that cannot reach its database is a
// 503 that says when to retry, not a 500.
func TestUnavailableAnswers503(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	w := httptest.NewRecorder()
	s.writeError(w, httptest.NewRequest(http.MethodGet, "/v1/orders/x", nil), fmt.Errorf("read order: %w",
		&fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database cannot be reached", Err: errors.New("refused")}))
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusServiceUnavailable ||
		w.Header().Get("Retry-After") != "1" || p.Code != "store_unavailable" || p.Status != 503 || p.Title != "Service unavailable" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
}

// TestOutcomeUnknownIsLoggedWhenTheClientHungUp: a COMMIT that the database
// never answered (its own timeout, context.DeadlineExceeded in the chain)
// is the server's error even when the client has gone meanwhile: it is
// logged as an internal error, for an operator to settle the write, and
// recorded as a 500, not swallowed as a hang-up (499, a debug line).
func TestOutcomeUnknownIsLoggedWhenTheClientHungUp(t *testing.T) {
	var logged bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/orders/x/capture", nil).WithContext(ctx)
	r.Header.Set("Idempotency-Key", "k1")
	s.writeError(w, r, fault.OutcomeUnknown(fmt.Errorf("commit: %w", context.DeadlineExceeded), "postgres: COMMIT was sent but not answered"))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"code":"outcome_unknown"`) {
		t.Errorf("outcome unknown with the client gone: %d %s, want 500 outcome_unknown", w.Code, w.Body)
	}
	if !strings.Contains(logged.String(), `level=ERROR msg="internal error"`) || !strings.Contains(logged.String(), "COMMIT was sent but not answered") {
		t.Errorf("outcome unknown with the client gone was not logged as an error:\n%s", logged.String())
	}
	// A wait the hang-up ended did nothing: still 499.
	w = httptest.NewRecorder()
	s.writeError(w, r, &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "wait ended", Err: context.Canceled})
	if w.Code != statusClientClosed {
		t.Errorf("a wait the hang-up ended: %d, want 499", w.Code)
	}
}
