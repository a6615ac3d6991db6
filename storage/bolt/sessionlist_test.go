package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

var sessionStart = time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)

// openSessions opens a store holding n sessions of merchant m1 (and a few of
// m2), one second apart: 10 stores, merchant reference "PO-<i>", every 10th
// completed with order "order-<i>" an hour after it was created.
func openSessions(tb testing.TB, n int) *Store {
	tb.Helper()
	s, err := Open(filepath.Join(tb.TempDir(), "kassa.db"), Options{NoSync: true, Clock: func() time.Time { return sessionStart.Add(72 * time.Hour) }})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	ids := &seqIDs{}
	for from := 0; from < n; from += 2000 {
		if err := s.Update(context.Background(), func(tx storage.Tx) error {
			for i := from; i < min(from+2000, n); i++ {
				for _, m := range []string{"m1", "m2"} {
					if m == "m2" && i%100 != 0 {
						continue
					}
					r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
						StoreID: fmt.Sprint("store-", i%10), MerchantReference: fmt.Sprint("PO-", i),
						OrderLines:       []order.LineInput{{Description: ptr("x"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))}},
						ExpiresInMinutes: ptr(int64(session.MaxTTLMinutes))}
					created := sessionStart.Add(time.Duration(i) * time.Second)
					ss, err := session.New(m, session.SourceCheckout, r, ids, created, func(id string) string { return "/checkout/" + id })
					if err != nil {
						return err
					}
					if i%10 == 0 {
						if err := ss.Authorize(order.Customer{CompanyID: "5560000001"}, order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
							fmt.Sprint("at-", m, i), time.Time{}, created.Add(30*time.Minute)); err != nil {
							return err
						}
						if err := ss.Complete(fmt.Sprint("order-", i), created.Add(time.Hour)); err != nil {
							return err
						}
					}
					if err := tx.PutSession(ss); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// sessionQueries are filtered lists over openSessions(n) with n ≥ 5000.
func sessionQueries() []struct {
	name string
	q    session.Query
} {
	at := func(sec int) time.Time { return sessionStart.Add(time.Duration(sec) * time.Second) }
	return []struct {
		name string
		q    session.Query
	}{
		{"none", session.Query{Size: 10}},
		{"orderId=nope", session.Query{OrderIDs: []string{"nope"}, Size: 10}},
		{"orderId", session.Query{OrderIDs: []string{"order-1230", "order-40"}, Size: 10}},
		{"merchantReference", session.Query{MerchantReferences: []string{"PO-77", "PO-4000"}, Size: 10}},
		{"storeId", session.Query{StoreIDs: []string{"store-3"}, Size: 10}},
		{"storeId+merchantReference", session.Query{StoreIDs: []string{"store-7"}, MerchantReferences: []string{"PO-77"}, Size: 10}},
		{"created (60 s)", session.Query{CreatedFrom: at(1000), CreatedTo: at(1060), Size: 10}},
		{"updated (60 s)", session.Query{UpdatedFrom: at(1000), UpdatedTo: at(1060), Size: 10}},
		{"updated (all)", session.Query{UpdatedFrom: at(-1), Size: 10}},
		{"updated (old, 300 s)", session.Query{UpdatedFrom: at(0), UpdatedTo: at(300), Size: 10}},
		{"state=completed", session.Query{States: []session.State{session.StateCompleted}, Size: 10}},
		{"q", session.Query{Q: "PO-4242", Size: 10}},
	}
}

// BenchmarkListSessions lists the first page of 10 000 sessions of one
// merchant under each filter (docs/sessions.md).
func BenchmarkListSessions(b *testing.B) {
	s := openSessions(b, 10_000)
	for _, c := range sessionQueries() {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.View(context.Background(), func(tx storage.Tx) error {
					_, _, err := tx.ListSessions("m1", c.q)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSessionListWalksAnIndex counts the sessions a filtered list decodes
// over 5 000 sessions: each filter with an index reads its own entries, not
// the merchant's sessions (before the session indexes, each read all 5 000).
func TestSessionListWalksAnIndex(t *testing.T) {
	s := openSessions(t, 5000)
	want := map[string]struct{ found, examined int }{
		"none":                      {10, 11},
		"orderId=nope":              {0, 0},
		"orderId":                   {2, 2},
		"merchantReference":         {2, 2},
		"storeId":                   {10, 11},
		"storeId+merchantReference": {1, 1},
		"created (60 s)":            {10, 11},
		// The range's entries are collected (keys only) and sorted; decoding stops after a page.
		"updated (60 s)": {10, 11},
		"updated (all)":  {10, 11}, // too wide to collect: the creation index, newest first
		// An old range with an end is collected: the creation walk would read every newer session.
		"updated (old, 300 s)": {10, 11},
		"state=completed":      {10, 110}, // no index: every tenth matches
		"q":                    {1, 5000}, // no index: a substring of four fields
	}
	for _, c := range sessionQueries() {
		if err := s.View(context.Background(), func(stx storage.Tx) error {
			page, _, err := stx.ListSessions("m1", c.q)
			if err != nil {
				return err
			}
			w := want[c.name]
			if got := stx.(*tx).examined; len(page) != w.found || got != w.examined {
				t.Errorf("%s: %d sessions after decoding %d, want %d after %d", c.name, len(page), got, w.found, w.examined)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// A file written before the storeId, merchantReference and updatedAt session
// entries existed gets them when opened, drops index entries no session
// accounts for, and passes the consistency check.
func TestReindexSessionsOnOpen(t *testing.T) {
	s := openSessions(t, 300)
	path := s.db.Path()
	q := session.Query{StoreIDs: []string{"store-3"}, MerchantReferences: []string{"PO-13", "PO-23", "PO-24"}, Size: 10}
	list := func(s *Store) []string {
		var got []string
		if err := s.View(context.Background(), func(tx storage.Tx) error {
			page, _, err := tx.ListSessions("m1", q)
			for _, ss := range page {
				got = append(got, ss.MerchantReference)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(s); !slices.Equal(got, []string{"PO-23", "PO-13"}) {
		t.Fatalf("before: %v", got)
	}
	// What the previous build left: only 'c', 'x' and 'o' entries (one of
	// them stale), and no sessionIndex record.
	err := s.db.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bSessionIx)
		var drop [][]byte
		b.ForEach(func(k, _ []byte) error {
			for _, m := range []string{"m1", "m2"} {
				if p := lp(nil, m); bytes.HasPrefix(k, p) && bytes.IndexByte([]byte{sixStore, sixRef, sixUpdated}, k[len(p)]) >= 0 {
					drop = append(drop, bytes.Clone(k))
				}
			}
			return nil
		})
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if err := b.Put(sessionLookupKey("m1", sixOrder, "order-stale"), []byte("session-00001")); err != nil {
			return err
		}
		return btx.Bucket(bInfo).Delete(keySessionIndex)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err == nil {
		t.Fatal("the stripped file passes the check")
	}
	s.Close()
	again, err := Open(path, Options{NoSync: true, Clock: func() time.Time { return sessionStart.Add(72 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Check(); err != nil {
		t.Fatal(err)
	}
	if got := list(again); !slices.Equal(got, []string{"PO-23", "PO-13"}) {
		t.Fatalf("after: %v", got)
	}
}

// BenchmarkListBigSessions lists a page of 100 of 100 sessions of 1 000
// lines (200-character descriptions, about 0.35 MB of JSON each): before
// the page budget the whole page was decoded (and answered) at once.
func BenchmarkListBigSessions(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "kassa.db"), Options{NoSync: true, Clock: func() time.Time { return sessionStart.Add(time.Hour) }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := &seqIDs{}
	const n = 100
	var lines []order.LineInput
	for i := range order.MaxLines {
		lines = append(lines, order.LineInput{Description: ptr(fmt.Sprintf("%0200d", i)), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000)), Vat: ptr(int64(2500))})
	}
	var size int
	for i := range n {
		r := &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: lines, ExpiresInMinutes: ptr(int64(session.MaxTTLMinutes))}
		ss, err := session.New("m1", session.SourceCheckout, r, ids, sessionStart.Add(time.Duration(i)*time.Second), func(id string) string { return "/checkout/" + id })
		if err != nil {
			b.Fatal(err)
		}
		js, _ := storage.EncodeRecord(ss)
		size = len(js)
		if err := s.Update(context.Background(), func(tx storage.Tx) error { return tx.PutSession(ss) }); err != nil {
			b.Fatal(err)
		}
	}
	var got int
	for b.Loop() {
		if err := s.View(context.Background(), func(tx storage.Tx) error {
			page, _, err := tx.ListSessions("m1", session.Query{Size: n})
			got = len(page)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(got), "sessions/page")
	b.ReportMetric(float64(size)/(1<<20), "MB/session")
}
