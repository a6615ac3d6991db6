package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// leakyStore fails every transaction, once armed, with an internal error
// whose message holds what a database's can: a host, a user, a statement.
type leakyStore struct {
	storage.Store
	armed atomic.Bool
}

var errLeaky = fault.Internalf(errors.New("dial tcp 10.1.2.3:5432: password authentication failed"),
	"postgres: SELECT secret FROM merchants as kassa_admin@10.1.2.3")

func (s *leakyStore) View(ctx context.Context, fn func(storage.Tx) error) error {
	if s.armed.Load() {
		return errLeaky
	}
	return s.Store.View(ctx, fn)
}

func (s *leakyStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if s.armed.Load() {
		return errLeaky
	}
	return s.Store.Update(ctx, fn)
}

// TestInternalErrorShowsNoInternals: a 500's problem document says only
// that an internal error occurred and quotes the request id; the message of
// the failure, which may name hosts, users and statements, stays in the
// log. A mutant that let the message through as the detail survived every
// other test.
func TestInternalErrorShowsNoInternals(t *testing.T) {
	clock := NewClock(true)
	st := &leakyStore{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, true, clock, st, nil)
	st.armed.Store(true)
	code, h, b := e.req("GET", "/v1/orders", "", e.auth, map[string]string{"X-Request-Id": "trace-internal-1"})
	wantProblem(t, code, b, 500, "internal")
	detail, _ := b["detail"].(string)
	if b["requestId"] != "trace-internal-1" || !strings.Contains(detail, "requestId") || h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("500: %v %v", h, b)
	}
	for _, secret := range []string{"postgres", "10.1.2.3", "kassa_admin", "SELECT", "password"} {
		if strings.Contains(detail, secret) || strings.Contains(b["title"].(string), secret) {
			t.Errorf("the 500's problem document shows %q: %v", secret, b)
		}
	}
}
