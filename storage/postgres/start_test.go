package postgres_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
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
