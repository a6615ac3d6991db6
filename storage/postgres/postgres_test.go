package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/storagetest"
)

// databaseURL is the test database, or the test is skipped.
func databaseURL(t testing.TB) string {
	u := os.Getenv("KASSA_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("KASSA_TEST_DATABASE_URL not set: skipping PostgreSQL tests (.ci/run starts a database and sets it)")
	}
	return u
}

// freshSchema creates an empty schema, dropped when the test ends, and
// returns a URL whose connections use it.
func freshSchema(t testing.TB) string {
	base := databaseURL(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "kassa_t_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

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
	databaseURL(t)
	storagetest.Run(t, func(t *testing.T) storage.Store { return open(t, freshSchema(t)) })
}
