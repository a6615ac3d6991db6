package storagetest

import (
	"context"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// WrapTx is a store whose Update hands its function the transaction as Wrap
// makes it: a test puts a storage.Tx of its own in front of a store's, to
// make one read or write fail as a database would. Wrap is called for every
// transaction, so it may read what the test changes between them.
type WrapTx struct {
	storage.Store
	Wrap func(storage.Tx) storage.Tx
}

func (s WrapTx) Update(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.Update(ctx, func(tx storage.Tx) error { return fn(s.Wrap(tx)) })
}

// UnreadableOrder is a transaction in which every read of one order fails
// with an internal error, as a record no build can decode would.
type UnreadableOrder struct {
	storage.Tx
	OrderID string
}

func (t UnreadableOrder) GetOrder(merchantID, orderID string) (*order.Order, error) {
	if orderID == t.OrderID {
		return nil, fault.Internalf(nil, "decode order %s: unexpected end of JSON input", orderID)
	}
	return t.Tx.GetOrder(merchantID, orderID)
}
