package kassa

import (
	"context"
	"sync"

	"github.com/kassahq/kassa/storage"
)

// gate lets one change of an order at a time into the store, per Ledger.
// The store serializes changes of one order anyway (PostgreSQL: the order's
// row lock), but each request waiting there holds a database connection:
// requests piling up on an order locked elsewhere (a transaction left open,
// a slow replica) would take the whole pool, and every other order and
// merchant would wait with them. Here they wait without one, until their
// context ends.
type gate struct {
	mu    sync.Mutex
	slots map[string]*slot
}

type slot struct {
	turn  chan struct{} // holds a token while a change of the order runs
	users int           // holders and waiters; the slot goes at zero
}

// enter waits for the turn of the merchant's order; release ends it. No
// order (a change of no existing order) waits for nothing. A context that
// ends first is store_unavailable, as when the store itself gives up
// waiting.
func (g *gate) enter(ctx context.Context, merchantID, orderID string) (release func(), err error) {
	if orderID == "" {
		return func() {}, nil
	}
	key := merchantID + "\x00" + orderID
	g.mu.Lock()
	if g.slots == nil {
		g.slots = map[string]*slot{}
	}
	s := g.slots[key]
	if s == nil {
		s = &slot{turn: make(chan struct{}, 1)}
		g.slots[key] = s
	}
	s.users++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if s.users--; s.users == 0 {
			delete(g.slots, key)
		}
		g.mu.Unlock()
	}
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, storage.WaitEnded(ctx, nil)
	}
}
