package storagetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// testPageBudget: a page of an order list holds at most storage.MaxPageBytes
// of stored order JSON, except that its first order is always on it, and a
// page that ends early for its budget carries NextCursor, so that a walk
// still sees every order once, in order. The suite lowers the budget through
// OrderQuery.PageBytes (a hook for tests: 16 MiB of orders per page would be
// slow to build on every store), with orders of mixed sizes around it.
func testPageBudget(t *testing.T, s storage.Store) {
	b := newBuilder()
	var all []*order.Order
	stored := map[string]int64{} // id → length of the order's stored JSON
	update(t, s, func(tx storage.Tx) error {
		for i := range 30 {
			o := b.makeLines(t, "m1", i, Start().Add(time.Duration(i/2)*time.Second), budgetExtra(i)) // pairs share an instant
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
			js, err := json.Marshal(o) // what every store stores (storage.EncodeRecord)
			if err != nil {
				return err
			}
			stored[o.ID] = int64(len(js))
			all = append(all, o)
		}
		return nil
	})
	small, large := stored[all[1].ID], stored[all[3].ID]
	budget := 3 * stored[all[0].ID] // all[0] is medium
	if small*3 > budget || large <= budget {
		t.Fatalf("sizes do not straddle the budget %d: small %d, medium %d, large %d", budget, small, stored[all[0].ID], large)
	}
	for _, q := range []storage.OrderQuery{{}, {StoreIDs: []string{"store-0", "store-2"}}, {Status: []order.Status{order.StatusUncaptured, order.StatusFullyCaptured}}} {
		var match []*order.Order
		for _, o := range all {
			if storage.Matches(o, o.Statuses(Now()), q) {
				match = append(match, o)
			}
		}
		want := newestFirst(match)
		for _, size := range []int{1, 2, 5, 100} {
			q := q
			q.Size, q.PageBytes = size, int(budget)
			budgetWalk(t, fmt.Sprintf("%+v", q), want, stored, budget, size, func(cursor string) ([]string, string) {
				q.Cursor = cursor
				var page storage.OrderPage
				view(t, s, func(tx storage.Tx) error {
					var err error
					page, err = tx.ListOrders("m1", q)
					return err
				})
				var ids []string
				for _, o := range page.Orders {
					ids = append(ids, o.ID)
				}
				return ids, page.NextCursor
			})
		}
	}
	// The budget defaults to MaxPageBytes, and a larger PageBytes does not raise it.
	for _, pb := range []int{0, storage.MaxPageBytes * 2} {
		if got := storage.PageBudget(storage.OrderQuery{PageBytes: pb}); got != storage.MaxPageBytes {
			t.Fatalf("PageBytes %d: budget %d", pb, got)
		}
	}
}

// budgetExtra is the extra size of the i-th item of a page-budget case:
// mixed sizes around the budget, some larger than it on their own.
func budgetExtra(i int) int {
	switch {
	case i%7 == 3:
		return 120 // larger than the budget on its own
	case i%3 == 0:
		return 25
	}
	return 0
}

// budgetWalk walks a list whose pages have a byte budget through fetch (the
// ids of the page that cont continues from, "" for the first, and what
// continues after it, "" on the last page), and fails t unless the walk sees
// want, once each and in order; each page holds at most size items and,
// past its first, at most budget of their stored bytes; and a page ends
// before size only where the next item would pass the budget: the same
// rule on every store.
func budgetWalk(t *testing.T, label string, want []string, stored map[string]int64, budget int64, size int, fetch func(cont string) ([]string, string)) {
	t.Helper()
	var seen []string
	cont := ""
	for pages := 0; ; pages++ {
		if pages > len(want)+1 {
			t.Fatalf("%s: the walk does not end", label)
		}
		page, next := fetch(cont)
		if len(page) == 0 && (cont != "" || len(want) > 0) {
			t.Fatalf("%s: empty page after %q (next %q)", label, cont, next)
		}
		var used int64
		for _, id := range page {
			used += stored[id]
		}
		seen = append(seen, page...)
		if used > budget && len(page) > 1 {
			t.Fatalf("%s: page of %d holds %d bytes, over the budget of %d", label, len(page), used, budget)
		}
		if len(page) > size {
			t.Fatalf("%s: page of %d, over its size", label, len(page))
		}
		if next == "" {
			break
		}
		if len(page) < size {
			if len(seen) >= len(want) {
				t.Fatalf("%s: a continuation after the last item", label)
			}
			if n := stored[want[len(seen)]]; used+n <= budget {
				t.Fatalf("%s: page of %d (%d bytes) ended before %s (%d bytes) within the budget of %d",
					label, len(page), used, want[len(seen)], n, budget)
			}
		}
		cont = next
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("%s: the walk saw %v\nwant %v", label, seen, want)
	}
}
