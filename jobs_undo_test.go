package kassa_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
)

// The jobs span several transactions, so a failed store call cannot leave
// the store as it was: what an earlier transaction committed stays. These
// tests make each store call of a job fail in turn, and check after each
// failure that the caller has the store's error, that every unit of the
// job's work is whole or absent, and that the next run completes the work
// with nothing done twice.

// jobFixtures runs run with store calls failing before and after they
// write (late), on each store in turn.
func jobFixtures(t *testing.T, run func(t *testing.T, f *undoFixture, late bool)) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) {
			withUndoFixtures(t, func(t *testing.T, f *undoFixture) {
				t.Logf("store %s", f.st.name)
				run(t, f, late)
			})
		})
	}
}

// injectedErr checks that a job that failed at an injected store call
// answered that error, as an internal one.
func injectedErr(t *testing.T, k int, err, injected error, method string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call %d (%s) failed and the job answered no error", k, method)
	}
	if !errors.Is(err, injected) || !fault.Is(err, fault.Internal) {
		t.Fatalf("call %d (%s) failed: the job answered %v (kind %v), want the store's error", k, method, err, fault.KindOf(err))
	}
}

// notifications lists the merchant's notifications of topic (any, if
// empty) about orderID.
func (f *undoFixture) notifications(t *testing.T, merchantID, topic, orderID string) []kassa.Notification {
	t.Helper()
	var out []kassa.Notification
	from := ""
	for {
		page, err := f.l.ListNotifications(f.ctx, merchantID, from, kassa.MaxNotificationPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.Notifications {
			if (topic == "" || n.Type == topic) && n.OrderID == orderID {
				out = append(out, n)
			}
		}
		if page.NextFromID == "" {
			return out
		}
		from = page.NextFromID
	}
}

// capturedNotifications captures n new orders of the merchant and lists
// the ids of their notifications.
func (f *undoFixture) capturedNotifications(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		o := f.captured(t, f.order(t, f.merchant).ID)
		for _, n := range f.notifications(t, f.merchant, "", o.ID) {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// TestFailedStoreCallInRunTasks: a store call of RunTasks that fails ends
// no task half done (an auto-capture has its invoice number, its
// notification and its settlement item, or none of them), the caller has
// the store's error, and the next run does every task once.
func TestFailedStoreCallInRunTasks(t *testing.T) {
	jobFixtures(t, func(t *testing.T, f *undoFixture, late bool) {
		for _, m := range []string{f.merchant, f.ackMerch} {
			if _, err := f.l.SetWebhook(f.ctx, m, kassa.SetWebhookRequest{URL: "https://hooks.example.com/k",
				Events: []string{notify.AllOrderEvents, notify.TopicAcknowledgementReminder, notify.TopicExpiryReminder}}); err != nil {
				t.Fatal(err)
			}
		}
		invoices := 0
		var autos []string // the orders auto-captured after a failure
		for k := 1; ; k++ {
			if k > 200 {
				t.Fatal("no success after 200 injected failures")
			}
			req := undoCreate()
			req.AutoCapture = &order.AutoCapture{Enabled: true, DelayMinutes: 10}
			res, err := f.l.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, f.token(t, f.merchant), req)
			if err != nil {
				t.Fatal(err)
			}
			auto := res.Order
			ack := f.order(t, f.ackMerch)
			open := f.order(t, f.merchant)
			unused := f.token(t, f.merchant)
			*f.now = open.ExpiresAt.Add(-23 * time.Hour) // every task due, no order expired

			f.inj.arm(k, late)
			stats, err := f.l.RunTasks(f.ctx, 1000)
			injected, method := f.inj.fired()
			f.inj.arm(0, false)
			if injected == nil {
				if err != nil {
					t.Fatalf("after %d failures, with none injected: %v", k-1, err)
				}
				if stats.AutoCaptured != 1 || stats.TokensExpired != 1 || stats.RemindersSent != 3 {
					t.Fatalf("a run without failure: %+v", stats)
				}
				// Each auto-capture reaches settlement once.
				made, err := f.l.RunSettlements(f.ctx)
				if err != nil {
					t.Fatal(err)
				}
				settled := map[string]int64{}
				for _, s := range made {
					page, err := f.l.SettlementTransactions(f.ctx, s.MerchantID, s.ID, "", 1000)
					if err != nil {
						t.Fatal(err)
					}
					for _, tx := range page.Transactions {
						settled[tx.OrderID] += tx.Amount.MinorUnits
					}
				}
				for _, id := range append(autos, auto.ID) {
					if settled[id] != 60000 {
						t.Fatalf("auto-capture of %s settled %d, want 60000", id, settled[id])
					}
				}
				t.Logf("%d store calls", k-1)
				return
			}
			injectedErr(t, k, err, injected, method)

			// Whatever the run did is whole.
			check := func(when string) (captured bool) {
				t.Helper()
				o := f.get(t, auto.ID)
				caps := f.notifications(t, f.merchant, "order.fullCapture", auto.ID)
				switch {
				case len(o.Captured) == 0 && len(caps) == 0 && o.Amounts().Captured == 0:
					return false
				case len(o.Captured) == 1 && len(caps) == 1 && o.Amounts().Captured == 60000 &&
					o.Captured[0].DocumentReference == fmt.Sprintf("INV-%08d", invoices+1):
					return true
				}
				t.Fatalf("%s: call %d (%s) failed: the auto-capture is half done: %d captures (%v), %d notifications, captured %d",
					when, k, method, len(o.Captured), o.Captured, len(caps), o.Amounts().Captured)
				return false
			}
			check("after the failure")
			for _, n := range []struct {
				merchant, topic, order string
			}{{f.ackMerch, notify.TopicAcknowledgementReminder, ack.ID}, {f.ackMerch, notify.TopicExpiryReminder, ack.ID},
				{f.merchant, notify.TopicExpiryReminder, open.ID}} {
				if got := len(f.notifications(t, n.merchant, n.topic, n.order)); got > 1 {
					t.Fatalf("call %d (%s) failed: %d %s notifications", k, method, got, n.topic)
				}
			}
			if f.st.check != nil {
				f.st.check(t)
			}

			// The next run, once what was set aside is due again, does the rest once.
			*f.now = f.now.Add(2 * time.Hour)
			if _, err := f.l.RunTasks(f.ctx, 1000); err != nil {
				t.Fatalf("the run after call %d (%s) failed: %v", k, method, err)
			}
			if !check("after the next run") {
				t.Fatalf("call %d (%s) failed: the next run did not capture", k, method)
			}
			invoices++
			for _, n := range []struct {
				merchant, topic, order string
			}{{f.ackMerch, notify.TopicAcknowledgementReminder, ack.ID}, {f.ackMerch, notify.TopicExpiryReminder, ack.ID},
				{f.merchant, notify.TopicExpiryReminder, open.ID}} {
				if got := len(f.notifications(t, n.merchant, n.topic, n.order)); got != 1 {
					t.Fatalf("call %d (%s) failed: after the next run, %d %s notifications of %s, want 1", k, method, got, n.topic, n.order)
				}
			}
			if _, err := f.l.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, unused, undoCreate()); fault.CodeOf(err) != "authorization_token_expired" {
				t.Fatalf("call %d (%s) failed: an order from the expired token: %v", k, method, err)
			}
			autos = append(autos, auto.ID)
			*f.now = f.now.Add(time.Hour)
		}
	})
}

// postCounter answers 200 to every POST and counts them by event id.
type postCounter struct {
	mu    sync.Mutex
	posts map[string]int
}

func (p *postCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.posts[r.Header.Get(notify.HeaderEventID)]++
	p.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
}

func (p *postCounter) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts[id]
}

// TestFailedStoreCallInDelivery: a store call of DeliverNotifications that
// fails leaves every notification either delivered, with its one attempt
// logged, or pending; the caller has the store's error; and the next run
// after the lease delivers the rest, posting again only the notification
// whose answer could not be recorded (delivery is at least once), none of
// those it recorded.
func TestFailedStoreCallInDelivery(t *testing.T) {
	jobFixtures(t, func(t *testing.T, f *undoFixture, late bool) {
		if _, err := f.l.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://hooks.example.com/k",
			Events: []string{notify.AllOrderEvents}}); err != nil {
			t.Fatal(err)
		}
		const lease = 20 * time.Millisecond
		for k := 1; ; k++ {
			if k > 200 {
				t.Fatal("no success after 200 injected failures")
			}
			ids := f.capturedNotifications(t, 2)
			if len(ids) < 4 {
				t.Fatalf("%d notifications, want at least 4", len(ids))
			}
			w := &postCounter{posts: map[string]int{}}
			opts := kassa.DeliveryOptions{Client: &http.Client{Transport: w}, Lease: lease, Parallel: 2,
				RandN: func(n int64) int64 { return n / 2 }}

			f.inj.arm(k, late)
			stats, err := f.l.DeliverNotifications(f.ctx, opts)
			injected, method := f.inj.fired()
			f.inj.arm(0, false)
			if injected == nil {
				if err != nil || stats.Delivered != len(ids) {
					t.Fatalf("after %d failures, with none injected: %+v %v", k-1, stats, err)
				}
				t.Logf("%d store calls", k-1)
				return
			}
			injectedErr(t, k, err, injected, method)
			recorded := map[string]bool{}
			for _, id := range ids {
				n, err := f.l.GetNotification(f.ctx, f.merchant, id)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case n.Status == "delivered" && n.Attempts == 1 && len(n.Log) == 1 && w.count(id) == 1:
					recorded[id] = true
				case n.Status == "pending" && n.Attempts == 0 && len(n.Log) == 0 && w.count(id) <= 1:
				default:
					t.Fatalf("call %d (%s) failed: notification %s is %s after %d attempts, %d logged, %d posted",
						k, method, id, n.Status, n.Attempts, len(n.Log), w.count(id))
				}
			}
			if f.st.check != nil {
				f.st.check(t)
			}

			time.Sleep(2 * lease)
			*f.now = f.now.Add(time.Hour)
			if _, err := f.l.DeliverNotifications(f.ctx, opts); err != nil {
				t.Fatalf("the run after call %d (%s) failed: %v", k, method, err)
			}
			again := 0
			for _, id := range ids {
				n, err := f.l.GetNotification(f.ctx, f.merchant, id)
				if err != nil {
					t.Fatal(err)
				}
				if n.Status != "delivered" || n.Attempts != 1 || len(n.Log) != 1 {
					t.Fatalf("call %d (%s) failed: after the next run, %s is %s after %d attempts, %d logged",
						k, method, id, n.Status, n.Attempts, len(n.Log))
				}
				switch c := w.count(id); {
				case c == 1:
				case c == 2 && !recorded[id]:
					again++
				default:
					t.Fatalf("call %d (%s) failed: %s posted %d times (recorded in the failed run: %v)", k, method, id, c, recorded[id])
				}
			}
			if again > 1 {
				t.Fatalf("call %d (%s) failed: %d notifications posted twice, want at most the one whose record failed", k, method, again)
			}
		}
	})
}

// TestFailedStoreCallInSweeps: a sweep that fails midway keeps what its
// earlier transactions removed removed, answers the store's error, and the
// next sweep removes the rest, each record once.
func TestFailedStoreCallInSweeps(t *testing.T) {
	jobFixtures(t, func(t *testing.T, f *undoFixture, late bool) {
		if _, err := f.l.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://hooks.example.com/k",
			Events: []string{notify.AllOrderEvents}}); err != nil {
			t.Fatal(err)
		}
		w := &postCounter{posts: map[string]int{}}
		opts := kassa.DeliveryOptions{Client: &http.Client{Transport: w}}
		for k := 1; ; k++ {
			if k > 200 {
				t.Fatal("no success after 200 injected failures")
			}
			ids := f.capturedNotifications(t, 2)
			if s, err := f.l.DeliverNotifications(f.ctx, opts); err != nil || s.Delivered != len(ids) {
				t.Fatalf("delivery %+v %v", s, err)
			}
			*f.now = f.now.Add(kassa.DefaultNotificationRetention + time.Hour)

			f.inj.arm(k, late)
			n, err := f.l.SweepNotifications(f.ctx, 1)
			injected, method := f.inj.fired()
			f.inj.arm(0, false)
			gone := 0
			for _, id := range ids {
				_, err := f.l.GetNotification(f.ctx, f.merchant, id)
				switch {
				case fault.Is(err, fault.NotFound):
					gone++
				case err != nil:
					t.Fatal(err)
				}
			}
			if injected == nil {
				if err != nil || n != len(ids) || gone != len(ids) {
					t.Fatalf("after %d failures, with none injected: %d swept, %d gone, %v", k-1, n, gone, err)
				}
				t.Logf("%d store calls", k-1)
				return
			}
			injectedErr(t, k, err, injected, method)
			if n != gone {
				t.Fatalf("call %d (%s) failed: the sweep reported %d removed, %d are gone", k, method, n, gone)
			}
			if f.st.check != nil {
				f.st.check(t)
			}
			m, err := f.l.SweepNotifications(f.ctx, 1)
			if err != nil || n+m != len(ids) {
				t.Fatalf("call %d (%s) failed: the next sweep removed %d (%v), %d before, of %d", k, method, m, err, n, len(ids))
			}
		}
	})
}
