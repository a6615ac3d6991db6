package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/storagetest"
)

// errInjected is the failure the injector makes a store call (or a commit)
// answer, as a database does on an I/O error.
var errInjected = fault.Internalf(errors.New("injected store failure"), "injected store failure")

// injector is a store whose transactions fail on request: the N-th Tx call
// made while it is armed (counted over every transaction), or the commit of
// the k-th Update.
type injector struct {
	storage.Store
	mu                    sync.Mutex
	armed                 bool
	failCall, failCommit  int
	calls, updates, fired int
}

func (s *injector) arm(call, commit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.failCall, s.failCommit, s.calls, s.updates, s.fired = true, call, commit, 0, 0, 0
}

// disarm turns failures off and reports how many were injected.
func (s *injector) disarm() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	return s.fired
}

func (s *injector) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.mu.Lock()
	s.updates++
	k, armed := s.updates, s.armed
	s.mu.Unlock()
	return s.Store.Update(ctx, func(tx storage.Tx) error {
		if err := fn(storagetest.Hooked(tx, s)); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if armed && k == s.failCommit {
			s.fired++
			return errInjected
		}
		return nil
	})
}

func (s *injector) View(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.View(ctx, func(tx storage.Tx) error { return fn(storagetest.Hooked(tx, s)) })
}

func (s *injector) hit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed {
		return nil
	}
	s.calls++
	if s.calls == s.failCall {
		s.fired++
		return errInjected
	}
	return nil
}

// Before fails the armed call (storagetest.TxHook).
func (s *injector) Before(string) error { return s.hit() }

// After passes the call's own error on: failures are injected before a call.
func (s *injector) After(_ string, err error) error { return err }

// snapshot is every record of the bbolt file, by bucket path and key.
func snapshot(t *testing.T, db *bbolt.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(prefix string, b *bbolt.Bucket) error
	walk = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			out[prefix+string(k)] = string(v)
			return nil
		})
	}
	if err := db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walk(string(name)+"/", b) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(before, after map[string]string) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if v, ok := before[k]; !ok {
			d = append(d, "+ "+k)
		} else if v != after[k] {
			d = append(d, "~ "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "- "+k)
		}
	}
	return strings.Join(d, "\n")
}

type injEnv struct {
	*sessionEnv
	inj *injector
	db  *bbolt.DB
}

func newInjEnv(t *testing.T) *injEnv {
	clock := NewClock(true)
	st := openStore(t, clock.Now)
	b, ok := st.(*bolt.Store)
	if !ok {
		t.Skip("the injection test snapshots a bbolt file")
	}
	inj := &injector{Store: st}
	return &injEnv{sessionEnv: newEnvOn(t, false, clock, inj, nil), inj: inj, db: b.DB()}
}

// raw sends a request and returns its answer unparsed.
func (x *injEnv) raw(method, path, body, key string) (int, http.Header, []byte) {
	x.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, x.ts.URL+path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", x.auth)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

type sender func(key string) (int, http.Header, []byte)

func (x *injEnv) call(method, path, body string) sender {
	return func(key string) (int, http.Header, []byte) { return x.raw(method, path, body, key) }
}

// share holds the bbolt committer for a moment, and queues behind it, after
// the request under test is sent, a write of another merchant's unchanged
// record: the two run in one bbolt transaction.
func (x *injEnv) share() chan error {
	entered, done := make(chan struct{}), make(chan error, 1)
	go x.inj.Store.Update(context.Background(), func(storage.Tx) error {
		close(entered)
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	<-entered
	go func() {
		time.Sleep(10 * time.Millisecond)
		done <- x.inj.Store.Update(context.Background(), func(tx storage.Tx) error {
			m, err := tx.GetMerchantByClientID("m2")
			if err != nil {
				return err
			}
			return tx.PutMerchant(m)
		})
	}()
	return done
}

// injOp prepares a fresh target for an operation and returns the request
// and the GETs whose answers must not change when it fails.
type injOp struct {
	name    string
	unkeyed bool // the route takes no Idempotency-Key
	// partial: a job of many items, each in its own transaction; one
	// failing leaves the others done (and a failed task set aside), so
	// only the answer is checked.
	partial bool
	prepare func(x *injEnv) (sender, []string)
}

var (
	injSeq     int
	requestIDs = regexp.MustCompile(`"requestId":"[^"]*"`)
)

// exercise runs op with the n-th store call failing (commit false) or the
// n-th Update's commit failing (commit true), for n = 1, 2, … until it
// succeeds, then replays it.
// batched also makes the failing transaction share a bbolt commit with
// another writer's, so that its writes are undone from its journal rather
// than by rolling the whole bbolt transaction back.
func (x *injEnv) exercise(t *testing.T, op injOp, commit, batched bool) {
	send, watch := op.prepare(x)
	injSeq++
	key := fmt.Sprintf("inj-%d", injSeq)
	mode := "call"
	if commit {
		mode = "commit"
	}
	views := func() []string {
		var out []string
		for _, p := range watch {
			code, _, b := x.raw("GET", p, "", "")
			b = requestIDs.ReplaceAll(b, nil)
			out = append(out, fmt.Sprintf("%s %d %s", p, code, b))
		}
		return out
	}
	for n := 1; n <= 300; n++ {
		before, seen := snapshot(t, x.db), views()
		if commit {
			x.inj.arm(0, n)
		} else {
			x.inj.arm(n, 0)
		}
		var bystander chan error
		if batched {
			bystander = x.share()
		}
		code, hdr, body := send(key)
		if bystander != nil {
			if err := <-bystander; err != nil {
				t.Fatal(err)
			}
		}
		fired := x.inj.disarm()
		after := snapshot(t, x.db)
		if batched {
			delete(after, "storeinfo/lastCommit")
			delete(before, "storeinfo/lastCommit")
		}
		if fired == 0 {
			if n == 1 {
				t.Fatalf("%s (%s): nothing went through the injector, so it failed nothing", op.name, mode)
			}
			t.Logf("%s (%s): ran after %d failures", op.name, mode, n-1)
			if code >= 400 {
				t.Errorf("%s: %d without a failure: %s", op.name, code, body)
				return
			}
			if op.unkeyed {
				return
			}
			// Replayed with its key: the same answer, nothing written.
			code2, _, body2 := send(key)
			if code2 != code || (!bytes.Equal(body, body2) && !strings.HasPrefix(op.name, "checkout")) {
				t.Errorf("%s: replay %d %s, first %d %s", op.name, code2, body2, code, body)
			}
			replayed := snapshot(t, x.db)
			if batched {
				delete(replayed, "storeinfo/lastCommit")
			}
			if d := diff(after, replayed); d != "" && key != "" && !strings.HasPrefix(op.name, "checkout") && !strings.HasPrefix(op.name, "job") {
				t.Errorf("%s: the replay wrote:\n%s", op.name, d)
			}
			return
		}
		where := fmt.Sprintf("%s, %s %d failing", op.name, mode, n)
		if batched {
			where += " (batched)"
		}
		if op.partial {
			if code >= 400 && code < 500 {
				t.Errorf("%s: answered %d %s", where, code, body)
			}
			continue
		}
		if code < 500 {
			t.Errorf("%s: answered %d %s", where, code, body)
		} else if ct := hdr.Get("Content-Type"); !strings.HasPrefix(op.name, "checkout") &&
			(ct != "application/problem+json" || !(bytes.Contains(body, []byte(`"code":"internal"`)) && bytes.Contains(body, []byte(`"requestId":"`)) ||
				bytes.Contains(body, []byte(`"code":"store_unavailable"`)))) {
			t.Errorf("%s: answered %d %s %s", where, code, ct, body)
		}
		if d := diff(before, after); d != "" {
			t.Errorf("%s: left written:\n%s", where, d)
		}
		if now := views(); !slices.Equal(seen, now) {
			t.Errorf("%s: reads changed:\nbefore %q\nafter  %q", where, seen, now)
		}
	}
	t.Errorf("%s (%s): still failing after 300 tries", op.name, mode)
}

func (x *injEnv) orderID(companyID, pm string) string { return x.order(companyID, pm)["id"].(string) }

// captured makes an order with one capture of 10000 and returns the order
// and capture ids.
func (x *injEnv) captured() (string, string) {
	id := x.orderID("5560000001", "invoice")
	code, _, o := x.req("POST", "/v1/orders/"+id+"/partialcapture",
		`{"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":10000,"vat":2500}],"totalCaptureAmount":10000}`, x.auth, nil)
	if code != 200 {
		x.t.Fatalf("capture: %d %v", code, o)
	}
	return id, o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
}

func (x *injEnv) session() (string, string) {
	injSeq++
	code, _, s := x.req("POST", "/v1/sessions", fill(sessionBody, "s", "r", fmt.Sprint("ext-inj-", injSeq)), x.auth, nil)
	if code != 201 {
		x.t.Fatalf("session: %d %v", code, s)
	}
	return s["id"].(string), s["checkoutUrl"].(string)
}

func (x *injEnv) notification() string {
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	x.t.Cleanup(hook.Close)
	if code, _, b := x.req("PUT", "/v1/notification-settings", `{"url":"`+hook.URL+`","events":["order.create"]}`, x.auth, nil); code != 200 {
		x.t.Fatalf("settings: %d %v", code, b)
	}
	x.orderID("5560000001", "invoice")
	code, _, b := x.req("GET", "/v1/notifications?size=1", "", x.auth, nil)
	if code != 200 || len(b["notifications"].([]any)) == 0 {
		x.t.Fatalf("notifications: %d %v", code, b)
	}
	return b["notifications"].([]any)[0].(map[string]any)["id"].(string)
}

func orderOp(name, method, sub, body string, make func(x *injEnv) (string, string)) injOp {
	return injOp{name, false, false, func(x *injEnv) (sender, []string) {
		id, ledger := make(x)
		path := strings.NewReplacer("{id}", id, "{ledger}", ledger).Replace(sub)
		if !strings.HasPrefix(path, "/sandbox") {
			path = "/v1/orders/" + id + path
		}
		return x.call(method, path, body), []string{"/v1/orders/" + id, "/v1/orders"}
	}}
}

func plain(x *injEnv) (string, string) { return x.orderID("5560000001", "invoice"), "" }

var injOps = []injOp{
	{"create order from token", false, false, func(x *injEnv) (sender, []string) {
		return x.call("POST", "/v1/authorization-tokens/"+x.mint("5560000001", "invoice")+"/order", orderBody), []string{"/v1/orders"}
	}},
	{"customer token", false, false, func(x *injEnv) (sender, []string) {
		return x.call("POST", "/v1/authorization-tokens/"+x.mint("5560000001", "invoice")+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`), nil
	}},
	{"customer token order", false, false, func(x *injEnv) (sender, []string) {
		code, _, ct := x.req("POST", "/v1/authorization-tokens/"+x.mint("5560000001", "invoice")+"/customer-token",
			`{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"email":"ap@b.se"}}`, x.auth, nil)
		if code != 200 && code != 201 {
			x.t.Fatalf("customer token: %d %v", code, ct)
		}
		return x.call("POST", "/v1/customer-tokens/"+ct["customerToken"].(string)+"/order", orderBody), []string{"/v1/orders"}
	}},
	{"session create", false, false, func(x *injEnv) (sender, []string) {
		injSeq++
		return x.call("POST", "/v1/sessions", fill(sessionBody, "s", "r", fmt.Sprint("ext-new-", injSeq))), []string{"/v1/sessions"}
	}},
	{"session update", false, false, func(x *injEnv) (sender, []string) {
		id, _ := x.session()
		return x.call("POST", "/v1/sessions/"+id, `{"merchantReference":"PO-2"}`), []string{"/v1/sessions/" + id}
	}},
	{"session cancel", false, false, func(x *injEnv) (sender, []string) {
		id, _ := x.session()
		return x.call("DELETE", "/v1/sessions/"+id, ""), []string{"/v1/sessions/" + id}
	}},
	{"checkout approve", false, false, func(x *injEnv) (sender, []string) {
		id, u := x.session()
		terms := x.checkoutTerms(u)
		return func(string) (int, http.Header, []byte) { return x.approve(u, terms), nil, nil }, []string{"/v1/sessions/" + id, "/v1/orders"}
	}},
	orderOp("acknowledge", "POST", "/acknowledge", "", func(x *injEnv) (string, string) { return x.orderID("5560000027", "invoice"), "" }),
	orderOp("full capture", "POST", "/capture", "", plain),
	orderOp("partial capture", "POST", "/partialcapture", `{"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":100,"vat":0}],"totalCaptureAmount":100}`, plain),
	orderOp("full refund", "POST", "/refund/{ledger}", "", (*injEnv).captured),
	orderOp("partial refund", "POST", "/partialrefund/{ledger}", `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1,"vat":0}],"totalRefundAmount":1,"note":"n"}`, (*injEnv).captured),
	orderOp("cancel", "DELETE", "", "", plain),
	orderOp("void", "DELETE", "/{ledger}", "", func(x *injEnv) (string, string) {
		id, _ := x.captured()
		return id, x.get(id)["uncaptured"].(map[string]any)["ledgerId"].(string)
	}),
	orderOp("extend expiry", "POST", "/extendexpiry", "", plain),
	orderOp("edit order", "POST", "", `{"orderLines":[{"description":"Gift","quantity":1,"unitPrice":0,"vat":0}],"totalOrderAmount":0,"totalOrderAmountExclVat":0,"totalOrderVatAmount":0}`, plain),
	orderOp("edit customer", "POST", "/customer", `{"phone":"+46701234567"}`, plain),
	orderOp("edit payment method", "POST", "/paymentmethod", `{"paymentMethod":{"provider":"service","type":"advanceInvoice"}}`, plain),
	orderOp("reference", "POST", "/reference", `{"reference":"PO-77"}`, plain),
	orderOp("resend", "POST", "/document/{ledger}/resend", "", (*injEnv).captured),
	orderOp("recourse", "POST", "/recourse/{ledger}", `{"reason":"unpaid"}`, (*injEnv).captured),
	orderOp("sandbox payment", "POST", "/sandbox/v1/orders/{id}/ledgers/{ledger}/payments", `{"amount":3000}`, (*injEnv).captured),
	orderOp("sandbox status", "POST", "/sandbox/v1/orders/{id}/ledgers/{ledger}/status", `{"status":"reminder1"}`, (*injEnv).captured),
	orderOp("sandbox risk", "POST", "/sandbox/v1/orders/{id}/risk", `{"decision":"approve"}`, func(x *injEnv) (string, string) { return x.orderID("5560000035", "invoice"), "" }),
	{"notification settings put", true, false, func(x *injEnv) (sender, []string) {
		return x.call("PUT", "/v1/notification-settings", `{"url":"https://example.com/hook2","events":["order.create"]}`), []string{"/v1/notification-settings"}
	}},
	{"notification settings delete", true, false, func(x *injEnv) (sender, []string) {
		x.notification()
		return x.call("DELETE", "/v1/notification-settings", ""), []string{"/v1/notification-settings"}
	}},
	{"redeliver", true, false, func(x *injEnv) (sender, []string) {
		id := x.notification()
		x.req("POST", "/sandbox/v1/jobs/notifications", "", x.auth, nil)
		return x.call("POST", "/v1/notifications/"+id+"/redeliver", ""), []string{"/v1/notifications/" + id}
	}},
	{"job expire", true, true, func(x *injEnv) (sender, []string) {
		id := x.orderID("5560000001", "invoice")
		exp, _ := time.Parse(time.RFC3339, x.get(id)["expiresAt"].(string))
		if err := x.clock.Advance(time.Until(exp) + time.Hour); err != nil {
			x.t.Fatal(err)
		}
		return x.call("POST", "/sandbox/v1/jobs/expire", ""), []string{"/v1/orders/" + id}
	}},
	{"job autocapture", true, true, func(x *injEnv) (sender, []string) {
		code, _, o := x.req("POST", "/v1/authorization-tokens/"+x.mint("5560000001", "invoice")+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"autoCapture":{"enabled":true,"delayMinutes":10},"orderLines":[{"description":"tiles","quantity":1,"unitPrice":10000,"vat":2500}]}`, x.auth, nil)
		if code != 200 {
			x.t.Fatalf("create: %d %v", code, o)
		}
		x.clock.Advance(15 * time.Minute)
		return x.call("POST", "/sandbox/v1/jobs/tasks", ""), []string{"/v1/orders/" + o["orderId"].(string)}
	}},
	{"job notifications", true, true, func(x *injEnv) (sender, []string) {
		x.req("POST", "/sandbox/v1/jobs/notifications", "", x.auth, nil)
		id := x.notification()
		return x.call("POST", "/sandbox/v1/jobs/notifications", ""), []string{"/v1/notifications/" + id}
	}},
	{"job settlement run", true, true, func(x *injEnv) (sender, []string) {
		x.captured()
		return x.call("POST", "/sandbox/v1/settlements/run", ""), []string{"/v1/settlements"}
	}},
}

// TestInjectedStoreFailuresWriteNothing: whichever store call or commit of
// a mutating request fails, the request is answered with a 5xx problem,
// nothing it did is left in the store or served by a read, and the same
// request sent again with its key then runs once.
func TestInjectedStoreFailuresWriteNothing(t *testing.T) {
	x := newInjEnv(t)
	start := time.Now()
	for _, op := range injOps {
		x.exercise(t, op, false, false)
		x.exercise(t, op, true, false)
	}
	t.Logf("%d operations in %v", len(injOps), time.Since(start))
}

// TestInjectedStoreFailuresInASharedCommit: the same, with the failing
// transaction in one bbolt commit with another writer's.
func TestInjectedStoreFailuresInASharedCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps to share commits")
	}
	x := newInjEnv(t)
	for _, op := range injOps {
		if !op.partial {
			x.exercise(t, op, false, true)
			x.exercise(t, op, true, true)
		}
	}
}
