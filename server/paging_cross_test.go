package server

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestListCursorsStayWithTheirListAndMerchant: a position handed out by one
// merchant's list, used by another merchant or on another list, never shows
// anything of the first merchant's: fromId of another merchant's session,
// settlement, notification or settlement transaction is 400 naming fromId
// (the settlement itself 404), and an order-list or delivery-log cursor, a
// position only, moves the other merchant within its own list: to exactly
// its items older than the position, which the test makes non-empty so that
// a walk showing nothing fails.
func TestListCursorsStayWithTheirListAndMerchant(t *testing.T) {
	e := newSessionEnv(t)
	// otherOrder makes an order of the other merchant, subscribed too.
	otherOrder := func() string {
		t.Helper()
		e.auth, e.other = e.other, e.auth
		defer func() { e.auth, e.other = e.other, e.auth }()
		return e.order("5560000001", "invoice")["id"].(string)
	}
	for _, auth := range []string{e.auth, e.other} {
		if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"https://example.com/hook","events":["order.*"]}`, auth, nil); code != 200 {
			t.Fatalf("subscribe: %d %v", code, b)
		}
	}
	// The other merchant has an order older than everything of the first's,
	// which a position of the first's lists is past, and one newer (below).
	otherOlder := otherOrder()
	var orders []string
	for range 3 {
		o := e.order("5560000001", "invoice")
		orders = append(orders, o["id"].(string))
		if code, _, b := e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil); code != 200 {
			t.Fatalf("capture: %d %v", code, b)
		}
		if code, _, b := e.do("POST", "/v1/sessions", fill(sessionBody, "store-1", "PO-x", ""), e.auth); code != 201 {
			t.Fatalf("session: %d %v", code, b)
		}
	}
	if code, _, b := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); code != 200 {
		t.Fatalf("run: %d %v", code, b)
	}
	otherNewer := otherOrder()
	first := func(path, list, field string) (string, string) {
		t.Helper()
		code, _, b := e.req("GET", path, "", e.auth, nil)
		items, _ := b[list].([]any)
		if code != 200 || len(items) == 0 {
			t.Fatalf("GET %s: %d %v", path, code, b)
		}
		next, _ := b[field].(string)
		return items[0].(map[string]any)["id"].(string), next
	}
	sessionID, sessionNext := first("/v1/sessions?size=1", "sessions", "nextFromId")
	settlementID, _ := first("/v1/settlements?size=1", "settlements", "nextFromId")
	notificationID, notificationNext := first("/v1/notifications?size=1", "notifications", "nextFromId")
	_, _, txs := e.req("GET", "/v1/settlements/"+settlementID+"/tx?size=1", "", e.auth, nil)
	txNext, _ := txs["nextFromId"].(string)
	_, _, ol := e.req("GET", "/v1/orders?size=1", "", e.auth, nil)
	orderCursor, _ := ol["nextCursor"].(string)
	if sessionNext == "" || notificationNext == "" || txNext == "" || orderCursor == "" {
		t.Fatalf("cursors: %q %q %q %q", sessionNext, notificationNext, txNext, orderCursor)
	}
	refused := func(path string) {
		t.Helper()
		code, _, b := e.req("GET", path, "", e.other, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != "fromId" {
			t.Fatalf("GET %s: field %v", path, f)
		}
	}
	for _, from := range []string{sessionID, sessionNext} {
		refused("/v1/sessions?fromId=" + url.QueryEscape(from))
	}
	refused("/v1/settlements?fromId=" + settlementID)
	refused("/v1/notifications?fromId=" + notificationID)
	// Ids of one list on another list, by their own merchant.
	for _, path := range []string{"/v1/sessions?fromId=" + settlementID, "/v1/settlements?fromId=" + sessionID,
		"/v1/notifications?fromId=" + url.QueryEscape(orderCursor), "/v1/sessions?fromId=" + url.QueryEscape(notificationNext)} {
		code, _, b := e.req("GET", path, "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
	}
	code, _, b := e.req("GET", "/v1/orders?cursor="+url.QueryEscape(notificationNext), "", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	code, _, b = e.req("GET", "/v1/settlements/"+settlementID+"/tx?fromId="+txNext, "", e.other, nil)
	wantProblem(t, code, b, 404, "settlement_not_found")
	// The other merchant's notification log from the first's position: its
	// own only, and exactly those older than the position (the older order's;
	// the newer order's are before it), so the walk is not empty.
	code, _, b = e.req("GET", "/v1/notifications?size=1000", "", e.other, nil)
	if code != 200 {
		t.Fatalf("the other's log: %d %v", code, b)
	}
	var want []any
	newer := 0
	for _, n := range b["notifications"].([]any) {
		switch n.(map[string]any)["orderId"] {
		case otherOlder:
			want = append(want, n.(map[string]any)["id"])
		case otherNewer:
			newer++
		default:
			t.Fatalf("the other merchant's log shows %v", n)
		}
	}
	if len(want) == 0 || newer == 0 {
		t.Fatalf("the other's log has %d notifications of its older order and %d of its newer, want some of each: %v", len(want), newer, b)
	}
	code, _, b = e.req("GET", "/v1/notifications?size=1000&fromId="+url.QueryEscape(notificationNext), "", e.other, nil)
	if code != 200 {
		t.Fatalf("a position on the other's log: %d %v", code, b)
	}
	var got []any
	for _, n := range b["notifications"].([]any) {
		got = append(got, n.(map[string]any)["id"])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the other's log from the first's position shows %v, want its older order's %v", got, want)
	}
	code, _, b = e.req("GET", "/v1/orders?cursor="+url.QueryEscape(orderCursor), "", e.other, nil)
	if code != 200 {
		t.Fatalf("an order cursor of another merchant: %d %v", code, b)
	}
	got = nil
	for _, o := range b["orders"].([]any) {
		got = append(got, o.(map[string]any)["id"])
	}
	if !reflect.DeepEqual(got, []any{otherOlder}) {
		t.Fatalf("the other merchant's list from the first's cursor shows %v, want its older order %s (the first's orders %v, its newer %s)",
			got, otherOlder, orders, otherNewer)
	}
}

// TestLogCursorOfTextNoStoreHolds: a delivery-log cursor is a position with
// a checksum, not a secret, so a client can make one up. One whose id is
// no text (invalid UTF-8, NUL), which no id the server hands out is, was
// listed from on bbolt (200) and refused 400 invalid_text naming no
// parameter on PostgreSQL; it is refused 400 naming fromId on every store,
// as a bare id of no notification is.
func TestLogCursorOfTextNoStoreHolds(t *testing.T) {
	e := newSessionEnv(t)
	seal := func(pos string) string {
		sum := sha256.Sum256([]byte(pos))
		return pos + "." + base64.RawURLEncoding.EncodeToString(sum[:6])
	}
	at := strconv.FormatInt(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano(), 36)
	for _, id := range []string{"\xff", "ntf\x00x", "a\xc3"} {
		code, _, b := e.req("GET", "/v1/notifications?fromId="+url.QueryEscape(seal(id+"@"+at)), "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != "fromId" {
			t.Fatalf("id %q: field %v, want fromId", id, f)
		}
	}
	// A made-up position of text is one: it pages from there.
	code, _, b := e.req("GET", "/v1/notifications?fromId="+url.QueryEscape(seal("ntf-x@"+at)), "", e.auth, nil)
	if code != 200 {
		t.Fatalf("a made-up position: %d %v", code, b)
	}
}
