package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
)

// TestPooledConnectionGoneSilent: the database's address moved (a failover)
// or a NAT or balancer dropped the flows while the pool's connections sat
// idle, so they went silent: nothing sent on them is answered, and nothing
// says so. New connections reach the database. A transaction with no
// deadline (every background job: notification delivery, tasks, the
// settlement run) must not wait on such a connection for as long as it
// stays silent: the pool pinged an idle connection before handing it out
// with the caller's context, which has no end there, so delivery and the
// jobs stopped for good (until TCP gave up, a quarter of an hour, or never
// behind a pooler that keeps the flow alive). The ping is bounded, the
// silent connection dropped, and the transaction runs on a new one.
func TestPooledConnectionGoneSilent(t *testing.T) {
	p, s := proxiedStore(t, "")
	// Cut the proxy's connections before the store closes (cleanups run
	// last first), so that a transaction still waiting cannot hold Close.
	t.Cleanup(p.down)
	putMerchantM1(t, s)
	// Idle past the pool's one second, after which it pings a connection
	// before handing it out.
	time.Sleep(1100 * time.Millisecond)
	p.silence()

	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx storage.Tx) error {
			return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1", Name: "after the failover"})
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("update with no deadline after the pool's connections went silent: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an update with no deadline still waits, 30 s on, on a pooled connection gone silent")
	}
	if name := merchantName(t, s); name != "after the failover" {
		t.Fatalf("merchant after the update: %q", name)
	}
}
