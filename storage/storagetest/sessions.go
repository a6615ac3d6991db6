package storagetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

func newSession(t *testing.T, ids *ids, merchant string, i int) *session.Session {
	t.Helper()
	r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		StoreID: fmt.Sprint("store-", i%2), MerchantReference: fmt.Sprint("PO-", i),
		OrderLines:       []order.LineInput{line("Tiles", 1, 10000, 2500)},
		ExpiresInMinutes: ptr(int64(session.MaxTTLMinutes))}
	if i%3 == 0 {
		r.ExternalSessionID = fmt.Sprint("ext-", i)
	}
	s, err := session.New(merchant, session.SourceCheckout, r, ids, Start.Add(time.Duration(i)*time.Minute), func(id string) string { return "/checkout/" + id })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testSessions(t *testing.T, s storage.Store) {
	ids := &ids{}
	var all []*session.Session
	update(t, s, func(tx storage.Tx) error {
		for i := 0; i < 12; i++ {
			ss := newSession(t, ids, "m1", i)
			all = append(all, ss)
			if err := tx.PutSession(ss); err != nil {
				return err
			}
		}
		return tx.PutSession(newSession(t, ids, "m2", 0))
	})
	// Lookups by id, external id and (after completion) order id; isolation.
	done := all[3]
	if err := done.Authorize(order.Customer{CompanyID: "5560000001"}, order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, "at-1", time.Time{}, Now()); err != nil {
		t.Fatal(err)
	}
	if err := done.Complete("order-77", Now()); err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx storage.Tx) error { return tx.PutSession(done) })
	view(t, s, func(tx storage.Tx) error {
		for name, get := range map[string]func() (*session.Session, error){
			"id":       func() (*session.Session, error) { return tx.GetSession("m1", done.ID) },
			"external": func() (*session.Session, error) { return tx.GetSessionByExternalID("m1", "ext-3") },
			"order":    func() (*session.Session, error) { return tx.GetSessionByOrderID("m1", "order-77") },
		} {
			got, err := get()
			if err != nil || got.ID != done.ID || got.State != session.StateCompleted || got.OrderID != "order-77" || got.Totals.Gross != 10000 {
				t.Fatalf("by %s: %+v %v", name, got, err)
			}
		}
		_, err := tx.GetSession("m2", done.ID)
		wantKind(t, err, fault.NotFound)
		_, err = tx.GetSessionByExternalID("m2", "ext-3")
		wantKind(t, err, fault.NotFound)
		_, err = tx.GetSessionByOrderID("m1", "order-78")
		wantKind(t, err, fault.NotFound)
		return nil
	})
	// An external id belongs to one session of a merchant.
	dup := newSession(t, ids, "m1", 6)
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.PutSession(dup) })
	wantKind(t, err, fault.Conflict)

	walk := func(q session.Query) []string {
		if err := q.Validate(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for pages := 0; pages < 100; pages++ {
			var page []*session.Session
			var next string
			view(t, s, func(tx storage.Tx) error {
				var err error
				page, next, err = tx.ListSessions("m1", q)
				return err
			})
			for _, ss := range page {
				got = append(got, ss.ID)
			}
			if next == "" {
				return got
			}
			q.FromID = next
		}
		t.Fatal("session walk does not end")
		return nil
	}
	expect := func(q session.Query) []string {
		q.Validate()
		var want []string
		for i := len(all) - 1; i >= 0; i-- {
			if q.Match(all[i], Now()) {
				want = append(want, all[i].ID)
			}
		}
		return want
	}
	for name, q := range map[string]session.Query{
		"all":       {Size: 5},
		"store":     {StoreIDs: []string{"store-1"}, Size: 2},
		"state":     {States: []session.State{session.StateCompleted}},
		"order":     {OrderIDs: []string{"order-77"}},
		"reference": {MerchantReferences: []string{"PO-4", "PO-5"}, Size: 1},
		"q":         {Q: "ext-", Size: 3},
		"created":   {CreatedFrom: Start.Add(2 * time.Minute), CreatedTo: Start.Add(7 * time.Minute), Size: 2},
		"updated":   {UpdatedFrom: Now(), Size: 10},
		"source":    {Sources: []session.Source{session.SourcePayment}},
	} {
		if got, want := walk(q), expect(q); !slices.Equal(got, want) {
			t.Errorf("%s: got %v want %v", name, got, want)
		}
	}
	view(t, s, func(tx storage.Tx) error {
		_, _, err := tx.ListSessions("m1", session.Query{FromID: "no-such-session", Size: 10})
		wantKind(t, err, fault.NotFound)
		return nil
	})
}
