package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// TestSlowReceiverDoesNotDelayTheLoop: a run waits for all its POSTs, and
// the loop ran one run at a time, so a receiver that answered just inside
// the timeout held every other merchant's new notification until the run
// ended. A run now starts each tick while others still wait.
//
// The slow receiver holds its POST until the test releases it, after the
// other merchant's notification has arrived, and the client's timeout is
// far beyond the test's: that notification cannot have waited for the slow
// run, however slow the machine.
func TestSlowReceiverDoesNotDelayTheLoop(t *testing.T) {
	ctx := context.Background()
	ledger := kassa.New(memory.New(time.Now), kassa.Options{})
	var slowPosts, slowHeld atomic.Int64
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowPosts.Add(1)
		slowHeld.Add(1)
		defer slowHeld.Add(-1)
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer release() // before the slow server closes, which waits for its POSTs
	delivered := make(chan time.Time, 10)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- time.Now()
	}))
	defer fast.Close()
	newOrder := func(merchant, tok string) { orderWithNotification(t, ledger, merchant, tok) }
	merchant := func(name, url string) string { return merchantWithWebhook(t, ledger, name, url) }
	slowID, fastID := merchant("slow", slow.URL), merchant("fast", fast.URL)
	newOrder(slowID, "s0")

	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		runDelivery(loopCtx, loopCtx, ledger, slog.New(slog.NewTextHandler(io.Discard, nil)),
			kassa.DeliveryOptions{AllowPrivateNetworks: true, Client: &http.Client{Timeout: 10 * time.Minute}})
		close(done)
	}()
	defer func() { release(); cancel(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); slowPosts.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no POST to the slow receiver")
		}
	}
	newOrder(fastID, "f0")
	select {
	case <-delivered:
		if slowHeld.Load() == 0 {
			t.Error("the slow receiver's POST ended before the other merchant's notification arrived")
		}
	case <-time.After(30 * time.Second):
		// The slow POST is held until after this: a loop that waits for it
		// never delivers, which no load of the machine explains.
		t.Fatal("the other merchant's notification never arrived while the slow receiver held its POST")
	}
}

// TestSlowReceiversDoNotHoldEveryRun: a run waits for all its POSTs, and the
// loop holds at most deliveryRuns of them at once. Four merchants whose
// receivers answer just inside the client's timeout, each with a backlog and
// each taken up by its own run, held all four: every run went on posting to
// its slow receiver, wave after wave, and a fifth merchant's new notification
// waited for one of them to end.
//
// Here the slow receivers hold their POSTs until the test releases them,
// after the fifth merchant's notification has arrived, and the client's
// timeout is far beyond the test's: every run is still held when it does,
// however slow the machine.
func TestSlowReceiversDoNotHoldEveryRun(t *testing.T) {
	ctx := context.Background()
	ledger := kassa.New(memory.New(time.Now), kassa.Options{})
	const timeout = 10 * time.Minute
	var slowPosts, slowHeld [deliveryRuns]atomic.Int64
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	merchant := func(name, url string) string { return merchantWithWebhook(t, ledger, name, url) }
	newOrder := func(merchant, tok string) { orderWithNotification(t, ledger, merchant, tok) }
	var slowIDs [deliveryRuns]string
	for i := range deliveryRuns {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slowPosts[i].Add(1)
			slowHeld[i].Add(1)
			defer slowHeld[i].Add(-1)
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer release() // before the server closes, which waits for its POSTs
		slowIDs[i] = merchant(fmt.Sprintf("slow%d", i), srv.URL)
	}
	delivered := make(chan time.Time, 10)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { delivered <- time.Now() }))
	defer fast.Close()
	fastID := merchant("fast", fast.URL)

	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		runDelivery(loopCtx, loopCtx, ledger, slog.New(slog.NewTextHandler(io.Discard, nil)),
			kassa.DeliveryOptions{Client: &http.Client{Timeout: timeout}})
		close(done)
	}()
	defer func() { release(); cancel(); <-done }()
	// Each slow merchant's backlog becomes due once the one before it is
	// being posted to, so that each is taken up by a run of its own.
	for i, id := range slowIDs {
		for j := range 16 {
			newOrder(id, fmt.Sprintf("s%d-%d", i, j))
		}
		for deadline := time.Now().Add(30 * time.Second); slowPosts[i].Load() == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no POST to slow receiver %d", i)
			}
		}
	}
	newOrder(fastID, "f0")
	select {
	case <-delivered:
		for i := range slowHeld {
			if slowHeld[i].Load() == 0 {
				t.Errorf("slow receiver %d's POST ended before the other merchant's notification arrived", i)
			}
		}
	case <-time.After(30 * time.Second):
		// The slow POSTs are held until after this: a loop whose runs all
		// wait for them never delivers, which no load of the machine explains.
		t.Fatalf("with %d slow receivers holding their POSTs, another merchant's notification never arrived", deliveryRuns)
	}
}

// merchantWithWebhook makes a merchant whose notifications go to url.
func merchantWithWebhook(t *testing.T, ledger *kassa.Ledger, name, url string) string {
	t.Helper()
	ctx := context.Background()
	creds, _, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: url}); err != nil {
		t.Fatal(err)
	}
	return creds.MerchantID
}

// orderWithNotification creates an order of merchant from a new token tok,
// which queues one notification for it.
func orderWithNotification(t *testing.T, ledger *kassa.Ledger, merchant, tok string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := ledger.PutAuthorization(ctx, &token.Authorization{Token: tok, MerchantID: merchant, Country: "SE",
		Currency: "SEK", PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayAdvanceInvoice},
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	amount := int64(1000)
	if _, err := ledger.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, tok, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: &amount}}); err != nil {
		t.Fatal(err)
	}
}

// slowReturn holds, once armed, the return of the next Update after its
// commit: the gap between a run's claim committing and the run registering
// its merchants as busy, which the two runs runDelivery starts at one
// instant each tick race through. The hold ends when another Update returns
// (a second run's claim, made in the gap), or after holdFor: with claims
// made one at a time no other can be made meanwhile, and the hold is the
// time a second run is given to show it could.
type slowReturn struct {
	storage.Store
	armed   atomic.Bool
	holdFor time.Duration
	held    chan struct{} // closed once the armed Update is held
	next    chan struct{} // closed by the next Update to return, ending the hold
	endHold sync.Once
}

func (s *slowReturn) Update(ctx context.Context, fn func(storage.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if s.armed.CompareAndSwap(true, false) {
		close(s.held)
		select {
		case <-s.next:
		case <-time.After(s.holdFor):
		}
		return err
	}
	select {
	case <-s.held:
		s.endHold.Do(func() { close(s.next) })
	default:
	}
	return err
}

// TestTwoRunsStartedTogetherClaimNoMerchantTwice: kassa serve starts its
// usual run and the one that skips slow receivers at the same instant. A run
// left alone the merchants of other runs only once they had registered,
// after their claim committed, so a run claiming in that gap took the same
// merchant: 12 POSTs at once to one receiver (a run posts at most 8), and
// the run meant to skip slow receivers waited on one.
//
// The second run starts once the first's claim has committed and is held
// from registering; the receiver holds every POST until the end. A second
// run that claims nothing returns at once; one that took the merchant too
// posts to it (a run's first POST to a merchant goes alone, so one more at
// once) and waits on its answer.
func TestTwoRunsStartedTogetherClaimNoMerchantTwice(t *testing.T) {
	ctx := context.Background()
	st := &slowReturn{Store: memory.New(time.Now), holdFor: 2 * time.Second, held: make(chan struct{}), next: make(chan struct{})}
	ledger := kassa.New(st, kassa.Options{})
	var inFlight, maxInFlight atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	id := merchantWithWebhook(t, ledger, "slow", srv.URL)
	for j := range 16 {
		orderWithNotification(t, ledger, id, fmt.Sprintf("s%d", j))
	}
	opts := kassa.DeliveryOptions{AllowPrivateNetworks: true, Client: &http.Client{Timeout: time.Minute}}
	prompt := opts
	prompt.SkipSlowReceivers = true
	st.armed.Store(true)
	type result struct {
		stats kassa.DeliveryStats
		err   error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { s, err := ledger.DeliverNotifications(ctx, opts); first <- result{s, err} }()
	var once sync.Once
	defer once.Do(func() { close(release) }) // before the receiver closes, which waits for its POSTs
	select {
	case <-st.held: // the first run's claim has committed, not yet registered
	case <-time.After(30 * time.Second):
		t.Fatal("the first run made no claim")
	}
	go func() { s, err := ledger.DeliverNotifications(ctx, prompt); second <- result{s, err} }()
	var got result
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		select {
		case got = <-second:
		default:
			if maxInFlight.Load() > 1 {
				t.Fatalf("%d POSTs at once to one merchant: both runs claimed it", maxInFlight.Load())
			}
			if time.Now().After(deadline) {
				t.Fatal("the second run neither returned nor posted")
			}
			continue
		}
		break
	}
	if got.err != nil || got.stats != (kassa.DeliveryStats{}) {
		t.Fatalf("the second run: %+v, %v; want nothing claimed, the merchant being the first run's", got.stats, got.err)
	}
	once.Do(func() { close(release) })
	select {
	case got = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first run did not end once its POSTs were answered")
	}
	// A claim's share of one merchant: Batch/4 (12) of its 16.
	if got.err != nil || got.stats.Delivered != 12 || got.stats.Retrying+got.stats.Failed != 0 {
		t.Fatalf("the first run: %+v, %v; want 12 delivered", got.stats, got.err)
	}
}

// TestStopLetsPostsUnderWayBeAnswered: a shutdown cut the POSTs under way at
// once, even with the grace unused, and dropped an answer arriving just then:
// the notification stayed pending with no attempt counted, and was sent again
// two minutes after the restart. Now stopping starts no run, and the runs
// under way are waited for, their POSTs answered and recorded.
func TestStopLetsPostsUnderWayBeAnswered(t *testing.T) {
	ctx := context.Background()
	ledger := kassa.New(memory.New(time.Now), kassa.Options{})
	arrived := make(chan struct{}, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(300 * time.Millisecond)
	}))
	defer receiver.Close()
	id := merchantWithWebhook(t, ledger, "m", receiver.URL)
	orderWithNotification(t, ledger, id, "t0")
	stop, stopNow := context.WithCancel(ctx)
	posts, cutPosts := context.WithCancel(ctx)
	defer cutPosts()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runDelivery(stop, posts, ledger, slog.New(slog.NewTextHandler(io.Discard, nil)), kassa.DeliveryOptions{AllowPrivateNetworks: true})
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no POST arrived")
	}
	stopNow()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runDelivery did not return after its POST was answered")
	}
	page, err := ledger.ListNotifications(ctx, id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range page.Notifications {
		got = append(got, fmt.Sprintf("%s after %d attempts", n.Status, n.Attempts))
	}
	if fmt.Sprint(got) != "[delivered after 1 attempts]" {
		t.Fatalf("after the stop: %v; want the one notification delivered at its first attempt", got)
	}
}
