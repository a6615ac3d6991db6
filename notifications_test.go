package kassa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// receiver is a merchant's endpoint as a careful merchant writes it: it
// verifies every signature, and it processes each event id once however
// often it arrives. It fails the first failFirst deliveries with 503.
type receiver struct {
	t         *testing.T
	secret    string
	failFirst int

	mu        sync.Mutex
	posts     int
	bodies    map[string][]byte // event id → first body
	processed []string          // event ids, each once
	badSig    int
	onPost    func()
	conns     int // connections opened to it
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hook := rc.receive(w, r); hook != nil {
		hook() // outside the lock, so that a hook that stalls holds up only its own POST
	}
}

// receive handles a POST and returns the onPost hook to run after an accepted one.
func (rc *receiver) receive(w http.ResponseWriter, r *http.Request) func() {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts++
	if err := notify.Verify(rc.secret, r.Header.Get(notify.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
		rc.badSig++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return nil
	}
	var env kassa.Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.ID != r.Header.Get(notify.HeaderEventID) {
		rc.t.Errorf("body %s, event id header %q", body, r.Header.Get(notify.HeaderEventID))
	}
	if rc.posts <= rc.failFirst {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return nil
	}
	if first, seen := rc.bodies[env.ID]; seen {
		if string(first) != string(body) {
			rc.t.Errorf("event %s redelivered with another body", env.ID)
		}
	} else {
		rc.bodies[env.ID] = body
		rc.processed = append(rc.processed, env.ID)
	}
	w.WriteHeader(http.StatusNoContent)
	return rc.onPost
}

// use makes the receiver verify with secret from now on, as a merchant's
// deploy of a rotated secret does.
func (rc *receiver) use(secret string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = secret
}

func (rc *receiver) counts() (posts int, processed []string, badSig int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.posts, slices.Clone(rc.processed), rc.badSig
}

// clock is a settable store clock, safe to read from the deliverer's goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

type notifyFixture struct {
	ledger   *kassa.Ledger
	store    storage.Store
	clock    *clock
	merchant string
	rc       *receiver
	srv      *httptest.Server
}

func newNotifyFixture(t *testing.T, failFirst int, events ...string) *notifyFixture {
	t.Helper()
	c := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	st := memory.New(c.Now)
	l := kassa.New(st, kassa.Options{})
	ctx := context.Background()
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, failFirst: failFirst, bodies: map[string][]byte{}}
	srv := httptest.NewUnstartedServer(rc)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			rc.mu.Lock()
			rc.conns++
			rc.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	set, err := l.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: srv.URL + "/hooks", Events: events})
	if err != nil || set.Secret == "" {
		t.Fatalf("set webhook: %+v %v", set, err)
	}
	rc.secret = set.Secret
	return &notifyFixture{ledger: l, store: st, clock: c, merchant: creds.MerchantID, rc: rc, srv: srv}
}

func (f *notifyFixture) order(t *testing.T, tok string, pm order.PaymentType, amount int64) *order.Order {
	t.Helper()
	return f.orderFor(t, f.merchant, tok, pm, amount)
}

func (f *notifyFixture) orderFor(t *testing.T, merchant, tok string, pm order.PaymentType, amount int64) *order.Order {
	t.Helper()
	now := f.clock.Now()
	ctx := context.Background()
	putToken(t, f.ledger, merchant, tok, pm, now)
	res, err := f.ledger.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, tok, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(amount)}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Order
}

func (f *notifyFixture) log(t *testing.T) []kassa.Notification {
	t.Helper()
	page, err := f.ledger.ListNotifications(context.Background(), f.merchant, "", kassa.MaxNotificationPage)
	if err != nil {
		t.Fatal(err)
	}
	return page.Notifications
}

func topics(ns []kassa.Notification) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type)
	}
	slices.Sort(out)
	return out
}

func TestNotificationsFollowSubscriptions(t *testing.T) {
	f := newNotifyFixture(t, 0, "order.partialCapture")
	ctx := context.Background()
	o := f.order(t, "t1", order.PayInvoice, 10000)
	call := kassa.Call{MerchantID: f.merchant}
	if _, err := f.ledger.PartialCapture(ctx, call, o.ID, partial(4000)); err != nil {
		t.Fatal(err)
	}
	full := f.order(t, "t0", order.PayInvoice, 3000)
	if _, err := f.ledger.Capture(ctx, call, full.ID, nil); err != nil {
		t.Fatal(err)
	}
	// An advance invoice awaits acknowledgement: always announced.
	adv := f.order(t, "t2", order.PayAdvanceInvoice, 500)
	got := f.log(t)
	if want := []string{notify.TopicAcknowledgementRequired, "order.partialCapture"}; !slices.Equal(topics(got), want) {
		t.Fatalf("topics %v, want %v", topics(got), want)
	}
	for _, n := range got {
		var env kassa.Envelope
		if err := json.Unmarshal(n.Payload, &env); err != nil || env.ID != n.ID || env.Type != n.Type || env.MerchantID != f.merchant {
			t.Fatalf("envelope %s: %v", n.Payload, err)
		}
		switch n.Type {
		case "order.partialCapture":
			var d kassa.OrderEventData
			if err := json.Unmarshal(env.Data, &d); err != nil || d.OrderID != o.ID || d.Amount.Amount != "40.00" ||
				d.Amount.Currency != "SEK" || d.EventType != "partialCapture" || d.EventID == "" {
				t.Fatalf("partial capture data %s %v", env.Data, err)
			}
		case notify.TopicAcknowledgementRequired:
			if n.OrderID != adv.ID || string(env.Data) != `{"orderId":"`+adv.ID+`"}` {
				t.Fatalf("ack data %s", env.Data)
			}
		}
	}

	// order.* takes every order event of later operations.
	if _, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: f.srv.URL, Events: []string{notify.AllOrderEvents}}); err != nil {
		t.Fatal(err)
	}
	f.order(t, "t3", order.PayInvoice, 700)
	if got := topics(f.log(t)); !slices.Contains(got, "order.create") || !slices.Contains(got, "order.readyForCapture") {
		t.Fatalf("order.* topics %v", got)
	}

	// Without a URL nothing is recorded.
	if err := f.ledger.DeleteWebhook(ctx, f.merchant); err != nil {
		t.Fatal(err)
	}
	before := len(f.log(t))
	f.order(t, "t4", order.PayAdvanceInvoice, 700)
	if after := len(f.log(t)); after != before {
		t.Fatalf("recorded %d notifications without a URL", after-before)
	}
	if _, err := f.ledger.Webhook(ctx, f.merchant); !fault.Is(err, fault.NotFound) {
		t.Fatalf("settings after delete: %v", err)
	}
}

func TestSetWebhookValidatesAndShowsTheSecretOnce(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	again, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://m.example/h", Events: []string{"order.fullCapture"}})
	if err != nil || again.Secret != "" || again.URL != "https://m.example/h" || !slices.Equal(again.Events, []string{"order.fullCapture"}) {
		t.Fatalf("update shows %+v %v", again, err)
	}
	rotated, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://m.example/h", RotateSecret: true})
	if err != nil || rotated.Secret == "" || rotated.Secret == f.rc.secret {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	read, err := f.ledger.Webhook(ctx, f.merchant)
	if err != nil || read.Secret != "" || read.URL != "https://m.example/h" || len(read.Events) != 0 {
		t.Fatalf("read: %+v %v", read, err)
	}
	for _, bad := range []kassa.SetWebhookRequest{{URL: "ftp://x"}, {URL: "https://x.example", Events: []string{"nope"}}, {}} {
		if _, err := f.ledger.SetWebhook(ctx, f.merchant, bad); !fault.Is(err, fault.Invalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestRotationSignsWithBothSecretsForADay: a receiver that still holds the
// secret of before a rotation keeps verifying deliveries for 24 hours of the
// ledger's clock; one holding the new secret verifies them too. After that
// only the new secret verifies.
func TestRotationSignsWithBothSecretsForADay(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	old := f.rc.secret
	rotated, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: f.srv.URL + "/hooks", RotateSecret: true})
	if err != nil || rotated.Secret == "" || rotated.Secret == old {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	opts := kassa.DeliveryOptions{AllowPrivateNetworks: true}
	deliver := func(want kassa.DeliveryStats) {
		t.Helper()
		if stats, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || stats != want {
			t.Fatalf("delivery %+v %v, want %+v", stats, err, want)
		}
	}

	// The overlap runs on real time: a sandbox moving its clock 36 hours
	// ahead still signs with the old secret too.
	wall := time.Now()
	kassa.SetWallClock(t, func() time.Time { return wall })
	f.clock.Advance(36 * time.Hour)
	wall = wall.Add(24*time.Hour - time.Minute)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	deliver(kassa.DeliveryStats{Delivered: 1})
	f.rc.use(rotated.Secret)
	if _, err := f.ledger.RedeliverNotification(ctx, f.merchant, f.log(t)[0].ID); err != nil {
		t.Fatal(err)
	}
	deliver(kassa.DeliveryStats{Delivered: 1})
	if _, _, badSig := f.rc.counts(); badSig != 0 {
		t.Fatalf("%d signatures refused within a day of the rotation", badSig)
	}

	f.clock.Advance(time.Minute)
	wall = wall.Add(time.Minute)
	f.rc.use(old)
	f.order(t, "t2", order.PayAdvanceInvoice, 1000)
	deliver(kassa.DeliveryStats{Retrying: 1})
	if _, _, badSig := f.rc.counts(); badSig != 1 {
		t.Fatalf("the old secret verified a day after the rotation (%d refused)", badSig)
	}
	f.rc.use(rotated.Secret)
	f.clock.Advance(time.Hour)
	deliver(kassa.DeliveryStats{Delivered: 1})
}

// TestDeliveryRetriesWithBackoffUntilAccepted: the receiver fails the first
// three attempts; the message is tried again no sooner than its backoff
// allows, is processed exactly once, and every signature verifies.
func TestDeliveryRetriesWithBackoffUntilAccepted(t *testing.T) {
	const failFirst = 3
	f := newNotifyFixture(t, failFirst)
	ctx := context.Background()
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	retry := notify.Retry{Base: 30 * time.Second, Cap: time.Hour, MaxAttempts: 10}
	opts := kassa.DeliveryOptions{Retry: retry, AllowPrivateNetworks: true}

	step := 5 * time.Second
	var attemptsAt []time.Time
	for range 200 {
		stats, err := f.ledger.DeliverNotifications(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Delivered+stats.Retrying+stats.Failed > 0 {
			attemptsAt = append(attemptsAt, f.clock.Now())
		}
		if stats.Delivered > 0 {
			break
		}
		f.clock.Advance(step)
	}
	if len(attemptsAt) != failFirst+1 {
		t.Fatalf("attempts at %v, want %d", attemptsAt, failFirst+1)
	}
	for i := 1; i < len(attemptsAt); i++ {
		gap, nominal := attemptsAt[i].Sub(attemptsAt[i-1]), retry.Nominal(i)
		if gap < nominal/2 || gap > nominal+step {
			t.Errorf("gap after attempt %d: %v, want within [%v, %v]", i, gap, nominal/2, nominal+step)
		}
	}
	posts, processed, badSig := f.rc.counts()
	if posts != failFirst+1 || len(processed) != 1 || badSig != 0 {
		t.Fatalf("receiver: %d posts, processed %v, %d bad signatures", posts, processed, badSig)
	}
	n := f.log(t)[0]
	if n.Status != "delivered" || n.Attempts != failFirst+1 || len(n.Log) != failFirst+1 || n.Log[0].StatusCode != 503 ||
		n.Log[failFirst].StatusCode != 204 || n.Log[failFirst].Error != "" || n.NextAttemptAt != nil {
		t.Fatalf("delivery log %+v", n)
	}
	// Nothing is sent again.
	f.clock.Advance(24 * time.Hour)
	if stats, _ := f.ledger.DeliverNotifications(ctx, opts); stats != (kassa.DeliveryStats{}) {
		t.Fatalf("a delivered message went out again: %+v", stats)
	}
}

// TestDeliveryAfterCrashIsDeduplicatedByEventID: the deliverer stops after
// the receiver accepted but before the answer was recorded (a crash). After
// the lease the message goes out again with the same event id and body; the
// idempotent receiver processes it once and the log shows it delivered.
func TestDeliveryAfterCrashIsDeduplicatedByEventID(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	ctx, crash := context.WithCancel(context.Background())
	f.rc.onPost = crash
	wall := &clock{t: time.Now()} // the lease is kept on the wall clock
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	if _, err := f.ledger.DeliverNotifications(ctx, opts); err == nil {
		t.Fatal("the crashed run reported success")
	}
	f.rc.onPost = nil
	if n := f.log(t)[0]; n.Status != "pending" || n.Attempts != 0 {
		t.Fatalf("after the crash %+v", n)
	}
	// Within the lease no other deliverer takes it.
	if stats, _ := f.ledger.DeliverNotifications(context.Background(), opts); stats != (kassa.DeliveryStats{}) {
		t.Fatalf("taken during the lease: %+v", stats)
	}
	f.clock.Advance(time.Minute)
	if stats, _ := f.ledger.DeliverNotifications(context.Background(), opts); stats != (kassa.DeliveryStats{}) {
		t.Fatalf("taken when the store's clock passed the lease, the wall clock not: %+v", stats)
	}
	wall.Advance(time.Minute)
	if stats, err := f.ledger.DeliverNotifications(context.Background(), opts); err != nil || stats.Delivered != 1 {
		t.Fatalf("after the lease: %+v %v", stats, err)
	}
	posts, processed, _ := f.rc.counts()
	if posts != 2 || len(processed) != 1 {
		t.Fatalf("receiver saw %d posts and processed %v", posts, processed)
	}
}

func TestDeliveryGivesUpAndCanBeRedelivered(t *testing.T) {
	f := newNotifyFixture(t, 1000)
	ctx := context.Background()
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	opts := kassa.DeliveryOptions{Retry: notify.Retry{Base: time.Second, Cap: time.Second, MaxAttempts: 3}, AllowPrivateNetworks: true}
	var total kassa.DeliveryStats
	for range 10 {
		s, err := f.ledger.DeliverNotifications(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		total.Retrying += s.Retrying
		total.Failed += s.Failed
		f.clock.Advance(time.Second)
	}
	n := f.log(t)[0]
	if total.Retrying != 2 || total.Failed != 1 || n.Status != "failed" || n.Attempts != 3 || len(n.Log) != 3 || n.LastError != "answered 503" {
		t.Fatalf("stats %+v, notification %+v", total, n)
	}
	if _, err := f.ledger.RedeliverNotification(ctx, f.merchant, "nope"); !fault.Is(err, fault.NotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	f.rc.mu.Lock()
	f.rc.failFirst = 0
	f.rc.mu.Unlock()
	again, err := f.ledger.RedeliverNotification(ctx, f.merchant, n.ID)
	if err != nil || again.Status != "pending" {
		t.Fatalf("redeliver: %+v %v", again, err)
	}
	if _, err := f.ledger.RedeliverNotification(ctx, f.merchant, n.ID); !fault.Is(err, fault.Conflict) {
		t.Fatalf("redeliver a pending one: %v", err)
	}
	if s, _ := f.ledger.DeliverNotifications(ctx, opts); s.Delivered != 1 {
		t.Fatalf("redelivery: %+v", s)
	}
	if got, _ := f.ledger.GetNotification(ctx, f.merchant, n.ID); got.Status != "delivered" || len(got.Log) != 4 {
		t.Fatalf("after redelivery %+v", got)
	}
}

// TestLateRecordDoesNotSwallowARedelivery: a deliverer stalls past its lease
// while another delivers the message and the merchant asks for a
// redelivery; the stalled one's late record must not close the new series,
// and the redelivery goes out.
func TestLateRecordDoesNotSwallowARedelivery(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	ctx := context.Background()
	wall := &clock{t: time.Now()}
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	stalled, release := make(chan struct{}), make(chan struct{})
	var posted atomic.Bool
	f.rc.onPost = func() { // only the first POST stalls (sync.Once would stall the others too)
		if !posted.Swap(true) {
			close(stalled)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() { _, err := f.ledger.DeliverNotifications(ctx, opts); done <- err }()
	<-stalled
	// Past the first deliverer's lease, a second one delivers the message,
	// and the merchant asks for a redelivery; then the first records.
	wall.Advance(time.Minute)
	f.clock.Advance(time.Minute)
	if s, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || s.Delivered != 1 {
		t.Fatalf("second deliverer: %+v %v", s, err)
	}
	n := f.log(t)[0]
	if _, err := f.ledger.RedeliverNotification(ctx, f.merchant, n.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := f.ledger.GetNotification(ctx, f.merchant, n.ID); got.Status != "pending" || got.Attempts != 0 {
		t.Fatalf("after the late record: %s, %d attempts; want the redelivery pending", got.Status, got.Attempts)
	}
	postsBefore, _, _ := f.rc.counts()
	if s, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || s.Delivered != 1 {
		t.Fatalf("redelivery: %+v %v", s, err)
	}
	if posts, _, _ := f.rc.counts(); posts != postsBefore+1 {
		t.Fatalf("%d posts after the redelivery, want %d", posts, postsBefore+1)
	}
}

// TestLeaseHoldsWhenTheStoreClockJumps: the sandbox clock moved past the
// lease while a deliverer is mid-POST does not hand the message to another
// deliverer: the lease is kept on the wall clock.
func TestLeaseHoldsWhenTheStoreClockJumps(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	ctx := context.Background()
	stalled, release := make(chan struct{}), make(chan struct{})
	var posted atomic.Bool
	f.rc.onPost = func() {
		if !posted.Swap(true) {
			close(stalled)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true})
		done <- err
	}()
	<-stalled
	f.clock.Advance(3 * time.Minute)
	s, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true})
	close(release)
	if err != nil || s != (kassa.DeliveryStats{}) {
		t.Fatalf("a message under lease was taken after the clock moved: %+v %v", s, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if posts, processed, _ := f.rc.counts(); posts != 1 || len(processed) != 1 {
		t.Fatalf("%d posts, %d processed; want 1 and 1", posts, len(processed))
	}
}

// TestConcurrentDeliverersSendEachMessageOnce: two deliverers (two replicas)
// run at once; the claim hides a message from the other, so the receiver
// sees each event once. The replicas' first claims are made to overlap
// (claimRace), so that a claim that did not read and lease in one
// transaction is caught on every run, not only when the goroutines happen
// to interleave.
func TestConcurrentDeliverersSendEachMessageOnce(t *testing.T) {
	f := newNotifyFixture(t, 0, notify.AllOrderEvents)
	for i := range 20 {
		f.order(t, "t"+string(rune('a'+i)), order.PayInvoice, 1000)
	}
	want := len(f.log(t))
	// Two replicas: a run of one Ledger leaves a merchant another of its
	// runs is posting to alone, so deliverers of one Ledger would not race.
	a, b := newClaimRace(f.store), newClaimRace(f.store)
	a.other, b.other = b, a
	replicas := []*kassa.Ledger{kassa.New(a, kassa.Options{}), kassa.New(b, kassa.Options{})}
	var wg sync.WaitGroup
	for _, l := range replicas {
		wg.Go(func() {
			for range 5 {
				if _, err := l.DeliverNotifications(context.Background(), kassa.DeliveryOptions{Batch: 7, AllowPrivateNetworks: true}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	posts, processed, _ := f.rc.counts()
	if posts != want || len(processed) != want {
		t.Fatalf("%d messages, %d posts, %d processed", want, posts, len(processed))
	}
}

// claimRace is the store as one of two replicas sees it. Its first read of
// the due messages waits until the other replica has read them too, or is
// waiting for a write transaction (where a claim reads them, after this
// one's commits). So the first claims of the two overlap as far as the
// claim lets them, however the goroutines are scheduled: a claim that read
// the due messages in one transaction and leased them in a later one would
// lease the same messages to both replicas.
type claimRace struct {
	storage.Store
	other   *claimRace
	arrived chan struct{} // closed once this replica has read, or waits to write
	arrive  sync.Once
	wait    sync.Once
}

func newClaimRace(st storage.Store) *claimRace {
	return &claimRace{Store: st, arrived: make(chan struct{})}
}

func (s *claimRace) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.arrive.Do(func() { close(s.arrived) })
	return s.Store.Update(ctx, func(tx storage.Tx) error { return fn(claimRaceTx{tx, s}) })
}

func (s *claimRace) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.View(ctx, func(tx storage.Tx) error { return fn(claimRaceTx{tx, s}) })
}

type claimRaceTx struct {
	storage.Tx
	s *claimRace
}

func (t claimRaceTx) PendingOutbox(at time.Time, limit, perMerchant int) ([]*storage.OutboxMessage, error) {
	due, err := t.Tx.PendingOutbox(at, limit, perMerchant)
	t.s.arrive.Do(func() { close(t.s.arrived) })
	t.s.wait.Do(func() { <-t.s.other.arrived })
	return due, err
}

// TestDeliveryRefusesPrivateAddresses: by default a merchant's URL may not
// reach loopback or private networks (the operator's internal services).
func TestDeliveryRefusesPrivateAddresses(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	s, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{})
	if err != nil || s.Retrying != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	if posts, _, _ := f.rc.counts(); posts != 0 {
		t.Fatalf("delivered to a loopback address %d times", posts)
	}
	if n := f.log(t)[0]; !strings.Contains(n.LastError, "non-public address") {
		t.Fatalf("last error %q", n.LastError)
	}
}

// The delivery log is the merchant's to read: a refused attempt names no
// address that the URL's host resolved to, or a merchant could learn the
// operator's internal names' addresses (split-horizon DNS, a cluster's
// service names) one URL at a time.
func TestRefusedDeliveryShowsNoResolvedAddress(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: "http://localhost:" + u.Port() + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	if s, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{}); err != nil || s.Retrying != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	if posts, _, _ := f.rc.counts(); posts != 0 {
		t.Fatalf("delivered to localhost %d times", posts)
	}
	n := f.log(t)[0]
	if !strings.Contains(n.LastError, "non-public address") || strings.Contains(n.LastError, "127.0.0.1") || strings.Contains(n.LastError, "::1") {
		t.Fatalf("last error %q", n.LastError)
	}
}

func TestDeliveryWithoutURLFails(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	if err := f.ledger.DeleteWebhook(ctx, f.merchant); err != nil {
		t.Fatal(err)
	}
	if s, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{}); err != nil || s.Failed != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	if n := f.log(t)[0]; n.Status != "failed" || n.LastError != "no webhook URL is configured" {
		t.Fatalf("%+v", n)
	}
}

// TestRemindersAndTokenExpiryOnTheClock drives the reminder and token-expiry
// tasks with the store clock.
func TestRemindersAndTokenExpiryOnTheClock(t *testing.T) {
	f := newNotifyFixture(t, 0, notify.TopicAcknowledgementReminder, notify.TopicExpiryReminder)
	ctx := context.Background()
	adv := f.order(t, "adv", order.PayAdvanceInvoice, 1000)
	inv := f.order(t, "inv", order.PayInvoice, 2000)
	now := f.clock.Now()
	if err := f.ledger.PutAuthorization(ctx, &token.Authorization{Token: "unused", MerchantID: f.merchant, Country: "SE",
		Currency: "SEK", PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	run := func() kassa.TaskStats {
		t.Helper()
		s, err := f.ledger.RunTasks(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.clock.Advance(time.Hour - time.Second)
	if s := run(); s.RemindersSent != 0 || s.TokensExpired != 0 {
		t.Fatalf("before anything is due: %+v", s)
	}
	f.clock.Advance(time.Second)
	// The ack reminder and the expiry of the unused token; the used tokens need nothing.
	if s := run(); s.RemindersSent != 1 || s.TokensExpired != 1 || s.NothingToDo != 2 {
		t.Fatalf("at one hour: %+v", s)
	}
	var tok *token.Authorization
	f.store.View(ctx, func(tx storage.Tx) error {
		var err error
		tok, err = tx.GetAuthorization(f.merchant, "unused")
		return err
	})
	if tok == nil || !tok.Expired {
		t.Fatalf("token %+v", tok)
	}
	// The merchant acknowledges, then captures the invoice order; the
	// expiry reminder goes out for the advance invoice only.
	call := kassa.Call{MerchantID: f.merchant}
	if _, err := f.ledger.Acknowledge(ctx, call, adv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Capture(ctx, call, inv.ID, nil); err != nil {
		t.Fatal(err)
	}
	o, _, _ := f.ledger.GetOrder(ctx, f.merchant, adv.ID)
	f.clock.Advance(o.ExpiresAt.Sub(f.clock.Now()) - kassa.ExpiryReminderBefore)
	if s := run(); s.RemindersSent != 1 || s.NothingToDo != 1 {
		t.Fatalf("a day before expiry: %+v", s)
	}
	var reminders []kassa.Notification
	for _, n := range f.log(t) {
		if n.Type == notify.TopicExpiryReminder || n.Type == notify.TopicAcknowledgementReminder {
			reminders = append(reminders, n)
		}
	}
	if len(reminders) != 2 || reminders[0].OrderID != adv.ID || reminders[1].OrderID != adv.ID {
		t.Fatalf("reminders %+v", reminders)
	}
	var env kassa.Envelope
	var d kassa.ExpiryReminderData
	_ = json.Unmarshal(reminders[0].Payload, &env)
	if err := json.Unmarshal(env.Data, &d); err != nil || d.Uncaptured.Amount != "10.00" || !d.ExpiresAt.Equal(o.ExpiresAt) {
		t.Fatalf("expiry reminder %s %v", env.Data, err)
	}
	if s := run(); s.TasksProcessed != 0 {
		t.Fatalf("tasks left: %+v", s)
	}
}

// The acknowledgement reminder goes out exactly when acknowledging is
// possible: not for an order whose only capture was voided with nothing left
// uncaptured (closed), still for one merely captured.
func TestAckReminderSkipsAClosedOrder(t *testing.T) {
	f := newNotifyFixture(t, 0, notify.TopicAcknowledgementReminder)
	ctx := context.Background()
	if err := f.store.Update(ctx, func(tx storage.Tx) error {
		m, err := tx.GetMerchant(f.merchant)
		if err != nil {
			return err
		}
		m.RequireAck = true
		return tx.PutMerchant(m)
	}); err != nil {
		t.Fatal(err)
	}
	call := kassa.Call{MerchantID: f.merchant}
	for _, tok := range []string{"voided", "captured"} {
		o := f.order(t, tok, order.PayInvoice, 1000)
		if !o.Unacknowledged {
			t.Fatalf("%s: order not awaiting acknowledgement", tok)
		}
		if _, err := f.ledger.Capture(ctx, call, o.ID, nil); err != nil {
			t.Fatal(err)
		}
		if tok == "voided" {
			o, _, _ = f.ledger.GetOrder(ctx, f.merchant, o.ID)
			if _, err := f.ledger.CancelLedger(ctx, call, o.ID, o.Captured[0].ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.clock.Advance(time.Hour)
	s, err := f.ledger.RunTasks(ctx, 100)
	if err != nil || s.RemindersSent != 1 {
		t.Fatalf("reminders %+v %v, want 1 (the captured order's only)", s, err)
	}
}

// TestDeliveryRecordsEachAnswerAsItArrives: a deliverer that dies mid-batch
// has recorded the answers it got, so only the POSTs in flight go out again
// after the lease, not the whole batch.
func TestDeliveryRecordsEachAnswerAsItArrives(t *testing.T) {
	f := newNotifyFixture(t, 0)
	for _, tok := range []string{"t1", "t2", "t3"} {
		f.order(t, tok, order.PayAdvanceInvoice, 1000)
	}
	ctx, crash := context.WithCancel(context.Background())
	var posts atomic.Int64
	f.rc.onPost = func() {
		if posts.Add(1) == 2 {
			crash() // dies after its second POST was answered, before recording it
		}
	}
	opts := kassa.DeliveryOptions{Parallel: 1, AllowPrivateNetworks: true}
	if _, err := f.ledger.DeliverNotifications(ctx, opts); err == nil {
		t.Fatal("the crashed run reported success")
	}
	var delivered, pending int
	for _, n := range f.log(t) {
		switch n.Status {
		case "delivered":
			delivered++
		case "pending":
			pending++
		}
	}
	if delivered != 1 || pending != 2 {
		t.Fatalf("after the crash: %d delivered, %d pending; want the first answer recorded (1, 2)", delivered, pending)
	}
}

// TestFullBatchAsksForMore: a run that claimed a full batch says so, so the
// server's deliverer claims again at once instead of one batch a second.
func TestFullBatchAsksForMore(t *testing.T) {
	f := newNotifyFixture(t, 0)
	for _, tok := range []string{"t1", "t2", "t3", "t4", "t5"} {
		f.order(t, tok, order.PayAdvanceInvoice, 1000)
	}
	opts := kassa.DeliveryOptions{Batch: 3, AllowPrivateNetworks: true}
	s, err := f.ledger.DeliverNotifications(context.Background(), opts)
	if err != nil || s.Delivered != 3 || !s.More {
		t.Fatalf("first run: %+v %v; want 3 delivered and more", s, err)
	}
	s, err = f.ledger.DeliverNotifications(context.Background(), opts)
	if err != nil || s.Delivered != 2 || s.More {
		t.Fatalf("second run: %+v %v; want 2 delivered and no more", s, err)
	}
}

// TestDeliveryRunsReuseConnections: the default client is shared by every
// run, so one run after another posts over the connection the first opened
// (a client per run left each run's connections idle, and their goroutines
// running, until the transport's idle timeout).
func TestDeliveryRunsReuseConnections(t *testing.T) {
	f := newNotifyFixture(t, 0)
	opts := kassa.DeliveryOptions{Parallel: 1, AllowPrivateNetworks: true}
	for i := range 10 {
		f.order(t, fmt.Sprint("t", i), order.PayAdvanceInvoice, 1000)
		if s, err := f.ledger.DeliverNotifications(context.Background(), opts); err != nil || s.Delivered == 0 {
			t.Fatalf("run %d: %+v %v", i, s, err)
		}
	}
	f.rc.mu.Lock()
	defer f.rc.mu.Unlock()
	if f.rc.conns != 1 || len(f.rc.processed) < 10 {
		t.Fatalf("%d connections opened for %d notifications over 10 runs, want 1", f.rc.conns, len(f.rc.processed))
	}
}

// TestSlowReceiverHoldsUpNoOtherMerchant: a merchant whose receiver does not
// answer costs a run one wave of timed-out POSTs, not one per message of its
// backlog: its other messages wait out their lease unsent. And a run takes
// the merchants in turn, so another merchant's message is among the first
// posted rather than behind that backlog. Before, a run posted every
// message of the slow merchant, each waiting out the client's timeout, while
// every other merchant's notifications waited for the whole run.
func TestSlowReceiverHoldsUpNoOtherMerchant(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	var received, slowPosts, fastFirst atomic.Int64
	stuck := make(chan struct{})
	arrived := make(chan struct{}, 16) // one for each of its 12 messages, and more
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		slowPosts.Add(1)
		arrived <- struct{}{}
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stuck); slow.Close() })
	fastAnswered := make(chan struct{})
	answered := sync.OnceFunc(func() { close(fastAnswered) })
	f.rc.onPost = func() { fastFirst.CompareAndSwap(0, received.Add(1)); answered() }

	creds, _, err := f.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: slow.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		f.orderFor(t, creds.MerchantID, fmt.Sprint("s", i), order.PayAdvanceInvoice, 1000)
	}
	f.clock.Advance(time.Second) // the other merchant's message is due after the whole backlog
	f.order(t, "fast", order.PayAdvanceInvoice, 1000)
	fast := len(f.log(t))

	opts := kassa.DeliveryOptions{Parallel: 2, AllowPrivateNetworks: true, Client: &http.Client{Timeout: 10 * time.Second,
		Transport: abandoning{host: slow.Listener.Addr().String(), arrived: arrived, done: fastAnswered}}}
	s, err := f.ledger.DeliverNotifications(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := slowPosts.Load(); n < 1 || n > int64(opts.Parallel) {
		t.Errorf("the slow receiver got %d POSTs in one run; want one wave, at most %d", n, opts.Parallel)
	}
	if at := fastFirst.Load(); at < 1 || at > int64(opts.Parallel) {
		t.Errorf("the other merchant's first POST was number %d of the run; want it among the first %d", at, opts.Parallel)
	}
	if s.Delivered != fast || int64(s.Retrying) != slowPosts.Load() {
		t.Errorf("stats %+v; want the other merchant's %d delivered and one retry per slow POST (%d)", s, fast, slowPosts.Load())
	}
	page, err := f.ledger.ListNotifications(ctx, creds.MerchantID, "", kassa.MaxNotificationPage)
	if err != nil {
		t.Fatal(err)
	}
	var tried, untried int
	for _, n := range page.Notifications {
		switch {
		case n.Status != "pending":
			t.Errorf("slow merchant's %s is %s", n.ID, n.Status)
		case n.Attempts == 1:
			tried++
		case n.Attempts == 0:
			untried++
		}
	}
	if int64(tried) != slowPosts.Load() || tried+untried != len(page.Notifications) || untried == 0 {
		t.Errorf("slow merchant: %d tried, %d untried of %d; want the unsent ones pending with no attempt", tried, untried, len(page.Notifications))
	}
}

// The expiry reminder asks the merchant to capture or extend before the
// authorization lapses. An order denied for fraud can do neither (it offers
// only cancel), so it gets none; an order still on hold can be extended and
// gets one, like an ordinary order.
func TestExpiryReminderSkipsAFraudDeniedOrder(t *testing.T) {
	f := newNotifyFixture(t, 0, notify.TopicExpiryReminder)
	ctx := context.Background()
	now := f.clock.Now()
	mk := func(tok string, tags ...order.RiskTag) *order.Order {
		t.Helper()
		putToken(t, f.ledger, f.merchant, tok, order.PayInvoice, now, tags...)
		res, err := f.ledger.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: f.merchant}, tok, &order.CreateRequest{
			Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Order
	}
	plain := mk("plain")
	onHold := mk("held", order.RiskPossibleFraud)
	mk("blacklisted", order.RiskBlacklisted)
	denied := mk("denied", order.RiskPossibleFraud)
	if _, err := f.ledger.ResolveHold(ctx, kassa.Call{MerchantID: f.merchant}, denied.ID, false); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(plain.ExpiresAt.Sub(f.clock.Now()) - kassa.ExpiryReminderBefore + time.Minute)
	if _, err := f.ledger.RunTasks(ctx, 100); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range f.log(t) {
		if n.Type == notify.TopicExpiryReminder {
			got = append(got, n.OrderID)
		}
	}
	slices.Sort(got)
	want := []string{plain.ID, onHold.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("expiry reminders for %v, want %v (the plain and the held order, not the denied ones)", got, want)
	}
}

// panicTransport panics on the first POST, as a bug in an embedder's client
// (or in the deliverer) would, and sends the rest; always, it panics on every
// POST.
type panicTransport struct {
	panicked atomic.Bool
	always   bool
}

func (p *panicTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !p.panicked.Swap(true) || p.always {
		panic("transport bug")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestDeliveryPanicIsReportedAndCountedAsAFailedAttempt: a panic while
// posting (in a goroutine of the deliverer, where no caller could recover it)
// ended the whole process. It is answered as an internal error carrying the
// panic and its stack, and the message, whose POST may or may not have gone
// out, counts a failed attempt, with a bounded error that tells the merchant
// nothing of kassa's insides, and is retried on the schedule: not lost, and
// not marked delivered.
func TestDeliveryPanicIsReportedAndCountedAsAFailedAttempt(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	wall := &clock{t: time.Now()}
	opts := kassa.DeliveryOptions{Client: &http.Client{Transport: &panicTransport{}}, Lease: time.Minute, WallClock: wall.Now,
		Retry: notify.Retry{Base: time.Second, Cap: time.Second, MaxAttempts: 3}}
	ctx := context.Background()
	s, err := f.ledger.DeliverNotifications(ctx, opts)
	if !fault.Is(err, fault.Internal) || !strings.Contains(err.Error(), "transport bug") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("a panicking POST answered %+v %v; want an internal error with the panic and its stack", s, err)
	}
	if s != (kassa.DeliveryStats{Retrying: 1}) {
		t.Fatalf("the panicked POST counted %+v; want one retrying", s)
	}
	if n := f.log(t)[0]; n.Status != "pending" || n.Attempts != 1 || n.LastError != "internal error while delivering" ||
		len(n.Log) != 1 || n.Log[0].Error != n.LastError {
		t.Fatalf("after the panic %+v", n)
	}
	f.clock.Advance(time.Second) // the retry's delay; no lease to wait out
	if s, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || s.Delivered != 1 {
		t.Fatalf("the retry: %+v %v", s, err)
	}
	if posts, processed, _ := f.rc.counts(); posts != 1 || len(processed) != 1 {
		t.Fatalf("%d posts, %d processed; want 1 and 1", posts, len(processed))
	}
}

// TestDeliveryThatAlwaysPanicsEndsAsFailed: a message whose POST panicked
// every time (a bug that one payload, receiver or client triggers) was left
// unrecorded each time, so it came back after every lease, forever, and never
// reached the end of the retry schedule. Each panic is now a failed attempt,
// so it ends as failed, like a receiver that always fails.
func TestDeliveryThatAlwaysPanicsEndsAsFailed(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	opts := kassa.DeliveryOptions{Client: &http.Client{Transport: &panicTransport{always: true}},
		Retry: notify.Retry{Base: time.Second, Cap: time.Second, MaxAttempts: 3}}
	ctx := context.Background()
	var total kassa.DeliveryStats
	for range 6 {
		s, err := f.ledger.DeliverNotifications(ctx, opts)
		if s != (kassa.DeliveryStats{}) && !fault.Is(err, fault.Internal) {
			t.Fatalf("a panicking POST answered %+v %v", s, err)
		}
		total.Add(s)
		f.clock.Advance(time.Second)
	}
	n := f.log(t)[0]
	if total != (kassa.DeliveryStats{Retrying: 2, Failed: 1}) || n.Status != "failed" || n.Attempts != 3 ||
		n.LastError != "internal error while delivering" {
		t.Fatalf("stats %+v, notification %+v", total, n)
	}
}

// TestHugeAnswerHeadersFailTheAttempt: the default client took up to 10 MiB
// of headers per answer, so a receiver answering with that much made each
// POST in flight hold it (measured: a server at 38 MB RSS peaked at 141 MB
// with eight such answers). Past 64 KiB the answer is refused and the
// attempt failed, to be retried like any other.
func TestHugeAnswerHeadersFailTheAttempt(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for i := range 2 {
			w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("z", 64<<10))
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: srv.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true})
	if err != nil || s.Delivered != 0 || s.Retrying == 0 {
		t.Fatalf("an answer with 128 KiB of headers: %+v %v", s, err)
	}
	if n := f.log(t)[0]; !strings.Contains(n.LastError, "header") {
		t.Fatalf("last error %q", n.LastError)
	}
}

// TestDeliveryErrorTextIsBounded: the HTTP client's error can be as long as
// a receiver makes it within the 64 KiB header limit (a malformed status
// line is quoted whole, each control byte as \x01: 60 KiB made a 240 KiB
// error; before that limit, 1 MiB made 4 MiB), and a message keeps it as its last error and in each
// of its 20 log entries. One receiver could so grow every message of its
// merchant's delivery log by up to 21 such texts, in the store and in each
// page of GET /v1/notifications. The stored text is cut to its beginning and
// end.
func TestDeliveryErrorTextIsBounded(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for range 10 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 64<<10))
			c.Write([]byte("HTTP/1.1 " + strings.Repeat("\x01", 60<<10) + "\r\n\r\n"))
			c.Close()
		}
	}()
	if _, err := f.ledger.SetWebhook(ctx, f.merchant, kassa.SetWebhookRequest{URL: "http://" + ln.Addr().String() + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	for range 2 {
		if _, err := f.ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
	}
	n := f.log(t)[0]
	if n.Attempts != 2 || len(n.Log) != 2 {
		t.Fatalf("%d attempts, log %d", n.Attempts, len(n.Log))
	}
	for _, e := range append([]string{n.LastError}, n.Log[0].Error, n.Log[1].Error) {
		if len(e) > 1024 || !strings.HasPrefix(e, `Post "http://`) || !strings.Contains(e, "malformed HTTP status code") || !utf8.ValidString(e) {
			t.Fatalf("error of %d bytes: %.200q", len(e), e)
		}
	}
}

// hangingMerchant adds a merchant whose receiver holds every POST until
// release is called or the test ends, with n notifications due before
// anything the test adds later.
func hangingMerchant(t *testing.T, f *notifyFixture, n int) (merchant string, posts *atomic.Int64, release func()) {
	t.Helper()
	ctx := context.Background()
	posts = new(atomic.Int64)
	stuck := make(chan struct{})
	release = sync.OnceFunc(func() { close(stuck) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { release(); srv.Close() })
	creds, _, err := f.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "hanging"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: srv.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f.orderFor(t, creds.MerchantID, fmt.Sprint("h", i), order.PayAdvanceInvoice, 1000)
	}
	f.clock.Advance(time.Second) // what the test adds next is due after the whole backlog
	return creds.MerchantID, posts, release
}

// abandoning is a delivery client's transport that gives up a POST to the
// receiver at host, as the client's timeout would, but on events rather
// than on the clock: once that receiver has the POST (a value on arrived;
// at once if arrived is nil) and done is closed. Other POSTs go as usual.
// A client timeout of 100 ms ended the hanging POSTs before, and on a
// loaded machine it also ended the POSTs of the receiver that answers at
// once, and hanging ones before they reached their receiver.
type abandoning struct {
	host    string
	arrived <-chan struct{}
	done    <-chan struct{}
}

func (a abandoning) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != a.host {
		return http.DefaultTransport.RoundTrip(r)
	}
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		defer cancel()
		if a.arrived != nil {
			select {
			case <-a.arrived:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-a.done:
		case <-ctx.Done():
		}
	}()
	return http.DefaultTransport.RoundTrip(r.WithContext(ctx))
}

// TestBacklogBeyondTheClaimWindowHoldsUpNoOtherMerchant: a claim read only
// the oldest few batches of due messages, so a merchant whose backlog was
// larger than that window hid every other merchant's messages behind it,
// one run's timeouts per batch of the backlog. A claim now takes at most a
// few messages of each merchant, so the first run finds the others.
func TestBacklogBeyondTheClaimWindowHoldsUpNoOtherMerchant(t *testing.T) {
	f := newNotifyFixture(t, 0)
	hanging, posts, _ := hangingMerchant(t, f, 20)
	f.order(t, "other", order.PayAdvanceInvoice, 1000)
	otherAnswered := make(chan struct{})
	f.rc.onPost = sync.OnceFunc(func() { close(otherAnswered) })
	hook, err := f.ledger.Webhook(context.Background(), hanging)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts := kassa.DeliveryOptions{Batch: 2, Parallel: 2, AllowPrivateNetworks: true,
		Client: &http.Client{Timeout: 10 * time.Second, Transport: abandoning{host: u.Host, done: otherAnswered}}}
	s, err := f.ledger.DeliverNotifications(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Delivered == 0 {
		t.Errorf("first run: %+v, %d POSTs to the hanging receiver; want the other merchant's notification delivered", s, posts.Load())
	}
}

// TestOverlappingRunsPostNothingMoreToABusyMerchant: a run that starts
// while another still waits on a merchant's POSTs leaves that merchant
// alone and delivers the others'. Before, it claimed and posted the busy
// merchant's next messages too, so runs started side by side filled up with
// one slow receiver's POSTs.
//
// That the second run waits on nothing of the first's is told by causality:
// the hanging POST ends only when the test releases it, after the second
// run has answered, and the client's timeout is far beyond the test's.
func TestOverlappingRunsPostNothingMoreToABusyMerchant(t *testing.T) {
	f := newNotifyFixture(t, 0)
	_, posts, release := hangingMerchant(t, f, 10)
	opts := kassa.DeliveryOptions{Batch: 4, Parallel: 2, AllowPrivateNetworks: true,
		Client: &http.Client{Timeout: 10 * time.Minute}}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := f.ledger.DeliverNotifications(ctx, opts); first <- err }()
	// The first run's first POST to the merchant hangs; its others wait for
	// that one's answer.
	for deadline := time.Now().Add(30 * time.Second); posts.Load() < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d POSTs to the hanging receiver; want 1", posts.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.order(t, "other", order.PayAdvanceInvoice, 1000)
	type answer struct {
		s   kassa.DeliveryStats
		err error
	}
	second := make(chan answer, 1)
	go func() { s, err := f.ledger.DeliverNotifications(ctx, opts); second <- answer{s, err} }()
	select {
	case a := <-second:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.s.Delivered == 0 || posts.Load() != 1 {
			t.Errorf("second run: %+v, %d POSTs to the hanging receiver in all; want the other merchant's delivered and no more POSTs to the busy one",
				a.s, posts.Load())
		}
	case <-time.After(30 * time.Second):
		// Without the release it would never answer: this is a hang, not
		// a slow machine.
		t.Errorf("second run still waits while the busy merchant's POST hangs; %d POSTs to it", posts.Load())
	}
	select {
	case <-first:
		t.Fatal("first run ended while its POST hung")
	default:
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestSkipSlowReceiversLeavesASlowMerchantAlone: a run with
// SkipSlowReceivers takes no message of a merchant whose receiver a run of
// the Ledger last found slow (here, an answer after half the client's
// timeout), so that it waits on no such receiver; a usual run still delivers
// them, and a prompt answer clears the mark.
func TestSkipSlowReceiversLeavesASlowMerchantAlone(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	var delay atomic.Int64
	delay.Store(int64(300 * time.Millisecond))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(delay.Load()))
	}))
	t.Cleanup(srv.Close)
	creds, _, err := f.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: srv.URL + "/hooks"}); err != nil {
		t.Fatal(err)
	}
	usual := kassa.DeliveryOptions{Client: &http.Client{Timeout: 500 * time.Millisecond}}
	prompt := usual
	prompt.SkipSlowReceivers = true
	deliver := func(opts kassa.DeliveryOptions, want int) {
		t.Helper()
		if s, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || s.Delivered != want {
			t.Fatalf("%+v %v; want %d delivered", s, err, want)
		}
	}
	f.orderFor(t, creds.MerchantID, "s1", order.PayAdvanceInvoice, 1000)
	deliver(prompt, 1) // not yet known to be slow
	f.orderFor(t, creds.MerchantID, "s2", order.PayAdvanceInvoice, 1000)
	f.order(t, "f1", order.PayAdvanceInvoice, 1000)
	deliver(prompt, 1) // the other merchant's only
	delay.Store(0)
	deliver(usual, 1) // the slow merchant's, promptly now
	f.orderFor(t, creds.MerchantID, "s3", order.PayAdvanceInvoice, 1000)
	deliver(prompt, 1)
}

// TestHangingReceiversTakeOneSlotEach: a run posted a merchant's claimed
// notifications side by side before any had answered, so four receivers
// that hang, with two notifications each, took all 8 of a run's POSTs in
// flight, and another merchant's notifications claimed by the same run (its
// later ones too: a merchant a run holds is left alone by the other runs)
// waited out the client's timeout behind them. A merchant's first POST of a
// run now goes alone; the rest follow it only once it has answered, so a
// receiver that hangs holds one POST of the run, and the others go out.
func TestHangingReceiversTakeOneSlotEach(t *testing.T) {
	f := newNotifyFixture(t, 0)
	ctx := context.Background()
	release := make(chan struct{})
	var hung atomic.Int64
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); hang.Close() })
	for i := range 4 {
		creds, _, err := f.ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: fmt.Sprint("hangs", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ledger.SetWebhook(ctx, creds.MerchantID, kassa.SetWebhookRequest{URL: hang.URL + "/hooks"}); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			f.orderFor(t, creds.MerchantID, fmt.Sprint("h", i, "-", j), order.PayAdvanceInvoice, 1000)
		}
	}
	f.clock.Advance(time.Second) // the other merchant's notifications are due after theirs
	f.order(t, "fast1", order.PayAdvanceInvoice, 1000)
	f.order(t, "fast2", order.PayAdvanceInvoice, 1000)
	want := len(f.log(t))
	if want < 2 {
		t.Fatalf("the other merchant has %d notifications due, want 2 or more", want)
	}
	// The receivers hang until the other merchant has had all of its
	// notifications, or a minute has passed: the run ends either way.
	var got, hungThen atomic.Int64
	f.rc.onPost = func() {
		if got.Add(1) == int64(want) {
			hungThen.Store(hung.Load())
			free()
		}
	}
	time.AfterFunc(20*time.Second, free)
	opts := kassa.DeliveryOptions{Parallel: 8, AllowPrivateNetworks: true, Client: &http.Client{Timeout: 2 * time.Minute}}
	s, err := f.ledger.DeliverNotifications(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Delivered < want {
		t.Fatalf("stats %+v: the other merchant's %d notifications were not all delivered", s, want)
	}
	// At most one each: their first POSTs race the other merchant's, so
	// on a loaded machine some may not have reached the receiver yet.
	if n := hungThen.Load(); n > 4 {
		t.Errorf("the hanging receivers got %d POSTs before the other merchant's were through, want at most one each (4)", n)
	}
}

// TestDeliveryRecordOutlivesAShortOutage: the database goes away after the
// receiver accepted a POST and before its answer is recorded, and comes back
// within the lease. The answer is recorded once it is back, so the receiver
// is not sent the notification again when the lease ends. Before, the run
// gave up on the first store_unavailable and every POST in flight during a
// database restart (19 of 58 315 in a load run with 7 restarts) went out a
// second time two minutes later.
func TestDeliveryRecordOutlivesAShortOutage(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	st := &scriptedFailures{Store: f.store}
	l := kassa.New(st, kassa.Options{})
	f.rc.onPost = func() { st.arm("unavailable", "unavailable", "unavailable") }
	wall := &clock{t: time.Now()}
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	stats, err := l.DeliverNotifications(context.Background(), opts)
	if err != nil || stats.Delivered != 1 {
		t.Fatalf("run across the outage: %+v %v", stats, err)
	}
	if n := f.log(t)[0]; n.Status != "delivered" || n.Attempts != 1 {
		t.Fatalf("after the outage: %s, %d attempts; want delivered, 1", n.Status, n.Attempts)
	}
	f.rc.onPost = nil
	wall.Advance(time.Minute)
	f.clock.Advance(time.Minute)
	if stats, err := l.DeliverNotifications(context.Background(), opts); err != nil || stats != (kassa.DeliveryStats{}) {
		t.Fatalf("after the lease: %+v %v", stats, err)
	}
	if posts, processed, _ := f.rc.counts(); posts != 1 || len(processed) != 1 {
		t.Fatalf("receiver saw %d posts and processed %v; want 1", posts, processed)
	}
}

// TestDeliveryRecordGivesUpWhenTheLeaseEnds: an outage that outlasts the
// lease is not waited out: past it another deliverer may have taken the
// message, and the run ends with the store's error.
func TestDeliveryRecordGivesUpWhenTheLeaseEnds(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	st := &scriptedFailures{Store: f.store}
	l := kassa.New(st, kassa.Options{})
	wall := &clock{t: time.Now()}
	// More refusals than a lease's worth of retries could use.
	f.rc.onPost = func() { st.arm(slices.Repeat([]string{"unavailable"}, 100)...); wall.Advance(time.Minute) }
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	start := time.Now()
	if _, err := l.DeliverNotifications(context.Background(), opts); !fault.Is(err, fault.Unavailable) {
		t.Fatalf("run past its lease: %v, want store_unavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the run took %v past its lease", d)
	}
	st.arm()
	if n := f.log(t)[0]; n.Status != "pending" || n.Attempts != 0 {
		t.Fatalf("after the outage: %s, %d attempts; want pending, 0", n.Status, n.Attempts)
	}
}

// TestDeliveryRecordWithAnUnknownOutcomeIsMadeOnce: the record of an
// answer committed but was answered with an unknown outcome; recording again
// finds it made and changes nothing, so the notification is delivered once,
// with one attempt in its log, and not sent again after the lease.
func TestDeliveryRecordWithAnUnknownOutcomeIsMadeOnce(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	st := &scriptedFailures{Store: f.store}
	l := kassa.New(st, kassa.Options{})
	f.rc.onPost = func() { st.arm("lost") }
	wall := &clock{t: time.Now()}
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	if _, err := l.DeliverNotifications(context.Background(), opts); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := f.log(t)[0]; n.Status != "delivered" || n.Attempts != 1 || len(n.Log) != 1 {
		t.Fatalf("after the lost answer: %s, %d attempts, %d in the log; want delivered, 1, 1", n.Status, n.Attempts, len(n.Log))
	}
	f.rc.onPost = nil
	wall.Advance(time.Minute)
	f.clock.Advance(time.Minute)
	if stats, err := l.DeliverNotifications(context.Background(), opts); err != nil || stats != (kassa.DeliveryStats{}) {
		t.Fatalf("after the lease: %+v %v", stats, err)
	}
	if posts, _, _ := f.rc.counts(); posts != 1 {
		t.Fatalf("receiver saw %d posts; want 1", posts)
	}
}

// scriptedFailures fails its next Updates as its script says (arm), one
// entry each: "unavailable" as a database out of reach answers, without
// running the function; "unknown" as a COMMIT lost with its connection
// whose transaction in fact rolled back: the function runs, nothing is
// kept; "lost" as one whose transaction committed: kept, and answered
// unknown all the same.
var errRolledBack = errors.New("rolled back")

type scriptedFailures struct {
	storage.Store
	mu     sync.Mutex
	script []string
}

// arm replaces the script; none disarms it.
func (s *scriptedFailures) arm(script ...string) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

func (s *scriptedFailures) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.mu.Lock()
	var next string
	if len(s.script) > 0 {
		next, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	switch next {
	case "unavailable":
		return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database cannot be reached; nothing was done"}
	case "lost":
		if err := s.Store.Update(ctx, fn); err != nil {
			return err
		}
		return fault.OutcomeUnknown(nil, "postgres: COMMIT was sent but not answered, so whether it committed is unknown")
	case "unknown":
		if err := s.Store.Update(ctx, func(tx storage.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRolledBack
		}); !errors.Is(err, errRolledBack) {
			return err
		}
		return fault.OutcomeUnknown(nil, "postgres: COMMIT was sent but not answered, so whether it committed is unknown")
	}
	return s.Store.Update(ctx, fn)
}

// TestDeliveryRecordAfterAnOutageThenAnUnknownOutcome: an outage's pauses
// do not use up the tries an unknown outcome gets. Before, three
// store_unavailable answers left none, and a record whose commit had in
// fact rolled back was given up: the notification went out again after
// its lease.
func TestDeliveryRecordAfterAnOutageThenAnUnknownOutcome(t *testing.T) {
	f := newNotifyFixture(t, 0)
	f.order(t, "t1", order.PayAdvanceInvoice, 1000)
	st := &scriptedFailures{Store: f.store}
	l := kassa.New(st, kassa.Options{})
	f.rc.onPost = func() { st.arm("unavailable", "unavailable", "unavailable", "unknown") }
	wall := &clock{t: time.Now()}
	opts := kassa.DeliveryOptions{Lease: time.Minute, AllowPrivateNetworks: true, WallClock: wall.Now}
	if _, err := l.DeliverNotifications(context.Background(), opts); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := f.log(t)[0]; n.Status != "delivered" || n.Attempts != 1 {
		t.Fatalf("after the outage and the lost answer: %s, %d attempts; want delivered, 1", n.Status, n.Attempts)
	}
	f.rc.onPost = nil
	wall.Advance(time.Minute)
	f.clock.Advance(time.Minute)
	if _, err := l.DeliverNotifications(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if posts, _, _ := f.rc.counts(); posts != 1 {
		t.Fatalf("receiver saw %d posts; want 1", posts)
	}
}

// TestRetryFieldsDefaultOneByOne: an embedder who sets one field of
// DeliveryOptions.Retry (fewer attempts, say) keeps the default for the
// others, as Options.Policy's periods do. Left at zero, Base and Cap made
// every delay zero, so a receiver down for a minute used up the whole
// schedule in as many runs, and MaxAttempts zero gave up at the first
// failure.
func TestRetryFieldsDefaultOneByOne(t *testing.T) {
	def := notify.DefaultRetry()
	for _, tc := range []struct {
		name  string
		retry notify.Retry
		want  notify.Retry
	}{
		{"attempts only", notify.Retry{MaxAttempts: 3}, notify.Retry{Base: def.Base, Cap: def.Cap, MaxAttempts: 3}},
		{"base only", notify.Retry{Base: time.Minute}, notify.Retry{Base: time.Minute, Cap: def.Cap, MaxAttempts: def.MaxAttempts}},
		{"negative base", notify.Retry{Base: -time.Second, Cap: time.Hour, MaxAttempts: 4}, notify.Retry{Base: def.Base, Cap: time.Hour, MaxAttempts: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNotifyFixture(t, 1000)
			ctx := context.Background()
			f.order(t, "t1", order.PayAdvanceInvoice, 1000)
			opts := kassa.DeliveryOptions{Retry: tc.retry, AllowPrivateNetworks: true,
				RandN: func(n int64) int64 { return n - 1 }} // the nominal delay, no jitter
			start := f.clock.Now()
			if s, err := f.ledger.DeliverNotifications(ctx, opts); err != nil || s.Retrying != 1 {
				t.Fatalf("first run: %+v %v", s, err)
			}
			n := f.log(t)[0]
			if n.Status != "pending" || n.NextAttemptAt == nil || !n.NextAttemptAt.Equal(start.Add(tc.want.Nominal(1))) {
				t.Fatalf("after the first failure: %s, next attempt %v, want %v", n.Status, n.NextAttemptAt, start.Add(tc.want.Nominal(1)))
			}
			// Each run finds the message due only when its delay is over; the
			// schedule gives up after want.MaxAttempts attempts in all.
			attempts := 1
			for n.Status == "pending" && attempts < 100 {
				f.clock.Advance(n.NextAttemptAt.Sub(f.clock.Now()))
				if _, err := f.ledger.DeliverNotifications(ctx, opts); err != nil {
					t.Fatal(err)
				}
				attempts++
				n = f.log(t)[0]
			}
			if n.Status != "failed" || n.Attempts != tc.want.MaxAttempts {
				t.Fatalf("%s after %d attempts, want failed after %d", n.Status, n.Attempts, tc.want.MaxAttempts)
			}
		})
	}
}
