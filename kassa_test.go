package kassa_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/storagetest"
	"github.com/kassahq/kassa/token"
)

type fixture struct {
	ledger   *kassa.Ledger
	store    storage.Store
	merchant string
	ctx      context.Context
	now      func() time.Time
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, time.Now, kassa.Options{}) }

// newFixtureWith is newFixture on a memory store whose clock is now, with
// the ledger's options opts.
func newFixtureWith(t *testing.T, now func() time.Time, opts kassa.Options) *fixture {
	t.Helper()
	st := memory.New(now)
	l := kassa.New(st, opts)
	creds, created, err := l.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m"})
	if err != nil || !created {
		t.Fatalf("merchant: %v %v", created, err)
	}
	return &fixture{ledger: l, store: st, merchant: creds.MerchantID, ctx: context.Background(), now: now}
}

// authorization is an invoice token tok of the merchant, valid for an hour.
func (f *fixture) authorization(tok string) *token.Authorization {
	now := f.now()
	return &token.Authorization{Token: tok, MerchantID: f.merchant, Country: "SE", Currency: "SEK", Locale: "sv-SE",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt:     now, ExpiresAt: now.Add(time.Hour)}
}

// capturedOrder creates an order of one line of amount and captures it in full.
func (f *fixture) capturedOrder(t *testing.T, tok string, amount int64) {
	t.Helper()
	o := f.order(t, tok, amount)
	if _, err := f.ledger.Capture(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// order creates an order of lines (each unitPrice at 25 % VAT, quantity 1).
func (f *fixture) order(t *testing.T, tok string, prices ...int64) *order.Order {
	t.Helper()
	if err := f.ledger.PutAuthorization(f.ctx, f.authorization(tok)); err != nil {
		t.Fatal(err)
	}
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"}
	for i, p := range prices {
		req.OrderLines = append(req.OrderLines, order.LineInput{Description: ptr(fmt.Sprint("line ", i)),
			Quantity: ptr(int64(1)), UnitPrice: ptr(p), Vat: ptr(int64(2500))})
	}
	res, err := f.ledger.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, tok, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Order
}

func partial(amount int64) *capture.PartialRequest {
	return &capture.PartialRequest{OrderLines: []order.LineInput{{Description: ptr("part"), Quantity: ptr(int64(1)),
		UnitPrice: ptr(amount), Vat: ptr(int64(2500))}}, TotalCaptureAmount: ptr(amount)}
}

func TestIdempotentReplayReturnsOriginalBody(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000, 20000)
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "k1"}
	first, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(5000))
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(5000))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || first.Replayed || again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: replayed=%v status %d/%d equal=%v", again.Replayed, first.Status, again.Status, bytes.Equal(again.Body, first.Body))
	}
	got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
	if len(got.Captured) != 1 || got.Amounts().Captured != 5000 {
		t.Fatalf("captured %d times, %d", len(got.Captured), got.Amounts().Captured)
	}
}

func TestIdempotencyKeyReusedWithAnotherRequest(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000)
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "k1"}
	if _, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(1000)); err != nil {
		t.Fatal(err)
	}
	_, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(2000))
	if fault.KindOf(err) != fault.KeyReused || fault.CodeOf(err) != "idempotency_key_reused" {
		t.Fatalf("got %v", err)
	}
	_, err = f.ledger.CancelOrder(f.ctx, call, o.ID)
	if fault.KindOf(err) != fault.KeyReused {
		t.Fatalf("same key on another operation: %v", err)
	}
}

func TestRefusedRequestStoresNoKey(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000)
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "k1"}
	bad := partial(1000)
	bad.TotalCaptureAmount = ptr(int64(999))
	if _, err := f.ledger.PartialCapture(f.ctx, call, o.ID, bad); fault.CodeOf(err) != "capture_amount_mismatch" {
		t.Fatalf("got %v", err)
	}
	// The key was not consumed: the corrected request runs.
	res, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(1000))
	if err != nil || res.Replayed {
		t.Fatalf("corrected request: %v replayed=%v", err, res != nil && res.Replayed)
	}
}

// TestConcurrentSameKeyExecutesOnce: eight requests with one
// Idempotency-Key, four on each of two replicas (Ledgers) of one store,
// create an order from a customer token, which makes any number of orders,
// so only the key keeps it to one. The first to reach its transaction's
// key record is held there, its order made and not committed, until every
// other has arrived (sameKeyRace), so they overlap on every run: each
// replica's in-flight map refuses its own twins at once, the other
// replica's one request past its map waits for the store and then finds the
// key and replays, and a retry afterwards replays too.
func TestConcurrentSameKeyExecutesOnce(t *testing.T) {
	const requests = 8
	race := &sameKeyRace{Store: memory.New(time.Now), arrived: make(chan struct{}, 2*requests), others: requests - 1}
	replicas := []*kassa.Ledger{kassa.New(race, kassa.Options{}), kassa.New(race, kassa.Options{})}
	ctx := context.Background()
	creds, _, err := replicas[0].EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ledger: replicas[0], store: race.Store, merchant: creds.MerchantID, ctx: ctx, now: time.Now}
	if err := f.ledger.PutAuthorization(ctx, f.authorization("t1")); err != nil {
		t.Fatal(err)
	}
	customerToken := customerTokenOf(t, ctx, f.ledger, f.merchant, "t1")
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "same"}
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}}
	race.armed.Store(true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	var executed *kassa.Result
	for i := range requests {
		wg.Go(func() {
			res, err := replicas[i%2].CreateOrderFromCustomerToken(ctx, call, customerToken, req)
			race.arrived <- struct{}{}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res.Replayed:
				outcomes["replayed"]++
			case err == nil:
				outcomes["executed"]++
				executed = res
			case fault.CodeOf(err) == "idempotency_request_in_progress":
				outcomes["inFlight"]++
			default:
				outcomes[err.Error()]++
			}
		})
	}
	wg.Wait()
	race.armed.Store(false)
	if want := map[string]int{"executed": 1, "replayed": 1, "inFlight": requests - 2}; !maps.Equal(outcomes, want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	for _, l := range replicas {
		again, err := l.CreateOrderFromCustomerToken(ctx, call, customerToken, req)
		if err != nil || !again.Replayed || again.Status != executed.Status || !bytes.Equal(again.Body, executed.Body) {
			t.Fatalf("a retry once the requests ended: %+v %v, want the replay of %s", again, err, executed.Body)
		}
	}
	page, _, err := f.ledger.ListOrders(ctx, f.merchant, storage.OrderQuery{})
	if err != nil || len(page.Orders) != 1 {
		t.Fatalf("%d orders (%v), want 1", len(page.Orders), err)
	}
}

// sameKeyRace is a store whose first transaction to write an idempotency
// record, once armed, waits before it writes it until the test's other
// requests have arrived: each has either returned (the test sends on
// arrived) or asked for a write transaction (Update sends), where it waits
// for the held one to commit, so none is counted twice. The held request
// asked for its own transaction, so it is one of the arrivals too. No
// request waits where the store cannot see it: the operation is a customer
// token's order, which no order's turn (Ledger's gate) queues.
type sameKeyRace struct {
	storage.Store
	armed   atomic.Bool
	arrived chan struct{} // buffered for every arrival, so no sender waits
	others  int
	hold    sync.Once
}

func (s *sameKeyRace) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if s.armed.Load() {
		s.arrived <- struct{}{}
	}
	return s.Store.Update(ctx, func(tx storage.Tx) error { return fn(sameKeyRaceTx{tx, s}) })
}

type sameKeyRaceTx struct {
	storage.Tx
	s *sameKeyRace
}

func (t sameKeyRaceTx) PutIdempotency(r *storage.IdempotencyRecord) error {
	if t.s.armed.Load() {
		t.s.hold.Do(func() {
			for range t.s.others + 1 {
				<-t.s.arrived
			}
		})
	}
	return t.Tx.PutIdempotency(r)
}

func TestConcurrentCapturesNeverPassAuthorization(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 50000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for {
				_, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: fmt.Sprint("c", i)}, o.ID, partial(5000))
				if fault.Is(err, fault.Conflict) && fault.CodeOf(err) != "idempotency_request_in_progress" {
					continue // version conflict with another writer: retry
				}
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
				return
			}
		}(i)
	}
	wg.Wait()
	got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
	if ok != 10 || got.Amounts().Captured != 50000 || len(got.Captured) != 10 {
		t.Fatalf("ok=%d captured=%d ledgers=%d", ok, got.Amounts().Captured, len(got.Captured))
	}
	seen := map[string]bool{}
	for _, l := range got.Captured {
		if seen[l.DocumentReference] {
			t.Fatalf("document %s used twice", l.DocumentReference)
		}
		seen[l.DocumentReference] = true
	}
}

func TestTokenIsSingleUse(t *testing.T) {
	f := newFixture(t)
	f.order(t, "t1", 1000)
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}}
	_, err := f.ledger.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, "t1", req)
	if fault.CodeOf(err) != "authorization_token_used" {
		t.Fatalf("second use: %v", err)
	}
}

func TestAcknowledgementRequiredWritesOutbox(t *testing.T) {
	f := newFixture(t)
	if _, err := f.ledger.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://m.example/hooks"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.ledger.PutAuthorization(f.ctx, &token.Authorization{Token: "adv", MerchantID: f.merchant, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayAdvanceInvoice},
		CreatedAt:     now, ExpiresAt: now.Add(time.Hour)})
	res, err := f.ledger.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, "adv",
		&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*storage.OutboxMessage
	f.store.View(f.ctx, func(tx storage.Tx) error {
		msgs, err = tx.PendingOutbox(time.Now().Add(time.Minute), 10, 0)
		return err
	})
	if len(msgs) != 1 || msgs[0].Topic != kassa.TopicAcknowledgementRequired || msgs[0].OrderID != res.Order.ID {
		t.Fatalf("outbox %+v", msgs)
	}
	if _, err := f.ledger.Capture(f.ctx, kassa.Call{MerchantID: f.merchant}, res.Order.ID, nil); fault.KindOf(err) != fault.NotAvailable {
		t.Fatalf("capture before acknowledge: %v", err)
	}
	if _, err := f.ledger.Acknowledge(f.ctx, kassa.Call{MerchantID: f.merchant}, res.Order.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Capture(f.ctx, kassa.Call{MerchantID: f.merchant}, res.Order.ID, nil); err != nil {
		t.Fatalf("capture after acknowledge: %v", err)
	}
}

func TestMerchantIsolation(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 1000)
	other, _, _ := f.ledger.EnsureMerchant(f.ctx, kassa.MerchantOptions{Name: "other"})
	if _, _, err := f.ledger.GetOrder(f.ctx, other.MerchantID, o.ID); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("other merchant read: %v", err)
	}
	if _, err := f.ledger.CancelOrder(f.ctx, kassa.Call{MerchantID: other.MerchantID}, o.ID); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("other merchant cancel: %v", err)
	}
}

func TestAuthenticate(t *testing.T) {
	f := newFixture(t)
	creds, _, _ := f.ledger.EnsureMerchant(f.ctx, kassa.MerchantOptions{ClientID: "c1", ClientSecret: "s1"})
	m, err := f.ledger.Authenticate(f.ctx, "c1", "s1")
	if err != nil || m.ID != creds.MerchantID {
		t.Fatalf("good secret: %v", err)
	}
	if _, err := f.ledger.Authenticate(f.ctx, "c1", "s2"); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("bad secret: %v", err)
	}
	// Keeping the merchant with a new secret rotates it.
	again, created, _ := f.ledger.EnsureMerchant(f.ctx, kassa.MerchantOptions{ClientID: "c1", ClientSecret: "s3"})
	if created || again.MerchantID != creds.MerchantID {
		t.Fatalf("ensure kept? created=%v", created)
	}
	if _, err := f.ledger.Authenticate(f.ctx, "c1", "s1"); fault.KindOf(err) != fault.Unauthorized {
		t.Fatalf("old secret still works")
	}
}

func TestSweepIdempotency(t *testing.T) {
	now := time.Now()
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{IdempotencyTTL: time.Hour})
	l := f.ledger
	o := f.order(t, "t1", 10000)
	for i := 0; i < 3; i++ {
		if _, err := l.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: fmt.Sprint("k", i)}, o.ID, partial(100)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.SweepIdempotency(f.ctx, 2); err != nil || n != 0 {
		t.Fatalf("sweep before retention: %d %v", n, err)
	}
	// Retention runs on real time: a sandbox moving its clock a day ahead
	// must not free a key, or the merchant's retry would capture again.
	now = now.Add(25 * time.Hour)
	if n, err := l.SweepIdempotency(f.ctx, 2); err != nil || n != 0 {
		t.Fatalf("sweep after the store's clock moved: %d %v", n, err)
	}
	if res, err := l.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: "k0"}, o.ID, partial(100)); err != nil || !res.Replayed {
		t.Fatalf("retry after the store's clock moved: %v replayed=%v", err, res != nil && res.Replayed)
	}
	wall := time.Now().Add(61 * time.Minute)
	kassa.SetWallClock(t, func() time.Time { return wall })
	if n, err := l.SweepIdempotency(f.ctx, 2); err != nil || n != 3 {
		t.Fatalf("sweep after retention: %d %v", n, err)
	}
	// The key is free again: the same request runs anew.
	res, err := l.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: "k0"}, o.ID, partial(100))
	if err != nil || res.Replayed {
		t.Fatalf("after sweep: %v replayed=%v", err, res != nil && res.Replayed)
	}
}

// endsAfterUpdates is a store that ends a context once n of its read-write
// transactions have returned: a deadline that falls between two of a job's.
type endsAfterUpdates struct {
	storage.Store
	n   int
	end context.CancelFunc
}

func (s *endsAfterUpdates) Update(ctx context.Context, fn func(storage.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if s.n--; s.n == 0 {
		s.end()
	}
	return err
}

// TestSweepStoppedBetweenTransactions: a sweep whose context ends between
// two of its transactions reports what it removed and an error that says
// which sweep stopped, of the kind a context ending in a transaction gives
// (store_unavailable, as ExpireOrders' and RunTasks' next transaction
// gives), with the context's error in it: not a bare "context canceled" of
// kind internal.
func TestSweepStoppedBetweenTransactions(t *testing.T) {
	now := time.Now()
	opts := kassa.Options{IdempotencyTTL: time.Hour}
	f := newFixtureWith(t, func() time.Time { return now }, opts)
	o := f.order(t, "t1", 10000)
	for i := range 3 {
		if _, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: fmt.Sprint("k", i)}, o.ID, partial(100)); err != nil {
			t.Fatal(err)
		}
	}
	wall := time.Now().Add(61 * time.Minute)
	kassa.SetWallClock(t, func() time.Time { return wall })
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	l := kassa.New(&endsAfterUpdates{Store: f.store, n: 1, end: cancel}, opts)
	n, err := l.SweepIdempotency(ctx, 2)
	if n != 2 || !errors.Is(err, context.Canceled) || !fault.Is(err, fault.Unavailable) || !strings.HasPrefix(err.Error(), "idempotency sweep, after removing 2: ") {
		t.Fatalf("sweep stopped after its first transaction: %d, %v (kind %s)", n, err, fault.KindOf(err))
	}
	// The rest is removed by the next sweep.
	if n, err := f.ledger.SweepIdempotency(f.ctx, 2); n != 1 || err != nil {
		t.Fatalf("the next sweep: %d %v", n, err)
	}
}

// TestAutoCaptureOnTheClock drives the auto-capture job with a settable
// clock: nothing before the delay, a full capture after it, never twice.
func TestAutoCaptureOnTheClock(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx, merchant := f.ledger, f.ctx, f.merchant
	if err := l.PutAuthorization(ctx, f.authorization("t")); err != nil {
		t.Fatal(err)
	}
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, "t", &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", AutoCapture: &order.AutoCapture{Enabled: true, DelayMinutes: 30},
		TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(5000))}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Order.ID
	now = now.Add(29*time.Minute + 59*time.Second)
	if n, err := l.RunAutoCapture(ctx, 10); err != nil || n != 0 {
		t.Fatalf("before the delay: %d %v", n, err)
	}
	if o, _, _ := l.GetOrder(ctx, merchant, id); len(o.Captured) != 0 {
		t.Fatal("captured before the delay")
	}
	now = now.Add(time.Second)
	if n, err := l.RunAutoCapture(ctx, 10); err != nil || n != 1 {
		t.Fatalf("at the delay: %d %v", n, err)
	}
	o, _, _ := l.GetOrder(ctx, merchant, id)
	if len(o.Captured) != 1 || o.Amounts().Captured != 5000 || o.Events[len(o.Events)-1].Type != order.EventFullCapture {
		t.Fatalf("after the delay: %+v", o.Amounts())
	}
	now = now.Add(time.Hour)
	if n, _ := l.RunAutoCapture(ctx, 10); n != 0 {
		t.Fatalf("captured twice: %d", n)
	}
	// The capture is queued for settlement.
	made, err := l.RunSettlements(ctx)
	if err != nil || len(made) != 1 || made[0].Gross != 5000 {
		t.Fatalf("settlement %+v %v", made, err)
	}
}

// A cached order response holds signed document links, which change every
// wall-clock hour; reading the order in the next hour must render links of
// that hour, not serve the cached ones (which could be past their expiry).
func TestCachedOrderResponseNeverOutlivesItsDocumentLinks(t *testing.T) {
	wall := time.Date(2026, 11, 23, 10, 30, 0, 0, time.UTC)
	kassa.SetWallClock(t, func() time.Time { return wall })
	links := 0
	f := newFixtureWith(t, time.Now, kassa.Options{DocumentURL: func(o *order.Order, sub *order.Ledger) string {
		links++
		return "https://kassa.test/documents/" + sub.ID + "?hour=" + wall.Format("15")
	}})
	l := f.ledger
	o := f.order(t, "t-links", 10000)
	if _, err := l.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID, partial(4000)); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		b, err := l.OrderJSON(f.ctx, f.merchant, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := read()
	if !strings.Contains(first, "?hour=10") {
		t.Fatalf("no document link of 10:00 in %s", first)
	}
	rendered := links
	wall = time.Date(2026, 11, 23, 10, 59, 59, 0, time.UTC)
	if again := read(); again != first || links != rendered {
		t.Fatalf("same hour, same version: expected the cached body (links rendered %d→%d)", rendered, links)
	}
	wall = time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)
	if next := read(); !strings.Contains(next, "?hour=11") || strings.Contains(next, "?hour=10") {
		t.Fatalf("the next hour served links of the previous one: %s", next)
	}
}

// TestPutAuthorizationOnce: a token id is put once, so a used single-use
// token cannot be put again to make a second order; bad input is Invalid.
func TestPutAuthorizationOnce(t *testing.T) {
	f := newFixture(t)
	f.order(t, "once", 10000)
	again := f.authorization("once")
	if err := f.ledger.PutAuthorization(f.ctx, again); fault.CodeOf(err) != "authorization_token_exists" || !fault.Is(err, fault.Conflict) {
		t.Fatalf("putting a used token again: %v, want conflict authorization_token_exists", err)
	}
	_, err := f.ledger.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, "once", &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(100)), Vat: ptr(int64(2500))}}})
	if fault.CodeOf(err) != "authorization_token_used" {
		t.Fatalf("second order from a used token: %v", err)
	}
	if err := f.ledger.PutAuthorization(f.ctx, nil); !fault.Is(err, fault.Invalid) {
		t.Fatalf("nil token: %v", err)
	}
	bad := *again
	bad.Token, bad.PaymentMethod.Type = "fresh", "bitcoin"
	if err := f.ledger.PutAuthorization(f.ctx, &bad); !fault.Is(err, fault.Invalid) {
		t.Fatalf("unknown payment type: %v", err)
	}
}

// TestNilRequestsAreInvalid: a method given a nil request answers Invalid,
// without running a transaction; Capture and Refund read nil as the empty
// request, with the same fingerprint.
func TestNilRequestsAreInvalid(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "nil", 10000, 20000)
	call := kassa.Call{MerchantID: f.merchant}
	calls := map[string]func() (*kassa.Result, error){
		"EditOrder":      func() (*kassa.Result, error) { return f.ledger.EditOrder(f.ctx, call, o.ID, nil) },
		"PartialCapture": func() (*kassa.Result, error) { return f.ledger.PartialCapture(f.ctx, call, o.ID, nil) },
		"PartialRefund":  func() (*kassa.Result, error) { return f.ledger.PartialRefund(f.ctx, call, o.ID, "l", nil) },
		"EditCustomer":   func() (*kassa.Result, error) { return f.ledger.EditCustomer(f.ctx, call, o.ID, nil) },
		"EditPaymentMethod": func() (*kassa.Result, error) {
			return f.ledger.EditPaymentMethod(f.ctx, call, o.ID, nil)
		},
		"SetReference":  func() (*kassa.Result, error) { return f.ledger.SetReference(f.ctx, call, o.ID, nil) },
		"Recourse":      func() (*kassa.Result, error) { return f.ledger.Recourse(f.ctx, call, o.ID, "l", nil) },
		"CreateSession": func() (*kassa.Result, error) { return f.ledger.CreateSession(f.ctx, call, session.SourceCheckout, nil) },
		"UpdateSession": func() (*kassa.Result, error) {
			return f.ledger.UpdateSession(f.ctx, call, "s", session.SourceCheckout, nil)
		},
		"CreateOrderFromAuthorization": func() (*kassa.Result, error) {
			return f.ledger.CreateOrderFromAuthorization(f.ctx, call, "t", nil)
		},
		"CreateOrderFromCustomerToken": func() (*kassa.Result, error) {
			return f.ledger.CreateOrderFromCustomerToken(f.ctx, call, "c", nil)
		},
		"CreateCustomerToken": func() (*kassa.Result, error) { return f.ledger.CreateCustomerToken(f.ctx, call, "t", nil) },
	}
	for name, c := range calls {
		if _, err := c(); !fault.Is(err, fault.Invalid) || fault.CodeOf(err) != "validation_failed" {
			t.Errorf("%s(nil): %v (kind %v), want validation_failed", name, err, fault.KindOf(err))
		}
	}
	// Capture(nil) captures everything and keeps the fingerprint it always
	// had, so a keyed retry across an upgrade replays.
	keyed := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "all"}
	res, err := f.ledger.Capture(f.ctx, keyed, o.ID, nil)
	if err != nil || res.Order.Amounts().Captured != 30000 {
		t.Fatalf("Capture(nil): %v", err)
	}
	if res, err = f.ledger.Capture(f.ctx, keyed, o.ID, nil); err != nil || !res.Replayed {
		t.Fatalf("Capture(nil) again under its key: %v, replayed %v", err, res != nil && res.Replayed)
	}
}

// TestJobLimitsUnderOneAreInvalid: a batch limit under one is refused on
// every job instead of doing nothing, failing in the store, or (the sweep)
// looping until the context ends.
func TestJobLimitsUnderOneAreInvalid(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	for _, limit := range []int{0, -1} {
		if _, err := f.ledger.SweepIdempotency(ctx, limit); !fault.Is(err, fault.Invalid) {
			t.Errorf("SweepIdempotency(%d): %v", limit, err)
		}
		if _, err := f.ledger.ExpireOrders(ctx, limit); !fault.Is(err, fault.Invalid) {
			t.Errorf("ExpireOrders(%d): %v", limit, err)
		}
		if _, err := f.ledger.RunTasks(ctx, limit); !fault.Is(err, fault.Invalid) {
			t.Errorf("RunTasks(%d): %v", limit, err)
		}
	}
}

// TestUnknownEnumsAreInvalid: through the Go API (the server checks its
// query and body first), an unknown list status or category and an unknown
// session source are refused, not stored or silently matching nothing.
func TestUnknownEnumsAreInvalid(t *testing.T) {
	f := newFixture(t)
	for _, q := range []storage.OrderQuery{{Status: []order.Status{"bogus"}}, {StatusAnd: []order.Status{"x"}},
		{StatusNot: []order.Status{"y"}}, {Categories: []order.Category{"crypto"}}} {
		if _, _, err := f.ledger.ListOrders(f.ctx, f.merchant, q); !fault.Is(err, fault.Invalid) {
			t.Errorf("ListOrders(%+v): %v", q, err)
		}
	}
	req := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: []order.LineInput{{
		Description: ptr("a"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(100)), Vat: ptr(int64(2500))}}}
	if _, err := f.ledger.CreateSession(f.ctx, kassa.Call{MerchantID: f.merchant}, "bogus", req); !fault.Is(err, fault.Invalid) {
		t.Errorf("CreateSession with source bogus: %v", err)
	}
	if _, err := f.ledger.CreateSession(f.ctx, kassa.Call{MerchantID: f.merchant}, session.SourceCheckout, req); err != nil {
		t.Errorf("CreateSession: %v", err)
	}
}

// TestOrderSizeLimit: captures of new zero-amount lines, looped, stop at the
// order's line limit with a 409-kind refusal that leaves the order as it was;
// a refund still goes through on the full order.
func TestOrderSizeLimit(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "size", 10000, 5000)
	call := kassa.Call{MerchantID: f.merchant}
	res, err := f.ledger.PartialCapture(f.ctx, call, o.ID, &capture.PartialRequest{
		OrderLines: []order.LineInput{{ID: ptr(o.Uncaptured.Lines[0].ID)}}, TotalCaptureAmount: ptr(int64(10000))})
	if err != nil {
		t.Fatal(err)
	}
	paid := res.Order.Captured[0].ID
	zeros := &capture.PartialRequest{TotalCaptureAmount: ptr(int64(0))}
	for range order.MaxLines {
		zeros.OrderLines = append(zeros.OrderLines, order.LineInput{Description: ptr("free"), Quantity: ptr(int64(1)),
			UnitPrice: ptr(int64(0)), Vat: ptr(int64(2500))})
	}
	stored := 2 // the captured line and the one left uncaptured
	for stored+order.MaxLines <= order.MaxStoredLines {
		if _, err := f.ledger.PartialCapture(f.ctx, call, o.ID, zeros); err != nil {
			t.Fatalf("capture with %d lines stored: %v", stored, err)
		}
		stored += order.MaxLines
	}
	_, err = f.ledger.PartialCapture(f.ctx, call, o.ID, zeros)
	if fault.KindOf(err) != fault.NotAvailable || fault.CodeOf(err) != "order_size_limit" {
		t.Fatalf("capture past the limit: %v (kind %v)", err, fault.KindOf(err))
	}
	got, _, err := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + (stored-2)/order.MaxLines; len(got.Captured) != want {
		t.Fatalf("%d captures stored after the refusal, want %d", len(got.Captured), want)
	}
	res, err = f.ledger.Refund(f.ctx, call, o.ID, paid, nil)
	if err != nil {
		t.Fatalf("refund on a full order: %v", err)
	}
	if res.Order.Amounts().Refunded != 10000 {
		t.Fatalf("refunded %d, want 10000", res.Order.Amounts().Refunded)
	}
}

// TestPaymentsLeaveTheMerchantsSizeLimit: a buyer paying an invoice in
// many parts (in the sandbox, a test paying 1 öre at a time) is never
// refused, and those payments must not use up the order's event limit:
// once they had, the merchant could no longer capture the lines left,
// extend the expiry or set a reference, and the order could only be
// cancelled.
func TestPaymentsLeaveTheMerchantsSizeLimit(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "payments", 1_000_000, 5000)
	call := kassa.Call{MerchantID: f.merchant}
	res, err := f.ledger.PartialCapture(f.ctx, call, o.ID, &capture.PartialRequest{
		OrderLines: []order.LineInput{{ID: ptr(o.Uncaptured.Lines[0].ID)}}, TotalCaptureAmount: ptr(int64(1_000_000))})
	if err != nil {
		t.Fatal(err)
	}
	invoice := res.Order.Captured[0].ID
	if _, err := f.ledger.RegisterPayment(f.ctx, call, o.ID, invoice, 1); err != nil {
		t.Fatal(err)
	}
	// The other payments by the same rule in one transaction: through the
	// ledger, each would render the growing order, minutes in all.
	if err := f.store.Update(f.ctx, func(tx storage.Tx) error {
		stored, err := tx.GetOrder(f.merchant, o.ID)
		if err != nil {
			return err
		}
		env := order.Env{Now: f.now(), IDs: kassa.RandomIDs{}, Policy: order.DefaultPolicy()}
		for range order.MaxEvents - 1 {
			if err := stored.RegisterPayment(invoice, 1, env); err != nil {
				return err
			}
		}
		return tx.UpdateOrder(stored)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.ExtendExpiry(f.ctx, call, o.ID); err != nil {
		t.Fatalf("extend expiry after %d payments: %v", order.MaxEvents, err)
	}
	res, err = f.ledger.PartialCapture(f.ctx, call, o.ID, &capture.PartialRequest{
		OrderLines: []order.LineInput{{ID: ptr(o.Uncaptured.Lines[1].ID)}}, TotalCaptureAmount: ptr(int64(5000))})
	if err != nil {
		t.Fatalf("capture of the line left after %d payments: %v", order.MaxEvents, err)
	}
	if a := res.Order.Amounts(); a.Captured != 1_005_000 || a.Uncaptured != 0 {
		t.Fatalf("captured %d, uncaptured %d", a.Captured, a.Uncaptured)
	}
}

// TestSettlementsBeforeCutoff: a run up to a cutoff settles what occurred
// before it once; a second run to the same cutoff (another replica's daily
// run, a little later) makes nothing, and what came after waits.
func TestSettlementsBeforeCutoff(t *testing.T) {
	now := time.Date(2026, 2, 2, 1, 59, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx := f.ledger, f.ctx
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	f.capturedOrder(t, "before", 5000)
	now = cutoff
	f.capturedOrder(t, "at", 700)
	now = cutoff.Add(40 * time.Second)

	made, err := l.RunSettlementsBefore(ctx, cutoff)
	if err != nil || len(made) != 1 || made[0].Gross != 5000 {
		t.Fatalf("first run to the cutoff: %+v %v", made, err)
	}
	if made, err := l.RunSettlementsBefore(ctx, cutoff); err != nil || len(made) != 0 {
		t.Fatalf("second run to the cutoff: %+v %v", made, err)
	}
	if made, err := l.RunSettlements(ctx); err != nil || len(made) != 1 || made[0].Gross != 700 {
		t.Fatalf("run of everything: %+v %v", made, err)
	}
	if _, err := l.RunSettlementsBefore(ctx, time.Time{}); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("zero cutoff: %v", err)
	}
}

// TestLateItemWaitsForTheNextDay: a capture whose transaction began before
// the cutoff but committed after the day's first run (on another replica)
// is not settled by a later replica's run to the same cutoff, which would
// make a second settlement for the day; the next day's run settles it.
func TestLateItemWaitsForTheNextDay(t *testing.T) {
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	now := cutoff.Add(-time.Hour)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx := f.ledger, f.ctx
	f.capturedOrder(t, "early", 5000)
	now = cutoff.Add(10 * time.Second)
	if made, err := l.RunSettlementsBefore(ctx, cutoff); err != nil || len(made) != 1 || made[0].Gross != 5000 {
		t.Fatalf("first replica's run: %+v %v", made, err)
	}
	now = cutoff.Add(-time.Millisecond) // began before the cutoff, committed after the run
	f.capturedOrder(t, "late", 300)
	now = cutoff.Add(50 * time.Second)
	if made, err := l.RunSettlementsBefore(ctx, cutoff); err != nil || len(made) != 0 {
		t.Fatalf("second replica's run, same day: %+v %v; want no second settlement", made, err)
	}
	now = cutoff.Add(24*time.Hour + time.Second)
	made, err := l.RunSettlementsBefore(ctx, cutoff.Add(24*time.Hour))
	if err != nil || len(made) != 1 || made[0].Gross != 300 {
		t.Fatalf("next day's run: %+v %v; want the late capture of 300", made, err)
	}
}

// TestLateItemWaitsForTheNextDayPastOnePage: the settlements that mark a
// day settled are read newest first a page (20) at a time; a merchant
// settling more stores than a page holds has its day settled for every one
// of them, also for those found on a later page.
func TestLateItemWaitsForTheNextDayPastOnePage(t *testing.T) {
	const stores = 45 // three pages of 20
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	now := cutoff.Add(-time.Hour)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx, call := f.ledger, f.ctx, kassa.Call{MerchantID: f.merchant}
	capture := func(tok, store string, amount int64) {
		t.Helper()
		if err := l.PutAuthorization(ctx, f.authorization(tok)); err != nil {
			t.Fatal(err)
		}
		res, err := l.CreateOrderFromAuthorization(ctx, call, tok, &order.CreateRequest{Country: "SE", Currency: "SEK",
			Locale: "sv-SE", StoreID: store, OrderLines: []order.LineInput{{Description: ptr("line"), Quantity: ptr(int64(1)),
				UnitPrice: ptr(amount), Vat: ptr(int64(2500))}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Capture(ctx, call, res.Order.ID, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range stores {
		capture(fmt.Sprint("early-", i), fmt.Sprintf("store-%02d", i), 5000)
	}
	now = cutoff.Add(10 * time.Second)
	if made, err := l.RunSettlementsBefore(ctx, cutoff); err != nil || len(made) != stores {
		t.Fatalf("first replica's run: %d settlements, %v; want %d", len(made), err, stores)
	}
	now = cutoff.Add(-time.Millisecond) // began before the cutoff, committed after the run
	for i := range stores {
		capture(fmt.Sprint("late-", i), fmt.Sprintf("store-%02d", i), 300)
	}
	now = cutoff.Add(50 * time.Second)
	if made, err := l.RunSettlementsBefore(ctx, cutoff); err != nil || len(made) != 0 {
		t.Fatalf("second replica's run, same day: %d settlements, %v; want none", len(made), err)
	}
	now = cutoff.Add(24*time.Hour + time.Second)
	made, err := l.RunSettlementsBefore(ctx, cutoff.Add(24*time.Hour))
	if err != nil || len(made) != stores {
		t.Fatalf("next day's run: %d settlements, %v; want %d", len(made), err, stores)
	}
	for _, s := range made {
		if s.Gross != 300 {
			t.Fatalf("next day's settlement of %s: gross %d, want the late capture of 300", s.StoreID, s.Gross)
		}
	}
}

// countdownIDs mints ids that sort before every id it minted earlier, so
// the queue's item keys (ledger ids) sort opposite to when they occurred.
type countdownIDs struct{ n atomic.Int64 }

func (c *countdownIDs) NewID(string) string { return fmt.Sprintf("id-%08d", 99_999_999-c.n.Add(1)) }

// TestRunLargerThanOneReadSettlesTheOldest: when more items are pending
// than one run reads, the daily run settles the oldest and leaves the rest
// for the next day's, whatever order their keys sort in; reading by key
// settled the newest each day and left the oldest waiting forever.
func TestRunLargerThanOneReadSettlesTheOldest(t *testing.T) {
	kassa.SetSettlementRunSize(t, 2)
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	now := cutoff.Add(-3 * time.Hour)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{IDs: &countdownIDs{}})
	for i, amount := range []int64{1000, 2000, 4000} {
		now = cutoff.Add(time.Duration(i-3) * time.Hour)
		f.capturedOrder(t, fmt.Sprint("t", i), amount)
	}
	now = cutoff.Add(time.Minute)
	made, err := f.ledger.RunSettlementsBefore(f.ctx, cutoff)
	if err != nil || len(made) != 1 || made[0].Gross != 3000 {
		t.Fatalf("first day's run: %+v %v; want the two oldest captures, 1000 and 2000", made, err)
	}
	now = cutoff.Add(24*time.Hour + time.Minute)
	made, err = f.ledger.RunSettlementsBefore(f.ctx, cutoff.Add(24*time.Hour))
	if err != nil || len(made) != 1 || made[0].Gross != 4000 {
		t.Fatalf("next day's run: %+v %v; want the capture left over, 4000", made, err)
	}
}

// TestSettlementAheadOfTheClockHoldsNothingBack: a settlement made while
// the clock was a year ahead (a sandbox clock since reset, a host clock set
// right) does not count as today's, so today's run still settles.
func TestSettlementAheadOfTheClockHoldsNothingBack(t *testing.T) {
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	now := cutoff.AddDate(1, 0, 0)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	f.capturedOrder(t, "ahead", 5000)
	if made, err := f.ledger.RunSettlements(f.ctx); err != nil || len(made) != 1 {
		t.Fatalf("run a year ahead: %+v %v", made, err)
	}
	now = cutoff.Add(-time.Hour)
	f.capturedOrder(t, "today", 300)
	now = cutoff.Add(time.Minute)
	made, err := f.ledger.RunSettlementsBefore(f.ctx, cutoff)
	if err != nil || len(made) != 1 || made[0].Gross != 300 {
		t.Fatalf("today's run after the clock was set back: %+v %v; want today's capture of 300 settled", made, err)
	}
}

// TestReturnedBytesAreTheCallers: the body of a mutation and of OrderJSON
// are the caller's own. Changing or appending to them must not reach the
// cache of rendered orders, which every later read of that version serves.
func TestReturnedBytesAreTheCallers(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t", 10000, 20000)
	res, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID, partial(10000))
	if err != nil {
		t.Fatal(err)
	}
	want := string(res.Body)
	for i := range res.Body {
		res.Body[i] = 'X'
	}
	first, err := f.ledger.OrderJSON(f.ctx, f.merchant, o.ID)
	if err != nil || string(first) != want {
		t.Fatalf("read after the caller changed the capture's body: %.40s… %v", first, err)
	}
	copy(first, "CORRUPT")
	var wg sync.WaitGroup
	got := make([][]byte, 2)
	for i := range got {
		wg.Go(func() {
			b, err := f.ledger.OrderJSON(f.ctx, f.merchant, o.ID)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = append(b, byte('0'+i)) // two appends at once: the race detector's case
		})
	}
	wg.Wait()
	for i, b := range got {
		if string(b) != want+string(rune('0'+i)) {
			t.Fatalf("read %d after the caller changed an earlier read: %.40s…", i, b)
		}
	}
}

// TestReadOnlyBodyIsTheCachedAnswer: a caller that promises not to change
// Result.Body (Call.ReadOnlyBody, the reference server) gets the very bytes
// the cache then serves to a read of that version, with no copy; any other
// caller gets a copy of its own, as TestReturnedBytesAreTheCallers checks.
func TestReadOnlyBodyIsTheCachedAnswer(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t", 10000, 20000)
	served := func() []byte {
		var body []byte
		if err := f.ledger.ServeOrderJSON(f.ctx, f.merchant, o.ID, func(b []byte) { body = b }); err != nil {
			t.Fatal(err)
		}
		return body
	}
	for _, readOnly := range []bool{false, true} {
		res, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, ReadOnlyBody: readOnly}, o.ID, partial(5000))
		if err != nil {
			t.Fatal(err)
		}
		got := served()
		if string(got) != string(res.Body) || (&got[0] == &res.Body[0]) != readOnly {
			t.Fatalf("ReadOnlyBody %v: served the same bytes %v, at the same address %v", readOnly,
				string(got) == string(res.Body), &got[0] == &res.Body[0])
		}
	}
}

// TestOrderJSONAfterAMissIsTheCallers: an order rendered by a read (not in
// the cache of rendered orders: this ledger never changed it) is the
// caller's own too; changing it does not reach the next read.
func TestOrderJSONAfterAMissIsTheCallers(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t", 10000, 20000)
	other := kassa.New(f.store, kassa.Options{})
	first, err := other.OrderJSON(f.ctx, f.merchant, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := string(first)
	copy(first, "CORRUPT")
	if again, err := other.OrderJSON(f.ctx, f.merchant, o.ID); err != nil || string(again) != want {
		t.Fatalf("read after the caller changed the first read: %.40s… %v", again, err)
	}
	var served []byte
	if err := other.ServeOrderJSON(f.ctx, f.merchant, o.ID, func(b []byte) { served = b }); err != nil || string(served) != want {
		t.Fatalf("served after the caller changed the first read: %.40s… %v", served, err)
	}
}

// TestOptionsDefaultEachField: a zero or negative option takes its default
// on its own, so that setting one period does not make orders expire at
// creation and a negative key lifetime does not turn idempotency off.
func TestOptionsDefaultEachField(t *testing.T) {
	day := 24 * time.Hour
	def := order.DefaultPolicy()
	for _, c := range []struct {
		name      string
		set, want order.Policy
	}{
		{"none", order.Policy{}, def},
		{"only MaxExpiry", order.Policy{MaxExpiry: 90 * day}, order.Policy{ExpiryPeriod: def.ExpiryPeriod, MaxExpiry: 90 * day}},
		{"only ExpiryPeriod", order.Policy{ExpiryPeriod: 7 * day}, order.Policy{ExpiryPeriod: 7 * day, MaxExpiry: def.MaxExpiry}},
		{"negative", order.Policy{ExpiryPeriod: -day, MaxExpiry: -day}, def},
		{"period past the cap", order.Policy{ExpiryPeriod: 200 * day, MaxExpiry: 100 * day}, order.Policy{ExpiryPeriod: 200 * day, MaxExpiry: 200 * day}},
	} {
		if got := kassa.New(memory.New(time.Now), kassa.Options{Policy: c.set}).Policy(); got != c.want {
			t.Errorf("%s: policy %+v, want %+v", c.name, got, c.want)
		}
	}

	f := newFixtureWith(t, time.Now, kassa.Options{Policy: order.Policy{MaxExpiry: 90 * day}, IdempotencyTTL: -time.Hour})
	o := f.order(t, "t", 10000, 20000)
	if o.ExpiresAt.Sub(o.CreatedAt) != def.ExpiryPeriod {
		t.Fatalf("order expires %v after creation", o.ExpiresAt.Sub(o.CreatedAt))
	}
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "cap-1"}
	if _, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(10000)); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ledger.SweepIdempotency(f.ctx, 100); err != nil || n != 0 {
		t.Fatalf("sweep removed %d keys at once (%v)", n, err)
	}
	again, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(10000))
	got, _, gerr := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
	if err != nil || gerr != nil || !again.Replayed || len(got.Captured) != 1 {
		t.Fatalf("retry: replayed %v, %d captures (%v, %v)", again != nil && again.Replayed, len(got.Captured), err, gerr)
	}
}

// TestEnsureMerchantRefusesUnstorableText: a merchant name or client id
// with NUL or invalid UTF-8 is refused on every store, as PostgreSQL must,
// rather than stored by the embedded ones only.
func TestEnsureMerchantRefusesUnstorableText(t *testing.T) {
	l := kassa.New(memory.New(time.Now), kassa.Options{})
	for _, mo := range []kassa.MerchantOptions{{Name: "a\x00b"}, {Name: "m", ClientID: "client\xff"},
		{Name: strings.Repeat("n", kassa.MaxMerchantName+1)}} {
		_, created, err := l.EnsureMerchant(context.Background(), mo)
		var fe *fault.Error
		if created || !errors.As(err, &fe) || fe.Kind != fault.Invalid || len(fe.Fields) != 1 {
			t.Errorf("%+q: created %v, %v", mo.Name+"/"+mo.ClientID, created, err)
		}
	}
}

// openViews is a store that counts its read transactions under way.
type openViews struct {
	storage.Store
	open atomic.Int32
}

func (s *openViews) View(ctx context.Context, fn func(storage.Tx) error) error {
	s.open.Add(1)
	defer s.open.Add(-1)
	return s.Store.View(ctx, fn)
}

// writerCheck fails the test if it is written to while a read transaction is open.
type writerCheck struct {
	t     *testing.T
	views *openViews
	n     int
}

func (w *writerCheck) Write(p []byte) (int, error) {
	if open := w.views.open.Load(); open != 0 {
		w.t.Errorf("written to with %d read transactions open", open)
	}
	w.n += len(p)
	return len(p), nil
}

// TestExportWritesOutsideTheTransaction: the settlement CSV goes to the
// client after its read transaction ended, so a client reading slowly holds
// no transaction open (on bolt that stalled every writer once the file had
// to grow).
func TestExportWritesOutsideTheTransaction(t *testing.T) {
	views := &openViews{Store: memory.New(time.Now)}
	l := kassa.New(views, kassa.Options{})
	ctx := context.Background()
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ledger: l, store: views, merchant: creds.MerchantID, ctx: ctx, now: time.Now}
	o := f.order(t, "t", 10000)
	if _, err := l.Capture(ctx, kassa.Call{MerchantID: f.merchant}, o.ID, &capture.FullRequest{}); err != nil {
		t.Fatal(err)
	}
	made, err := l.RunSettlements(ctx)
	if err != nil || len(made) != 1 {
		t.Fatalf("settlements: %v %v", made, err)
	}
	w := &writerCheck{t: t, views: views}
	if err := l.ExportSettlement(ctx, f.merchant, made[0].ID, w); err != nil || w.n == 0 {
		t.Fatalf("export: %d bytes, %v", w.n, err)
	}
}

// TestBlockedAutoCaptureBacksOffAndRunsOnAcknowledge: an auto-capture order
// awaiting acknowledgement is looked at again less and less often while it
// stays blocked (it used to be every minute until the order expired, 40 000
// transactions for one order), and the acknowledgement brings the capture
// forward to the next run instead of leaving it to the backed-off time.
func TestBlockedAutoCaptureBacksOffAndRunsOnAcknowledge(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx, merchant := f.ledger, f.ctx, f.merchant
	a := f.authorization("adv")
	a.PaymentMethod.Type = order.PayAdvanceInvoice
	if err := l.PutAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, "adv", &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", AutoCapture: &order.AutoCapture{Enabled: true, DelayMinutes: 30},
		TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(5000))}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Order.ID
	// A day of the job running every minute while the order stays blocked.
	looks := 0
	for range 24 * 60 {
		now = now.Add(time.Minute)
		st, err := l.RunTasks(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if st.AutoCaptured != 0 {
			t.Fatal("captured an order awaiting acknowledgement")
		}
		looks += st.Rescheduled
	}
	if looks > 40 {
		t.Fatalf("a blocked auto-capture was looked at %d times in a day; want it to back off", looks)
	}
	if looks < 5 {
		t.Fatalf("a blocked auto-capture was looked at %d times in a day; want it retried", looks)
	}
	if _, err := l.Acknowledge(ctx, kassa.Call{MerchantID: merchant}, id); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if n, err := l.RunAutoCapture(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the run right after the acknowledgement captured %d (%v), want 1", n, err)
	}
	o, _, _ := l.GetOrder(ctx, merchant, id)
	if o.Amounts().Captured != 5000 {
		t.Fatalf("captured %d, want 5000", o.Amounts().Captured)
	}
}

// TestAutoCaptureRunsWhenTheHoldIsApproved: an auto-capture held back by a
// risk review runs at the next job after the hold is approved, not at its
// backed-off retry.
func TestAutoCaptureRunsWhenTheHoldIsApproved(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	l, ctx, merchant := f.ledger, f.ctx, f.merchant
	a := f.authorization("held")
	a.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	if err := l.PutAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, "held", &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", AutoCapture: &order.AutoCapture{Enabled: true, DelayMinutes: 30},
		TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(7000))}})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 * 60 {
		now = now.Add(time.Minute)
		if n, err := l.RunAutoCapture(ctx, 10); err != nil || n != 0 {
			t.Fatalf("while on hold: captured %d (%v)", n, err)
		}
	}
	if _, err := l.ResolveHold(ctx, kassa.Call{MerchantID: merchant}, res.Order.ID, true); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if n, err := l.RunAutoCapture(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the run right after the approval captured %d (%v), want 1", n, err)
	}
	if o, _, _ := l.GetOrder(ctx, merchant, res.Order.ID); o.Amounts().Captured != 7000 {
		t.Fatalf("captured %d, want 7000", o.Amounts().Captured)
	}
}

// TestServeOrderJSONSharesTheCachedBody: ServeOrderJSON hands out the body
// OrderJSON copies, and a caller changing its OrderJSON copy changes
// nothing another reader gets.
func TestServeOrderJSONSharesTheCachedBody(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t-serve", 10000)
	own, err := f.ledger.OrderJSON(f.ctx, f.merchant, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := string(own)
	for i := range own {
		own[i] = 'x'
	}
	for range 2 { // the first read may render, the second is served from the cache
		var got string
		if err := f.ledger.ServeOrderJSON(f.ctx, f.merchant, o.ID, func(b []byte) { got = string(b) }); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("ServeOrderJSON gave %.80s…, want the body OrderJSON gave", got)
		}
	}
	if err := f.ledger.ServeOrderJSON(f.ctx, f.merchant, "no-such-order", func([]byte) { t.Fatal("write called for an error") }); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("unknown order: %v", err)
	}
}

// expiryLimitTx records the largest batch any transaction asks the store
// for, and how many orders one transaction was given.
type expiryLimitTx struct {
	storage.Tx
	maxLimit, maxGiven *int
}

func (t expiryLimitTx) OrdersExpiringBefore(at time.Time, limit int) ([]*order.Order, error) {
	due, err := t.Tx.OrdersExpiringBefore(at, limit)
	*t.maxLimit, *t.maxGiven = max(*t.maxLimit, limit), max(*t.maxGiven, len(due))
	return due, err
}

// TestExpireOrdersInBoundedTransactions: the expiry job's limit (1 000 in
// kassa serve) was one transaction, which decodes, re-encodes and writes
// every order it holds; orders may hold 5 000 lines (about 2 MB each), so
// one run could hold gigabytes and the store's writer for seconds. A run
// now works in transactions of at most kassa.ExpiryBatch orders and still
// expires every due order up to its limit, each exactly once.
func TestExpireOrdersInBoundedTransactions(t *testing.T) {
	at := time.Now()
	now := func() time.Time { return at }
	var maxLimit, maxGiven int
	st := storagetest.WrapTx{Store: memory.New(now), Wrap: func(tx storage.Tx) storage.Tx {
		return expiryLimitTx{tx, &maxLimit, &maxGiven}
	}}
	l := kassa.New(st, kassa.Options{})
	creds, _, err := l.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ledger: l, store: st, merchant: creds.MerchantID, ctx: context.Background(), now: now}
	const orders = 2*kassa.ExpiryBatch + 7
	for i := range orders {
		f.order(t, fmt.Sprint("t", i), 1000)
	}
	at = at.AddDate(1, 0, 1) // past any order's expiry
	n, err := l.ExpireOrders(f.ctx, orders-3)
	if err != nil || n != orders-3 {
		t.Fatalf("first run expired %d (%v), want %d: the limit", n, err, orders-3)
	}
	if maxLimit > kassa.ExpiryBatch || maxGiven > kassa.ExpiryBatch {
		t.Fatalf("a transaction asked for %d orders and held %d, want at most %d", maxLimit, maxGiven, kassa.ExpiryBatch)
	}
	if n, err = l.ExpireOrders(f.ctx, 1000); err != nil || n != 3 {
		t.Fatalf("second run expired %d (%v), want the 3 left", n, err)
	}
	if n, err = l.ExpireOrders(f.ctx, 1000); err != nil || n != 0 {
		t.Fatalf("third run expired %d (%v), want none", n, err)
	}
}

// TestKeyReusedWithAnEmptyListOrMap: a request that sends a list or map
// empty is another request than one that leaves it out (a session update's
// metadata {} clears the metadata, paymentMethods [] offers every method
// again; a full capture's orderLines [] is refused), so the key of one
// refuses the other rather than replaying its answer.
func TestKeyReusedWithAnEmptyListOrMap(t *testing.T) {
	f := newFixture(t)
	req := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", Metadata: map[string]string{"a": "1"},
		OrderLines: []order.LineInput{{Description: ptr("a"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(100)), Vat: ptr(int64(2500))}}}
	res, err := f.ledger.CreateSession(f.ctx, kassa.Call{MerchantID: f.merchant}, session.SourceCheckout, req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Location[strings.LastIndex(res.Location, "/")+1:]
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "upd"}
	if _, err := f.ledger.UpdateSession(f.ctx, call, id, session.SourceCheckout, &session.UpdateRequest{MerchantReference: ptr("r")}); err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]*session.UpdateRequest{
		"metadata {}":       {MerchantReference: ptr("r"), Metadata: map[string]string{}},
		"paymentMethods []": {MerchantReference: ptr("r"), PaymentMethods: []string{}},
		"orderLines []":     {MerchantReference: ptr("r"), OrderLines: []order.LineInput{}},
	} {
		if res, err := f.ledger.UpdateSession(f.ctx, call, id, session.SourceCheckout, other); fault.CodeOf(err) != "idempotency_key_reused" {
			t.Errorf("update with %s under the key of one without: %v, replayed %v", name, err, res != nil && res.Replayed)
		}
	}

	o := f.order(t, "t1", 10000)
	all := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "all"}
	if _, err := f.ledger.Capture(f.ctx, all, o.ID, &capture.FullRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err = f.ledger.Capture(f.ctx, all, o.ID, &capture.FullRequest{OrderLines: []order.LineInput{}})
	if fault.CodeOf(err) != "idempotency_key_reused" {
		t.Errorf("capture of orderLines [] under the key of a capture of everything: %v, replayed %v", err, res != nil && res.Replayed)
	}
	if res, err = f.ledger.Capture(f.ctx, all, o.ID, &capture.FullRequest{}); err != nil || !res.Replayed {
		t.Errorf("same capture again: %v, replayed %v", err, res != nil && res.Replayed)
	}
}

// TestOptionalBodyNilOrEmptyFingerprintAlike: a full capture or full
// refund without a request (nil) and with an empty one (&FullRequest{}, what
// the HTTP server passes for a body left out) ask the same, so a retry that
// sends the other under the same Idempotency-Key replays the first answer
// instead of being refused as another request.
func TestOptionalBodyNilOrEmptyFingerprintAlike(t *testing.T) {
	f := newFixture(t)
	for i, first := range []bool{true, false} { // nil first, then empty first
		o := f.order(t, fmt.Sprint("t", i), 10000)
		call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: fmt.Sprint("capture", i)}
		var a, b *capture.FullRequest
		if first {
			b = &capture.FullRequest{}
		} else {
			a = &capture.FullRequest{}
		}
		if _, err := f.ledger.Capture(f.ctx, call, o.ID, a); err != nil {
			t.Fatal(err)
		}
		res, err := f.ledger.Capture(f.ctx, call, o.ID, b)
		if err != nil || !res.Replayed {
			t.Fatalf("capture retried with %v after %v: %v", b, a, err)
		}
		got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
		if len(got.Captured) != 1 || got.Amounts().Captured != 10000 {
			t.Fatalf("after a capture and its retry: %d captures of %d, want one of 10000", len(got.Captured), got.Amounts().Captured)
		}
		ledgerID := got.Captured[0].ID
		call.IdempotencyKey = fmt.Sprint("refund", i)
		var ra, rb *refund.FullRequest
		if first {
			rb = &refund.FullRequest{}
		} else {
			ra = &refund.FullRequest{}
		}
		if _, err := f.ledger.Refund(f.ctx, call, o.ID, ledgerID, ra); err != nil {
			t.Fatal(err)
		}
		res, err = f.ledger.Refund(f.ctx, call, o.ID, ledgerID, rb)
		if err != nil || !res.Replayed {
			t.Fatalf("refund retried with %v after %v: %v", rb, ra, err)
		}
		if got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID); got.Amounts().Refunded != 10000 {
			t.Fatalf("after a full refund and its retry: refunded %d, want 10000", got.Amounts().Refunded)
		}
	}
}

// TestAuthorizationRetentionDefaultAndFloor: a token is kept 30 days past
// its expiry by default (DefaultAuthorizationRetention, as the README and
// docs/decisions.md state), to the nanosecond, and never less than the
// Idempotency-Key's retention, however short the retention asked for: a
// create-order retried once its key is gone must still find its token.
func TestAuthorizationRetentionDefaultAndFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		opts kassa.Options
		kept time.Duration
	}{
		{"default", kassa.Options{}, 30 * 24 * time.Hour},
		{"below the key's retention", kassa.Options{IdempotencyTTL: 72 * time.Hour, AuthorizationRetention: time.Hour}, 72 * time.Hour},
		{"above it", kassa.Options{IdempotencyTTL: 72 * time.Hour, AuthorizationRetention: 100 * time.Hour}, 100 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Now().UTC()
			f := newFixtureWith(t, func() time.Time { return now }, c.opts)
			a := f.authorization("t")
			if err := f.ledger.PutAuthorization(f.ctx, a); err != nil {
				t.Fatal(err)
			}
			now = a.ExpiresAt.Add(c.kept)
			if n, err := f.ledger.SweepAuthorizations(f.ctx, 10); n != 0 || err != nil {
				t.Fatalf("a sweep %v past the token's expiry removed %d (%v); want it kept", c.kept, n, err)
			}
			now = now.Add(time.Nanosecond)
			if n, err := f.ledger.SweepAuthorizations(f.ctx, 10); n != 1 || err != nil {
				t.Fatalf("a sweep %v and a nanosecond past the token's expiry removed %d (%v); want it removed", c.kept, n, err)
			}
		})
	}
}
