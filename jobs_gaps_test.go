package kassa_test

import (
	"testing"

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
	if _, err := f.ledger.CreateCustomerToken(f.ctx, call, "t1", creq); err == nil {
		t.Fatal("a second customer token from one authorization")
	}
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(1000))}}
	if _, err := f.ledger.CreateOrderFromAuthorization(f.ctx, call, "t1", req); fault.CodeOf(err) != "authorization_token_used" {
		t.Fatalf("an order from an authorization made into a customer token: %v", err)
	}
}
