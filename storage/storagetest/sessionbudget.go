package storagetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// testSessionPageBudget: a page of a session list obeys the byte budget of
// an order-list page (testPageBudget): at most storage.MaxPageBytes of stored
// session JSON, except that its first session is always on it, and a page
// that ends early for its budget carries the id to continue from, so that a
// walk still sees every session once, in order. Sessions that do not match
// (q, source: no index) are read but not on the page, and do not count. The
// suite lowers the budget through session.Query.PageBytes.
func testSessionPageBudget(t *testing.T, s storage.Store) {
	ids := &ids{}
	var all []*session.Session
	stored := map[string]int64{} // id → length of the session's stored JSON
	update(t, s, func(tx storage.Tx) error {
		for i := range 30 {
			extra := 0
			switch {
			case i%7 == 3:
				extra = 120 // larger than the budget on its own
			case i%3 == 0:
				extra = 25
			}
			ss := newSessionLines(t, ids, "m1", i, Start.Add(time.Duration(i/2)*time.Second), extra) // pairs share an instant
			if err := tx.PutSession(ss); err != nil {
				return err
			}
			js, err := json.Marshal(ss) // what every store stores (storage.EncodeRecord)
			if err != nil {
				return err
			}
			stored[ss.ID] = int64(len(js))
			all = append(all, ss)
		}
		return nil
	})
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	at := func(i int) *session.Session { // the i-th made
		for _, ss := range all {
			if ss.MerchantReference == fmt.Sprint("PO-", i) {
				return ss
			}
		}
		t.Fatalf("no session %d", i)
		return nil
	}
	small, medium, large := stored[at(1).ID], stored[at(0).ID], stored[at(3).ID]
	budget := 3 * medium
	if small*3 > budget || large <= budget {
		t.Fatalf("sizes do not straddle the budget %d: small %d, medium %d, large %d", budget, small, medium, large)
	}
	for _, q := range []session.Query{{}, {StoreIDs: []string{"store-0"}}, {Q: "po-1"}, {Sources: []session.Source{session.SourceCheckout}},
		{CreatedFrom: Start.Add(3 * time.Second)}} {
		var want []string
		for _, ss := range all {
			if q.Match(ss, Now()) {
				want = append(want, ss.ID)
			}
		}
		if len(want) < 4 {
			t.Fatalf("%+v: only %d sessions match", q, len(want))
		}
		for _, size := range []int{1, 2, 5, 100} {
			q := q
			q.Size, q.PageBytes = size, int(budget)
			var seen []string
			for pages := 0; ; pages++ {
				if pages > len(all)+1 {
					t.Fatalf("%+v: the walk does not end", q)
				}
				page, next := sessionPage(t, s, "m1", q)
				if len(page) == 0 {
					t.Fatalf("%+v: empty page (next %q)", q, next)
				}
				var used int64
				for _, id := range page {
					used += stored[id]
				}
				seen = append(seen, page...)
				if used > budget && len(page) > 1 {
					t.Fatalf("%+v: page of %d sessions holds %d bytes, over the budget of %d", q, len(page), used, budget)
				}
				if len(page) > size {
					t.Fatalf("%+v: page of %d sessions", q, len(page))
				}
				if next == "" {
					break
				}
				if next != page[len(page)-1] {
					t.Fatalf("%+v: next %q is not the page's last session %q", q, next, page[len(page)-1])
				}
				// A page ends before size only where the next session would
				// take it past the budget: the same rule on every store.
				if len(page) < size {
					if len(seen) >= len(want) {
						t.Fatalf("%+v: next after the last session", q)
					}
					if n := stored[want[len(seen)]]; used+n <= budget {
						t.Fatalf("%+v: page of %d sessions (%d bytes) ended before %s (%d bytes) within the budget of %d",
							q, len(page), used, want[len(seen)], n, budget)
					}
				}
				q.FromID = next
			}
			if !slices.Equal(seen, want) {
				t.Fatalf("%+v: the walk saw %v\nwant %v", q, seen, want)
			}
		}
	}
	// The budget defaults to MaxPageBytes, and a larger PageBytes does not raise it.
	for _, pb := range []int{0, storage.MaxPageBytes * 2} {
		if got := storage.SessionPageBudget(session.Query{PageBytes: pb}); got != storage.MaxPageBytes {
			t.Fatalf("PageBytes %d: budget %d", pb, got)
		}
	}
}
