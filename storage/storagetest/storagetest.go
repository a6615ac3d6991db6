// Package storagetest is the conformance suite every kassa store runs: the
// same records, the same transaction semantics, the same list results for
// every filter and combination, and the same paging, whatever the database.
//
// A backend's test calls Run with a function that opens a new, empty store
// whose clock is Clock:
//
//	func TestConformance(t *testing.T) { storagetest.Run(t, openStore) }
//
// The suite builds its orders with the real domain rules (order, capture,
// refund) and deterministic identifiers, and states every expected result
// exactly. It has no wall-clock thresholds.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Run runs the whole suite. open must return a new, empty store whose clock
// is Clock, and close it when the test ends.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Run("Merchants", func(t *testing.T) { testMerchants(t, open(t)) })
	t.Run("Orders", func(t *testing.T) { testOrders(t, open(t)) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, open(t)) })
	t.Run("AuthorizationRetention", func(t *testing.T) { testAuthorizationRetention(t, open(t)) })
	t.Run("Sequences", func(t *testing.T) { testSequences(t, open(t)) })
	t.Run("SequencesConcurrentWithFailures", func(t *testing.T) { testSequencesConcurrent(t, open(t)) })
	t.Run("DeadlinesNeverHideACommit", func(t *testing.T) { testDeadlines(t, open(t)) })
	t.Run("DeadlineEndsAWaitBehindAnotherTransaction", func(t *testing.T) { testDeadlineEndsAWait(t, open(t)) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, open(t)) })
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, open(t)) })
	t.Run("OutboxPerMerchant", func(t *testing.T) { testOutboxPerMerchant(t, open(t)) })
	t.Run("OutboxRetention", func(t *testing.T) { testOutboxRetention(t, open(t)) })
	t.Run("OutboxImmutable", func(t *testing.T) { testOutboxImmutable(t, open(t)) })
	t.Run("OutboxDueBoundary", func(t *testing.T) { testOutboxDueBoundary(t, open(t)) })
	t.Run("RollbackAndReadOnly", func(t *testing.T) { testRollback(t, open(t)) })
	t.Run("ListFilters", func(t *testing.T) { testList(t, open(t)) })
	t.Run("CursorWalkWithConcurrentInserts", func(t *testing.T) { testCursorWalk(t, open(t)) })
	t.Run("PagingUnderWrites", func(t *testing.T) { testPagingUnderWrites(t, open(t)) })
	t.Run("PageBudget", func(t *testing.T) { testPageBudget(t, open(t)) })
	t.Run("Expiring", func(t *testing.T) { testExpiring(t, open(t)) })
	t.Run("StatusesAsOfLastChange", func(t *testing.T) { testStatusesAsOfLastChange(t, open(t)) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open(t)) })
	t.Run("SessionFilters", func(t *testing.T) { testSessionFilters(t, open(t)) })
	t.Run("SessionPageBudget", func(t *testing.T) { testSessionPageBudget(t, open(t)) })
	t.Run("Settlements", func(t *testing.T) { testSettlements(t, open(t)) })
	t.Run("SettlementOrder", func(t *testing.T) { testSettlementOrder(t, open(t)) })
	t.Run("SettlementCreatedRange", func(t *testing.T) { testSettlementCreatedRange(t, open(t)) })
	t.Run("QueuedSettlementItems", func(t *testing.T) { testQueuedSettlementItems(t, open(t)) })
	t.Run("Tasks", func(t *testing.T) { testTasks(t, open(t)) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open(t)) })
}

// testClosed: transactions on a closed store fail with ErrClosed, of kind
// Internal, without running their function; closing again is no error.
func testClosed(t *testing.T, s storage.Store) {
	update(t, s, func(tx storage.Tx) error { return tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1"}) })
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ran := false
	for name, call := range map[string]func(context.Context, func(storage.Tx) error) error{"update": s.Update, "view": s.View} {
		err := call(ctx, func(storage.Tx) error { ran = true; return nil })
		if !errors.Is(err, storage.ErrClosed) || fault.KindOf(err) != fault.Internal || ran {
			t.Errorf("%s after close: %v (ran: %v)", name, err, ran)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

var ctx = context.Background()

func update(t *testing.T, s storage.Store, fn func(storage.Tx) error) {
	t.Helper()
	if err := s.Update(ctx, fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func view(t *testing.T, s storage.Store, fn func(storage.Tx) error) {
	t.Helper()
	if err := s.View(ctx, fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

func wantKind(t *testing.T, err error, k fault.Kind) {
	t.Helper()
	if err == nil || fault.KindOf(err) != k {
		t.Fatalf("got %v, want kind %s", err, k)
	}
}

func testMerchants(t *testing.T, s storage.Store) {
	m := &storage.Merchant{ID: "m1", Name: "One", ClientID: "c1", SecretHash: []byte{1, 2}, Salt: []byte{3},
		RequireAck: true, WebhookURL: "https://one.example/hook", WebhookSecret: "whsec_1",
		WebhookEvents: []string{"order.partialCapture", "order.fullCapture"}, CreatedAt: Now()}
	view(t, s, func(tx storage.Tx) error {
		if has, err := tx.HasMerchants(); has || err != nil {
			t.Fatalf("an empty store has merchants: %v %v", has, err)
		}
		return nil
	})
	update(t, s, func(tx storage.Tx) error { return tx.PutMerchant(m) })
	view(t, s, func(tx storage.Tx) error {
		if has, err := tx.HasMerchants(); !has || err != nil {
			t.Fatalf("a store with a merchant has none: %v %v", has, err)
		}
		got, err := tx.GetMerchant("m1")
		if err != nil || got.Name != "One" || got.ClientID != "c1" || string(got.SecretHash) != "\x01\x02" ||
			string(got.Salt) != "\x03" || !got.RequireAck || got.WebhookURL != m.WebhookURL || !got.CreatedAt.Equal(m.CreatedAt) ||
			got.WebhookSecret != "whsec_1" || !slices.Equal(got.WebhookEvents, m.WebhookEvents) {
			t.Fatalf("get merchant: %+v %v", got, err)
		}
		byClient, err := tx.GetMerchantByClientID("c1")
		if err != nil || byClient.ID != "m1" {
			t.Fatalf("by client: %+v %v", byClient, err)
		}
		// What a caller does to its copy stays with it (a store may cache).
		for _, mine := range []*storage.Merchant{got, byClient} {
			mine.SecretHash[0], mine.Salt[0], mine.WebhookEvents[0] = 9, 9, "scribbled"
		}
		again, err := tx.GetMerchant("m1")
		if err != nil || string(again.SecretHash) != "\x01\x02" || string(again.Salt) != "\x03" || again.WebhookEvents[0] != "order.partialCapture" {
			t.Fatalf("a caller's change to its merchant reached the store: %+v %v", again, err)
		}
		_, err = tx.GetMerchant("nope")
		wantKind(t, err, fault.NotFound)
		_, err = tx.GetMerchantByClientID("nope")
		wantKind(t, err, fault.NotFound)
		return nil
	})
	// Another merchant cannot take the client id, and the failed put writes nothing.
	err := s.Update(ctx, func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m2", ClientID: "c1"})
	})
	wantKind(t, err, fault.Conflict)
	view(t, s, func(tx storage.Tx) error {
		_, err := tx.GetMerchant("m2")
		wantKind(t, err, fault.NotFound)
		return nil
	})
	update(t, s, func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m2", Name: "Two", ClientID: "c2"})
	})
	// Replacing a merchant's client id retires the old one.
	update(t, s, func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m2", Name: "Two", ClientID: "c3"})
	})
	view(t, s, func(tx storage.Tx) error {
		ms, err := tx.ListMerchants()
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID+"/"+m.ClientID)
		}
		slices.Sort(ids)
		if err != nil || !slices.Equal(ids, []string{"m1/c1", "m2/c3"}) {
			t.Fatalf("list merchants %v %v", ids, err)
		}
		if m, err := tx.GetMerchantByClientID("c3"); err != nil || m.ID != "m2" {
			t.Fatalf("new client id: %+v %v", m, err)
		}
		_, err = tx.GetMerchantByClientID("c2")
		wantKind(t, err, fault.NotFound)
		return nil
	})
}

func testOrders(t *testing.T, s storage.Store) {
	b := newBuilder()
	o := b.make(t, "m1", 5, Start()) // fully refunded card order: captures, refunds, events
	update(t, s, func(tx storage.Tx) error { return tx.CreateOrder(o) })
	if o.Version != 1 {
		t.Fatalf("version after create %d", o.Version)
	}
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o.Clone()) })
	wantKind(t, err, fault.Conflict)

	var loaded *order.Order
	view(t, s, func(tx storage.Tx) error {
		var err error
		loaded, err = tx.GetOrder("m1", o.ID)
		return err
	})
	if loaded.Version != 1 || loaded.Amounts() != o.Amounts() || len(loaded.Events) != len(o.Events) ||
		len(loaded.Captured) != 1 || len(loaded.Refunded) != 1 ||
		loaded.Captured[0].DocumentReference != o.Captured[0].DocumentReference || !loaded.UpdatedAt.Equal(o.UpdatedAt) ||
		!loaded.CreatedAt.Equal(o.CreatedAt) || loaded.PaymentMethod != o.PaymentMethod || loaded.StoreID != o.StoreID ||
		!slices.Equal(loaded.Statuses(Now()), o.Statuses(Now())) {
		t.Fatalf("round trip: %+v", loaded)
	}
	view(t, s, func(tx storage.Tx) error {
		_, err := tx.GetOrder("m2", o.ID)
		wantKind(t, err, fault.NotFound) // another merchant's order does not exist for it
		_, err = tx.GetOrder("m1", "order-9999")
		wantKind(t, err, fault.NotFound)
		_, err = tx.OrderVersion("m2", o.ID)
		wantKind(t, err, fault.NotFound)
		if v, err := tx.OrderVersion("m1", o.ID); err != nil || v != 1 {
			t.Fatalf("OrderVersion after create: %d, %v", v, err)
		}
		return nil
	})
	// Another merchant updating the same id finds nothing to update.
	foreign := loaded.Clone()
	foreign.MerchantID = "m2"
	err = s.Update(ctx, func(tx storage.Tx) error { return tx.UpdateOrder(foreign) })
	wantKind(t, err, fault.NotFound)

	// Two writers load version 1; the second save is a conflict and writes nothing.
	first, second := loaded.Clone(), loaded.Clone()
	env := b.env(Start().Add(time.Hour))
	if err := first.SetReference(&order.ReferenceRequest{Reference: ptr("first")}, env); err != nil {
		t.Fatal(err)
	}
	if err := second.SetReference(&order.ReferenceRequest{Reference: ptr("second")}, env); err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx storage.Tx) error { return tx.UpdateOrder(first) })
	if first.Version != 2 {
		t.Fatalf("version after update %d", first.Version)
	}
	view(t, s, func(tx storage.Tx) error {
		if v, err := tx.OrderVersion("m1", o.ID); err != nil || v != 2 {
			t.Fatalf("OrderVersion after update: %d, %v", v, err)
		}
		return nil
	})
	err = s.Update(ctx, func(tx storage.Tx) error { return tx.UpdateOrder(second) })
	wantKind(t, err, fault.Conflict)
	if fault.CodeOf(err) != "version_conflict" {
		t.Fatalf("conflict code %q", fault.CodeOf(err))
	}
	view(t, s, func(tx storage.Tx) error {
		got, _ := tx.GetOrder("m1", o.ID)
		if got.MerchantReference != "first" || got.Version != 2 {
			t.Fatalf("after conflict: %q v%d", got.MerchantReference, got.Version)
		}
		page, err := tx.ListOrders("m1", storage.OrderQuery{MerchantReferences: []string{"second"}})
		if err != nil || len(page.Orders) != 0 {
			t.Fatalf("a conflicting update reached the index: %d %v", len(page.Orders), err)
		}
		return nil
	})
	missing := b.make(t, "m1", 2, Start())
	err = s.Update(ctx, func(tx storage.Tx) error { return tx.UpdateOrder(missing) })
	wantKind(t, err, fault.NotFound)

	// Orders a list page hands out are the caller's: changing one (stores
	// may serve them from a cache of decoded orders) changes no later read.
	for range 2 {
		view(t, s, func(tx storage.Tx) error {
			page, err := tx.ListOrders("m1", storage.OrderQuery{MerchantReferences: []string{"first"}})
			if err != nil || len(page.Orders) != 1 {
				t.Fatalf("list: %d %v", len(page.Orders), err)
			}
			got := page.Orders[0]
			if got.MerchantReference != "first" || len(got.Captured) != 1 || got.Captured[0].DocumentReference != o.Captured[0].DocumentReference {
				t.Fatalf("a caller's change to a listed order reached a later read: %+v", got)
			}
			got.MerchantReference = "scribbled"
			got.Captured[0].DocumentReference = "scribbled"
			return nil
		})
	}
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetOrder("m1", o.ID)
		if err != nil || got.MerchantReference != "first" || got.Captured[0].DocumentReference != o.Captured[0].DocumentReference {
			t.Fatalf("a caller's change to a listed order reached GetOrder: %+v %v", got, err)
		}
		return nil
	})
}

func testTokens(t *testing.T, s storage.Store) {
	a := &token.Authorization{Token: "at1", MerchantID: "m1", Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Buyer:          order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB"},
		PaymentMethod:  order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		ApprovedAmount: 5000, CreatedAt: Now(), ExpiresAt: Now().Add(time.Hour)}
	update(t, s, func(tx storage.Tx) error { return tx.PutAuthorization(a) })
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetAuthorization("m1", "at1")
		if err != nil || got.ApprovedAmount != 5000 || !got.ExpiresAt.Equal(a.ExpiresAt) || got.Buyer.CompanyName != "Buyer AB" ||
			got.PaymentMethod != a.PaymentMethod || got.UsedAt != nil {
			t.Fatalf("authorization %+v %v", got, err)
		}
		_, err = tx.GetAuthorization("m2", "at1")
		wantKind(t, err, fault.NotFound)
		return nil
	})
	if err := a.Consume(Now(), "order:o1"); err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx storage.Tx) error { return tx.PutAuthorization(a) })
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetAuthorization("m1", "at1")
		if err != nil || got.UsedAt == nil || !got.UsedAt.Equal(Now()) || got.UsedFor != "order:o1" {
			t.Fatalf("consumed authorization %+v %v", got, err)
		}
		return nil
	})
	a.Deleted = true
	update(t, s, func(tx storage.Tx) error { return tx.PutAuthorization(a) })
	view(t, s, func(tx storage.Tx) error {
		_, err := tx.GetAuthorization("m1", "at1")
		wantKind(t, err, fault.NotFound) // a deleted token is gone
		return nil
	})
	c := &token.Customer{Record: token.Record{TokenID: "ct1", State: token.StateActive, MerchantID: "m1", CompanyID: "556",
		StoreID: "store-1"}, Currency: "SEK", Locale: "sv-SE", CreatedAt: Now()}
	update(t, s, func(tx storage.Tx) error { return tx.PutCustomerToken(c) })
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetCustomerToken("m1", "ct1")
		if err != nil || got.State != token.StateActive || got.StoreID != "store-1" || got.RevokedAt != nil {
			t.Fatalf("customer token %+v %v", got, err)
		}
		return nil
	})
	c.Revoke(Now())
	update(t, s, func(tx storage.Tx) error { return tx.PutCustomerToken(c) })
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetCustomerToken("m1", "ct1")
		if err != nil || got.State != token.StateRevoked || got.CompanyID != "556" || got.RevokedAt == nil {
			t.Fatalf("revoked customer token %+v %v", got, err)
		}
		_, err = tx.GetCustomerToken("m2", "ct1")
		wantKind(t, err, fault.NotFound)
		_, err = tx.GetCustomerToken("m1", "nope")
		wantKind(t, err, fault.NotFound)
		return nil
	})
}

func next(t *testing.T, s storage.Store, m, series string) int64 {
	t.Helper()
	var n int64
	update(t, s, func(tx storage.Tx) error {
		var err error
		n, err = tx.NextSequence(m, series)
		return err
	})
	return n
}

func testSequences(t *testing.T, s storage.Store) {
	if a, b, c := next(t, s, "m1", "invoice"), next(t, s, "m1", "invoice"), next(t, s, "m1", "creditNote"); a != 1 || b != 2 || c != 1 {
		t.Fatalf("sequences %d %d %d", a, b, c)
	}
	if n := next(t, s, "m2", "invoice"); n != 1 {
		t.Fatalf("another merchant starts at %d", n)
	}
	// A rolled-back transaction gives its numbers back: no gap.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx storage.Tx) error {
		for range 3 {
			if _, err := tx.NextSequence("m1", "invoice"); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rollback error %v", err)
	}
	if n := next(t, s, "m1", "invoice"); n != 3 {
		t.Fatalf("after rollback got %d, want 3", n)
	}
	// Numbers taken in one transaction follow each other.
	var got []int64
	update(t, s, func(tx storage.Tx) error {
		got = nil
		for range 3 {
			n, err := tx.NextSequence("m1", "invoice")
			if err != nil {
				return err
			}
			got = append(got, n)
		}
		return nil
	})
	if !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("numbers of one transaction %v", got)
	}
}

// testDeadlines runs transactions whose context ends at a random moment,
// before, during or after the commit: an Update that returned an error must
// have committed nothing, or a caller that retries without an idempotency
// key would apply a change twice. Each transaction takes a number, so the
// next number counts the commits.
func testDeadlines(t *testing.T, s storage.Store) {
	succeeded := int64(0)
	for i := range 300 {
		c, cancel := context.WithTimeout(ctx, time.Duration(i%31)*100*time.Microsecond)
		err := s.Update(c, func(tx storage.Tx) error {
			_, err := tx.NextSequence("m1", "deadline")
			return err
		})
		cancel()
		if err == nil {
			succeeded++
		}
	}
	if n := next(t, s, "m1", "deadline"); n != succeeded+1 {
		t.Fatalf("%d of 300 transactions reported success, but %d committed", succeeded, n-1)
	}
}

// testDeadlineEndsAWait: an Update that waits behind another transaction
// (bolt: queued behind a write that is still running; PostgreSQL: on the
// row lock of a document number) returns when its context's deadline
// passes, while the other still holds on, with store_unavailable and
// nothing written, rather than when the other ends; the holder still
// commits. A request must not wait for the store as long as its client does.
func testDeadlineEndsAWait(t *testing.T, s storage.Store) {
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// Freed at last in any case, so that a store that waits for the holder
	// fails this test instead of hanging it.
	safety := time.AfterFunc(20*time.Second, free)
	defer safety.Stop()
	held := make(chan error, 1)
	go func() {
		held <- s.Update(ctx, func(tx storage.Tx) error {
			if _, err := tx.NextSequence("m1", "held"); err != nil {
				return err
			}
			select {
			case <-holding:
			default:
				close(holding)
			}
			<-release
			return nil
		})
	}()
	<-holding
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err := s.Update(c, func(tx storage.Tx) error {
		_, err := tx.NextSequence("m1", "held")
		return err
	})
	select {
	case <-release:
		t.Fatalf("the Update returned (%v) only once the transaction it waited for ended", err)
	default:
	}
	free()
	if fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update past its deadline: %v (kind %v, code %s), want store_unavailable wrapping the deadline", err, fault.KindOf(err), fault.CodeOf(err))
	}
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	if n := next(t, s, "m1", "held"); n != 2 {
		t.Fatalf("next number %d, want 2: the Update past its deadline took one", n)
	}
}

// testSequencesConcurrent runs many transactions at once, every third of
// which fails after taking a number: the committed numbers are exactly 1..N.
func testSequencesConcurrent(t *testing.T, s storage.Store) {
	const workers = 48
	var mu sync.Mutex
	var got []int64
	var wg sync.WaitGroup
	boom := errors.New("boom")
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			err := s.Update(ctx, func(tx storage.Tx) error {
				var err error
				if n, err = tx.NextSequence("m3", "invoice"); err != nil {
					return err
				}
				if i%3 == 0 {
					return boom
				}
				return nil
			})
			switch {
			case i%3 == 0 && !errors.Is(err, boom):
				t.Errorf("failing transaction returned %v", err)
			case i%3 != 0 && err != nil:
				t.Errorf("concurrent next: %v", err)
			case i%3 != 0:
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(got)
	want := make([]int64, workers-workers/3)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("concurrent numbers %v, want 1..%d once each", got, len(want))
	}
	if n := next(t, s, "m3", "invoice"); n != int64(len(want)+1) {
		t.Fatalf("next after the concurrent run %d, want %d", n, len(want)+1)
	}
}

func testIdempotency(t *testing.T, s storage.Store) {
	r := &storage.IdempotencyRecord{MerchantID: "m1", Key: "k1", Fingerprint: "fp", Status: 201,
		Header: map[string]string{"Location": "/v1/orders/x"}, Body: []byte(`{"a":1}`), CreatedAt: Now(), ExpiresAt: Now().Add(time.Hour)}
	update(t, s, func(tx storage.Tx) error { return tx.PutIdempotency(r) })
	other := *r
	other.Fingerprint = "other"
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.PutIdempotency(&other) })
	wantKind(t, err, fault.Conflict)
	if fault.CodeOf(err) != "idempotency_key_exists" {
		t.Fatalf("duplicate idempotency record: code %q, want idempotency_key_exists", fault.CodeOf(err))
	}
	old := *r
	old.Key, old.ExpiresAt = "k0", Now().Add(-time.Minute)
	m2 := *r
	m2.MerchantID = "m2" // the same key of another merchant is another record
	update(t, s, func(tx storage.Tx) error {
		if err := tx.PutIdempotency(&old); err != nil {
			return err
		}
		return tx.PutIdempotency(&m2)
	})
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetIdempotency("m1", "k1")
		if err != nil || got == nil || got.Fingerprint != "fp" || got.Status != 201 || string(got.Body) != `{"a":1}` ||
			got.Header["Location"] != "/v1/orders/x" || !got.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("get %+v %v", got, err)
		}
		none, err := tx.GetIdempotency("m1", "missing")
		if none != nil || err != nil {
			t.Fatalf("missing key: %+v %v", none, err)
		}
		return nil
	})
	var n int
	update(t, s, func(tx storage.Tx) error {
		var err error
		n, err = tx.DeleteExpiredIdempotency(Now(), 100)
		return err
	})
	view(t, s, func(tx storage.Tx) error {
		gone, _ := tx.GetIdempotency("m1", "k0")
		kept, _ := tx.GetIdempotency("m1", "k1")
		kept2, _ := tx.GetIdempotency("m2", "k1")
		if n != 1 || gone != nil || kept == nil || kept2 == nil {
			t.Fatalf("sweep removed %d; k0=%v k1=%v m2=%v", n, gone, kept, kept2)
		}
		return nil
	})
	// A swept key can be used again.
	update(t, s, func(tx storage.Tx) error { return tx.PutIdempotency(&old) })
	// An answer large enough to be kept deflated comes back byte for byte.
	big := *r
	big.Key = "big"
	big.Body = []byte(`{"events":[` + strings.Repeat(`{"type":"partialCapture","amount":{"minorUnits":100}},`, 2*storage.CompressAnswerAbove/50) + `{}]}`)
	update(t, s, func(tx storage.Tx) error { return tx.PutIdempotency(&big) })
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetIdempotency("m1", "big")
		if err != nil || got == nil || !bytes.Equal(got.Body, big.Body) {
			t.Fatalf("large answer: %v, %v", err, got != nil)
		}
		return nil
	})
	// The limit bounds one sweep; the next sweep takes the rest.
	update(t, s, func(tx storage.Tx) error {
		for i := range 5 {
			rec := *r
			rec.Key, rec.ExpiresAt = fmt.Sprint("old", i), Now().Add(-time.Hour)
			if err := tx.PutIdempotency(&rec); err != nil {
				return err
			}
		}
		return nil
	})
	sweep := func(limit int) int {
		var n int
		update(t, s, func(tx storage.Tx) error {
			var err error
			n, err = tx.DeleteExpiredIdempotency(Now(), limit)
			return err
		})
		return n
	}
	if a, b, c := sweep(3), sweep(10), sweep(10); a != 3 || b != 3 || c != 0 {
		t.Fatalf("sweeps removed %d, %d, %d; want 3, 3, 0", a, b, c)
	}
	view(t, s, func(tx storage.Tx) error {
		kept, _ := tx.GetIdempotency("m1", "k1")
		if kept == nil {
			t.Fatal("an unexpired record was swept")
		}
		return nil
	})
	// Sweeps side by side (replicas) remove each record once.
	const many = 40
	update(t, s, func(tx storage.Tx) error {
		for i := range many {
			rec := *r
			rec.MerchantID, rec.Key, rec.ExpiresAt = "m3", fmt.Sprint("c", i), Now().Add(-time.Hour+time.Duration(i)*time.Millisecond)
			if err := tx.PutIdempotency(&rec); err != nil {
				return err
			}
		}
		return nil
	})
	sweepsSideBySide(t, s, many, Now(), storage.Tx.DeleteExpiredIdempotency)
	view(t, s, func(tx storage.Tx) error {
		if kept, _ := tx.GetIdempotency("m1", "k1"); kept == nil {
			t.Fatal("an unexpired record was swept side by side")
		}
		return nil
	})
}

func testOutbox(t *testing.T, s storage.Store) {
	msg := func(id string, at time.Time) *storage.OutboxMessage {
		return &storage.OutboxMessage{ID: id, MerchantID: "m1", Topic: "order.event", OrderID: "o1", Payload: []byte(`{}`),
			CreatedAt: at, NextAttempt: at}
	}
	update(t, s, func(tx storage.Tx) error {
		for i, id := range []string{"b", "a", "c"} {
			if err := tx.AddOutbox(msg(id, Now().Add(time.Duration(i)*time.Minute))); err != nil {
				return err
			}
		}
		return tx.AddOutbox(msg("later", Now().Add(time.Hour)))
	})
	pending := func(at time.Time, limit int) []string {
		var ids []string
		view(t, s, func(tx storage.Tx) error {
			ms, err := tx.PendingOutbox(at, limit, 0)
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			return err
		})
		return ids
	}
	if got := pending(Now().Add(5*time.Minute), 10); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("pending %v", got)
	}
	if got := pending(Now().Add(time.Minute), 10); !slices.Equal(got, []string{"b", "a"}) { // due at t is pending
		t.Fatalf("pending at the due time %v", got)
	}
	if got := pending(Now().Add(5*time.Minute), 2); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("pending with limit %v", got)
	}
	update(t, s, func(tx storage.Tx) error {
		m := msg("b", Now())
		m.Attempts, m.NextAttempt, m.LastError = 1, Now().Add(30*time.Minute), "503"
		if err := tx.UpdateOutbox(m); err != nil {
			return err
		}
		d := msg("a", Now().Add(time.Minute))
		d.Delivered, d.Attempts = true, 1
		return tx.UpdateOutbox(d)
	})
	if got := pending(Now().Add(5*time.Minute), 10); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after update %v", got)
	}
	if got := pending(Now().Add(2*time.Hour), 10); !slices.Equal(got, []string{"c", "b", "later"}) {
		t.Fatalf("later %v", got)
	}
	view(t, s, func(tx storage.Tx) error {
		ms, err := tx.PendingOutbox(Now().Add(2*time.Hour), 10, 0)
		if err != nil || len(ms) != 3 || ms[1].Attempts != 1 || ms[1].LastError != "503" || ms[1].OrderID != "o1" {
			t.Fatalf("pending records %+v %v", ms, err)
		}
		return nil
	})
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.UpdateOutbox(msg("nope", Now())) })
	wantKind(t, err, fault.NotFound)
	testOutboxLog(t, s, msg, pending)
}

// testOutboxPerMerchant: with a cap per merchant, a merchant's backlog
// yields its oldest few, and the messages of others due after that backlog
// are still listed, oldest first.
func testOutboxPerMerchant(t *testing.T, s storage.Store) {
	update(t, s, func(tx storage.Tx) error {
		add := func(id, merchant string, at time.Time) error {
			return tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: merchant, Topic: "order.event",
				Payload: []byte(`{}`), CreatedAt: at, NextAttempt: at})
		}
		for i := range 30 {
			if err := add(fmt.Sprintf("a%02d", i), "ma", Now().Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		for i, id := range []string{"b0", "b1", "b2"} {
			if err := add(id, "mb", Now().Add(time.Minute+time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		if err := add("c0", "mc", Now().Add(90*time.Second)); err != nil {
			return err
		}
		return add("c1", "mc", Now().Add(time.Hour)) // not due
	})
	pending := func(limit, perMerchant int) []string {
		var ids []string
		view(t, s, func(tx storage.Tx) error {
			ms, err := tx.PendingOutbox(Now().Add(2*time.Minute), limit, perMerchant)
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			return err
		})
		return ids
	}
	if got := pending(10, 2); !slices.Equal(got, []string{"a00", "a01", "b0", "b1", "c0"}) {
		t.Fatalf("two of each merchant: %v", got)
	}
	// All 34 due fit the limit: the same cap, however a store finds them.
	if got := pending(40, 2); !slices.Equal(got, []string{"a00", "a01", "b0", "b1", "c0"}) {
		t.Fatalf("two of each, all due within the limit: %v", got)
	}
	if got := pending(4, 2); !slices.Equal(got, []string{"a00", "a01", "b0", "b1"}) {
		t.Fatalf("two of each, four in all: %v", got)
	}
	if got := pending(3, 0); !slices.Equal(got, []string{"a00", "a01", "a02"}) {
		t.Fatalf("no cap: %v", got)
	}
	update(t, s, func(tx storage.Tx) error {
		ms, err := tx.PendingOutbox(Now().Add(2*time.Minute), 10, 1)
		if err != nil {
			return err
		}
		if len(ms) != 3 || ms[0].ID != "a00" || ms[1].ID != "b0" || ms[2].ID != "c0" {
			t.Fatalf("one of each, in an Update: %v", ms)
		}
		return nil
	})
}

// testOutboxLog: a message that failed for good leaves the pending list but
// stays readable, with its delivery log, in the merchant's newest-first list.
func testOutboxLog(t *testing.T, s storage.Store, msg func(string, time.Time) *storage.OutboxMessage,
	pending func(time.Time, int) []string) {
	update(t, s, func(tx storage.Tx) error {
		m := msg("c", Now().Add(2*time.Minute))
		m.Failed, m.Attempts, m.LastError = true, 8, "timeout"
		m.Log = []storage.DeliveryAttempt{{At: Now(), StatusCode: 503, DurationMS: 12}, {At: Now().Add(time.Minute), Error: "timeout", DurationMS: 10000}}
		if err := tx.UpdateOutbox(m); err != nil {
			return err
		}
		other := msg("x", Now())
		other.MerchantID = "m2"
		return tx.AddOutbox(other)
	})
	if got := pending(Now().Add(2*time.Hour), 10); !slices.Equal(got, []string{"x", "b", "later"}) { // every merchant's
		t.Fatalf("pending after a failure %v", got)
	}
	view(t, s, func(tx storage.Tx) error {
		m, err := tx.GetOutbox("m1", "c")
		if err != nil || !m.Failed || m.Attempts != 8 || len(m.Log) != 2 || m.Log[0].StatusCode != 503 ||
			m.Log[1].Error != "timeout" || m.Log[1].DurationMS != 10000 || !m.Log[1].At.Equal(Now().Add(time.Minute)) {
			t.Fatalf("failed message %+v %v", m, err)
		}
		_, err = tx.GetOutbox("m2", "c")
		wantKind(t, err, fault.NotFound)
		_, err = tx.GetOutbox("m1", "x")
		wantKind(t, err, fault.NotFound)
		return nil
	})
	var walked []string
	from := ""
	for range 10 {
		var page []*storage.OutboxMessage
		var next string
		view(t, s, func(tx storage.Tx) error {
			var err error
			page, next, err = tx.ListOutbox("m1", from, time.Time{}, 2)
			return err
		})
		for _, m := range page {
			walked = append(walked, m.ID)
		}
		if from = next; from == "" {
			break
		}
	}
	// Created: b at Now, a at +1m, c at +2m, later at +1h.
	if want := []string{"later", "c", "a", "b"}; !slices.Equal(walked, want) {
		t.Fatalf("delivery log walk %v, want %v", walked, want)
	}
	view(t, s, func(tx storage.Tx) error {
		page, next, err := tx.ListOutbox("m2", "", time.Time{}, 10)
		if err != nil || len(page) != 1 || page[0].ID != "x" || next != "" {
			t.Fatalf("other merchant's log %v %q %v", page, next, err)
		}
		_, _, err = tx.ListOutbox("m2", "a", time.Time{}, 10)
		wantKind(t, err, fault.NotFound)
		// From a position, whether a message is there or not: after
		// (+1m, "zz") come a (+1m, an id before "zz") and b; after a
		// position between c and a, a and b; after a's own, b.
		for _, c := range []struct {
			at   time.Time
			id   string
			want []string
		}{
			{Now().Add(time.Minute), "zz", []string{"a", "b"}},
			{Now().Add(90 * time.Second), "gone", []string{"a", "b"}},
			{Now().Add(time.Minute), "a", []string{"b"}},
			{Now().Add(-time.Second), "gone", nil},
		} {
			page, next, err := tx.ListOutbox("m1", c.id, c.at, 10)
			var got []string
			for _, m := range page {
				got = append(got, m.ID)
			}
			if err != nil || !slices.Equal(got, c.want) || next != "" {
				t.Fatalf("delivery log after (%s, %s): %v %q %v, want %v", c.at, c.id, got, next, err, c.want)
			}
		}
		return nil
	})
}

func testRollback(t *testing.T, s storage.Store) {
	b := newBuilder()
	o := b.make(t, "m1", 0, Start())
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx storage.Tx) error {
		if err := tx.CreateOrder(o.Clone()); err != nil {
			return err
		}
		if err := tx.PutMerchant(&storage.Merchant{ID: "m1", ClientID: "c1"}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(&storage.IdempotencyRecord{MerchantID: "m1", Key: "k", ExpiresAt: Start()}); err != nil {
			return err
		}
		if err := tx.AddOutbox(&storage.OutboxMessage{ID: "x", MerchantID: "m1", NextAttempt: Start()}); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	nothing := func() {
		t.Helper()
		view(t, s, func(tx storage.Tx) error {
			_, err := tx.GetOrder("m1", o.ID)
			wantKind(t, err, fault.NotFound)
			_, err = tx.GetMerchant("m1")
			wantKind(t, err, fault.NotFound)
			page, err := tx.ListOrders("m1", storage.OrderQuery{})
			if err != nil || len(page.Orders) != 0 {
				t.Fatalf("the index kept a rolled-back order: %d %v", len(page.Orders), err)
			}
			if r, err := tx.GetIdempotency("m1", "k"); r != nil || err != nil {
				t.Fatalf("idempotency record kept: %v %v", r, err)
			}
			if ms, err := tx.PendingOutbox(Now(), 10, 0); len(ms) != 0 || err != nil {
				t.Fatalf("outbox kept: %v %v", ms, err)
			}
			if due, err := tx.OrdersExpiringBefore(Start().Add(365*24*time.Hour), 10); len(due) != 0 || err != nil {
				t.Fatalf("expiry index kept: %v %v", due, err)
			}
			return nil
		})
	}
	nothing()
	// A panic inside a transaction is an internal error, and nothing is written.
	err = s.Update(ctx, func(tx storage.Tx) error {
		if err := tx.CreateOrder(o.Clone()); err != nil {
			return err
		}
		panic("bug")
	})
	if err == nil || fault.KindOf(err) != fault.Internal {
		t.Fatalf("panic reported %v", err)
	}
	// With where it happened: a background job logs this error and goes on,
	// and a panic without its stack cannot be traced to its cause.
	if msg := err.Error(); !strings.Contains(msg, "bug") || !strings.Contains(msg, "goroutine ") || !strings.Contains(msg, "storagetest") {
		t.Fatalf("panic reported without its value and stack: %v", err)
	}
	nothing()
	// The store still works after both.
	update(t, s, func(tx storage.Tx) error { return tx.CreateOrder(o.Clone()) })
	// A View cannot write.
	for name, write := range map[string]func(storage.Tx) error{
		"CreateOrder": func(tx storage.Tx) error { return tx.CreateOrder(b.make(t, "m1", 1, Start())) },
		"PutMerchant": func(tx storage.Tx) error { return tx.PutMerchant(&storage.Merchant{ID: "m9", ClientID: "c9"}) },
		"NextSequence": func(tx storage.Tx) error {
			_, err := tx.NextSequence("m1", "invoice")
			return err
		},
		"DeleteExpiredIdempotency": func(tx storage.Tx) error {
			_, err := tx.DeleteExpiredIdempotency(Now(), 10)
			return err
		},
	} {
		if err := s.View(ctx, write); err == nil {
			t.Errorf("View %s wrote", name)
		}
	}
	view(t, s, func(tx storage.Tx) error {
		if _, err := tx.GetMerchant("m9"); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("a view wrote a merchant: %v", err)
		}
		return nil
	})
	if n := next(t, s, "m1", "invoice"); n != 1 {
		t.Fatalf("a view took a number: next is %d", n)
	}
	var vNow, uNow time.Time
	view(t, s, func(tx storage.Tx) error { vNow = tx.Now(); return nil })
	update(t, s, func(tx storage.Tx) error { uNow = tx.Now(); return nil })
	if !vNow.Equal(Now()) || !uNow.Equal(Now()) {
		t.Fatalf("tx.Now() = %v / %v, want the store clock %v", vNow, uNow, Now())
	}
	// A canceled context runs nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	if err := s.Update(cctx, func(storage.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("canceled update: %v ran=%v", err, ran)
	}
}

// list walks every page of q with the given page size.
func list(t *testing.T, s storage.Store, merchant string, q storage.OrderQuery, size int) []string {
	t.Helper()
	ids := []string{}
	q.Size = size
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("cursor walk does not end")
		}
		var page storage.OrderPage
		view(t, s, func(tx storage.Tx) error {
			var err error
			page, err = tx.ListOrders(merchant, q)
			return err
		})
		// Only the byte budget ends a page before size, and these orders
		// are far below storage.MaxPageBytes (testPageBudget covers it).
		if len(page.Orders) > size || len(page.Orders) < size && page.NextCursor != "" {
			t.Fatalf("page of %d orders (size %d) with cursor %q", len(page.Orders), size, page.NextCursor)
		}
		for _, o := range page.Orders {
			ids = append(ids, o.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		q.Cursor = page.NextCursor
	}
}

// newestFirst sorts orders the way every list returns them.
func newestFirst(os []*order.Order) []string {
	sort.Slice(os, func(i, j int) bool {
		if !os[i].CreatedAt.Equal(os[j].CreatedAt) {
			return os[i].CreatedAt.After(os[j].CreatedAt)
		}
		return os[i].ID > os[j].ID
	})
	ids := []string{}
	for _, o := range os {
		ids = append(ids, o.ID)
	}
	return ids
}

func testList(t *testing.T, s storage.Store) {
	b := newBuilder()
	var all []*order.Order
	at := func(m int) time.Time { return Start().Add(time.Duration(m) * time.Minute) }
	update(t, s, func(tx storage.Tx) error {
		for i := range 60 {
			o := b.make(t, "m1", i, at(i))
			all = append(all, o)
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		for i := range 5 {
			if err := tx.CreateOrder(b.make(t, "m2", i, at(i))); err != nil {
				return err
			}
		}
		return nil
	})
	// Orders created at the same instant still page deterministically (by id).
	update(t, s, func(tx storage.Tx) error {
		for _, i := range []int{7, 15, 23} {
			o := b.make(t, "m1", i, at(30))
			all = append(all, o)
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		return nil
	})
	expect := func(q storage.OrderQuery) []string {
		var hits []*order.Order
		for _, o := range all {
			if storage.Matches(o, o.Statuses(Now()), q) {
				hits = append(hits, o)
			}
		}
		return newestFirst(hits)
	}
	exp := func(m int) time.Time { return at(m).Add(order.DefaultPolicy().ExpiryPeriod) }
	st := func(ss ...order.Status) []order.Status { return ss }
	queries := map[string]storage.OrderQuery{
		"all":                      {},
		"one store":                {StoreIDs: []string{"store-1"}},
		"two stores":               {StoreIDs: []string{"store-1", "store-2"}},
		"unknown store":            {StoreIDs: []string{"store-9"}},
		"order references":         {OrderReferences: []string{all[5].OrderReference, all[9].OrderReference}},
		"merchant reference":       {MerchantReferences: []string{"ref-2"}},
		"merchant references":      {MerchantReferences: []string{"ref-2", "ref-4", "nope"}},
		"status any":               {Status: st(order.StatusFullyCaptured, order.StatusCancelled)},
		"status uncaptured":        {Status: st(order.StatusUncaptured)},
		"status expired":           {Status: st(order.StatusExpired)},
		"status unacknowledged":    {Status: st(order.StatusUnacknowledged)},
		"status onHold":            {Status: st(order.StatusOnHold)},
		"status readyForCapture":   {Status: st(order.StatusReadyForCapture)},
		"statusAnd":                {StatusAnd: st(order.StatusFullyCaptured, order.StatusFullyRefunded)},
		"statusAnd partial":        {StatusAnd: st(order.StatusFullyCaptured, order.StatusPartiallyRefunded)},
		"statusAnd uncaptured":     {StatusAnd: st(order.StatusUncaptured, order.StatusPartiallyCaptured)},
		"statusNot":                {StatusNot: st(order.StatusCancelled)},
		"statusNot two":            {StatusNot: st(order.StatusUncaptured, order.StatusFullyRefunded)},
		"status and statusNot":     {Status: st(order.StatusFullyCaptured), StatusNot: st(order.StatusPartiallyRefunded)},
		"category":                 {Categories: []order.Category{order.CategoryCard}},
		"categories":               {Categories: []order.Category{order.CategoryAdvanceInvoice, order.CategoryServiceInvoice}},
		"category directBank":      {Categories: []order.Category{order.CategoryDirectBank}},
		"category invoice":         {Categories: []order.Category{order.CategoryInvoice}},
		"created range":            {CreatedFrom: at(10), CreatedTo: at(25)},
		"created from":             {CreatedFrom: at(50)},
		"created to":               {CreatedTo: at(3)},
		"created same instant":     {CreatedFrom: at(30), CreatedTo: at(31)},
		"created to that instant":  {CreatedTo: at(30)}, // createdTo is exclusive
		"expires range":            {ExpiresFrom: exp(10), ExpiresTo: exp(20)},
		"expires from":             {ExpiresFrom: exp(55)},
		"q order id":               {Q: all[12].ID},
		"q order reference":        {Q: all[13].OrderReference},
		"q merchant reference":     {Q: "ref-3"},
		"q nothing":                {Q: "no-such-thing"},
		"ids":                      {IDs: []string{all[3].ID, all[7].ID, all[44].ID, "no-such-id"}},
		"ids+status":               {IDs: []string{all[0].ID, all[1].ID, all[2].ID}, Status: st(order.StatusCancelled)},
		"ids+q":                    {IDs: []string{all[0].ID, all[1].ID}, Q: all[1].OrderReference},
		"store+status+category":    {StoreIDs: []string{"store-0"}, Status: st(order.StatusUncaptured), Categories: []order.Category{order.CategoryServiceInvoice}},
		"store+status":             {StoreIDs: []string{"store-2"}, Status: st(order.StatusFullyCaptured, order.StatusPartiallyCaptured)},
		"reference+created":        {MerchantReferences: []string{"ref-1", "ref-4"}, CreatedFrom: at(20)},
		"store+statusNot":          {StoreIDs: []string{"store-2"}, StatusNot: st(order.StatusFullyCaptured)},
		"statusAnd+expires":        {StatusAnd: st(order.StatusUncaptured), ExpiresTo: exp(40)},
		"category+created+expires": {Categories: []order.Category{order.CategoryCard, order.CategoryInvoice}, CreatedFrom: at(5), ExpiresTo: exp(50)},
		"q+store":                  {Q: "ref-1", StoreIDs: []string{"store-0"}},
		"everything":               {StoreIDs: []string{"store-0", "store-1"}, MerchantReferences: []string{"ref-0", "ref-1", "ref-2"}, Status: st(order.StatusFullyCaptured, order.StatusUncaptured), StatusNot: st(order.StatusFullyRefunded), Categories: []order.Category{order.CategoryCard, order.CategoryServiceInvoice, order.CategoryInvoice}, CreatedFrom: at(2), CreatedTo: at(58), ExpiresFrom: exp(1)},
		"nothing matches":          {StoreIDs: []string{"store-1"}, StatusAnd: st(order.StatusCancelled, order.StatusFullyCaptured)},
	}
	// The data covers every filter value the queries name.
	for _, name := range []string{"status expired", "status unacknowledged", "status onHold", "category directBank",
		"category invoice", "statusAnd", "statusAnd partial", "statusAnd uncaptured", "created same instant", "everything"} {
		if len(expect(queries[name])) == 0 {
			t.Fatalf("the data has no order for %q", name)
		}
	}
	for name, q := range queries {
		want := expect(q)
		for _, size := range []int{1, 7, 100} {
			if got := list(t, s, "m1", q, size); !slices.Equal(got, want) {
				t.Errorf("%s (size %d): got %d orders %v\nwant %d %v", name, size, len(got), got, len(want), want)
			}
		}
	}
	if n := len(list(t, s, "m1", storage.OrderQuery{}, 1000)); n != 63 {
		t.Fatalf("m1 has %d orders, want 63", n)
	}
	if got := list(t, s, "m2", storage.OrderQuery{}, 100); len(got) != 5 {
		t.Fatalf("m2 lists %d orders, want its 5", len(got))
	}
	if got := list(t, s, "m2", storage.OrderQuery{IDs: []string{all[0].ID}}, 100); len(got) != 0 {
		t.Fatalf("m2 lists m1's order by id: %v", got)
	}
	view(t, s, func(tx storage.Tx) error {
		for _, size := range []int{storage.MaxPageSize + 1, -1} {
			_, err := tx.ListOrders("m1", storage.OrderQuery{Size: size})
			wantKind(t, err, fault.Invalid)
			if e := (*fault.Error)(nil); !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field != "size" {
				t.Fatalf("size %d: %v", size, err)
			}
		}
		_, err := tx.ListOrders("m1", storage.OrderQuery{Cursor: "!!not a cursor!!"})
		wantKind(t, err, fault.Invalid)
		page, err := tx.ListOrders("m1", storage.OrderQuery{})
		if err != nil || len(page.Orders) != 63 || page.NextCursor != "" {
			t.Fatalf("default size: %d %q %v", len(page.Orders), page.NextCursor, err)
		}
		page, err = tx.ListOrders("m1", storage.OrderQuery{Size: storage.MaxPageSize})
		if err != nil || len(page.Orders) != 63 {
			t.Fatalf("max size: %d %v", len(page.Orders), err)
		}
		// A page that ends exactly at the last order has no cursor.
		page, err = tx.ListOrders("m1", storage.OrderQuery{Size: 63})
		if err != nil || len(page.Orders) != 63 || page.NextCursor != "" {
			t.Fatalf("exact page: %d %q %v", len(page.Orders), page.NextCursor, err)
		}
		return nil
	})

	// Updates move orders between index entries: capture an uncaptured order
	// and change its merchant reference.
	o := all[0] // shapes[0]: uncaptured
	update(t, s, func(tx storage.Tx) error {
		cur, err := tx.GetOrder("m1", o.ID)
		if err != nil {
			return err
		}
		env := b.env(Start().Add(time.Hour))
		if _, err := capture.Full(cur, nil, env); err != nil {
			return err
		}
		if err := cur.SetReference(&order.ReferenceRequest{Reference: ptr("moved")}, env); err != nil {
			return err
		}
		if err := tx.UpdateOrder(cur); err != nil {
			return err
		}
		*o = *cur
		return nil
	})
	for name, q := range map[string]storage.OrderQuery{
		"fullyCaptured": {Status: st(order.StatusFullyCaptured)},
		"uncaptured":    {Status: st(order.StatusUncaptured)},
		"old reference": {MerchantReferences: []string{"ref-0"}},
		"new reference": {MerchantReferences: []string{"moved"}},
		"q new":         {Q: "moved"},
	} {
		if got, want := list(t, s, "m1", q, 10), expect(q); !slices.Equal(got, want) {
			t.Errorf("after update, %s: got %v want %v", name, got, want)
		}
	}
}

func testCursorWalk(t *testing.T, s storage.Store) {
	b := newBuilder()
	var before []*order.Order
	update(t, s, func(tx storage.Tx) error {
		for i := range 30 {
			o := b.make(t, "m1", i, Start().Add(time.Duration(i/2)*time.Second)) // pairs share an instant
			before = append(before, o)
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		return nil
	})
	existing := before
	var mu sync.Mutex
	var added []*order.Order
	stamp := 0
	for _, q := range []storage.OrderQuery{{Size: 4}, {Size: 3, StoreIDs: []string{"store-1", "store-2"}}} {
		existing = append(existing, added...)
		added = nil
		var want []*order.Order
		for _, o := range existing {
			if storage.Matches(o, o.Statuses(Now()), q) {
				want = append(want, o)
			}
		}
		wantIDs := newestFirst(want)
		var seen []string
		var inserted []string
		for pages := 0; pages < 100; pages++ {
			var page storage.OrderPage
			view(t, s, func(tx storage.Tx) error {
				var err error
				page, err = tx.ListOrders("m1", q)
				return err
			})
			for _, o := range page.Orders {
				seen = append(seen, o.ID)
			}
			// Concurrent writers insert newer orders between pages.
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mu.Lock()
					stamp++ // every insert is newer than every order before it
					at := Start().Add(time.Hour + time.Duration(stamp)*time.Second)
					mu.Unlock()
					o := b.make(t, "m1", w+1, at)
					if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
						t.Errorf("concurrent insert: %v", err)
					}
					mu.Lock()
					inserted = append(inserted, o.ID)
					added = append(added, o)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
		if !slices.Equal(seen, wantIDs) {
			t.Fatalf("walk %+v with concurrent inserts saw %v, want the %d that existed, in order: %v", q, seen, len(wantIDs), wantIDs)
		}
		// The inserts happened: a fresh walk sees them first.
		q.Cursor = ""
		fresh := list(t, s, "m1", storage.OrderQuery{IDs: inserted}, 1000)
		if len(fresh) != len(inserted) {
			t.Fatalf("concurrent inserts: %d listed of %d", len(fresh), len(inserted))
		}
	}
}

func testExpiring(t *testing.T, s storage.Store) {
	b := newBuilder()
	open := b.make(t, "m1", 0, Start())                         // uncaptured
	closed := b.make(t, "m1", 3, Start())                       // fully captured: cannot expire
	cancelled := b.make(t, "m1", 1, Start())                    // cancelled: cannot expire
	later := b.make(t, "m2", 8, Start().Add(10*time.Hour))      // uncaptured, expires later
	partial := b.make(t, "m2", 2, Start().Add(20*time.Hour))    // something left uncaptured
	marked := b.make(t, "m1", 6, Start().Add(-30*24*time.Hour)) // already marked expired
	update(t, s, func(tx storage.Tx) error {
		for _, o := range []*order.Order{open, closed, cancelled, later, partial, marked} {
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		return nil
	})
	due := func(at time.Time, limit int) []string {
		ids := []string{}
		view(t, s, func(tx storage.Tx) error {
			os, err := tx.OrdersExpiringBefore(at, limit)
			for _, o := range os {
				ids = append(ids, o.ID)
			}
			return err
		})
		return ids
	}
	exp := open.ExpiresAt
	if got := due(exp, 10); len(got) != 0 {
		t.Fatalf("due at the expiry instant (before is exclusive) %v", got)
	}
	if got := due(exp.Add(time.Second), 10); !slices.Equal(got, []string{open.ID}) {
		t.Fatalf("due after expiry %v", got)
	}
	end := partial.ExpiresAt.Add(time.Second)
	if got := due(end, 10); !slices.Equal(got, []string{open.ID, later.ID, partial.ID}) {
		t.Fatalf("due later %v", got)
	}
	if got := due(end, 2); !slices.Equal(got, []string{open.ID, later.ID}) {
		t.Fatalf("due with limit %v", got)
	}
	// Once marked expired (or otherwise closed), an order is no longer due.
	update(t, s, func(tx storage.Tx) error {
		o, err := tx.GetOrder("m1", open.ID)
		if err != nil {
			return err
		}
		if !o.MarkExpired(b.env(exp.Add(time.Second))) {
			return errors.New("not marked")
		}
		if err := tx.UpdateOrder(o); err != nil {
			return err
		}
		p, err := tx.GetOrder("m2", partial.ID)
		if err != nil {
			return err
		}
		if err := p.Cancel(b.env(Start().Add(21 * time.Hour))); err != nil {
			return err
		}
		return tx.UpdateOrder(p)
	})
	if got := due(end, 10); !slices.Equal(got, []string{later.ID}) {
		t.Fatalf("due after marking %v", got)
	}
}

// testStatusesAsOfLastChange: an order written after its expiry date but not
// yet marked expired (a write that appends no event, such as a resend) is
// indexed with its statuses as of its last change (updatedAt), on every
// store alike: a status that time alone brings enters the index when the
// expiry job marks the order (docs/decisions.md).
func testStatusesAsOfLastChange(t *testing.T, s storage.Store) {
	b := newBuilder()
	o := b.make(t, "m1", 0, Start().AddDate(0, 0, -40)) // uncaptured, expiresAt 12 days before Now
	if !o.ExpiresAt.Before(Now()) || o.ExpiredMarked {
		t.Fatalf("order expires %s, marked %v; want past and unmarked", o.ExpiresAt, o.ExpiredMarked)
	}
	update(t, s, func(tx storage.Tx) error { return tx.CreateOrder(o) })
	update(t, s, func(tx storage.Tx) error {
		got, err := tx.GetOrder("m1", o.ID)
		if err != nil {
			return err
		}
		return tx.UpdateOrder(got) // no event: updatedAt stays before the expiry
	})
	for _, c := range []struct {
		status order.Status
		want   int
	}{{order.StatusExpired, 0}, {order.StatusReadyForCapture, 1}, {order.StatusUncaptured, 1}} {
		view(t, s, func(tx storage.Tx) error {
			page, err := tx.ListOrders("m1", storage.OrderQuery{Status: []order.Status{c.status}, Size: 10})
			if err != nil {
				return err
			}
			if len(page.Orders) != c.want {
				t.Errorf("status=%s lists %d orders, want %d", c.status, len(page.Orders), c.want)
			}
			return nil
		})
	}
}

// testOutboxImmutable: a message's merchant and creation time place it in
// the stores' indexes (a merchant's log, the retention sweep's walk), so an
// update that changes either is refused and leaves the message as it was.
func testOutboxImmutable(t *testing.T, s storage.Store) {
	at := Now()
	msg := func() *storage.OutboxMessage {
		return &storage.OutboxMessage{ID: "n1", MerchantID: "m1", Topic: "order.event", OrderID: "o1", Payload: []byte(`{}`),
			CreatedAt: at, NextAttempt: at}
	}
	update(t, s, func(tx storage.Tx) error { return tx.AddOutbox(msg()) })
	moved := msg()
	moved.CreatedAt, moved.Attempts = at.Add(-time.Hour), 1
	other := msg()
	other.MerchantID, other.Attempts = "m2", 1
	for name, m := range map[string]*storage.OutboxMessage{"creation time": moved, "merchant": other} {
		err := s.Update(ctx, func(tx storage.Tx) error { return tx.UpdateOutbox(m) })
		wantKind(t, err, fault.Conflict)
		if fault.CodeOf(err) != "outbox_immutable" {
			t.Fatalf("update changing the %s: code %q, want outbox_immutable", name, fault.CodeOf(err))
		}
	}
	view(t, s, func(tx storage.Tx) error {
		got, err := tx.GetOutbox("m1", "n1")
		if err != nil || !got.CreatedAt.Equal(at) || got.Attempts != 0 {
			t.Fatalf("after refused updates: %+v %v", got, err)
		}
		return nil
	})
}

// testOutboxDueBoundary: a message is pending from its NextAttempt on, to
// the nanosecond, which stores keep: one due a nanosecond after the claim's
// time is not handed out yet, with or without a cap per merchant.
func testOutboxDueBoundary(t *testing.T, s storage.Store) {
	at := Now()
	update(t, s, func(tx storage.Tx) error {
		return tx.AddOutbox(&storage.OutboxMessage{ID: "n1", MerchantID: "m1", Topic: "order.event", Payload: []byte(`{}`),
			CreatedAt: at, NextAttempt: at.Add(time.Nanosecond)})
	})
	for _, perMerchant := range []int{0, 1} {
		pending := func(at time.Time) int {
			var n int
			view(t, s, func(tx storage.Tx) error {
				ms, err := tx.PendingOutbox(at, 10, perMerchant)
				n = len(ms)
				return err
			})
			return n
		}
		if before, due := pending(at), pending(at.Add(time.Nanosecond)); before != 0 || due != 1 {
			t.Fatalf("perMerchant %d: pending a nanosecond before its time %d, at it %d; want 0, 1", perMerchant, before, due)
		}
	}
}
