package kassa_test

import (
	"bytes"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
)

// TestIdempotentReplayKeepsLocation: a create answered 201 with a Location
// answers a retry with the same key with that Location too, as the spec's
// replay is the stored response, headers included.
func TestIdempotentReplayKeepsLocation(t *testing.T) {
	f := newFixture(t)
	req := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: []order.LineInput{{
		Description: ptr("a"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(100)), Vat: ptr(int64(2500))}}}
	call := kassa.Call{MerchantID: f.merchant, IdempotencyKey: "session-1"}
	first, err := f.ledger.CreateSession(f.ctx, call, session.SourceCheckout, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Location == "" {
		t.Fatal("a created session has no Location")
	}
	again, err := f.ledger.CreateSession(f.ctx, call, session.SourceCheckout, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Status != first.Status || again.Location != first.Location || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: replayed=%v status %d/%d Location %q/%q equal=%v",
			again.Replayed, first.Status, again.Status, first.Location, again.Location, bytes.Equal(again.Body, first.Body))
	}
}
