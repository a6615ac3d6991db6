package storagetest

import (
	"encoding/json"
	"fmt"
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
			ss := newSessionLines(t, ids, "m1", i, Start().Add(time.Duration(i/2)*time.Second), budgetExtra(i)) // pairs share an instant
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
		{CreatedFrom: Start().Add(3 * time.Second)}} {
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
			budgetWalk(t, fmt.Sprintf("%+v", q), want, stored, budget, size, func(fromID string) ([]string, string) {
				q.FromID = fromID
				page, next := sessionPage(t, s, "m1", q)
				if next != "" && len(page) > 0 && next != page[len(page)-1] {
					t.Fatalf("%+v: next %q is not the page's last session %q", q, next, page[len(page)-1])
				}
				return page, next
			})
		}
	}
	// The budget defaults to MaxPageBytes, and a larger PageBytes does not raise it.
	for _, pb := range []int{0, storage.MaxPageBytes * 2} {
		if got := storage.SessionPageBudget(session.Query{PageBytes: pb}); got != storage.MaxPageBytes {
			t.Fatalf("PageBytes %d: budget %d", pb, got)
		}
	}
}
