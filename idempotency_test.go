package kassa_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/storagetest"
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

// keyNotYetSeen is a transaction that does not see stored idempotency
// records, as a replica does not see the record another replica is
// committing at the same moment (storage/postgres sends it with the commit).
type keyNotYetSeen struct{ storage.Tx }

func (keyNotYetSeen) GetIdempotency(string, string) (*storage.IdempotencyRecord, error) {
	return nil, nil
}

// TestKeyStoredMeanwhileIsInProgress: when a store refuses the idempotency
// record because the key was stored by another request meanwhile, the call
// answers idempotency_request_in_progress (retry later and get the replay),
// not the store's idempotency_key_exists, and its change is not committed.
func TestKeyStoredMeanwhileIsInProgress(t *testing.T) {
	hide := false
	st := storagetest.WrapTx{Store: memory.New(time.Now), Wrap: func(tx storage.Tx) storage.Tx {
		if hide {
			return keyNotYetSeen{tx}
		}
		return tx
	}}
	l := kassa.New(st, kassa.Options{})
	creds, _, err := l.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	req := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: []order.LineInput{{
		Description: ptr("a"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(100)), Vat: ptr(int64(2500))}}}
	call := kassa.Call{MerchantID: creds.MerchantID, IdempotencyKey: "k1"}
	if _, err := l.CreateSession(context.Background(), call, session.SourceCheckout, req); err != nil {
		t.Fatal(err)
	}
	hide = true
	_, err = l.CreateSession(context.Background(), call, session.SourceCheckout, req)
	if !fault.Is(err, fault.Conflict) || fault.CodeOf(err) != "idempotency_request_in_progress" {
		t.Fatalf("key stored meanwhile: %v (code %q), want idempotency_request_in_progress", err, fault.CodeOf(err))
	}
	hide = false
	page, err := l.ListSessions(context.Background(), creds.MerchantID, session.Query{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("sessions after the refused call: %d %v", len(page.Sessions), err)
	}
}
