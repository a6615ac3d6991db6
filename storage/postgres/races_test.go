package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// twoReplicas opens two ledgers (two pools) on one fresh schema, with one merchant.
func twoReplicas(t *testing.T) ([]*kassa.Ledger, kassa.Credentials) {
	t.Helper()
	return twoReplicasAt(t, freshSchema(t))
}

// twoReplicasAt is twoReplicas on the schema of the URL u.
func twoReplicasAt(t *testing.T, u string) ([]*kassa.Ledger, kassa.Credentials) {
	t.Helper()
	ledgers := []*kassa.Ledger{kassa.New(openNow(t, u), kassa.Options{}), kassa.New(openNow(t, u), kassa.Options{})}
	creds, _, err := ledgers[0].EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	return ledgers, creds
}

// authorize gives the merchant a fresh invoice authorization token tok.
func authorize(t *testing.T, l *kassa.Ledger, merchantID, tok string) {
	t.Helper()
	now := time.Now()
	if err := l.PutAuthorization(context.Background(), &token.Authorization{Token: tok, MerchantID: merchantID, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// orderOnTwoReplicas is twoReplicas with a one-line order made on the first.
func orderOnTwoReplicas(t *testing.T) ([]*kassa.Ledger, kassa.Credentials, *kassa.Result) {
	t.Helper()
	ledgers, creds := twoReplicas(t)
	authorize(t, ledgers[0], creds.MerchantID, "t")
	res, err := ledgers[0].CreateOrderFromAuthorization(context.Background(), kassa.Call{MerchantID: creds.MerchantID}, "t", oneLineOrder())
	if err != nil {
		t.Fatal(err)
	}
	return ledgers, creds, res
}

func oneLineOrder() *order.CreateRequest {
	return &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: []order.LineInput{{
		Description: ptr("line"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))}}}
}

// TestAuthorizationTokenUsedOnceAcrossReplicas: a single-use authorization
// token sent by many requests at once, through two replicas, makes exactly
// one order; every other request is told the token is gone, none fails.
func TestAuthorizationTokenUsedOnceAcrossReplicas(t *testing.T) {
	ledgers, creds := twoReplicas(t)
	ctx := context.Background()
	authorize(t, ledgers[0], creds.MerchantID, "single")
	var made atomic.Int64
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			_, err := ledgers[i%2].CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID,
				IdempotencyKey: fmt.Sprint("k", i)}, "single", oneLineOrder())
			switch {
			case err == nil:
				made.Add(1)
			case fault.Is(err, fault.NotFound), fault.Is(err, fault.NotAvailable):
			default:
				t.Errorf("request %d: %v (kind %v)", i, err, fault.KindOf(err))
			}
		})
	}
	wg.Wait()
	page, _, err := ledgers[1].ListOrders(ctx, creds.MerchantID, storage.OrderQuery{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	if made.Load() != 1 || len(page.Orders) != 1 {
		t.Fatalf("one token made %d orders (%d stored), want 1", made.Load(), len(page.Orders))
	}
}

// TestAuthorizationPutOnceAcrossReplicas: an id put on two replicas at the
// same moment is stored once; the other put is refused, not a silent
// overwrite of the first token.
func TestAuthorizationPutOnceAcrossReplicas(t *testing.T) {
	ledgers, creds := twoReplicas(t)
	ctx := context.Background()
	now := time.Now()
	for round := range 30 {
		id := fmt.Sprint("put-once-", round)
		var stored, refused atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				<-start
				err := ledgers[i%2].PutAuthorization(ctx, &token.Authorization{Token: id, MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK",
					PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
				switch {
				case err == nil:
					stored.Add(1)
				case fault.Is(err, fault.Conflict):
					refused.Add(1)
				default:
					t.Errorf("put %s: %v", id, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if stored.Load() != 1 || refused.Load() != 3 {
			t.Fatalf("%s put at once four times: %d stored, %d refused; want 1 and 3", id, stored.Load(), refused.Load())
		}
	}
}

// newSession opens a one-line checkout session on l and returns its id and
// the approval of a buyer who saw it.
func newSession(t *testing.T, l *kassa.Ledger, merchantID string) (string, kassa.Approval) {
	t.Helper()
	ctx := context.Background()
	res, err := l.CreateSession(ctx, kassa.Call{MerchantID: merchantID}, session.SourceCheckout, &session.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: oneLineOrder().OrderLines})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		SessionID string `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &created); err != nil || created.SessionID == "" {
		t.Fatalf("session id from %s: %v", res.Body, err)
	}
	rec, err := l.GetSession(ctx, merchantID, created.SessionID, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	return created.SessionID, kassa.Approval{Terms: rec.Terms(), CompanyName: "Approved Byggvaror AB", PaymentMethod: order.PayInvoice, Customer: order.CustomerInput{
		CompanyID: "5560000001", Country: "SE", Email: "a@example.com", FirstName: "A", LastName: "B",
		BillingAddress: &order.Address{CompanyName: "Approved Byggvaror AB", StreetAddress: "Gatan 1", PostalCode: "11122", City: "Stockholm", Country: "SE"}}}
}

// TestSessionCancelRacingItsOrderAcrossReplicas: the merchant cancels an
// authorized session while an order is made from its token on the other
// replica. One of them wins and the session says which. Neither waits for
// PostgreSQL's deadlock detection (deadlock_timeout, 1 s by default): the
// order took the token's lock and then the session's, the cancel the
// session's and then the token's, so half of such pairs deadlocked, and a
// few more requests on the session at once (retries, a second cancel) made
// each retry deadlock again until every one of them answered 503.
//
// A deadlock is told apart from a slow machine by making it a hang: where
// the role may, the stores' connections wait a minute for deadlock
// detection, and a round that has not ended after 20 s deadlocked.
func TestSessionCancelRacingItsOrderAcrossReplicas(t *testing.T) {
	ledgers, creds := twoReplicasAt(t, patientWithDeadlocks(t, freshSchema(t)))
	ctx := context.Background()
	call := kassa.Call{MerchantID: creds.MerchantID}
	for round := range 16 {
		id, approval := newSession(t, ledgers[0], creds.MerchantID)
		rec, err := ledgers[0].ApproveSession(ctx, creds.MerchantID, id, approval)
		if err != nil {
			t.Fatal(err)
		}
		tok := rec.AuthorizationToken
		var orderID string
		var orderErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			var res *kassa.Result
			res, orderErr = ledgers[round%2].CreateOrderFromAuthorization(ctx, call, tok, oneLineOrder())
			if orderErr == nil {
				orderID = res.Order.ID
			}
		})
		wg.Go(func() { _, cancelErr = ledgers[(round+1)%2].DeleteSession(ctx, call, id, session.SourceCheckout) })
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the order and the cancel still wait after 20 s: they deadlocked", round)
		}
		rec, err = ledgers[0].GetSession(ctx, creds.MerchantID, id, session.SourceCheckout)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case orderErr == nil && cancelErr == nil:
			t.Fatalf("round %d: both the order and the cancel succeeded", round)
		case orderErr == nil:
			if fault.CodeOf(cancelErr) != "session_completed" || rec.State != session.StateCompleted || rec.OrderID != orderID {
				t.Errorf("round %d: order %s made; cancel: %v; session %s with order %q", round, orderID, cancelErr, rec.State, rec.OrderID)
			}
		case cancelErr == nil:
			if fault.CodeOf(orderErr) != "authorization_token_not_found" || rec.State != session.StateCancelled || rec.OrderID != "" {
				t.Errorf("round %d: cancelled; order: %v; session %s with order %q", round, orderErr, rec.State, rec.OrderID)
			}
		default:
			t.Errorf("round %d: neither succeeded: order %v, cancel %v", round, orderErr, cancelErr)
		}
	}
}

// TestSessionApprovedOnceAcrossReplicas: the buyer's approval clicked many
// times at once on two replicas authorizes the session once: one token.
func TestSessionApprovedOnceAcrossReplicas(t *testing.T) {
	ledgers, creds := twoReplicas(t)
	ctx := context.Background()
	id, approval := newSession(t, ledgers[0], creds.MerchantID)
	var approved atomic.Int64
	tokens := make(chan string, 16)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			v, err := ledgers[i%2].ApproveSession(ctx, creds.MerchantID, id, approval)
			switch {
			case err == nil:
				approved.Add(1)
				b, _ := json.Marshal(v)
				var tok struct {
					AuthorizationToken string `json:"authorizationToken"`
				}
				json.Unmarshal(b, &tok)
				tokens <- tok.AuthorizationToken
			case fault.Is(err, fault.NotAvailable):
			default:
				t.Errorf("approval %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(tokens)
	if approved.Load() != 1 {
		t.Fatalf("session approved %d times, want once", approved.Load())
	}
	rec, err := ledgers[1].GetSession(ctx, creds.MerchantID, id, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec)
	var stored struct {
		AuthorizationToken string `json:"authorizationToken"`
	}
	json.Unmarshal(b, &stored)
	if got := <-tokens; got == "" || got != stored.AuthorizationToken {
		t.Fatalf("the approval answered token %q, the session holds %q", got, stored.AuthorizationToken)
	}
}

// TestMerchantSettingsNotLostAcrossReplicas: replicas starting together on
// an empty database make one merchant, and notification settings written at
// once through both replicas end with one secret that was shown exactly once.
func TestMerchantSettingsNotLostAcrossReplicas(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	ledgers := []*kassa.Ledger{kassa.New(openNow(t, u), kassa.Options{}), kassa.New(openNow(t, u), kassa.Options{})}
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			c, _, err := ledgers[i%2].EnsureMerchant(ctx, kassa.MerchantOptions{Name: "sandbox", ClientID: "kc_fixed", ClientSecret: "ks_fixed", Sandbox: true})
			if err != nil {
				t.Errorf("start %d: %v", i, err)
			}
			ids[i] = c.MerchantID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent starts made different merchants: %v", ids)
		}
	}
	if _, err := ledgers[0].Authenticate(ctx, "kc_fixed", "ks_fixed"); err != nil {
		t.Fatal(err)
	}
	secrets := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			s, err := ledgers[i%2].SetWebhook(ctx, ids[0], kassa.SetWebhookRequest{URL: "https://example.com/hook", Events: []string{"order.*"}})
			if err != nil {
				t.Errorf("set webhook %d: %v", i, err)
			}
			if s.Secret != "" {
				secrets <- s.Secret
			}
		})
	}
	wg.Wait()
	close(secrets)
	var shown []string
	for s := range secrets {
		shown = append(shown, s)
	}
	m, err := ledgers[1].Merchant(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(shown) != 1 || shown[0] != m.WebhookSecret {
		t.Fatalf("secrets shown %d times (%v); stored %q", len(shown), shown, m.WebhookSecret)
	}
}

// TestTextPostgresCannotHold: NUL bytes and invalid UTF-8, which PostgreSQL
// text cannot hold, are a client's mistake (Invalid) or simply match nothing
// (NotFound, an empty list), never an internal error.
func TestTextPostgresCannotHold(t *testing.T) {
	ledgers, creds := twoReplicas(t)
	ctx := context.Background()
	for _, bad := range []string{"a\x00b", "\xff\xfe"} {
		if _, _, err := ledgers[0].GetOrder(ctx, creds.MerchantID, bad); fault.KindOf(err) == fault.Internal {
			t.Errorf("GetOrder(%q): %v", bad, err)
		}
		if page, _, err := ledgers[0].ListOrders(ctx, creds.MerchantID, storage.OrderQuery{MerchantReferences: []string{bad}, Q: bad, Size: 10}); err != nil || len(page.Orders) != 0 {
			t.Errorf("ListOrders(reference %q): %d orders, %v; want none, no error", bad, len(page.Orders), err)
		}
		if _, err := ledgers[0].GetNotification(ctx, creds.MerchantID, bad); fault.KindOf(err) == fault.Internal {
			t.Errorf("Notification(%q): %v", bad, err)
		}
		// Looked up by id, then by order id, in one transaction: the first
		// lookup must not abort it for the second.
		if _, err := ledgers[0].GetSession(ctx, creds.MerchantID, bad, session.SourceCheckout); fault.KindOf(err) != fault.NotFound {
			t.Errorf("GetSession(%q): %v, want not found", bad, err)
		}
		if _, err := ledgers[0].DeleteSession(ctx, kassa.Call{MerchantID: creds.MerchantID, IdempotencyKey: "del"}, bad, session.SourceCheckout); fault.KindOf(err) != fault.NotFound {
			t.Errorf("DeleteSession(%q): %v, want not found", bad, err)
		}
	}
	authorize(t, ledgers[0], creds.MerchantID, "t")
	req := oneLineOrder()
	req.Reference = "ref\x00"
	_, err := ledgers[0].CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", req)
	if fault.KindOf(err) != fault.Invalid {
		t.Fatalf("order with a NUL in its reference: %v (kind %v), want invalid", err, fault.KindOf(err))
	}
	// Nothing was half-written: the token is still there and makes the order.
	req.Reference = "ref"
	if _, err := ledgers[1].CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", req); err != nil {
		t.Fatalf("the token after the rejected request: %v", err)
	}
}

// TestOrderCacheSeesOtherReplicasChanges: a replica that rendered (and
// cached) an order answers a read after another replica changed it with the
// change, never with its cached body.
func TestOrderCacheSeesOtherReplicasChanges(t *testing.T) {
	ledgers, creds, res := orderOnTwoReplicas(t)
	ctx := context.Background()
	captured := func(l *kassa.Ledger) int64 {
		b, err := l.OrderJSON(ctx, creds.MerchantID, res.Order.ID)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Captured struct {
				MinorUnits int64 `json:"minorUnits"`
			} `json:"capturedAmount"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v.Captured.MinorUnits
	}
	for range 2 { // the second read is served from the cache
		if got := captured(ledgers[0]); got != 0 {
			t.Fatalf("captured before the capture: %d", got)
		}
	}
	if _, err := ledgers[1].Capture(ctx, kassa.Call{MerchantID: creds.MerchantID}, res.Order.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got := captured(ledgers[0]); got != 10000 {
		t.Fatalf("replica 1 reads captured %d after replica 2 captured 10000", got)
	}
}

// TestHeldOrderWriteWithBadTextWritesNothing: an order change is sent with
// the commit; text PostgreSQL cannot hold still makes it a client error, and
// nothing of the request is kept, its idempotency key included.
func TestHeldOrderWriteWithBadTextWritesNothing(t *testing.T) {
	ledgers, creds, res := orderOnTwoReplicas(t)
	ctx := context.Background()
	call := kassa.Call{MerchantID: creds.MerchantID, IdempotencyKey: "ref-1"}
	_, err := ledgers[0].SetReference(ctx, call, res.Order.ID, &order.ReferenceRequest{Reference: ptr("bad\x00ref")})
	if fault.KindOf(err) != fault.Invalid {
		t.Fatalf("reference with a NUL: %v (kind %v), want invalid", err, fault.KindOf(err))
	}
	o, _, err := ledgers[1].GetOrder(ctx, creds.MerchantID, res.Order.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != res.Order.Version || o.MerchantReference != res.Order.MerchantReference {
		t.Fatalf("after the refused change: version %d reference %q, want %d %q", o.Version, o.MerchantReference, res.Order.Version, res.Order.MerchantReference)
	}
	// The key was not kept: the same key with a good reference executes.
	r, err := ledgers[1].SetReference(ctx, call, res.Order.ID, &order.ReferenceRequest{Reference: ptr("good")})
	if err != nil || r.Replayed || r.Order.MerchantReference != "good" {
		t.Fatalf("same key, good reference: %+v, %v", r, err)
	}
}

// TestSameExternalSessionIDAcrossReplicas: sessions created at once with one
// externalSessionId, through two replicas, make one session; every other
// request gets the documented 400 external_session_id_taken, not the
// unique index's conflict.
func TestSameExternalSessionIDAcrossReplicas(t *testing.T) {
	ledgers, creds := twoReplicas(t)
	ctx := context.Background()
	for round := range 4 {
		ext := fmt.Sprint("ext-", round)
		var made atomic.Int64
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				_, err := ledgers[i%2].CreateSession(ctx, kassa.Call{MerchantID: creds.MerchantID}, session.SourceCheckout, &session.CreateRequest{
					Country: "SE", Currency: "SEK", Locale: "sv-SE", ExternalSessionID: ext, OrderLines: oneLineOrder().OrderLines})
				switch {
				case err == nil:
					made.Add(1)
				case fault.CodeOf(err) == "external_session_id_taken" && fault.Is(err, fault.Invalid):
				default:
					t.Errorf("round %d request %d: %v (kind %v, code %s)", round, i, err, fault.KindOf(err), fault.CodeOf(err))
				}
			})
		}
		wg.Wait()
		if made.Load() != 1 {
			t.Fatalf("round %d: %d sessions made with one externalSessionId, want 1", round, made.Load())
		}
	}
}

// patientWithDeadlocks returns u with PostgreSQL's deadlock detection put
// off for a minute, so that a deadlock shows as a hang rather than as a
// second's delay that a loaded machine can also cause. Setting
// deadlock_timeout takes a superuser; without one, u is returned as it is
// and a deadlock only costs its second.
func patientWithDeadlocks(t *testing.T, u string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, `SELECT current_setting('is_superuser') = 'on'`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if !super {
		t.Log("deadlocks are not told apart: the role may not set deadlock_timeout")
		return u
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("deadlock_timeout", "1min")
	pu.RawQuery = q.Encode()
	return pu.String()
}
