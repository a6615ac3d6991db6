package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/storage/storagetest"
)

func freshSchema(t testing.TB) string { return pgtest.FreshSchema(t) }

func open(t testing.TB, dbURL string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dbURL, postgres.Options{Clock: storagetest.Clock, MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storagetest.Run(t, func(t *testing.T) storage.Store { return open(t, freshSchema(t)) })
}

// TestConformanceThroughAPooler runs the conformance suite through the
// transaction pooler of KASSA_TEST_POOLER_URL, each store on a database of
// its own (PgBouncer refuses search_path), in that URL's query mode
// (pgtest.PoolerDatabase: cache_describe unless it names another), so
// that a pass of the suite in each mode docs/postgres.md says serves
// behind a pooler takes one variable.
func TestConformanceThroughAPooler(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return open(t, pgtest.PoolerDatabase(t)) })
}

// TestURLErrorsShowNoPassword: an error about a database URL that cannot be
// parsed names no part of its password, which would reach the logs. pgx
// quotes the URL with its password masked, but only as best it can: after
// an unescaped '@' in the password, the rest of it was shown.
func TestURLErrorsShowNoPassword(t *testing.T) {
	for _, u := range []string{
		"postgres://kassa:S3cret@PWtail@127.0.0.1:5432/db?x=%zz",
		"postgres://kassa:S3cret@PWtail@127.0.0.1:5432/db?sslmode=bogus",
		"postgresql://kassa:S3cretPWtail@[::1:5432/db",
		"host=127.0.0.1 password=S3cretPWtail sslmode=bogus",
		"host=127.0.0.1 password='S3cret PWtail' bogus",
		"postgres://kassa:S3cretPWtail@127.0.0.1:5432/db?pool_max_conns=abc",
		// pgx quotes a piece of what it could not read, here the rest of
		// a password with a space or an '&' in it.
		"host=127.0.0.1 user=kassa password=S3cret PWtail dbname=db",
		"postgres://kassa@127.0.0.1:5432/db?password=S3cret&PWtail",
		// These parse: the user info ends at the first '@', so the rest
		// of the password became the host, which a connection error names
		// (and which was looked up in DNS).
		"postgres://kassa:S3cret@PWtail@127.0.0.1:5432/db?connect_timeout=1",
		"postgres://kassa:S3cret@PWtail@127.0.0.1:5432,127.0.0.1:5433/db?connect_timeout=1",
		// A '/' in the password, after digits pgx takes for a port: the
		// user info is not seen at all, and the rest of the password became
		// the database name, which a connection error names too.
		"postgres://kassa:5432/S3cretPWtail@127.0.0.1:5433/db?connect_timeout=1",
	} {
		_, err := postgres.Open(context.Background(), u, postgres.Options{})
		if err == nil {
			t.Fatalf("%s: opened", u)
		}
		if msg := err.Error(); strings.Contains(msg, "PWtail") || strings.Contains(msg, "S3cret") {
			t.Errorf("error shows the password: %s", msg)
		} else if !strings.HasPrefix(msg, "postgres: ") || len(msg) < len("postgres: cannot parse the database URL: x") {
			t.Errorf("error says too little: %s", msg)
		}
	}
}
