package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kassahq/kassa/fault"
)

// unavailableEvery is how often at most a cause of 503 answers (a store
// outage, a full disk, the body budget spent) is logged while it goes on.
var unavailableEvery = time.Minute

// maxCauses bounds the causes a failureLog tells apart; the failures of
// any more share one entry. A cause is a fault's code and message, which
// the stores write from a few fixed strings, so a handful is the most seen.
const maxCauses = 32

// failureLog logs the failures of a cause that every request can meet (a
// store outage, which clients retried in a loop: a warn line a request
// besides its access line filled a disk with 103 732 lines in 25 s) at a
// bounded rate, as kassa serve's notification delivery does (cmd/kassa's
// errorLog): a failure is logged, with its request id, when none of its
// cause was in the last every, with notLogged, how many were not since the
// line before, and failingFor; the first request answered 2xx on a route
// that failed with it, after a logged failure, says it ended, with the
// count since the last line. So a cause shows at once, and a failing or
// flapping one adds at most two lines a window. Each request still has its
// access line with its status, code and request id.
//
// A success costs one atomic load while no cause is failing.
type failureLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	active atomic.Int32 // causes failing, so a success need not lock
	mu     sync.Mutex
	causes map[string]*failingCause
}

type failingCause struct {
	ended    string              // the message that says it ended
	failing  time.Time           // the first failure since the cause last ended; zero when none
	logged   time.Time           // when a failure was last logged
	reported bool                // a failure was logged since the cause last ended
	unlogged int                 // failures not logged since the last line
	routes   map[string]struct{} // the routes ("METHOD pattern") that failed with it, whose answer ends it
}

func newFailureLog(log *slog.Logger) *failureLog {
	return &failureLog{log: log, every: unavailableEvery, now: time.Now, causes: map[string]*failingCause{}}
}

// failed records a failure of cause on route, logging it as msg at level,
// with attrs, when none of cause was logged in the last every; ended is
// the message that will say it ended.
func (f *failureLog) failed(ctx context.Context, cause, route string, level slog.Level, msg, ended string, attrs ...slog.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.causes[cause]
	if c == nil {
		if len(f.causes) >= maxCauses {
			cause = "other causes"
			c = f.causes[cause]
		}
		if c == nil {
			c = &failingCause{ended: ended}
			f.causes[cause] = c
		}
	}
	now := f.now()
	if c.failing.IsZero() {
		c.failing = now
		c.routes = map[string]struct{}{}
		f.active.Add(1)
	}
	c.routes[route] = struct{}{}
	if !c.logged.IsZero() && now.Sub(c.logged) < f.every {
		c.unlogged++
		return
	}
	if c.unlogged > 0 {
		attrs = append(attrs, slog.Int("notLogged", c.unlogged))
	}
	if d := now.Sub(c.failing); d > 0 {
		attrs = append(attrs, slog.String("failingFor", d.Round(time.Second).String()))
	}
	f.log.LogAttrs(ctx, level, msg, attrs...)
	c.logged, c.reported, c.unlogged = now, true, 0
}

// succeeded ends the causes that failed on route, which has just answered
// 2xx, logging the end of each whose failure was logged.
func (f *failureLog) succeeded(ctx context.Context, route string) {
	if f.active.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for cause, c := range f.causes {
		if _, ok := c.routes[route]; !ok || c.failing.IsZero() {
			continue
		}
		if c.reported {
			f.log.LogAttrs(ctx, slog.LevelInfo, c.ended, slog.String("cause", cause),
				slog.String("failedFor", f.now().Sub(c.failing).Round(time.Second).String()), slog.Int("notLogged", c.unlogged))
			c.reported, c.unlogged = false, 0
		}
		c.failing, c.routes = time.Time{}, nil
		f.active.Add(-1)
	}
}

// unavailable records a 503 answer of r, which err caused, in s.failures;
// a Server not built by New (a test's) logs each one.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error, attrs ...slog.Attr) {
	attrs = append(attrs, slog.Any("err", err))
	if s.failures == nil {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "unavailable", attrs...)
		return
	}
	s.failures.failed(r.Context(), causeOf(err, err.Error()), routeOf(w, r), slog.LevelWarn, "unavailable", "available again", attrs...)
}

// notReady records a /readyz answered 503 because err, logged at error:
// the endpoint takes no credentials and is probed by every balancer, so
// its failures are bounded as a 503's.
func (s *Server) notReady(w http.ResponseWriter, r *http.Request, err error) {
	s.failures.failed(r.Context(), "not ready: "+causeOf(err, "the store did not answer"), routeOf(w, r),
		slog.LevelError, "not ready", "ready again", slog.Any("err", err))
}

// causeOf is what tells err's failures apart: the fault's own words, not
// its chain's, which can name a request's order or an address; fallback
// for an error that is not a fault.
func causeOf(err error, fallback string) string {
	if fe := (*fault.Error)(nil); errors.As(err, &fe) {
		return fe.Code + ": " + fe.Message
	}
	return fallback
}

// routeOf is r's route as failureLog names it, "METHOD pattern".
func routeOf(w http.ResponseWriter, r *http.Request) string {
	route := "unmatched"
	if sr, ok := w.(*statusRecorder); ok {
		route = sr.route
	}
	return r.Method + " " + route
}
