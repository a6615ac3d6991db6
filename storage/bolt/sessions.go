package bolt

import (
	"bytes"
	"slices"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// Session index entries, all under the merchant's prefix lp(merchant):
//
//	'c' time(createdAt) id                  → empty   newest-first listing
//	'x' lp(externalId)                      → id      lookup by external id
//	'o' lp(orderId)                         → id      lookup by order id
//	's' lp(storeId) time(createdAt) id      → empty   storeId filter
//	'm' lp(merchantRef) time(createdAt) id  → empty   merchantReference filter
//	'u' time(updatedAt) time(createdAt) id  → empty   updatedFrom/To filter
//
// A session's entries are a function of the session alone (sessionEntries),
// so PutSession replaces exactly the old version's entries and Check can
// recompute them. Files indexed before 's', 'm' and 'u' existed are
// reindexed at Open (reindexSessions).
const (
	sixCreated byte = 'c'
	sixExt     byte = 'x'
	sixOrder   byte = 'o'
	sixStore   byte = 's'
	sixRef     byte = 'm'
	sixUpdated byte = 'u'
)

// sessionIndexVersion is the set of session index kinds a file holds, kept
// in storeinfo under keySessionIndex; 2 has 's', 'm' and 'u'.
const sessionIndexVersion = 2

var keySessionIndex = []byte("sessionIndex")

func sessionLookupKey(merchantID string, kind byte, v string) []byte {
	return lp(append(lp(nil, merchantID), kind), v)
}

// ixEntry is one index entry; lookup entries ('x', 'o') are unique per
// merchant and hold the session id.
type ixEntry struct {
	key, value []byte
	lookup     byte
}

func sessionEntries(s *session.Session) []ixEntry {
	pos := position(s.CreatedAt, s.ID)
	kind := func(k byte) []byte { return append(lp(nil, s.MerchantID), k) }
	e := []ixEntry{
		{key: append(kind(sixCreated), pos...), value: present},
		{key: append(lp(kind(sixStore), s.StoreID), pos...), value: present},
		{key: append(lp(kind(sixRef), s.MerchantReference), pos...), value: present},
		{key: append(putTime(kind(sixUpdated), s.UpdatedAt), pos...), value: present},
	}
	if s.ExternalSessionID != "" {
		e = append(e, ixEntry{sessionLookupKey(s.MerchantID, sixExt, s.ExternalSessionID), []byte(s.ID), sixExt})
	}
	if s.OrderID != "" {
		e = append(e, ixEntry{sessionLookupKey(s.MerchantID, sixOrder, s.OrderID), []byte(s.ID), sixOrder})
	}
	return e
}

func (t *tx) GetSession(merchantID, id string) (*session.Session, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var s session.Session
	ok, err := t.getRecord(bSessions, key(merchantID, id), &s)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("session_not_found", "session %s not found", id)
	}
	return &s, nil
}

func (t *tx) sessionBy(merchantID string, kind byte, v string) (*session.Session, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	id := t.get(bSessionIx, sessionLookupKey(merchantID, kind, v))
	if id == nil {
		return nil, fault.NotFoundf("session_not_found", "session not found")
	}
	return t.GetSession(merchantID, string(id))
}

func (t *tx) GetSessionByExternalID(merchantID, externalID string) (*session.Session, error) {
	return t.sessionBy(merchantID, sixExt, externalID)
}

func (t *tx) GetSessionByOrderID(merchantID, orderID string) (*session.Session, error) {
	return t.sessionBy(merchantID, sixOrder, orderID)
}

func (t *tx) PutSession(s *session.Session) error {
	if err := t.check(true); err != nil {
		return err
	}
	old, err := t.GetSession(s.MerchantID, s.ID)
	if err != nil && !fault.Is(err, fault.NotFound) {
		return err
	}
	entries := sessionEntries(s)
	for _, e := range entries {
		if e.lookup == 0 {
			continue
		}
		if owner := t.get(bSessionIx, e.key); owner != nil && string(owner) != s.ID {
			field := map[byte]string{sixExt: "externalSessionId", sixOrder: "orderId"}[e.lookup]
			return fault.Conflictf("session_exists", "another session has that %s", field)
		}
	}
	keep := map[string]bool{}
	if old != nil {
		if !old.CreatedAt.Equal(s.CreatedAt) {
			return fault.Internalf(nil, "a session's creation time cannot change")
		}
		now := map[string]bool{}
		for _, e := range entries {
			now[string(e.key)] = true
		}
		for _, e := range sessionEntries(old) {
			if now[string(e.key)] {
				keep[string(e.key)] = true
			} else if err := t.del(bSessionIx, e.key); err != nil {
				return err
			}
		}
	}
	for _, e := range entries {
		if keep[string(e.key)] {
			continue
		}
		if err := t.put(bSessionIx, e.key, e.value); err != nil {
			return err
		}
	}
	return t.putRecord(bSessions, key(s.MerchantID, s.ID), s)
}

// ListSessions answers from the narrowest candidate set the query names,
// newest first, and checks every candidate with q.Match, which alone decides
// what matches:
//
//   - orderId values name at most one session each, looked up directly;
//   - otherwise merchantReference, storeId (each value's entries stream
//     newest first, values merged) and updatedFrom/To (the range of the 'u'
//     index, collected and sorted) are candidates; when several are given,
//     they are counted in step, keys only, and the first to run out (the
//     smallest) drives, so choosing costs at most a few times its size;
//   - with none of them, the creation index is walked (state, source and q
//     alone have no index: state depends on the time, source has two
//     values and q is a substring).
//
// createdFrom/To and fromId bound every candidate set to positions
// (createdAt, id) in [lower, upper). The walk stops after size+1 matches, or
// at the first match past the page's byte budget (storage.SessionPageBudget).
func (t *tx) ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error) {
	if err := t.check(false); err != nil {
		return nil, "", err
	}
	var lower, upper []byte
	if q.FromID != "" {
		s, err := t.GetSession(merchantID, q.FromID)
		if err != nil {
			return nil, "", err
		}
		upper = position(s.CreatedAt, s.ID)
	}
	if !q.CreatedTo.IsZero() {
		if ct := putTime(nil, q.CreatedTo); upper == nil || bytes.Compare(ct, upper) < 0 {
			upper = ct
		}
	}
	if !q.CreatedFrom.IsZero() {
		lower = putTime(nil, q.CreatedFrom)
	}
	p := &sessionPlanner{planner: planner{t: t, merchant: merchantID, lower: lower, upper: upper, b: t.st.bucket(bSessionIx)}, q: &q}
	src := p.plan()
	if p.err != nil {
		return nil, "", p.err
	}
	now := t.st.now
	var page []*session.Session
	fill := storage.PageFill{Budget: storage.SessionPageBudget(q)}
	for pos := src.next(); pos != nil; pos = src.next() {
		id := string(pos[timeLen:])
		t.examined++
		raw := t.get(bSessions, key(merchantID, id))
		if raw == nil {
			return nil, "", fault.Internalf(nil, "session index names a missing session %s", id)
		}
		var s session.Session
		if err := storage.DecodeRecord(raw, &s); err != nil {
			return nil, "", fault.Internalf(err, "decode %s record", bSessions)
		}
		if !q.Match(&s, now) {
			continue
		}
		if len(page) == q.Size || !fill.Take(int64(len(raw))) {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, &s)
	}
	return page, "", nil
}

type sessionPlanner struct {
	planner
	q   *session.Query
	err error
}

func (p *sessionPlanner) prefix(kind byte) []byte { return append(lp(nil, p.merchant), kind) }

func (p *sessionPlanner) plan() source {
	q := p.q
	if len(q.OrderIDs) > 0 {
		return p.byOrder()
	}
	type candidate struct {
		count func() func() bool // a fresh key walk of the set: step reports false when done
		build func() source
		// collects: build reads and sorts the whole set (the update-time
		// range, which is not in list order), where the others stream.
		collects bool
	}
	var cands []candidate
	values := func(kind byte, vs []string) {
		if len(vs) == 0 {
			return
		}
		mk := func() source { return p.values(kind, vs) }
		cands = append(cands, candidate{func() func() bool { s := mk(); return func() bool { return s.next() != nil } }, mk, false})
	}
	values(sixRef, q.MerchantReferences)
	values(sixStore, q.StoreIDs)
	if !q.UpdatedFrom.IsZero() || !q.UpdatedTo.IsZero() {
		cands = append(cands, candidate{func() func() bool { return p.updated() }, func() source {
			var ps [][]byte
			for step := p.updatedPositions(&ps); step(); {
			}
			return p.sorted(ps)
		}, true})
	}
	// An open-ended update range ("updated since") larger than this is not
	// collected for every page: the creation index, walked newest first and
	// checked with Match, finds its page sooner, since what was created
	// since was updated since. A range with an end may lie far behind the
	// newest sessions, where that walk would read every newer one: it is
	// collected (keys only) whatever its size.
	collectAtMost := 20 * (q.Size + 1)
	choose := func(c candidate, size int) source {
		if c.collects && size > collectAtMost && q.UpdatedTo.IsZero() {
			return p.values(sixCreated, nil)
		}
		return c.build()
	}
	switch len(cands) {
	case 0:
		return p.values(sixCreated, nil)
	case 1:
		size := 0
		for step := cands[0].count(); size <= collectAtMost && step(); {
			size++
		}
		return choose(cands[0], size)
	}
	steps := make([]func() bool, len(cands))
	for i, c := range cands {
		steps[i] = c.count()
	}
	for size := 0; ; size++ {
		for i, step := range steps {
			if !step() {
				return choose(cands[i], size)
			}
		}
	}
}

// values merges the newest-first walks of several values of one kind;
// nil values walk the kind's own entries (the creation index).
func (p *sessionPlanner) values(kind byte, vs []string) source {
	if vs == nil {
		return &merge{its: []*revIter{newRevIter(p.b, p.prefix(kind), p.lower, p.upper)}}
	}
	m := &merge{}
	for _, v := range slices.Compact(slices.Sorted(slices.Values(vs))) {
		if it := newRevIter(p.b, lp(p.prefix(kind), v), p.lower, p.upper); it.k != nil {
			m.its = append(m.its, it)
		}
	}
	return m
}

// updated counts the entries of the updatedFrom/To range, keys only.
func (p *sessionPlanner) updated() func() bool { return p.updatedPositions(nil) }

// updatedPositions walks the 'u' index over [updatedFrom, updatedTo); each
// step moves to the next entry whose position is in [lower, upper),
// appending it to *out when out is not nil, and reports false at the end.
func (p *sessionPlanner) updatedPositions(out *[][]byte) func() bool {
	prefix := p.prefix(sixUpdated)
	start, end := prefix, successor(prefix)
	if !p.q.UpdatedFrom.IsZero() {
		start = putTime(bytes.Clone(prefix), p.q.UpdatedFrom)
	}
	if !p.q.UpdatedTo.IsZero() {
		end = putTime(bytes.Clone(prefix), p.q.UpdatedTo)
	}
	c := p.b.Cursor()
	k, _ := c.Seek(start)
	return func() bool {
		for ; k != nil && (end == nil || bytes.Compare(k, end) < 0); k, _ = c.Next() {
			pos := k[len(prefix)+timeLen:]
			if !p.inRange(pos) {
				continue
			}
			if out != nil {
				*out = append(*out, bytes.Clone(pos))
			}
			k, _ = c.Next()
			return true
		}
		k = nil
		return false
	}
}

// byOrder looks up each orderId value's session.
func (p *sessionPlanner) byOrder() source {
	var ps [][]byte
	for _, o := range p.q.OrderIDs {
		id := p.t.get(bSessionIx, sessionLookupKey(p.merchant, sixOrder, o))
		if id == nil {
			continue
		}
		s, err := p.t.GetSession(p.merchant, string(id))
		if err != nil {
			p.err = err
			return &list{}
		}
		ps = append(ps, position(s.CreatedAt, s.ID))
	}
	return p.sorted(ps)
}

// pageNewest returns up to size records of a creation index (keys: prefix,
// time, id), newest first, starting strictly before the key from (at the
// newest when nil) and ending before the key lower (nil: none), keeping
// those match accepts, and the id to continue from ("" on the last page).
func pageNewest[T any](t *tx, bucket, prefix, from, lower []byte, size int, load func(id string) (T, error),
	match func(T) bool, idOf func(T) string) ([]T, string, error) {
	c := t.st.bucket(bucket).Cursor()
	var k []byte
	switch next := successor(prefix); {
	case from != nil:
		if k, _ = c.Seek(from); k != nil {
			k, _ = c.Prev()
		} else {
			k, _ = c.Last()
		}
	case next != nil:
		if k, _ = c.Seek(next); k != nil {
			k, _ = c.Prev()
		} else {
			k, _ = c.Last()
		}
	}
	var page []T
	for ; k != nil && bytes.HasPrefix(k, prefix) && (lower == nil || bytes.Compare(k, lower) >= 0); k, _ = c.Prev() {
		t.examined++
		r, err := load(string(k[len(prefix)+timeLen:]))
		if err != nil {
			return nil, "", err
		}
		if !match(r) {
			continue
		}
		if len(page) == size {
			return page, idOf(page[len(page)-1]), nil
		}
		page = append(page, r)
	}
	return page, "", nil
}
