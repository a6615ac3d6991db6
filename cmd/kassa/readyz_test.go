package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// The store serve asks for its health: bolt's stops taking writes after a
// commit of unknown outcome and says so here.
var _ interface{ Healthy() error } = (*bolt.Store)(nil)

// sickStore is a store whose Healthy a test sets.
type sickStore struct {
	storage.Store
	sick atomic.Bool
}

func (s *sickStore) Healthy() error {
	if s.sick.Load() {
		return fault.New(fault.Unavailable, "store_unavailable", "the store takes no writes until the server restarts")
	}
	return nil
}

// TestReadyzAsksTheStoreItsHealth: kassa serve's /readyz answers 503 once
// its store reports itself unhealthy (a bolt store after a commit of unknown
// outcome, which only a restart clears), so that a supervisor restarts it;
// it answers 200 before.
func TestReadyzAsksTheStoreItsHealth(t *testing.T) {
	var st *sickStore
	serveStore = func(ctx context.Context, kind, data, databaseURL string, clock func() time.Time, cacheBytes int64, lockWait time.Duration, log *slog.Logger, retryFor time.Duration) (storage.Store, error) {
		s, err := openStore(ctx, kind, data, databaseURL, clock, cacheBytes, lockWait, log, retryFor)
		if err != nil {
			return nil, err
		}
		st = &sickStore{Store: s}
		return st, nil
	}
	defer func() { serveStore = openStore }()
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0")
	defer stopInProcess(t, done)
	client := &http.Client{Timeout: 10 * time.Second}
	ready := func() (int, string) {
		t.Helper()
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := ready(); code != 200 {
		t.Fatalf("healthy store: /readyz %d %s", code, body)
	}
	st.sick.Store(true)
	if code, body := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("unhealthy store: /readyz %d %s, want 503", code, body)
	}
}
