package storagetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

func newSession(t *testing.T, ids *ids, merchant string, i int) *session.Session {
	t.Helper()
	return newSessionLines(t, ids, merchant, i, Start().Add(time.Duration(i)*time.Minute), 0)
}

// newSessionLines is newSession created at a given time, with extra order
// lines after the first, to build larger sessions.
func newSessionLines(t *testing.T, ids *ids, merchant string, i int, at time.Time, extra int) *session.Session {
	t.Helper()
	r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		StoreID: fmt.Sprint("store-", i%2), MerchantReference: fmt.Sprint("PO-", i),
		OrderLines:       []order.LineInput{line("Tiles", 1, 10000, 2500)},
		ExpiresInMinutes: ptr(int64(session.MaxTTLMinutes))}
	for n := range extra {
		r.OrderLines = append(r.OrderLines, line(fmt.Sprint("spacer ", n), 1, 100, 2500))
	}
	if i%3 == 0 {
		r.ExternalSessionID = fmt.Sprint("ext-", i)
	}
	s, err := session.New(merchant, session.SourceCheckout, r, ids, at, func(id string) string { return "/checkout/" + id })
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
			page, next := sessionPage(t, s, "m1", q)
			got = append(got, page...)
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
		"created":   {CreatedFrom: Start().Add(2 * time.Minute), CreatedTo: Start().Add(7 * time.Minute), Size: 2},
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

// testSessionFilters checks every session list filter, alone and combined,
// against Query.Page over all of the merchant's sessions (the definition of
// a page): after the indexed fields of sessions change (the old value must
// no longer match, the new one must), with ties in created time, and when
// paging with fromId from every session, whether it matches or not.
func testSessionFilters(t *testing.T, s storage.Store) {
	ids := &ids{}
	at := func(min int) time.Time { return Start().Add(time.Duration(min) * time.Minute) }
	mk := func(merchant string, created time.Time, store, ref string, src session.Source, ttl int64) *session.Session {
		r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", StoreID: store, MerchantReference: ref,
			OrderLines: []order.LineInput{line("Tiles", 1, 10000, 2500)}, ExpiresInMinutes: ptr(ttl)}
		ss, err := session.New(merchant, src, r, ids, created, func(id string) string { return "/checkout/" + id })
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	var all []*session.Session // m1's, current versions
	put := func(ss ...*session.Session) {
		t.Helper()
		update(t, s, func(tx storage.Tx) error {
			for _, x := range ss {
				if err := tx.PutSession(x); err != nil {
					return err
				}
			}
			return nil
		})
		for _, x := range ss {
			if x.MerchantID != "m1" {
				continue
			}
			if i := slices.IndexFunc(all, func(y *session.Session) bool { return y.ID == x.ID }); i >= 0 {
				all[i] = x
			} else {
				all = append(all, x)
			}
		}
	}
	// 24 sessions: three stores, references shared in pairs, every third a
	// payment session, every fifth expiring after ten minutes; sessions 8–11
	// are created at the same instant (ties), as are 20 and 21.
	for i := 0; i < 24; i++ {
		created := at(i)
		switch {
		case i >= 8 && i <= 11:
			created = at(8)
		case i == 21:
			created = at(20)
		}
		src, ttl := session.SourceCheckout, int64(session.MaxTTLMinutes)
		if i%3 == 0 {
			src = session.SourcePayment
		}
		if i%5 == 0 {
			ttl = 10
		}
		put(mk("m1", created, fmt.Sprint("store-", i%3), fmt.Sprint("PO-", i/2), src, ttl))
	}
	// Another merchant with the same stores, references and times.
	for i := 0; i < 6; i++ {
		put(mk("m2", at(i), fmt.Sprint("store-", i%3), fmt.Sprint("PO-", i/2), session.SourceCheckout, session.MaxTTLMinutes))
	}
	// Changes after creation.
	changeAt := Start().Add(time.Hour)
	ref := all[4] // PO-2 → PO-99, updated an hour in
	if err := ref.Update(&session.UpdateRequest{MerchantReference: ptr("PO-99")}, ids, changeAt); err != nil {
		t.Fatal(err)
	}
	done := all[7] // completed with order-1, then (directly) order-2
	if err := done.Authorize(order.Customer{CompanyID: "5560000001"}, order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, "at-7", time.Time{}, changeAt); err != nil {
		t.Fatal(err)
	}
	if err := done.Complete("order-1", changeAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	put(ref, done)
	moved := *all[10] // store-1 → store-9, updated half a microsecond past a minute boundary
	moved.StoreID, moved.UpdatedAt = "store-9", changeAt.Add(2*time.Minute+500*time.Nanosecond)
	renamed := *done
	renamed.OrderID, renamed.UpdatedAt = "order-2", changeAt.Add(3*time.Minute)
	put(&moved, &renamed)
	cancelled := *all[12]
	if err := cancelled.Cancel("", changeAt.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	put(&cancelled)

	view(t, s, func(tx storage.Tx) error {
		if _, err := tx.GetSessionByOrderID("m1", "order-1"); fault.KindOf(err) != fault.NotFound {
			t.Errorf("by the order id a session no longer has: %v, want not found", err)
		}
		if got, err := tx.GetSessionByOrderID("m1", "order-2"); err != nil || got.ID != done.ID {
			t.Errorf("by its new order id: %v %v", got, err)
		}
		return nil
	})

	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *session.Session) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	list := func(q session.Query) ([]string, string) { return sessionPage(t, s, "m1", q) }
	idsOf := func(ss []*session.Session) []string {
		var out []string
		for _, x := range ss {
			out = append(out, x.ID)
		}
		return out
	}
	queries := map[string]session.Query{
		"none":                     {},
		"orderId":                  {OrderIDs: []string{"order-2"}},
		"orderId old":              {OrderIDs: []string{"order-1"}},
		"orderId unknown":          {OrderIDs: []string{"nope"}},
		"reference":                {MerchantReferences: []string{"PO-4"}},
		"reference old":            {MerchantReferences: []string{"PO-2"}},
		"reference new":            {MerchantReferences: []string{"PO-99"}},
		"references":               {MerchantReferences: []string{"PO-99", "PO-4", "PO-5", "PO-10", "nope"}},
		"store":                    {StoreIDs: []string{"store-1"}},
		"store new":                {StoreIDs: []string{"store-9"}},
		"stores":                   {StoreIDs: []string{"store-0", "store-9"}},
		"state":                    {States: []session.State{session.StateExpired}},
		"states":                   {States: []session.State{session.StateCompleted, session.StateCancelled}},
		"source":                   {Sources: []session.Source{session.SourcePayment}},
		"q":                        {Q: "po-1"},
		"created":                  {CreatedFrom: at(8), CreatedTo: at(20)},
		"created from":             {CreatedFrom: at(20)},
		"created to":               {CreatedTo: at(9)},
		"created empty":            {CreatedFrom: at(9), CreatedTo: at(9)},
		"updated":                  {UpdatedFrom: changeAt},
		"updated window":           {UpdatedFrom: changeAt, UpdatedTo: changeAt.Add(2 * time.Minute)},
		"updated sub-µs to":        {UpdatedFrom: changeAt, UpdatedTo: changeAt.Add(2*time.Minute + 400*time.Nanosecond)},
		"updated sub-µs from":      {UpdatedFrom: changeAt.Add(2*time.Minute + 600*time.Nanosecond)},
		"updated sub-µs exact":     {UpdatedFrom: changeAt.Add(2*time.Minute + 500*time.Nanosecond), UpdatedTo: changeAt.Add(2*time.Minute + 501*time.Nanosecond)},
		"updated to":               {UpdatedTo: at(9)},
		"store+reference":          {StoreIDs: []string{"store-1"}, MerchantReferences: []string{"PO-5", "PO-8", "PO-99"}},
		"store+reference none":     {StoreIDs: []string{"store-2"}, MerchantReferences: []string{"PO-99"}},
		"orderId+store":            {OrderIDs: []string{"order-2"}, StoreIDs: []string{"store-1"}},
		"orderId+store none":       {OrderIDs: []string{"order-2"}, StoreIDs: []string{"store-2"}},
		"store+created":            {StoreIDs: []string{"store-1", "store-2"}, CreatedFrom: at(8), CreatedTo: at(21)},
		"reference+created":        {MerchantReferences: []string{"PO-4", "PO-5", "PO-10"}, CreatedTo: at(10)},
		"store+updated":            {StoreIDs: []string{"store-9", "store-1"}, UpdatedFrom: changeAt},
		"updated+created":          {UpdatedFrom: changeAt, CreatedFrom: at(8), CreatedTo: at(9)},
		"store+state":              {StoreIDs: []string{"store-0"}, States: []session.State{session.StateExpired, session.StateCreated}},
		"store+source+q":           {StoreIDs: []string{"store-0", "store-1"}, Sources: []session.Source{session.SourcePayment}, Q: "PO-"},
		"everything":               {StoreIDs: []string{"store-1", "store-9"}, MerchantReferences: []string{"PO-5", "PO-99"}, CreatedFrom: at(0), CreatedTo: at(30), UpdatedFrom: Start(), UpdatedTo: Now(), States: []session.State{session.StateCreated}, Sources: []session.Source{session.SourceCheckout}, Q: "PO"},
		"reference+updated window": {MerchantReferences: []string{"PO-5", "PO-99"}, UpdatedFrom: changeAt, UpdatedTo: changeAt.Add(time.Minute)},
		// Text no store can hold (invalid UTF-8, NUL) matches no session,
		// and the other values of its list match as without it.
		"store unholdable":        {StoreIDs: []string{"store-\xff"}},
		"stores one unholdable":   {StoreIDs: []string{"store-1", "store-\xff"}},
		"reference NUL":           {MerchantReferences: []string{"PO-4\x00"}},
		"references one NUL":      {MerchantReferences: []string{"PO-4", "PO-\x005"}},
		"orderIds one unholdable": {OrderIDs: []string{"order-2", "order-\xff"}},
		"orderId unholdable":      {OrderIDs: []string{"\x00"}},
	}
	for name, q := range queries {
		for _, size := range []int{1, 2, 3, 100} {
			q.Size = size
			if err := q.Validate(); err != nil {
				t.Fatal(err)
			}
			// Every page from the start, and one page from every session.
			var want, got []string
			q.FromID = ""
			full, _ := q.Page(sorted, Now(), nil)
			for pages := 0; ; pages++ {
				page, next := list(q)
				got = append(got, page...)
				if next == "" || pages > 30 {
					break
				}
				q.FromID = next
			}
			for _, x := range sorted {
				if q.Match(x, Now()) {
					want = append(want, x.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, size %d: walked %v, want %v", name, size, got, want)
			}
			if size == 100 && !slices.Equal(idsOf(full), want) {
				t.Fatalf("%s: the expectation is inconsistent", name)
			}
			for _, from := range sorted {
				q.FromID = from.ID
				wantPage, wantNext := q.Page(sorted, Now(), nil)
				gotPage, gotNext := list(q)
				if !slices.Equal(gotPage, idsOf(wantPage)) || gotNext != wantNext {
					t.Errorf("%s, size %d, from %s: %v next %q, want %v next %q", name, size, from.ID, gotPage, gotNext, idsOf(wantPage), wantNext)
				}
			}
		}
	}
	view(t, s, func(tx storage.Tx) error {
		_, _, err := tx.ListSessions("m1", session.Query{FromID: "no-such-session", StoreIDs: []string{"store-1"}, Size: 10})
		wantKind(t, err, fault.NotFound)
		_, _, err = tx.ListSessions("m2", session.Query{FromID: all[0].ID, OrderIDs: []string{"order-2"}, Size: 10})
		wantKind(t, err, fault.NotFound)
		return nil
	})
}

// sessionPage lists one page of the merchant's sessions: their ids, and the
// id to continue from.
func sessionPage(t *testing.T, s storage.Store, merchantID string, q session.Query) ([]string, string) {
	t.Helper()
	var page []*session.Session
	var next string
	view(t, s, func(tx storage.Tx) error {
		var err error
		page, next, err = tx.ListSessions(merchantID, q)
		return err
	})
	var ids []string
	for _, ss := range page {
		ids = append(ids, ss.ID)
	}
	return ids, next
}
