package bolt

import (
	"bytes"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// ListOrders answers a list from the smallest candidate set the query allows
// and never walks all of a merchant's orders when a filter has an index:
//
//   - Every equality filter (storeId, orderReference, merchantReference,
//     status, paymentMethodCategory, and each statusAnd value on its own) has
//     an index per value whose entries sort by (createdAt, id), plus a counter
//     of entries, so the size of its candidate set is known exactly and its
//     candidates stream newest first (values of one filter are merged).
//   - ids and q name a handful of orders, looked up directly.
//   - expiresFrom/To walk the expiresAt index over the range (keys only,
//     counted up to the best candidate size so far before being chosen).
//   - Otherwise, or when the created range is the narrowest, the createdAt
//     index is walked backwards from the cursor (statusNot alone does this).
//
// The smallest candidate set drives the walk; each candidate is checked
// against every filter on its meta record (no JSON decoding), and only the
// orders that pass are loaded. The walk stops after size+1 matches, or at the
// first match past the page's byte budget (storage.MaxPageBytes), so a page
// costs the candidates skipped before it, not the whole set, and decodes no
// more than the budget (or one order larger than it).
func (t *tx) ListOrders(merchantID string, q storage.OrderQuery) (storage.OrderPage, error) {
	var page storage.OrderPage
	if err := t.check(false); err != nil {
		return page, err
	}
	size := q.Size
	if size == 0 {
		size = storage.DefaultPageSize
	}
	if size < 1 || size > storage.MaxPageSize {
		return page, fault.Invalidf("size", "must be between 1 and %d", storage.MaxPageSize)
	}
	// Positions (createdAt, id) in [lower, upper) are candidates.
	var lower, upper []byte
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return page, err
		}
		upper = c
	}
	if !q.CreatedTo.IsZero() {
		if ct := putTime(nil, q.CreatedTo); upper == nil || bytes.Compare(ct, upper) < 0 {
			upper = ct
		}
	}
	if !q.CreatedFrom.IsZero() {
		lower = putTime(nil, q.CreatedFrom)
	}
	p := planner{t: t, merchant: merchantID, q: &q, lower: lower, upper: upper, b: t.st.bucket(bIndex)}
	src := p.plan()
	f := newFilter(&q)
	fill := storage.PageFill{Budget: storage.PageBudget(q)}
	for {
		pos := src.next()
		if pos == nil {
			break
		}
		id := string(pos[timeLen:])
		t.examined++
		k := orderKey(merchantID, id)
		raw := t.get(bOrders, k)
		if raw == nil {
			return page, fault.Internalf(nil, "order index names a missing order %s", id)
		}
		m, err := orderMeta(raw)
		if err != nil {
			return page, err
		}
		if !f.match(id, &m) {
			continue
		}
		_, js, err := splitOrder(raw)
		if err != nil {
			return page, err
		}
		if len(page.Orders) == size || !fill.Take(int64(len(js))) {
			// This order matches and is not on the page: the next one starts with it.
			last := page.Orders[len(page.Orders)-1]
			page.NextCursor = encodeCursor(position(last.CreatedAt, last.ID))
			break
		}
		o, err := t.st.decoded.Order(string(k), js)
		if err != nil {
			return page, err
		}
		page.Orders = append(page.Orders, o)
	}
	return page, nil
}

// filter checks a candidate against every filter of a query.
type filter struct {
	q                                         *storage.OrderQuery
	stores, orderRefs, merchRefs, cats, stats []string
	and, not                                  []string
	expFrom, expTo                            []byte
}

func newFilter(q *storage.OrderQuery) *filter {
	f := &filter{q: q, stores: q.StoreIDs, orderRefs: q.OrderReferences, merchRefs: q.MerchantReferences,
		cats: strs(q.Categories), stats: strs(q.Status), and: strs(q.StatusAnd), not: strs(q.StatusNot)}
	if !q.ExpiresFrom.IsZero() {
		f.expFrom = putTime(nil, q.ExpiresFrom)
	}
	if !q.ExpiresTo.IsZero() {
		f.expTo = putTime(nil, q.ExpiresTo)
	}
	return f
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func (f *filter) match(id string, m *meta) bool {
	q := f.q
	switch {
	case len(q.IDs) > 0 && !slices.Contains(q.IDs, id),
		len(f.stores) > 0 && !m.hasAny(kindStore, f.stores),
		len(f.orderRefs) > 0 && !m.hasAny(kindOrderRef, f.orderRefs),
		len(f.merchRefs) > 0 && !m.hasAny(kindMerchantRef, f.merchRefs),
		len(f.cats) > 0 && !m.hasAny(kindCategory, f.cats),
		len(f.stats) > 0 && !m.hasAny(kindStatus, f.stats),
		len(f.not) > 0 && m.hasAny(kindStatus, f.not),
		q.Q != "" && q.Q != id && q.Q != m.value(kindOrderRef) && q.Q != m.value(kindMerchantRef):
		return false
	}
	for _, s := range f.and {
		if !m.has(kindStatus, s) {
			return false
		}
	}
	if f.expFrom != nil || f.expTo != nil {
		e := putTime(nil, m.expires)
		if f.expFrom != nil && bytes.Compare(e, f.expFrom) < 0 || f.expTo != nil && bytes.Compare(e, f.expTo) >= 0 {
			return false
		}
	}
	return true
}

// source yields candidate positions newest first; nil when exhausted.
type source interface{ next() []byte }

type planner struct {
	t            *tx
	merchant     string
	q            *storage.OrderQuery
	lower, upper []byte
	b            *bbolt.Bucket
}

func (p *planner) inRange(pos []byte) bool {
	return (p.lower == nil || bytes.Compare(pos, p.lower) >= 0) && (p.upper == nil || bytes.Compare(pos, p.upper) < 0)
}

// plan picks the source with the smallest candidate set.
func (p *planner) plan() source {
	q := p.q
	best := p.t.count(valuePrefix(p.merchant, kindCreated, "")) // every order of the merchant
	build := func() source { return p.values(kindCreated, []string{""}) }
	consider := func(n int64, b func() source) {
		if n < best {
			best, build = n, b
		}
	}
	if len(q.IDs) > 0 {
		consider(int64(len(q.IDs)), func() source { return p.ids(q.IDs) })
	}
	if q.Q != "" {
		n := 2 + p.t.count(valuePrefix(p.merchant, kindMerchantRef, q.Q)) // an id, an order reference, merchant references
		consider(n, p.byQ)
	}
	equality := func(kind byte, values []string) {
		if len(values) == 0 {
			return
		}
		var n int64
		for _, v := range values {
			if kind == kindOrderRef {
				n++ // unique per order, not counted
				continue
			}
			n += p.t.count(valuePrefix(p.merchant, kind, v))
		}
		consider(n, func() source { return p.values(kind, values) })
	}
	equality(kindStore, q.StoreIDs)
	equality(kindOrderRef, q.OrderReferences)
	equality(kindMerchantRef, q.MerchantReferences)
	equality(kindCategory, strs(q.Categories))
	equality(kindStatus, strs(q.Status))
	for _, s := range q.StatusAnd {
		equality(kindStatus, []string{string(s)})
	}
	if !q.CreatedFrom.IsZero() || !q.CreatedTo.IsZero() {
		// The created range streams in order, so its size only bounds the
		// work; count it no further than the best so far.
		n := p.countCreated(best)
		consider(n, func() source { return p.values(kindCreated, []string{""}) })
	}
	if !q.ExpiresFrom.IsZero() || !q.ExpiresTo.IsZero() {
		n := int64(len(p.expiring(int(best))))
		consider(n, func() source { return p.sorted(p.expiring(-1)) })
	}
	return build()
}

// values merges the reverse walks of several values of one kind.
func (p *planner) values(kind byte, values []string) source {
	m := &merge{}
	for _, v := range slices.Compact(slices.Sorted(slices.Values(values))) {
		it := newRevIter(p.b, valuePrefix(p.merchant, kind, v), p.lower, p.upper)
		if it.k != nil {
			m.its = append(m.its, it)
		}
	}
	return m
}

func (p *planner) countCreated(limit int64) int64 {
	it := newRevIter(p.b, valuePrefix(p.merchant, kindCreated, ""), p.lower, p.upper)
	var n int64
	for n < limit && it.next() != nil {
		n++
	}
	return n
}

// expiring collects the positions of orders whose expiresAt is in the query's
// range (and position in [lower, upper)), stopping after limit (-1: all).
func (p *planner) expiring(limit int) [][]byte {
	prefix := expiresPrefix(p.merchant)
	start, end := prefix, successor(prefix)
	if !p.q.ExpiresFrom.IsZero() {
		start = putTime(bytes.Clone(prefix), p.q.ExpiresFrom)
	}
	if !p.q.ExpiresTo.IsZero() {
		end = putTime(bytes.Clone(prefix), p.q.ExpiresTo)
	}
	var out [][]byte
	c := p.b.Cursor()
	for k, _ := c.Seek(start); k != nil && (end == nil || bytes.Compare(k, end) < 0) && (limit < 0 || len(out) < limit); k, _ = c.Next() {
		pos := k[len(prefix)+timeLen:]
		if p.inRange(pos) {
			out = append(out, bytes.Clone(pos))
		}
	}
	return out
}

func (p *planner) ids(ids []string) source {
	var out [][]byte
	for _, id := range ids {
		if pos := p.positionOf(id); pos != nil {
			out = append(out, pos)
		}
	}
	return p.sorted(out)
}

func (p *planner) positionOf(id string) []byte {
	raw := p.t.get(bOrders, orderKey(p.merchant, id))
	if raw == nil {
		return nil
	}
	m, err := orderMeta(raw)
	if err != nil {
		return nil
	}
	return position(m.created, id)
}

// byQ collects the orders q names by id, orderReference or merchantReference.
func (p *planner) byQ() source {
	var out [][]byte
	if pos := p.positionOf(p.q.Q); pos != nil {
		out = append(out, pos)
	}
	for _, kind := range []byte{kindOrderRef, kindMerchantRef} {
		it := newRevIter(p.b, valuePrefix(p.merchant, kind, p.q.Q), nil, nil)
		for pos := it.next(); pos != nil; pos = it.next() {
			out = append(out, bytes.Clone(pos))
		}
	}
	return p.sorted(out)
}

// sorted serves collected positions newest first, without duplicates, within range.
func (p *planner) sorted(ps [][]byte) source {
	ps = slices.DeleteFunc(ps, func(pos []byte) bool { return !p.inRange(pos) })
	slices.SortFunc(ps, func(a, b []byte) int { return bytes.Compare(b, a) })
	return &list{ps: slices.CompactFunc(ps, bytes.Equal)}
}

type list struct{ ps [][]byte }

func (l *list) next() []byte {
	if len(l.ps) == 0 {
		return nil
	}
	p := l.ps[0]
	l.ps = l.ps[1:]
	return p
}

// revIter walks the entries of one index prefix backwards over positions in
// [lower, upper).
type revIter struct {
	c      *bbolt.Cursor
	prefix []byte
	lower  []byte
	k      []byte // current key; nil when done
}

func newRevIter(b *bbolt.Bucket, prefix, lower, upper []byte) *revIter {
	it := &revIter{c: b.Cursor(), prefix: prefix, lower: lower}
	var target []byte
	if upper != nil {
		target = append(bytes.Clone(prefix), upper...)
	} else {
		target = successor(prefix)
	}
	var k []byte
	if target != nil {
		k, _ = it.c.Seek(target)
	}
	// Seek lands on the first key ≥ target; the walk starts just before it.
	if k == nil {
		k, _ = it.c.Last()
	} else {
		k, _ = it.c.Prev()
	}
	it.set(k)
	return it
}

func (it *revIter) set(k []byte) {
	if k == nil || !bytes.HasPrefix(k, it.prefix) || it.lower != nil && bytes.Compare(k[len(it.prefix):], it.lower) < 0 {
		k = nil
	}
	it.k = k
}

func (it *revIter) pos() []byte { return it.k[len(it.prefix):] }

func (it *revIter) next() []byte {
	if it.k == nil {
		return nil
	}
	p := it.pos()
	k, _ := it.c.Prev()
	it.set(k)
	return p
}

// merge yields the union of several reverse walks, newest first, once each
// (an order has several statuses, so status values overlap).
type merge struct {
	its  []*revIter
	last []byte
}

func (m *merge) next() []byte {
	for {
		bi := -1
		for i, it := range m.its {
			if it.k != nil && (bi < 0 || bytes.Compare(it.pos(), m.its[bi].pos()) > 0) {
				bi = i
			}
		}
		if bi < 0 {
			return nil
		}
		p := m.its[bi].next()
		if m.last != nil && bytes.Equal(p, m.last) {
			continue
		}
		m.last = p
		return p
	}
}
