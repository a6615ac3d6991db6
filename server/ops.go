package server

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/storage"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of everything the server serves.
func OpenAPI() []byte { return openAPI }

func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeRaw(w, http.StatusOK, openAPI)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			// The reason goes to the log only: it can name the database's
			// host and user, and this endpoint takes no credentials.
			s.log.ErrorContext(r.Context(), "not ready", slog.Any("err", err))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "the store did not answer; see the server log"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.WriteTo(w)
}

// InstrumentStore wraps a store so that the latency of every durable commit
// is recorded in m.
func InstrumentStore(st storage.Store, m *Metrics) storage.Store { return &timedStore{Store: st, m: m} }

type timedStore struct {
	storage.Store
	m *Metrics
}

func (t *timedStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	start := time.Now()
	err := t.Store.Update(ctx, fn)
	t.m.ObserveCommit(time.Since(start))
	return err
}
