package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// TestSigningKeySharedByReplicas: replicas on one database end up signing
// with one key, or a replica that would not is refused at start.
func TestSigningKeySharedByReplicas(t *testing.T) {
	ctx := context.Background()
	type start struct {
		local   []byte
		fromEnv bool
		want    []byte // nil: refused
		refusal string
	}
	for _, tc := range []struct {
		name   string
		starts []start
	}{
		{"own keys: the first one's is shared", []start{
			{key(1), false, key(1), ""}, {key(2), false, key(1), ""}, {key(3), false, key(1), ""}}},
		{"KASSA_KEY everywhere", []start{
			{key(7), true, key(7), ""}, {key(7), true, key(7), ""}}},
		{"another KASSA_KEY is refused", []start{
			{key(7), true, key(7), ""}, {key(8), true, nil, "same KASSA_KEY"}}},
		{"no KASSA_KEY where the others have one is refused", []start{
			{key(7), true, key(7), ""}, {key(2), false, nil, "set the same KASSA_KEY"}}},
		{"KASSA_KEY equal to the shared key is taken", []start{
			{key(1), false, key(1), ""}, {key(1), true, key(1), ""}, {key(2), false, key(1), ""}}},
		{"KASSA_KEY other than the shared key is refused", []start{
			{key(1), false, key(1), ""}, {key(9), true, nil, "unset KASSA_KEY"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := freshSchema(t)
			for i, st := range tc.starts {
				got, err := openNow(t, u).SigningKey(ctx, st.local, st.fromEnv)
				if st.want == nil {
					if err == nil || !strings.Contains(err.Error(), st.refusal) {
						t.Fatalf("start %d: key %x, error %v; want a refusal saying %q", i, got, err, st.refusal)
					}
					continue
				}
				if err != nil || !bytes.Equal(got, st.want) {
					t.Fatalf("start %d: key %x, %v; want %x", i, got, err, st.want)
				}
			}
		})
	}
}

// TestReplicasStartingTogetherMakeOneSandboxMerchant: the check for an empty
// store and the creation of its first merchant run under the start lock.
func TestReplicasStartingTogetherMakeOneSandboxMerchant(t *testing.T) {
	ctx := context.Background()
	for range 8 {
		u := freshSchema(t)
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for range 3 {
			s := openNow(t, u)
			l := kassa.New(s, kassa.Options{})
			wg.Go(func() {
				<-begin
				err := s.Exclusive(ctx, func() error {
					if has, err := l.HasMerchants(ctx); err != nil || has {
						return err
					}
					_, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "sandbox", Sandbox: true})
					return err
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		close(begin)
		wg.Wait()
		var ms []*storage.Merchant
		err := openNow(t, u).View(ctx, func(tx storage.Tx) (err error) { ms, err = tx.ListMerchants(); return err })
		if err != nil || len(ms) != 1 {
			t.Fatalf("%d merchants after three starts at once (%v), want 1", len(ms), err)
		}
	}
}

// TestForgetSigningKey: kassa store rekey's step. While another kassa
// session is on the database (a replica serving, which goes on signing
// with the key it read) it refuses, naming the session, and the key stays
// recorded; sessions of other applications do not count. Once the replicas
// have stopped, the recorded key is forgotten, the next start records its
// own (a KASSA_KEY's check value here), and the old key is refused from then
// on.
func TestForgetSigningKey(t *testing.T) {
	ctx := context.Background()
	u := pgtest.FreshDatabase(t, "") // its own: the other tests' sessions are not this one's replicas
	start := func() *postgres.Store {
		s, err := postgres.Open(ctx, u, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	replica := start()
	defer replica.Close()
	if got, err := replica.SigningKey(ctx, key(1), false); err != nil || !bytes.Equal(got, key(1)) {
		t.Fatalf("first start: %x, %v", got, err)
	}
	other, err := pgx.Connect(ctx, u+"?application_name=psql")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	rekey := start()
	defer rekey.Close()
	forgot, err := rekey.ForgetSigningKey(ctx)
	if !errors.Is(err, postgres.ErrInUse) || forgot || !strings.Contains(err.Error(), "application 'kassa'") || strings.Contains(err.Error(), "psql") {
		t.Fatalf("forget beside a replica: %v, %v; want ErrInUse naming the replica's session only", forgot, err)
	}
	if got, err := replica.SigningKey(ctx, key(2), false); err != nil || !bytes.Equal(got, key(1)) {
		t.Fatalf("a start after the refusal: %x, %v; want the recorded key still", got, err)
	}

	replica.Close() // the replica stops
	if forgot, err := rekey.ForgetSigningKey(ctx); !forgot || err != nil {
		t.Fatalf("forget with the replica stopped: %v, %v", forgot, err)
	}
	if forgot, err := rekey.ForgetSigningKey(ctx); forgot || err != nil {
		t.Fatalf("forget again: %v, %v; want nothing to forget", forgot, err)
	}
	rekey.Close()
	next := start()
	defer next.Close()
	if got, err := next.SigningKey(ctx, key(7), true); err != nil || !bytes.Equal(got, key(7)) {
		t.Fatalf("the start after rekey, KASSA_KEY: %x, %v; want it recorded", got, err)
	}
	if _, err := next.SigningKey(ctx, key(1), false); err == nil || !strings.Contains(err.Error(), "set the same KASSA_KEY") {
		t.Fatalf("the old key after the new one was recorded: %v, want refused", err)
	}
}
