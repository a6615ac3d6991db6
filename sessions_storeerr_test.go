package kassa_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// troubledStore fails the reads troubled names with an internal error, as a
// database does when it breaks a deadlock: the ledger must pass such an
// error on (to the store's retry, then the client), never take it for
// "not found" and carry on.
type troubledStore struct {
	storage.Store
	troubled *bool
}

func (s troubledStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.Update(ctx, func(tx storage.Tx) error { return fn(troubledTx{tx, *s.troubled}) })
}

type troubledTx struct {
	storage.Tx
	troubled bool
}

var errTrouble = fault.Internalf(nil, "deadlock detected")

func (t troubledTx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	if t.troubled {
		return nil, errTrouble
	}
	return t.Tx.GetAuthorization(merchantID, tok)
}

func (t troubledTx) GetSessionByExternalID(merchantID, id string) (*session.Session, error) {
	if t.troubled {
		return nil, errTrouble
	}
	return t.Tx.GetSessionByExternalID(merchantID, id)
}

func TestSessionsPassStoreErrorsOn(t *testing.T) {
	ctx := context.Background()
	var troubled bool
	l := kassa.New(troubledStore{memory.New(nil), &troubled}, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	call := kassa.Call{MerchantID: creds.MerchantID}
	lines := []order.LineInput{{Description: ptr("line"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))}}
	res, err := l.CreateSession(ctx, call, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: lines})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &created); err != nil || created.ID == "" {
		t.Fatalf("session id from %s: %v", res.Body, err)
	}
	seen, err := l.GetSession(ctx, creds.MerchantID, created.ID, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApproveSession(ctx, creds.MerchantID, created.ID, kassa.Approval{Terms: seen.Terms(), CompanyName: "Approved Byggvaror AB",
		PaymentMethod: order.PayInvoice, Customer: order.CustomerInput{CompanyID: "5560000001", Country: "SE", Email: "a@example.com",
			FirstName: "A", LastName: "B", BillingAddress: &order.Address{CompanyName: "Approved Byggvaror AB", StreetAddress: "Gatan 1",
				PostalCode: "11122", City: "Stockholm", Country: "SE"}}}); err != nil {
		t.Fatal(err)
	}

	troubled = true
	if _, err := l.DeleteSession(ctx, call, created.ID, session.SourceCheckout); err != errTrouble {
		t.Errorf("delete while the token read fails: %v, want the store's error", err)
	}
	ext := "shop-order-1"
	_, err = l.CreateSession(ctx, call, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: lines, ExternalSessionID: ext})
	if err != errTrouble {
		t.Errorf("create while the external id lookup fails: %v, want the store's error", err)
	}
	troubled = false
	rec, err := l.GetSession(ctx, creds.MerchantID, created.ID, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	if st := rec.Session.StateAt(rec.Session.UpdatedAt); st != session.StateAuthorized {
		t.Errorf("session %s after the failed delete, want it still authorized", st)
	}
}
