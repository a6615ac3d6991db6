package kassa

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// panickyStore panics in Update while panicking is set, as a bug in a store
// or in a use case would.
type panickyStore struct {
	storage.Store
	mu        sync.Mutex
	panicking bool
}

func (s *panickyStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.mu.Lock()
	p := s.panicking
	s.mu.Unlock()
	if p {
		panic("store bug")
	}
	return s.Store.Update(ctx, fn)
}

// expiring is a context whose deadline passes when the test calls expire,
// not on a clock. A real deadline of 50 ms could pass, on a loaded machine,
// before the test had seen the waiter's key in flight or sent its twin: the
// test then waited forever, for a key already gone, or for the order's turn
// it held itself.
type expiring struct {
	context.Context
	done chan struct{}
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiring) expire()               { close(c.done) }
func (c *expiring) Done() <-chan struct{} { return c.done }

func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestLedgerKeepsNoBookkeepingOfEndedCalls: a long-running server makes
// changes with ever new idempotency keys and order ids, and many of them
// end in an error, a replay, a twin refused in flight, a caller who gave up
// waiting for the order's turn, or a panic. The in-flight keys and the
// order gate are emptied on every one of those paths: an entry left behind
// would grow the process by every such request for as long as it runs.
func TestLedgerKeepsNoBookkeepingOfEndedCalls(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	st := &panickyStore{Store: memory.New(time.Now)}
	l := New(st, Options{})
	creds, _, err := l.EnsureMerchant(ctx, MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	m := creds.MerchantID
	call := func(key string) Call { return Call{MerchantID: m, IdempotencyKey: key} }
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	if err := l.PutAuthorization(ctx, &token.Authorization{Token: "tok", MerchantID: m, Country: "SE", Currency: "SEK",
		Locale: "sv-SE", PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	res, err := l.CreateOrderFromAuthorization(ctx, call("create"), "tok", &order.CreateRequest{Country: "SE", Currency: "SEK",
		Locale: "sv-SE", OrderLines: []order.LineInput{{Description: str("a"), Quantity: num(1), UnitPrice: num(10000), Vat: num(2500)}}})
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ OrderID string }
	if err := json.Unmarshal(res.Body, &created); err != nil || created.OrderID == "" {
		t.Fatalf("created: %s %v", res.Body, err)
	}
	id := created.OrderID

	// Done, replayed, and the same key with another request.
	ref := func(s string) *order.ReferenceRequest { return &order.ReferenceRequest{Reference: str(s)} }
	if _, err := l.SetReference(ctx, call("k1"), id, ref("a")); err != nil {
		t.Fatal(err)
	}
	if r, err := l.SetReference(ctx, call("k1"), id, ref("a")); err != nil || !r.Replayed {
		t.Fatalf("replay: %v %v", r, err)
	}
	if _, err := l.SetReference(ctx, call("k1"), id, ref("b")); fault.CodeOf(err) != "idempotency_key_reused" {
		t.Fatalf("reused key: %v", err)
	}
	// An order that does not exist, with and without a key.
	if _, err := l.SetReference(ctx, call("k2"), "no-such-order", ref("a")); !fault.Is(err, fault.NotFound) {
		t.Fatalf("unknown order: %v", err)
	}
	if _, err := l.SetReference(ctx, call(""), "no-such-order", ref("a")); !fault.Is(err, fault.NotFound) {
		t.Fatalf("unknown order: %v", err)
	}
	// A caller whose context ended before it had the order's turn, and a
	// twin of its key refused while it waited.
	hold, err := l.orders.enter(ctx, m, id)
	if err != nil {
		t.Fatal(err)
	}
	short := newExpiring()
	waited := make(chan error, 1)
	go func() {
		_, err := l.SetReference(short, call("k3"), id, ref("c"))
		waited <- err
	}()
	// It waits for the order's turn, its key in flight, until its deadline.
	for {
		l.mu.Lock()
		_, busy := l.inFlight[m+"\x00k3"]
		l.mu.Unlock()
		l.orders.mu.Lock()
		s := l.orders.slots[m+"\x00"+id]
		waiting := s != nil && s.users == 2
		l.orders.mu.Unlock()
		if busy && waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := l.SetReference(ctx, call("k3"), id, ref("c")); fault.CodeOf(err) != "idempotency_request_in_progress" {
		t.Fatalf("twin in flight: %v", err)
	}
	short.expire()
	if err := <-waited; fault.CodeOf(err) != "store_unavailable" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller who gave up waiting: %v", err)
	}
	hold()
	// A context already ended.
	if _, err := l.SetReference(short, call("k4"), id, ref("d")); fault.CodeOf(err) != "store_unavailable" {
		t.Fatalf("ended context: %v", err)
	}
	// A panic in the store.
	st.mu.Lock()
	st.panicking = true
	st.mu.Unlock()
	func() {
		defer func() {
			if p := recover(); p != "store bug" {
				t.Fatalf("panic: %v", p)
			}
		}()
		l.SetReference(ctx, call("k5"), id, ref("e"))
	}()
	st.mu.Lock()
	st.panicking = false
	st.mu.Unlock()
	// The keys of the calls that ended without a record are free again.
	if r, err := l.SetReference(ctx, call("k5"), id, ref("e")); err != nil || r.Replayed {
		t.Fatalf("k5 after the panic: %v %v", r, err)
	}

	l.mu.Lock()
	inFlight := len(l.inFlight)
	l.mu.Unlock()
	l.orders.mu.Lock()
	slots := len(l.orders.slots)
	l.orders.mu.Unlock()
	if inFlight != 0 || slots != 0 {
		t.Fatalf("after every call ended: %d keys in flight, %d order slots; want none", inFlight, slots)
	}
}
