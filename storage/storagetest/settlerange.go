package storagetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// testSettlementCreatedRange: a settlement list with createdFrom
// (inclusive) and createdTo (exclusive), paged with fromId from a cursor in
// the range, before it, after it and at its bounds, gives what the query's
// Match over the merchant's settlements, newest first, gives: a store that
// bounds its walk by the range must not cut off what the range holds.
func testSettlementCreatedRange(t *testing.T, s storage.Store) {
	zone := time.FixedZone("CEST", 2*60*60)
	at := func(m int) time.Time { return Start().Add(time.Duration(m) * time.Minute) }
	// Several share a time (their ids sort both ways against the order of
	// saving), one is a nanosecond past another, one is in another zone.
	var ids []string
	times := map[string]time.Time{}
	for i, m := range []int{0, 1, 1, 1, 2, 3, 5, 5, 8, 9, 9, 12} {
		id := fmt.Sprintf("stl-%c", 'a'+rune((i*7)%12))
		ids, times[id] = append(ids, id), at(m)
	}
	ids, times["stl-n"], times["stl-z"] = append(ids, "stl-n", "stl-z"), at(5).Add(time.Nanosecond), at(3).In(zone)
	update(t, s, func(tx storage.Tx) error {
		for _, m := range []string{"m1", "m2"} {
			for _, id := range ids {
				err := tx.SaveSettlement(settlement.Batch{Settlement: settlement.Settlement{ID: id, MerchantID: m,
					StoreID: "a", Currency: "SEK", CreatedAt: times[id]}})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	bounds := []time.Time{{}, at(0), at(1), at(3), at(3).In(zone), at(5), at(5).Add(time.Nanosecond), at(9), at(13)}
	// Newest first: createdAt, then id, both descending.
	newest := slices.Clone(ids)
	slices.SortFunc(newest, func(a, b string) int {
		if c := times[b].Compare(times[a]); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	// m2's settlements sort last in an index of every merchant's: a walk
	// from past the index's end is held too.
	for _, merchant := range []string{"m1", "m2"} {
		view(t, s, func(tx storage.Tx) error {
			for _, from := range bounds {
				for _, to := range bounds {
					for _, cursor := range append([]string{""}, newest...) {
						for _, size := range []int{1, 100} {
							q := settlement.Query{CreatedFrom: from, CreatedTo: to, FromID: cursor, Size: size}
							var want []string
							started := cursor == ""
							for _, id := range newest {
								if started && q.Match(&settlement.Settlement{ID: id, StoreID: "a", Currency: "SEK", CreatedAt: times[id]}) {
									want = append(want, id)
								}
								started = started || id == cursor
							}
							pages, err := settlementPages(tx, merchant, q)
							if err != nil {
								return err
							}
							var got []string
							for i, page := range pages {
								for _, p := range page {
									got = append(got, p.ID)
								}
								if i < len(pages)-1 && len(page) != size {
									t.Errorf("%s from %v to %v after %q: a page of %d of %d names a next page", merchant, from, to, cursor, len(page), size)
								}
							}
							if !slices.Equal(got, want) {
								t.Fatalf("%s from %v to %v after %q, pages of %d: got %v, want %v", merchant, from, to, cursor, size, got, want)
							}
						}
					}
				}
			}
			return nil
		})
	}
}

// settlementPages lists a merchant's settlements from q page by page,
// following each page's cursor to the end.
func settlementPages(tx storage.Tx, merchant string, q settlement.Query) ([][]*settlement.Settlement, error) {
	var pages [][]*settlement.Settlement
	for {
		page, next, err := tx.ListSettlements(merchant, q)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page)
		if next == "" {
			return pages, nil
		}
		q.FromID = next
	}
}
