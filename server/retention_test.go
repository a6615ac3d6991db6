package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/token"
)

// TestDeliveryLogRetention: the sweep removes delivered and failed
// notifications once their retention has passed, and leaves a pending one
// (here: retrying against a receiver that fails) however old, and the
// recent ones.
func TestDeliveryLogRetention(t *testing.T) {
	e := newSessionEnv(t)
	fail := e.switchableReceiver(false)
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	list := func() (delivered, pending int) {
		code, _, page := e.req("GET", "/v1/notifications?size=1000", "", e.auth, nil)
		if code != 200 {
			t.Fatalf("list: %d", code)
		}
		for _, n := range page["notifications"].([]any) {
			switch n.(map[string]any)["status"] {
			case "delivered":
				delivered++
			case "pending":
				pending++
			}
		}
		return delivered, pending
	}
	old, _ := list()
	if old == 0 {
		t.Fatal("nothing delivered")
	}
	fail(true)
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	if _, p := list(); p == 0 {
		t.Fatal("nothing pending")
	}
	ctx := context.Background()
	if n, err := e.ledger.SweepNotifications(ctx, 100); err != nil || n != 0 {
		t.Fatalf("a sweep within the retention removed %d (%v)", n, err)
	}
	if err := e.clock.Advance(kassa.DefaultNotificationRetention + time.Hour); err != nil {
		t.Fatal(err)
	}
	// Recent ones, delivered: kept.
	fail(false)
	e.order("5560000001", "invoice")
	fail(true)
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil) // the retrying ones fail again
	beforeD, beforeP := list()
	n, err := e.ledger.SweepNotifications(ctx, 1) // a batch of one, swept until none is left
	if err != nil || n != old {
		t.Fatalf("the sweep removed %d (%v); want the %d old delivered ones", n, err, old)
	}
	if d, p := list(); d != beforeD-old || p != beforeP {
		t.Fatalf("after the sweep: %d delivered, %d pending; want %d, %d", d, p, beforeD-old, beforeP)
	}
}

// TestPagingTheLogAcrossASweep: a page's nextFromId stays good after the
// retention sweep has removed the notification it was taken from: the log
// then ends there. A cursor named a notification by id alone, and once the
// sweep removed it, the next page was 400 "not the id of an item on this
// list", blaming the client. A notification id sent as fromId still works,
// and one that names nothing is still 400.
func TestPagingTheLogAcrossASweep(t *testing.T) {
	e := newSessionEnv(t)
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rcv.Close()
	if code, _, _ := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("set: %d", code)
	}
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	if err := e.clock.Advance(kassa.DefaultNotificationRetention - time.Hour); err != nil {
		t.Fatal(err)
	}
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil)
	page := func(q string) (int, map[string]any) {
		code, _, b := e.req("GET", "/v1/notifications?size=1"+q, "", e.auth, nil)
		return code, b
	}
	// Walk to the oldest notification: its page's cursor is the last.
	var cursor, lastID string
	for q := ""; ; {
		code, b := page(q)
		if code != 200 {
			t.Fatalf("page %q: %d %v", q, code, b)
		}
		ns := b["notifications"].([]any)
		next, _ := b["nextFromId"].(string)
		if next == "" {
			break
		}
		cursor, lastID = next, ns[0].(map[string]any)["id"].(string)
		q = "&fromId=" + url.QueryEscape(next)
	}
	if code, b := page("&fromId=" + lastID); code != 200 {
		t.Fatalf("a notification id as fromId: %d %v", code, b)
	}
	if err := e.clock.Advance(2 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := e.ledger.SweepNotifications(context.Background(), 100); err != nil || n == 0 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	code, b := page("&fromId=" + url.QueryEscape(cursor))
	if code != 200 || len(b["notifications"].([]any)) != 0 || b["nextFromId"] != nil {
		t.Fatalf("the cursor of a swept notification: %d %v; want 200 and the end of the log", code, b)
	}
	code, b = page("&fromId=0b0b0b0b-0000-4000-8000-000000000000")
	wantProblem(t, code, b, 400, "validation_failed")
}

// TestPagingPastASweptCursorKeepsOlderPending: the sweep removes only done
// notifications, so a pending one older than a swept one stays in the log.
// Paging from the swept one's cursor must still reach it: the log does not
// end where the sweep took the cursor's notification away.
func TestPagingPastASweptCursorKeepsOlderPending(t *testing.T) {
	e := newSessionEnv(t)
	fail := e.switchableReceiver(true)
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil) // fails: pending, retried later
	fail(false)
	e.order("5560000001", "invoice")
	e.req("POST", "/sandbox/v1/jobs/notifications", "", e.auth, nil) // the new ones delivered; the old not yet due
	type item struct{ id, status, next string }
	walk := func(q string) []item {
		var out []item
		for range 100 {
			code, _, b := e.req("GET", "/v1/notifications?size=1"+q, "", e.auth, nil)
			if code != 200 {
				t.Fatalf("page %q: %d %v", q, code, b)
			}
			ns := b["notifications"].([]any)
			if len(ns) == 0 {
				break
			}
			n := ns[0].(map[string]any)
			next, _ := b["nextFromId"].(string)
			out = append(out, item{n["id"].(string), n["status"].(string), next})
			if next == "" {
				break
			}
			q = "&fromId=" + url.QueryEscape(next)
		}
		return out
	}
	before := walk("")
	var cursor string
	pending := 0
	for _, it := range before {
		if it.status == "delivered" && it.next != "" {
			cursor = it.next
		}
		if it.status == "pending" {
			pending++
		}
	}
	if cursor == "" || pending == 0 {
		t.Fatalf("want delivered notifications above pending ones: %v", before)
	}
	if err := e.clock.Advance(kassa.DefaultNotificationRetention + time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := e.ledger.SweepNotifications(context.Background(), 100); err != nil || n == 0 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	after := walk("&fromId=" + url.QueryEscape(cursor))
	if len(after) != pending {
		t.Fatalf("from the swept notification's cursor: %v; want the %d pending ones older than it (log before the sweep: %v)", after, pending, before)
	}
}

// switchableReceiver sets e's merchant's webhook to a receiver that answers
// 500 while failing, 200 otherwise, and returns the switch.
func (e *sessionEnv) switchableReceiver(failing bool) func(bool) {
	var mu sync.Mutex
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	e.t.Cleanup(rcv.Close)
	if code, _, _ := e.req("PUT", "/v1/notification-settings", `{"url":"`+rcv.URL+`","events":["order.*"]}`, e.auth, nil); code != 200 {
		e.t.Fatalf("set: %d", code)
	}
	return func(f bool) {
		mu.Lock()
		defer mu.Unlock()
		failing = f
	}
}

// TestAuthorizationTokenRetention: an authorization token stays, answering
// as documented (used and expired 409, deleted 404), until its retention
// after its expiry has passed on the store's clock; the sweep then removes
// used, expired and deleted tokens alike, after which each is 404
// authorization_token_not_found. A live token, the orders made from the
// removed ones, and a create-order replayed under its Idempotency-Key (kept
// on the wall clock) answer as before.
func TestAuthorizationTokenRetention(t *testing.T) {
	e := newSessionEnv(t)
	ctx := context.Background()
	used, expired, deleted := e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice"), e.mint("5560000001", "invoice")
	key := map[string]string{"Idempotency-Key": "retention-1"}
	code, _, made := e.req("POST", "/v1/authorization-tokens/"+used+"/order", orderBody, e.auth, key)
	if code != 200 {
		t.Fatalf("order: %d %v", code, made)
	}
	orderID := made["orderId"].(string)
	if code, _, b := e.req("DELETE", "/v1/authorization-tokens/"+deleted, "", e.auth, nil); code != 204 {
		t.Fatalf("delete: %d %v", code, b)
	}
	answer := func(tok string) (int, string) {
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+tok+"/order", orderBody, e.auth, nil)
		c, _ := b["code"].(string)
		return code, c
	}
	want := func(when, tok string, code int, c string) {
		t.Helper()
		if gc, gcode := answer(tok); gc != code || gcode != c {
			t.Errorf("%s: %d %s; want %d %s", when, gc, gcode, code, c)
		}
	}
	sweep := func() int {
		t.Helper()
		n, err := e.ledger.SweepAuthorizations(ctx, 1) // a batch of one, swept until none is left
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Past the expiry, within the retention: nothing goes.
	if err := e.clock.Advance(kassa.DefaultAuthorizationRetention); err != nil {
		t.Fatal(err)
	}
	if n := sweep(); n != 0 {
		t.Fatalf("a sweep within the retention removed %d", n)
	}
	want("within the retention", used, 409, "authorization_token_used")
	want("within the retention", expired, 409, "authorization_token_expired")
	want("within the retention", deleted, 404, "authorization_token_not_found")

	if err := e.clock.Advance(token.DefaultAuthorizationTTL + time.Minute); err != nil {
		t.Fatal(err)
	}
	live := e.mint("5560000001", "invoice")
	if n := sweep(); n != 3 {
		t.Fatalf("the sweep past the retention removed %d; want 3 (used, expired, deleted)", n)
	}
	for _, tok := range []string{used, expired, deleted} {
		want("after the sweep", tok, 404, "authorization_token_not_found")
	}
	if code, _, b := e.req("DELETE", "/v1/authorization-tokens/"+expired, "", e.auth, nil); code != 404 {
		t.Errorf("delete of a removed token: %d %v", code, b)
	}
	// The replay under the key needs no token: the same order.
	if code, _, b := e.req("POST", "/v1/authorization-tokens/"+used+"/order", orderBody, e.auth, key); code != 200 || b["orderId"] != orderID {
		t.Errorf("replay after the sweep: %d %v; want 200 %s", code, b, orderID)
	}
	if o := e.get(orderID); o["customer"].(map[string]any)["companyId"] != "5560000001" {
		t.Errorf("the order of the removed token: %v", o["customer"])
	}
	if code, c := answer(live); code != 200 {
		t.Errorf("the live token: %d %s", code, c)
	}
	if n := sweep(); n != 0 {
		t.Fatalf("a second sweep removed %d", n)
	}
}
