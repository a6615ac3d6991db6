package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/storagetest"
)

func TestNotificationsOverHTTP(t *testing.T) {
	e := newSessionEnv(t)
	var mu sync.Mutex
	var secret string
	received := map[string]int{} // event id → deliveries
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := notify.Verify(secret, r.Header.Get(notify.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		received[r.Header.Get(notify.HeaderEventID)]++
	}))
	defer rcv.Close()

	code, hdr, set := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil)
	if code != 200 || set["secret"] == nil || hdr.Get("Cache-Control") != "no-store" || set["url"] != rcv.URL {
		t.Fatalf("set: %d %v %v", code, hdr, set)
	}
	mu.Lock()
	secret = set["secret"].(string)
	mu.Unlock()
	// The secret is shown once.
	if code, _, again := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 || again["secret"] != nil {
		t.Fatalf("second set shows the secret: %v", again)
	}
	if code, _, got := e.req("GET", "/v1/notification-settings", "", e.auth, nil); code != 200 || got["secret"] != nil || got["events"].([]any)[0] != "order.*" {
		t.Fatalf("get settings %d %v", code, got)
	}
	code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"ftp://nope","events":["order.*"]}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	code, _, b = e.req("PUT", "/v1/notification-settings", `{"events":[]}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	code, _, b = e.req("GET", "/v1/notification-settings", "", e.other, nil)
	wantProblem(t, code, b, 404, "webhook_not_configured")

	o := e.order("5560000001", "invoice")
	code, _, stats := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	if code != 200 || stats["delivered"].(float64) < 2 || stats["failed"] != 0.0 {
		t.Fatalf("deliver: %d %v", code, stats)
	}
	code, _, page := e.req("GET", "/v1/notifications?size=50", "", e.auth, nil)
	list := page["notifications"].([]any)
	if code != 200 || len(list) != int(stats["delivered"].(float64)) {
		t.Fatalf("log %d %v", code, page)
	}
	first := list[0].(map[string]any)
	id := first["id"].(string)
	mu.Lock()
	if len(received) != len(list) || received[id] != 1 {
		t.Errorf("received %v", received)
	}
	mu.Unlock()
	if first["status"] != "delivered" || first["orderId"] != o["id"] || len(first["deliveries"].([]any)) != 1 {
		t.Fatalf("log entry %v", first)
	}
	var env map[string]any
	raw, _ := json.Marshal(first["payload"])
	if json.Unmarshal(raw, &env) != nil || env["id"] != id || env["type"] != first["type"] {
		t.Fatalf("payload %s", raw)
	}
	if code, _, one := e.req("GET", "/v1/notifications/"+id, "", e.auth, nil); code != 200 || one["id"] != id {
		t.Fatalf("get one %d %v", code, one)
	}
	code, _, b = e.req("GET", "/v1/notifications/"+id, "", e.other, nil)
	wantProblem(t, code, b, 404, "notification_not_found")
	code, _, b = e.req("GET", "/v1/notifications?size=1001", "", e.auth, nil) // design: lists take 1 to 1000
	wantProblem(t, code, b, 400, "validation_failed")
	if code, _, _ := e.req("GET", "/v1/notifications?size=1000", "", e.auth, nil); code != 200 {
		t.Fatalf("size=1000: %d", code)
	}

	if code, _, re := e.req("POST", "/v1/notifications/"+id+"/redeliver", "", e.auth, nil); code != 200 || re["status"] != "pending" {
		t.Fatalf("redeliver %d %v", code, re)
	}
	code, _, b = e.req("POST", "/v1/notifications/"+id+"/redeliver", "", e.auth, nil)
	wantProblem(t, code, b, 409, "notification_pending")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	mu.Lock()
	if received[id] != 2 {
		t.Errorf("redelivered %d times", received[id]-1)
	}
	mu.Unlock()

	if code, _, _ := e.req("DELETE", "/v1/notification-settings", "", e.auth, nil); code != 204 {
		t.Fatalf("delete %d", code)
	}
	code, _, b = e.req("DELETE", "/v1/notification-settings", "", e.auth, nil)
	wantProblem(t, code, b, 404, "webhook_not_configured")
	if code, _, ts := e.req("POST", "/sandbox/v1/jobs/tasks", "", e.auth, nil); code != 200 || ts["tasksProcessed"] == nil {
		t.Fatalf("tasks %d %v", code, ts)
	}
}

// TestSandboxDeliveryDrainsWhatIsDue: one call of the sandbox delivery job
// delivers every due notification, not only the first batch of 50.
func TestSandboxDeliveryDrainsWhatIsDue(t *testing.T) {
	e := newSessionEnv(t)
	var mu sync.Mutex
	received := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received++
		mu.Unlock()
	}))
	defer rcv.Close()
	if code, _, _ := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("set: %d", code)
	}
	for range 40 {
		e.order("5560000001", "invoice")
	}
	code, _, page := e.req("GET", "/v1/notifications?size=1000", "", e.auth, nil)
	due := len(page["notifications"].([]any))
	if code != 200 || due <= 50 {
		t.Fatalf("%d notifications due (%d), want more than one batch", due, code)
	}
	code, _, stats := e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	if code != 200 || stats["delivered"] != float64(due) || stats["retrying"] != 0.0 || stats["failed"] != 0.0 {
		t.Fatalf("deliver %d of %d: %d %v", int(stats["delivered"].(float64)), due, code, stats)
	}
	mu.Lock()
	defer mu.Unlock()
	if received != due {
		t.Fatalf("received %d of %d", received, due)
	}
}

// TestSandboxJobsAnswerTasksSetAside: a task that fails is set aside and
// the run goes on, so the sandbox jobs that run the due tasks (jobs/tasks,
// and jobs/autocapture, which runs them as jobs/tasks does) answer 200 with
// what they did, jobs/tasks with the failure counted, as the periodic job
// logs it. Both used to answer 500 and hide that the other due tasks had run.
func TestSandboxJobsAnswerTasksSetAside(t *testing.T) {
	for _, c := range []struct {
		path string
		want map[string]float64
	}{
		{"/sandbox/v1/jobs/tasks", map[string]float64{"failed": 1, "autoCaptured": 1}},
		{"/sandbox/v1/jobs/autocapture", map[string]float64{"captured": 1}},
	} {
		t.Run(c.path, func(t *testing.T) {
			clock := NewClock(true)
			var unreadable string
			st := storagetest.WrapTx{Store: openStore(t, clock.Now), Wrap: func(tx storage.Tx) storage.Tx {
				return storagetest.UnreadableOrder{Tx: tx, OrderID: unreadable}
			}}
			ledger := kassa.New(st, kassa.Options{})
			srv := New(Config{Ledger: ledger, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Key: []byte("0123456789abcdef0123456789abcdef"), Sandbox: true, Clock: clock})
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(ts.Close)
			ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m1", ClientSecret: "s1", Sandbox: true})
			e := &sessionEnv{t: t, ts: ts, clock: clock, auth: basic("m1", "s1"), ledger: ledger}

			autoCaptured := func() string {
				tok := e.mint("5560000001", "invoice")
				code, _, o := e.req("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
					"autoCapture":{"enabled":true,"delayMinutes":10},
					"orderLines":[{"description":"tiles","quantity":1,"unitPrice":10000,"vat":2500}]}`, e.auth, nil)
				if code != 200 {
					t.Fatalf("create: %d %v", code, o)
				}
				return o["orderId"].(string)
			}
			bad := autoCaptured()
			good := autoCaptured()
			unreadable = bad
			if err := clock.Advance(15 * time.Minute); err != nil {
				t.Fatal(err)
			}
			code, _, b := e.req("POST", c.path, "", e.auth, nil)
			if code != 200 {
				t.Fatalf("%d %v, want 200 with %v", code, b, c.want)
			}
			for k, v := range c.want {
				if b[k] != v {
					t.Fatalf("%s %v, want %v", k, b[k], v)
				}
			}
			if code, _, o := e.req("GET", "/v1/orders/"+good, "", e.auth, nil); code != 200 || !slices.Contains(o["status"].([]any), any("fullyCaptured")) {
				t.Fatalf("the readable order: %d %v, want it captured", code, o["status"])
			}
		})
	}
}

// TestExpiryReminderForUncapturedLinesOfZero: an order whose uncaptured
// lines sum to 0 still expires with them (and can still be captured or
// extended), so it gets its order.expiryReminder a day before; the reminder
// used to look at the uncaptured amount and sent none.
func TestExpiryReminderForUncapturedLinesOfZero(t *testing.T) {
	e := newSessionEnv(t)
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rcv.Close()
	if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.expiryReminder"]}`, e.auth, nil); code != 200 {
		t.Fatalf("set: %d %v", code, b)
	}
	tok := e.mint("5560000001", "invoice")
	code, _, o := e.req("POST", "/v1/authorization-tokens/"+tok+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"tiles","quantity":1,"unitPrice":10000,"vat":2500},{"description":"sample","quantity":1,"unitPrice":0,"vat":2500}]}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("create: %d %v", code, o)
	}
	id := o["orderId"].(string)
	first := lines(e.get(id)["uncaptured"])[0].(map[string]any)["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", `{"orderLines":[{"id":"`+first+`"}],"totalCaptureAmount":10000}`, e.auth, nil); code != 200 {
		t.Fatalf("capture: %d %v", code, b)
	}
	if err := e.clock.Advance(27*24*time.Hour + time.Minute); err != nil {
		t.Fatal(err)
	}
	if code, _, b := e.req("POST", "/sandbox/v1/jobs/tasks", "", e.auth, nil); code != 200 {
		t.Fatalf("tasks: %d %v", code, b)
	}
	_, _, page := e.req("GET", "/v1/notifications", "", e.auth, nil)
	list := page["notifications"].([]any)
	if len(list) != 1 {
		t.Fatalf("%d notifications, want the expiry reminder: %v", len(list), list)
	}
	n := list[0].(map[string]any)
	data := n["payload"].(map[string]any)["data"].(map[string]any)
	if n["type"] != "order.expiryReminder" || data["orderId"] != id || minor(data["uncapturedAmount"]) != 0 {
		t.Fatalf("notification %v", n)
	}
}
