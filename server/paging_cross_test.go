package server

import (
	"net/url"
	"testing"
)

// TestListCursorsStayWithTheirListAndMerchant: a position handed out by one
// merchant's list, used by another merchant or on another list, never shows
// anything of the first merchant's: fromId of another merchant's session,
// settlement, notification or settlement transaction is 400 naming fromId
// (the settlement itself 404), and an order-list cursor, a position only,
// moves the other merchant within its own orders.
func TestListCursorsStayWithTheirListAndMerchant(t *testing.T) {
	e := newSessionEnv(t)
	if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"https://example.com/hook","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("subscribe: %d %v", code, b)
	}
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
	// The other merchant, subscribed too, has one order.
	e.auth, e.other = e.other, e.auth
	if code, _, b := e.req("PUT", "/v1/notification-settings", `{"url":"https://example.com/hook","events":["order.*"]}`, e.auth, nil); code != 200 {
		t.Fatalf("subscribe: %d %v", code, b)
	}
	otherOrder := e.order("5560000001", "invoice")["id"].(string)
	e.auth, e.other = e.other, e.auth
	if code, _, b := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); code != 200 {
		t.Fatalf("run: %d %v", code, b)
	}
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
	// The other merchant's notification log from the first's position: its own only.
	code, _, b = e.req("GET", "/v1/notifications?fromId="+url.QueryEscape(notificationNext), "", e.other, nil)
	if code != 200 {
		t.Fatalf("a position on the other's log: %d %v", code, b)
	}
	for _, n := range b["notifications"].([]any) {
		if n.(map[string]any)["orderId"] != otherOrder {
			t.Fatalf("the other merchant's log shows %v", n)
		}
	}
	code, _, b = e.req("GET", "/v1/orders?cursor="+url.QueryEscape(orderCursor), "", e.other, nil)
	if code != 200 {
		t.Fatalf("an order cursor of another merchant: %d %v", code, b)
	}
	for _, o := range b["orders"].([]any) {
		if id := o.(map[string]any)["orderId"]; id != otherOrder {
			t.Fatalf("the other merchant's list shows %v (the first's orders %v)", id, orders)
		}
	}
}
