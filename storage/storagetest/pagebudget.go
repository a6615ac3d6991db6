package storagetest

import (
	"encoding/json"
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
			extra := 0
			switch {
			case i%7 == 3:
				extra = 120 // larger than the budget on its own
			case i%3 == 0:
				extra = 25
			}
			o := b.makeLines(t, "m1", i, Start.Add(time.Duration(i/2)*time.Second), extra) // pairs share an instant
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
			var seen []string
			for pages := 0; ; pages++ {
				if pages > len(all)+1 {
					t.Fatalf("%+v: the walk does not end", q)
				}
				var page storage.OrderPage
				view(t, s, func(tx storage.Tx) error {
					var err error
					page, err = tx.ListOrders("m1", q)
					return err
				})
				if len(page.Orders) == 0 && (q.Cursor != "" || len(want) > 0) {
					t.Fatalf("%+v: empty page (cursor %q)", q, page.NextCursor)
				}
				var used int64
				for _, o := range page.Orders {
					used += stored[o.ID]
					seen = append(seen, o.ID)
				}
				if used > budget && len(page.Orders) > 1 {
					t.Fatalf("%+v: page of %d orders holds %d bytes, over the budget of %d", q, len(page.Orders), used, budget)
				}
				if page.NextCursor == "" {
					break
				}
				// A page ends before size only where the next order would
				// take it past the budget: the same rule on every store.
				if len(page.Orders) < size {
					if len(seen) >= len(want) {
						t.Fatalf("%+v: cursor after the last order", q)
					}
					if next := stored[want[len(seen)]]; used+next <= budget {
						t.Fatalf("%+v: page of %d orders (%d bytes) ended before %s (%d bytes) within the budget of %d",
							q, len(page.Orders), used, want[len(seen)], next, budget)
					}
				}
				q.Cursor = page.NextCursor
			}
			if !slices.Equal(seen, want) {
				t.Fatalf("%+v: the walk saw %v\nwant %v", q, seen, want)
			}
		}
	}
	// The budget defaults to MaxPageBytes, and a larger PageBytes does not raise it.
	for _, pb := range []int{0, storage.MaxPageBytes * 2} {
		if got := storage.PageBudget(storage.OrderQuery{PageBytes: pb}); got != storage.MaxPageBytes {
			t.Fatalf("PageBytes %d: budget %d", pb, got)
		}
	}
}
