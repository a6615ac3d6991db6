package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// TestForgetSigningKeyRefusedBesideAnotherRolesSession: a role that is not
// a superuser (nor pg_read_all_stats) sees another role's sessions in
// pg_stat_activity with their application_name but without their state or
// backend_type. Such a session, a replica connecting as another user than
// the operator's rekey, counts as in use: it cannot be told from a replica
// serving. Before, the backend_type filter left it out, and the key was
// forgotten under a replica still signing with it.
func TestForgetSigningKeyRefusedBesideAnotherRolesSession(t *testing.T) {
	ctx := context.Background()
	u := pgtest.FreshDatabase(t, "")
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var db string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	owner, replica := db+"_owner", db+"_replica"
	for _, role := range []string{owner, replica} {
		if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
			t.Skipf("cannot create a role: %v", err)
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), pgtest.URL(t))
			if err != nil {
				return
			}
			defer c.Close(context.Background())
			c.Exec(context.Background(), `DROP DATABASE `+db+` WITH (FORCE)`)
			c.Exec(context.Background(), `DROP ROLE `+role)
		})
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+db+` OWNER TO `+owner); err != nil {
		t.Fatal(err)
	}
	as := func(role string) string {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		pu.User = url.User(role)
		return pu.String()
	}
	rekey, err := Open(ctx, as(owner), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rekey.Close()
	if _, err := rekey.SigningKey(ctx, make([]byte, 32), false); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, as(replica)+"?application_name=kassa")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	forgot, err := rekey.ForgetSigningKey(ctx)
	if forgot || !errors.Is(err, ErrInUse) {
		t.Fatalf("forget beside another role's kassa session: %v, %v; want ErrInUse", forgot, err)
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM signing_key`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("signing_key rows: %d, %v; want the key still recorded", n, err)
	}
}

// TestForgetSigningKeyBesideItsOwnPool: the store's own pooled connections,
// kassa sessions active a moment ago, are not taken for a replica's.
func TestForgetSigningKeyBesideItsOwnPool(t *testing.T) {
	ctx := context.Background()
	_, s := keyedDatabase(t)
	var held []*pgxpool.Conn
	for range 3 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	if forgot, err := s.ForgetSigningKey(ctx); !forgot || err != nil {
		t.Fatalf("forget beside the store's own %d pooled connections: %v, %v; want forgotten", len(held), forgot, err)
	}
}

// TestForgetSigningKeyWaitsForASessionEnding: a kassa session seen at the
// first look that ends a moment later (Open's migration lock connection,
// whose backend ends after it was closed) does not refuse the rekey: the
// look is made again for about a second.
func TestForgetSigningKeyWaitsForASessionEnding(t *testing.T) {
	ctx := context.Background()
	u, s := keyedDatabase(t)
	other, err := pgx.Connect(ctx, u+"?application_name=kassa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		other.Close(context.Background())
	}()
	if forgot, err := s.ForgetSigningKey(ctx); !forgot || err != nil {
		t.Fatalf("forget beside a session that ended 300 ms later: %v, %v; want forgotten", forgot, err)
	}
}

// keyedDatabase is a fresh database's URL and a store open on it that has
// recorded a signing key, for ForgetSigningKey to forget.
func keyedDatabase(t *testing.T) (string, *Store) {
	t.Helper()
	u := pgtest.FreshDatabase(t, "")
	s, err := Open(context.Background(), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.SigningKey(context.Background(), make([]byte, 32), false); err != nil {
		t.Fatal(err)
	}
	return u, s
}
