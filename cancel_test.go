package kassa_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/storagetest"
)

// canceller ends a context at the at-th store call (counted across the
// transactions of one operation): before the call or, late, after it did
// its work, as a caller hanging up at that moment would.
type canceller struct {
	mu     sync.Mutex
	at, n  int
	late   bool
	cancel context.CancelFunc
	fired  bool
	method string
}

func (c *canceller) arm(at int, late bool, cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.n, c.late, c.cancel, c.fired, c.method = at, 0, late, cancel, false, ""
}

func (c *canceller) Before(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.at != 0 && c.n == c.at {
		c.method = name
		c.fired = true
		if !c.late {
			c.cancel()
		}
	}
	return nil
}

func (c *canceller) After(name string, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.late && c.at != 0 && c.n == c.at && c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	return err
}

func (c *canceller) wrap(tx storage.Tx) storage.Tx { return storagetest.Hooked(tx, c) }

// TestCancelledCallTellsTheTruth ends the caller's context before each
// Ledger write and at each of its store calls, on every store: an error
// whose kind says nothing was done leaves the store exactly as before, a
// success is stored, and outcome_unknown is settled by a retry with the same
// idempotency key; a retry after any error does the work once.
func TestCancelledCallTellsTheTruth(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) {
			withUndoFixtures(t, func(t *testing.T, f *undoFixture) {
				canc := &canceller{}
				f.l = kassa.New(storagetest.WrapTx{Store: f.st.store, Wrap: canc.wrap}, kassa.Options{})
				for _, c := range undoCases() {
					t.Run(c.name, func(t *testing.T) { cancelledCallTellsTheTruth(t, f, canc, c, late) })
				}
			})
		})
	}
}

func cancelledCallTellsTheTruth(t *testing.T, f *undoFixture, canc *canceller, c undoCase, late bool) {
	var ok, failed int
	defer func() { t.Logf("%d cancellations: %d succeeded, %d failed", ok+failed-1, ok, failed) }()
	for k := 0; ; k++ {
		if k > 200 {
			t.Fatal("still cancelling after 200 store calls")
		}
		op, verify := c.setup(t, f)
		call := f.key(t)
		before := f.st.snapshot(t)
		ctx, cancel := context.WithCancel(context.Background())
		if k == 0 {
			cancel()
		}
		canc.arm(k, late, cancel)
		f.ctx = ctx
		res, err := op(call)
		f.ctx = context.Background()
		canc.mu.Lock()
		fired, method := canc.fired || k == 0, canc.method
		canc.mu.Unlock()
		canc.arm(0, false, nil)
		cancel()
		where := fmt.Sprintf("cancelled at call %d (%s, late %v)", k, method, late)
		switch {
		case err == nil:
			ok++
			verify(t)
			again, err := op(call)
			if err != nil && res != nil {
				t.Fatalf("%s: succeeded, replay: %v", where, err)
			}
			if res != nil && (again == nil || !again.Replayed || !bytes.Equal(again.Body, res.Body)) {
				t.Fatalf("%s: succeeded, replay %+v, want the first answer replayed", where, again)
			}
		case fault.CodeOf(err) == fault.CodeOutcomeUnknown:
			t.Logf("%s: outcome unknown: %v", where, err)
			if _, err := op(call); err != nil {
				t.Fatalf("%s: outcome unknown, retry: %v", where, err)
			}
			verify(t)
		default:
			failed++
			if d := firstDiff(before, f.st.snapshot(t)); d != "" {
				t.Errorf("%s: the caller got %v (kind %v, code %s) and the store changed: %s", where, err, fault.KindOf(err), fault.CodeOf(err), d)
			}
			if !fault.Is(err, fault.Unavailable) && !errors.Is(err, context.Canceled) {
				t.Logf("%s: the caller got %v (kind %v), not a wait ended", where, err, fault.KindOf(err))
			}
			if _, err := op(call); err != nil {
				t.Fatalf("%s: failed, retry: %v", where, err)
			}
			verify(t)
		}
		if f.st.check != nil {
			f.st.check(t)
		}
		if !fired {
			return
		}
	}
}
