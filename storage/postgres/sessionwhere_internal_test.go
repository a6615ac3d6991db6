package postgres

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kassahq/kassa/session"
)

// TestSessionWhereDropsTextNoRowHolds: a filter value PostgreSQL cannot
// hold (invalid UTF-8, NUL) is left out of the statement, which would fail
// with it; a list left with no value is the condition false, so that the
// statement reads no session rather than every session of the merchant for
// ListSessions' own match to refuse them one by one (the result is the same,
// the scan is not). The query's own lists are left as they were.
func TestSessionWhereDropsTextNoRowHolds(t *testing.T) {
	for _, c := range []struct {
		q     session.Query
		conds []string
		args  string
	}{
		{session.Query{StoreIDs: []string{"s\xff"}}, []string{"false"}, "[]"},
		{session.Query{MerchantReferences: []string{"PO\x00", "\xff"}}, []string{"false"}, "[]"},
		{session.Query{OrderIDs: []string{"o-1", "o\xff"}}, []string{"order_id = $2"}, "[o-1]"},
		{session.Query{StoreIDs: []string{"s1", "s2\x00", "s3"}, OrderIDs: []string{"\x00"}},
			[]string{"false", "store_id = ANY($2)"}, "[[s1 s3]]"},
		{session.Query{StoreIDs: []string{"s1"}, MerchantReferences: []string{"PO-1", "PO-2"}},
			[]string{"merchant_ref = ANY($2)", "store_id = $3"}, "[[PO-1 PO-2] s1]"},
	} {
		before := slices.Clone(c.q.StoreIDs)
		conds, args := sessionWhere(c.q)
		if !slices.Equal(conds, c.conds) || fmt.Sprint(args) != c.args {
			t.Errorf("orderIds %q, merchantReferences %q, storeIds %q: conditions %q, arguments %q; want %q, %s",
				c.q.OrderIDs, c.q.MerchantReferences, c.q.StoreIDs, conds, args, c.conds, c.args)
		}
		if !slices.Equal(c.q.StoreIDs, before) {
			t.Errorf("sessionWhere changed the query's storeIds to %q, from %q", c.q.StoreIDs, before)
		}
	}
}
