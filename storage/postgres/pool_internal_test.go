package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestPoolSizeFromTheURL: pool_max_conns in the database URL sizes the pool
// (the one way kassa serve has to size it, for replicas that together must
// stay under the database's max_connections); Options.MaxConns, set by an
// embedding program, comes first, and 32 is the default.
func TestPoolSizeFromTheURL(t *testing.T) {
	base := pgtest.FreshSchema(t)
	for _, c := range []struct {
		url  string
		opts Options
		want int32
	}{
		{base, Options{}, 32},
		{base + "&pool_max_conns=3", Options{}, 3},
		{base + "&pool_max_conns=3", Options{MaxConns: 5}, 5},
	} {
		s, err := Open(context.Background(), c.url, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		got := s.pool.Config().MaxConns
		s.Close()
		if got != c.want {
			t.Errorf("%s, MaxConns %d: pool of %d, want %d", c.url, c.opts.MaxConns, got, c.want)
		}
	}
	// One connection would hang kassa serve at start (Exclusive holds its
	// lock on one while the work needs another): refused.
	if s, err := Open(context.Background(), base+"&pool_max_conns=1", Options{}); err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("pool_max_conns=1: %v", err)
	}
}

// TestPingTimeoutFromTheURL: the ping of an idle connection before the pool
// hands it out is bounded by defaultPingTimeout (pgxpool's own default is no
// bound, see TestPooledConnectionGoneSilent) unless the URL's
// pool_ping_timeout gives another.
func TestPingTimeoutFromTheURL(t *testing.T) {
	base := pgtest.FreshSchema(t)
	for _, c := range []struct {
		url  string
		want time.Duration
	}{
		{base, time.Second},
		{base + "&pool_ping_timeout=250ms", 250 * time.Millisecond},
	} {
		s, err := Open(context.Background(), c.url, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := s.pool.Config().PingTimeout
		s.Close()
		if got != c.want {
			t.Errorf("%s: ping timeout %v, want %v", c.url, got, c.want)
		}
	}
}
