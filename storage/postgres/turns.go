package postgres

import (
	"context"
	"slices"
	"sync"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// turns lets a few transactions of a store at a time wait for a row many
// transactions share (a merchant's document-number row). A transaction
// waiting for a row lock holds its connection all along: with the row
// locked elsewhere (a transaction left open, a stuck replica), captures of
// a merchant's many orders would each take one and fill the pool, and every
// other merchant would wait with them. A transaction that finds every turn
// of the row taken rolls back instead, before anything is sent that would lock
// the row, and runs again once it has the turn, waiting for it without a
// connection (see Store.run). The turn is held until the transaction ends,
// after its COMMIT or rollback.
//
// Up to per transactions have a row's turn at once (half the pool, at
// least one): a turn taken from the start of a transaction that runs again
// makes all of its work wait for the row, not only its last round trips,
// and with a single turn a merchant's captures on one replica would run one
// whole transaction after the other. With a quarter, 16 clients capturing
// for one merchant on one replica (the scale benchmark) reran often enough
// to cost 10–15 % of its throughput; with half they do not. A row locked
// elsewhere then holds half the pool, and the rest is left to everyone else.
type turns struct {
	per   int
	mu    sync.Mutex
	slots map[string]*turnSlot
}

type turnSlot struct {
	turn  chan struct{} // holds a token for each transaction that has a turn
	users int           // holders and waiters; the slot goes at zero
}

// join counts the caller among key's users.
func (ts *turns) join(key string) *turnSlot {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.slots == nil {
		ts.slots = map[string]*turnSlot{}
	}
	s := ts.slots[key]
	if s == nil {
		s = &turnSlot{turn: make(chan struct{}, max(ts.per, 1))}
		ts.slots[key] = s
	}
	s.users++
	return s
}

func (ts *turns) leave(key string, s *turnSlot) {
	ts.mu.Lock()
	if s.users--; s.users == 0 {
		delete(ts.slots, key)
	}
	ts.mu.Unlock()
}

// try takes key's turn if no one has it.
func (ts *turns) try(key string) (release func(), ok bool) {
	s := ts.join(key)
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn; ts.leave(key, s) }, true
	default:
		ts.leave(key, s)
		return nil, false
	}
}

// wait takes key's turn, waiting for it until ctx ends.
func (ts *turns) wait(ctx context.Context, key string) (release func(), err error) {
	s := ts.join(key)
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn; ts.leave(key, s) }, nil
	case <-ctx.Done():
		ts.leave(key, s)
		return nil, storage.WaitEnded(ctx, nil)
	}
}

// heldTurns is what one attempt of a transaction holds: the release of
// each turn, by key.
type heldTurns map[string]func()

// waitAll takes the turns of keys, in order (sorted, so that two attempts
// waiting for the same turns cannot each hold one the other waits for),
// before a connection is taken.
func (ts *turns) waitAll(ctx context.Context, keys []string) (heldTurns, error) {
	held := heldTurns{}
	for _, k := range keys {
		release, err := ts.wait(ctx, k)
		if err != nil {
			held.release()
			return nil, err
		}
		held[k] = release
	}
	return held, nil
}

func (h heldTurns) release() {
	for _, r := range h {
		r()
	}
}

// turnTaken is the error of an attempt that needed a turn others of this
// store's transactions held: it was rolled back, having locked no row of
// key, and runs again holding a turn.
type turnTaken struct{ key string }

func (e *turnTaken) Error() string { return "postgres: waiting for the turn of " + e.key }

// errTurnTaken is what takeTurn returns to fn, which ends the attempt
// whatever fn makes of it (tx.missedTurn); should fn's caller see it
// somehow, it reads as what it is, a wait with nothing done.
var errTurnTaken = &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable",
	Message: "a shared row is busy; nothing was done, retry shortly"}

// takeTurn takes, for this transaction, the turn of the shared row key
// before the statement that locks it; when another transaction of this
// store has it, the transaction ends here and runs again (Store.run).
func (t *tx) takeTurn(key string) error {
	if _, ok := t.held[key]; ok {
		return nil
	}
	if release, ok := t.shared.try(key); ok {
		t.held[key] = release
		return nil
	}
	t.missedTurn = key
	return errTurnTaken
}

// addKey returns keys with key in it, sorted.
func addKey(keys []string, key string) []string {
	if i, found := slices.BinarySearch(keys, key); !found {
		keys = slices.Insert(keys, i, key)
	}
	return keys
}
