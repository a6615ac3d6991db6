package postgres_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
)

// openAt opens a replica's store whose clock is off the real time by skew.
func openAt(t *testing.T, dbURL string, skew time.Duration) (*postgres.Store, func() time.Time) {
	t.Helper()
	clock := func() time.Time { return time.Now().Add(skew) }
	s, err := postgres.Open(context.Background(), dbURL, postgres.Options{MaxConns: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock
}

// TestDeliveryLeaseHoldsAgainstAReplicaAhead: while one replica posts a
// notification it claimed, another whose clock runs ahead by more than the
// lease (a VM resumed from suspend, NTP failing) must not take it and post
// it again: the lease is judged on the database's clock, which every
// replica shares, not on each replica's own.
func TestDeliveryLeaseHoldsAgainstAReplicaAhead(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	sa := openNow(t, u)
	a := kassa.New(sa, kassa.Options{})
	cases := []struct {
		skew, lease, wait time.Duration
		posts             int32 // the second replica's POST included, once the lease has ended
	}{
		{skew: 5 * time.Minute, posts: 1},
		{skew: time.Hour, posts: 1},
		// The lease still ends: a deliverer that outlives a short one
		// (stuck, or killed) leaves the message to the other replica.
		{skew: time.Hour, lease: 2 * time.Second, wait: 2500 * time.Millisecond, posts: 2},
	}
	for _, c := range cases {
		skew := c.skew
		sb, ahead := openAt(t, u, skew)
		b := kassa.New(sb, kassa.Options{})
		creds, _, err := a.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m " + skew.String() + c.lease.String(), Sandbox: true})
		if err != nil {
			t.Fatal(err)
		}
		var posts atomic.Int32
		inside, release := make(chan struct{}), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if posts.Add(1) == 1 {
				close(inside)
				<-release // the first deliverer's POST is still under way
			}
		}))
		if _, err := a.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: srv.URL + "/hooks"}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := sa.Update(ctx, func(tx storage.Tx) error {
			return tx.AddOutbox(&storage.OutboxMessage{ID: "evt-" + skew.String() + c.lease.String(), MerchantID: creds.MerchantID, Topic: "order.acknowledgementRequired",
				Payload: []byte(`{}`), CreatedAt: now, NextAttempt: now})
		}); err != nil {
			t.Fatal(err)
		}
		first := make(chan kassa.DeliveryStats)
		go func() {
			stats, err := a.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true, Lease: c.lease})
			if err != nil {
				t.Error(err)
			}
			first <- stats
		}()
		<-inside
		time.Sleep(c.wait)
		stats, err := b.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true, WallClock: ahead})
		close(release)
		if c.posts == 1 && (err != nil || stats != (kassa.DeliveryStats{}) || posts.Load() != 1) {
			t.Errorf("a replica %s ahead took a notification under another's lease: %+v, %d POSTs, %v", skew, stats, posts.Load(), err)
		}
		if c.posts == 2 && (err != nil || stats.Delivered != 1 || posts.Load() != 2) {
			t.Errorf("a replica %s ahead did not take a notification whose %s lease had ended: %+v, %d POSTs, %v", skew, c.lease, stats, posts.Load(), err)
		}
		if got := <-first; c.posts == 1 && got.Delivered != 1 {
			t.Errorf("the first deliverer: %+v", got)
		}
		srv.Close()
	}
}
