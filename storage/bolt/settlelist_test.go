package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// A daily run makes a settlement per store and currency, so a merchant
// gathers thousands a year. A list with a created range read every one of
// the merchant's settlements outside the range (createdFrom: all older
// ones; createdTo: all newer ones before the first match); the index sorts
// them by creation, so the walk starts at createdTo and stops at
// createdFrom, reading only what is in range.
func TestSettlementListReadsOnlyItsCreatedRange(t *testing.T) {
	day0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	s, err := Open(filepath.Join(t.TempDir(), "kassa.db"), Options{NoSync: true, Clock: func() time.Time { return day0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const days = 60
	err = s.Update(context.Background(), func(stx storage.Tx) error {
		for d := range days {
			for _, m := range []string{"m1", "m2"} {
				id := fmt.Sprintf("stl-%s-%02d", m, d)
				b := settlement.Batch{Settlement: settlement.Settlement{ID: id, MerchantID: m, StoreID: "store-1",
					Currency: money.Currency("SEK"), CreatedAt: day0.AddDate(0, 0, d)}}
				if err := stx.SaveSettlement(b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	day := func(d int) time.Time { return day0.AddDate(0, 0, d) }
	for _, c := range []struct {
		name string
		q    settlement.Query
		want []string // days, newest first
	}{
		{"createdFrom", settlement.Query{CreatedFrom: day(57)}, []string{"59", "58", "57"}},
		{"createdTo", settlement.Query{CreatedTo: day(3)}, []string{"02", "01", "00"}},
		{"both", settlement.Query{CreatedFrom: day(20), CreatedTo: day(22)}, []string{"21", "20"}},
		{"both, after fromId", settlement.Query{CreatedFrom: day(20), CreatedTo: day(40), FromID: "stl-m1-22"}, []string{"21", "20"}},
		{"createdTo past the last", settlement.Query{CreatedTo: day(days + 5), CreatedFrom: day(days - 1)}, []string{"59"}},
	} {
		c.q.Size = 100
		var got []string
		examined := 0
		err := s.View(context.Background(), func(stx storage.Tx) error {
			page, _, err := stx.ListSettlements("m1", c.q)
			for _, st := range page {
				got = append(got, st.ID[len("stl-m1-"):])
			}
			examined = stx.(*tx).examined
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got days %v, want %v", c.name, got, c.want)
		}
		if examined != len(c.want) {
			t.Errorf("%s: read %d settlements for a page of %d", c.name, examined, len(c.want))
		}
	}
}
