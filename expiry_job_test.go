package kassa_test

import (
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/storagetest"
)

// unwritableOrders is a transaction in which every order update fails, as
// a store refusing writes would.
type unwritableOrders struct{ storage.Tx }

func (unwritableOrders) UpdateOrder(*order.Order) error {
	return fault.Internalf(nil, "write refused")
}

// TestExpireOrdersReportsAFailedUpdate: an order the expiry job could not
// save is an error of the run, not counted as marked, and stays unmarked.
func TestExpireOrdersReportsAFailedUpdate(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	o := f.order(t, "t1", 10000)
	now = o.ExpiresAt.Add(time.Hour)
	l := kassa.New(storagetest.WrapTx{Store: f.store, Wrap: func(tx storage.Tx) storage.Tx { return unwritableOrders{tx} }}, kassa.Options{})
	n, err := l.ExpireOrders(f.ctx, 10)
	if err == nil || n != 0 {
		t.Fatalf("expiry with order writes failing: marked %d, %v; want 0 and the error", n, err)
	}
	if got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID); got.ExpiredMarked {
		t.Fatal("the order is marked expired though its write failed")
	}
	if n, err := f.ledger.ExpireOrders(f.ctx, 10); err != nil || n != 1 {
		t.Fatalf("expiry with writes working: marked %d, %v; want 1", n, err)
	}
}
