package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
