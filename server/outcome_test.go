package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// lostAnswer commits an Update and then, once armed, answers it as a store
// whose COMMIT went out and whose answer was lost answers it: committed, but
// not known to be.
type lostAnswer struct {
	storage.Store
	armed atomic.Bool
}

func (s *lostAnswer) Update(ctx context.Context, fn func(storage.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return fault.OutcomeUnknown(errors.New("read tcp: connection reset by peer"), "postgres: COMMIT was sent but not answered, so whether it committed is unknown")
	}
	return err
}

// TestUnknownOutcomeSaysSo: a write whose commit outcome the store cannot
// tell is answered 500 with its own code and a detail that says what to do
// (send it again with its key), not as an unexplained internal error; sent
// again, it replays the change it made, once.
func TestUnknownOutcomeSaysSo(t *testing.T) {
	clock := NewClock(true)
	st := &lostAnswer{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, true, clock, st, nil)
	id := e.order("5560000001", "invoice")["id"].(string)
	key := map[string]string{"Idempotency-Key": "capture-once"}

	st.armed.Store(true)
	code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, key)
	if code != 500 || b["code"] != fault.CodeOutcomeUnknown || !strings.Contains(fmt.Sprint(b["detail"]), "Idempotency-Key") {
		t.Fatalf("capture with its answer lost: %d %v", code, b)
	}
	code, h, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, key)
	if code != 200 || h.Get("Idempotent-Replayed") != "true" || len(b["captured"].([]any)) != 1 {
		t.Fatalf("the capture sent again with its key: %d %v %v", code, h, b)
	}
	if o := e.get(id); len(o["captured"].([]any)) != 1 || minor(o["capturedAmount"]) != 30000 || minor(o["uncapturedAmount"]) != 0 {
		t.Fatalf("the order after the replay: %v", o)
	}
}

// TestUnknownOutcomeWithoutAKey: a write sent without an Idempotency-Key
// has no key to send again, and sent again without one it may be made
// twice (a second partial capture): the detail says to read the order
// first, not to send it again with "the same Idempotency-Key".
func TestUnknownOutcomeWithoutAKey(t *testing.T) {
	clock := NewClock(true)
	st := &lostAnswer{Store: openStore(t, clock.Now)}
	e := newEnvOn(t, true, clock, st, nil)
	id := e.order("5560000001", "invoice")["id"].(string)

	st.armed.Store(true)
	code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	detail := fmt.Sprint(b["detail"])
	if code != 500 || b["code"] != fault.CodeOutcomeUnknown || strings.Contains(detail, "same Idempotency-Key") || !strings.Contains(detail, "read") {
		t.Fatalf("capture without a key, its answer lost: %d %v", code, b)
	}
}
