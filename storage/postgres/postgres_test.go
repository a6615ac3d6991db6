package postgres_test

import (
	"context"
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
