package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestForgetSigningKeyIgnoresLongIdleSessions: an idle kassa session whose
// last statement is older than sessionsActiveWithin is not taken for a
// replica's (a kassa serve reads the database every second): it is a
// pooler's server connection kept after the replicas it served stopped,
// and would otherwise hold rekey off until the pooler closed it.
func TestForgetSigningKeyIgnoresLongIdleSessions(t *testing.T) {
	ctx := context.Background()
	old := sessionsActiveWithin
	sessionsActiveWithin = 2 * time.Second // past the second of looks a refusal takes
	defer func() { sessionsActiveWithin = old }()
	u := pgtest.FreshDatabase(t, "")
	left, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close()
	if _, err := left.SigningKey(ctx, make([]byte, 32), false); err != nil {
		t.Fatal(err)
	}
	rekey, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rekey.Close()
	if _, err := rekey.ForgetSigningKey(ctx); err == nil {
		t.Fatal("forget beside a session active just now: done, want refused")
	}
	time.Sleep(2 * time.Second)
	if forgot, err := rekey.ForgetSigningKey(ctx); !forgot || err != nil {
		t.Fatalf("forget beside a session idle for longer: %v, %v", forgot, err)
	}
}

// TestForgetSigningKeyRefusedThroughAPooler: behind a connection pooler
// the store's own sessions cannot be told from the replicas', so
// ForgetSigningKey refuses and asks for a URL to the database itself.
func TestForgetSigningKeyRefusedThroughAPooler(t *testing.T) {
	ctx := context.Background()
	u := pgtest.PoolerDatabase(t)
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SigningKey(ctx, make([]byte, 32), false); err != nil {
		t.Fatal(err)
	}
	if forgot, err := s.ForgetSigningKey(ctx); forgot || err == nil || !strings.Contains(err.Error(), "connection pooler") {
		t.Fatalf("forget through a pooler: %v, %v; want refused", forgot, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM signing_key`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("signing_key rows: %d, %v; want the key still recorded", n, err)
	}
}
