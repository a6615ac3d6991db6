package kassa_test

import (
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/token"
)

// TestCustomerTokenUsesUpTheAuthorization: an authorization token turned
// into a customer token is used up, in the same transaction: it makes
// neither an order nor a second customer token afterwards.
func TestCustomerTokenUsesUpTheAuthorization(t *testing.T) {
	f := newFixture(t)
	if err := f.ledger.PutAuthorization(f.ctx, f.authorization("t1")); err != nil {
		t.Fatal(err)
	}
	call := kassa.Call{MerchantID: f.merchant}
	creq := &token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", Customer: &order.CustomerInput{}}
	if _, err := f.ledger.CreateCustomerToken(f.ctx, call, "t1", creq); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.CreateCustomerToken(f.ctx, call, "t1", creq); fault.CodeOf(err) != "authorization_token_used" {
		t.Fatalf("a second customer token from one authorization: %v, want authorization_token_used", err)
	}
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}}
	if _, err := f.ledger.CreateOrderFromAuthorization(f.ctx, call, "t1", req); fault.CodeOf(err) != "authorization_token_used" {
		t.Fatalf("an order from an authorization made into a customer token: %v", err)
	}
}

// delayedCaptureOrder is an order of 5000 from an advance-invoice token (which
// awaits acknowledgement) with auto-capture ac, created at the fixture's now.
func delayedCaptureOrder(t *testing.T, f *fixture, tok string, ac *order.AutoCapture) string {
	t.Helper()
	a := f.authorization(tok)
	a.PaymentMethod.Type = order.PayAdvanceInvoice
	if err := f.ledger.PutAuthorization(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	res, err := f.ledger.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, tok, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", AutoCapture: ac,
		TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(5000))}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Order.ID
}

// TestAcknowledgeDoesNotBringAutoCaptureBeforeItsDelay: acknowledging an
// auto-capture order unblocks its capture, which still waits for the delay
// the merchant asked for.
func TestAcknowledgeDoesNotBringAutoCaptureBeforeItsDelay(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	id := delayedCaptureOrder(t, f, "adv", &order.AutoCapture{Enabled: true, DelayMinutes: 30})
	now = now.Add(time.Minute)
	if _, err := f.ledger.Acknowledge(f.ctx, kassa.Call{MerchantID: f.merchant}, id); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if n, err := f.ledger.RunAutoCapture(f.ctx, 10); err != nil || n != 0 {
		t.Fatalf("2 minutes into a 30-minute delay: captured %d (%v), want 0", n, err)
	}
	now = now.Add(29 * time.Minute)
	if n, err := f.ledger.RunAutoCapture(f.ctx, 10); err != nil || n != 1 {
		t.Fatalf("after the delay: captured %d (%v), want 1", n, err)
	}
}

// TestDisabledAutoCaptureNeverCaptures: an order whose auto-capture is
// given but not enabled is never captured by the task runner.
func TestDisabledAutoCaptureNeverCaptures(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	id := delayedCaptureOrder(t, f, "adv", &order.AutoCapture{Enabled: false, DelayMinutes: 30})
	if _, err := f.ledger.Acknowledge(f.ctx, kassa.Call{MerchantID: f.merchant}, id); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if n, err := f.ledger.RunAutoCapture(f.ctx, 10); err != nil || n != 0 {
		t.Fatalf("disabled auto-capture: captured %d (%v), want 0", n, err)
	}
	if o, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, id); o.Amounts().Captured != 0 {
		t.Fatalf("captured %d", o.Amounts().Captured)
	}
}
