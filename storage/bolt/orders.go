package bolt

import (
	"bytes"
	"encoding/base64"
	"sort"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// Index fields of the order list. Each entry is
// merchant·field·value·created·orderID, so that every entry of one value sorts
// by creation time and a page is a backwards walk from the cursor.
const (
	fAll      = "a" // every order (value "")
	fStore    = "s"
	fOrderRef = "o"
	fMerchRef = "m"
	fStatus   = "t"
	fCategory = "c"
	fExpires  = "e" // value: expiresAt, for expiry ranges
)

// esc keeps merchant-supplied values from containing the zero separator.
func esc(v string) string {
	if !strings.ContainsAny(v, "\x00\x01") {
		return v
	}
	return strings.NewReplacer("\x01", "\x01\x02", "\x00", "\x01\x01").Replace(v)
}

// meta remembers what was indexed for an order, so an update removes exactly
// the old entries, and the statuses the index holds (computed at write time).
type meta struct {
	Keys     [][]byte       `json:"keys"`
	Due      []byte         `json:"due,omitempty"`
	Statuses []order.Status `json:"statuses"`
}

func indexKeys(o *order.Order, statuses []order.Status) [][]byte {
	m, c := o.MerchantID, timeKey(o.CreatedAt)
	ks := [][]byte{
		key(m, fAll, "", c, o.ID),
		key(m, fStore, esc(o.StoreID), c, o.ID),
		key(m, fOrderRef, esc(o.OrderReference), c, o.ID),
		key(m, fCategory, string(o.PaymentMethod.Category()), c, o.ID),
		key(m, fExpires, "", timeKey(o.ExpiresAt), c, o.ID),
	}
	if o.MerchantReference != "" {
		ks = append(ks, key(m, fMerchRef, esc(o.MerchantReference), c, o.ID))
	}
	for _, s := range statuses {
		ks = append(ks, key(m, fStatus, string(s), c, o.ID))
	}
	return ks
}

// dueKey lists an order for the expiry job while it can still expire.
func dueKey(o *order.Order) []byte {
	if o.ExpiredMarked || o.Cancelled || len(o.Uncaptured.Lines) == 0 {
		return nil
	}
	return key(timeKey(o.ExpiresAt), o.MerchantID, o.ID)
}

func (t *tx) GetOrder(merchantID, orderID string) (*order.Order, error) {
	var o order.Order
	ok, err := t.get(bOrders, key(merchantID, orderID), &o)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("order_not_found", "order %s not found", orderID)
	}
	return &o, nil
}

func (t *tx) CreateOrder(o *order.Order) error {
	if !t.writable {
		return errReadOnly
	}
	if t.b.Bucket(bOrders).Get(key(o.MerchantID, o.ID)) != nil {
		return fault.Conflictf("order_exists", "order %s exists", o.ID)
	}
	o.Version = 1
	return t.writeOrder(o, nil)
}

func (t *tx) UpdateOrder(o *order.Order) error {
	if !t.writable {
		return errReadOnly
	}
	k := key(o.MerchantID, o.ID)
	var cur order.Order
	ok, err := t.get(bOrders, k, &cur)
	if err != nil {
		return err
	}
	if !ok {
		return fault.NotFoundf("order_not_found", "order %s not found", o.ID)
	}
	if cur.Version != o.Version {
		return fault.Conflictf("version_conflict", "order %s changed concurrently (version %d, stored %d)", o.ID, o.Version, cur.Version)
	}
	var old meta
	if _, err := t.get(bOrderMeta, k, &old); err != nil {
		return err
	}
	o.Version++
	if err := t.writeOrder(o, &old); err != nil {
		o.Version--
		return err
	}
	return nil
}

func (t *tx) writeOrder(o *order.Order, old *meta) error {
	k := key(o.MerchantID, o.ID)
	statuses := o.Statuses(t.now)
	m := meta{Keys: indexKeys(o, statuses), Due: dueKey(o), Statuses: statuses}
	if old != nil {
		keep := make(map[string]bool, len(m.Keys))
		for _, nk := range m.Keys {
			keep[string(nk)] = true
		}
		for _, ok := range old.Keys {
			if !keep[string(ok)] {
				if err := t.del(bIndex, ok); err != nil {
					return err
				}
			}
		}
		if old.Due != nil && !bytes.Equal(old.Due, m.Due) {
			if err := t.del(bDue, old.Due); err != nil {
				return err
			}
		}
	}
	for _, ik := range m.Keys {
		if err := t.put(bIndex, ik, nil); err != nil {
			return err
		}
	}
	if m.Due != nil {
		if err := t.put(bDue, m.Due, nil); err != nil {
			return err
		}
	}
	if err := t.put(bOrderMeta, k, m); err != nil {
		return err
	}
	return t.put(bOrders, k, o)
}

func (t *tx) OrdersExpiringBefore(at time.Time, limit int) ([]*order.Order, error) {
	var out []*order.Order
	c := t.b.Bucket(bDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if !timeOf(string(k[:8])).Before(at) {
			break
		}
		var o order.Order
		ok, err := t.get(bOrders, k[9:], &o)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, &o)
		}
	}
	return out, nil
}

// A position in newest-first order: created time, then order id.
type position struct {
	created string // timeKey
	id      string
}

func encodeCursor(p position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(p.created + p.id))
}

func decodeCursor(s string) (position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 9 {
		return position{}, fault.Invalidf("cursor", "is not a cursor from this server")
	}
	return position{created: string(raw[:8]), id: string(raw[8:])}, nil
}

// stream walks one index prefix backwards (newest first) from an upper bound.
type stream struct {
	c      *bbolt.Cursor
	prefix []byte
	k      []byte // current key, nil when done
}

func newStream(b *bbolt.Bucket, prefix []byte, below []byte) *stream {
	s := &stream{c: b.Cursor(), prefix: prefix}
	var k []byte
	if below == nil {
		// Start after the last key with this prefix.
		k, _ = s.c.Seek(append(append([]byte{}, prefix...), 0xff))
	} else {
		k, _ = s.c.Seek(below)
	}
	if k == nil {
		k, _ = s.c.Last()
	} else {
		k, _ = s.c.Prev()
	}
	s.set(k)
	return s
}

func (s *stream) set(k []byte) {
	if k != nil && bytes.HasPrefix(k, s.prefix) {
		s.k = k
	} else {
		s.k = nil
	}
}

func (s *stream) next() {
	k, _ := s.c.Prev()
	s.set(k)
}

// pos is the (created, id) suffix of the current key.
func (s *stream) pos() position {
	rest := s.k[len(s.prefix):]
	return position{created: string(rest[:8]), id: string(rest[9:])}
}

func less(a, b position) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

// candidate sources: each is the union of some index prefixes.
type source struct {
	prefixes [][]byte
}

func (t *tx) sourcesOf(merchantID string, q storage.OrderQuery) []source {
	one := func(field string, values []string) source {
		var s source
		for _, v := range values {
			s.prefixes = append(s.prefixes, key(merchantID, field, esc(v), ""))
		}
		return s
	}
	var out []source
	if len(q.StoreIDs) > 0 {
		out = append(out, one(fStore, q.StoreIDs))
	}
	if len(q.OrderReferences) > 0 {
		out = append(out, one(fOrderRef, q.OrderReferences))
	}
	if len(q.MerchantReferences) > 0 {
		out = append(out, one(fMerchRef, q.MerchantReferences))
	}
	if len(q.Status) > 0 {
		out = append(out, one(fStatus, statusStrings(q.Status)))
	}
	for _, s := range q.StatusAnd {
		out = append(out, one(fStatus, []string{string(s)}))
	}
	if len(q.Categories) > 0 {
		var cs []string
		for _, c := range q.Categories {
			cs = append(cs, string(c))
		}
		out = append(out, one(fCategory, cs))
	}
	if q.Q != "" {
		// q matches id, orderReference or merchantReference: the union of the three.
		s := one(fOrderRef, []string{q.Q})
		s.prefixes = append(s.prefixes, one(fMerchRef, []string{q.Q}).prefixes...)
		out = append(out, s)
	}
	return out
}

func statusStrings(ss []order.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// estimate counts the entries of a source, stopping at limit: enough to
// choose the most selective index without reading any index whole.
func (t *tx) estimate(s source, limit int) int {
	n := 0
	for _, p := range s.prefixes {
		c := t.b.Bucket(bIndex).Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && n < limit; k, _ = c.Next() {
			n++
		}
	}
	return n
}

// ListOrders answers from the most selective index among the query's
// filters, walking it newest first from the cursor and checking the other
// filters on each candidate.
func (t *tx) ListOrders(merchantID string, q storage.OrderQuery) (storage.OrderPage, error) {
	size, err := storage.PageSize(q)
	if err != nil {
		return storage.OrderPage{}, err
	}
	var from *position
	if q.Cursor != "" {
		p, err := decodeCursor(q.Cursor)
		if err != nil {
			return storage.OrderPage{}, err
		}
		from = &p
	}
	if len(q.IDs) > 0 || (q.Q != "" && t.b.Bucket(bOrders).Get(key(merchantID, q.Q)) != nil) {
		return t.listByID(merchantID, q, size, from)
	}
	if (!q.ExpiresFrom.IsZero() || !q.ExpiresTo.IsZero()) && len(t.sourcesOf(merchantID, q)) == 0 {
		return t.listByExpiry(merchantID, q, size, from)
	}
	src := source{prefixes: [][]byte{key(merchantID, fAll, "", "")}}
	const probe = 2000
	best := -1
	for _, s := range t.sourcesOf(merchantID, q) {
		if n := t.estimate(s, probe); best < 0 || n < best {
			best, src = n, s
		}
	}
	// Upper bound of the walk: the cursor, or createdTo.
	var upper *position
	if from != nil {
		upper = from
	}
	if !q.CreatedTo.IsZero() {
		ct := position{created: timeKey(q.CreatedTo), id: ""}
		if upper == nil || less(ct, *upper) {
			upper = &ct
		}
	}
	b := t.b.Bucket(bIndex)
	streams := make([]*stream, 0, len(src.prefixes))
	for _, p := range src.prefixes {
		var below []byte
		if upper != nil {
			below = append(append(append([]byte{}, p...), upper.created...), append([]byte{0}, upper.id...)...)
		}
		streams = append(streams, newStream(b, p, below))
	}
	lowest := ""
	if !q.CreatedFrom.IsZero() {
		lowest = timeKey(q.CreatedFrom)
	}
	var page storage.OrderPage
	var last position
	seen := map[string]bool{}
	for {
		// Take the newest position among the streams.
		var top *stream
		for _, s := range streams {
			if s.k != nil && (top == nil || less(top.pos(), s.pos())) {
				top = s
			}
		}
		if top == nil {
			break
		}
		p := top.pos()
		top.next()
		if p.created < lowest {
			break
		}
		if seen[p.id] {
			continue
		}
		seen[p.id] = true
		o, statuses, err := t.loadIndexed(merchantID, p.id)
		if err != nil {
			return storage.OrderPage{}, err
		}
		if o == nil || !storage.Matches(o, statuses, q) {
			continue
		}
		if len(page.Orders) == size {
			page.NextCursor = encodeCursor(last)
			break
		}
		page.Orders = append(page.Orders, o)
		last = p
	}
	return page, nil
}

func (t *tx) loadIndexed(merchantID, id string) (*order.Order, []order.Status, error) {
	var o order.Order
	ok, err := t.get(bOrders, key(merchantID, id), &o)
	if err != nil || !ok {
		return nil, nil, err
	}
	var m meta
	if _, err := t.get(bOrderMeta, key(merchantID, id), &m); err != nil {
		return nil, nil, err
	}
	return &o, m.Statuses, nil
}

// listByID answers a query naming order ids (or a q that is an order id) by
// direct lookups.
func (t *tx) listByID(merchantID string, q storage.OrderQuery, size int, from *position) (storage.OrderPage, error) {
	ids := q.IDs
	if len(ids) == 0 {
		ids = []string{q.Q}
	}
	var hits []*order.Order
	var pos []position
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		o, statuses, err := t.loadIndexed(merchantID, id)
		if err != nil {
			return storage.OrderPage{}, err
		}
		if o == nil || !storage.Matches(o, statuses, q) {
			continue
		}
		hits = append(hits, o)
		pos = append(pos, position{created: timeKey(o.CreatedAt), id: o.ID})
	}
	// A q that equals an order id may also equal another order's reference.
	if len(q.IDs) == 0 {
		q2 := q
		q2.Cursor, q2.Size = "", storage.MaxPageSize
		q2.IDs = nil
		more, err := t.listBySources(merchantID, q2)
		if err != nil {
			return storage.OrderPage{}, err
		}
		for _, o := range more {
			if !seen[o.ID] {
				seen[o.ID] = true
				hits = append(hits, o)
				pos = append(pos, position{created: timeKey(o.CreatedAt), id: o.ID})
			}
		}
	}
	return paginate(hits, pos, size, from), nil
}

// listBySources runs the index walk for q without the id shortcut.
func (t *tx) listBySources(merchantID string, q storage.OrderQuery) ([]*order.Order, error) {
	src := t.sourcesOf(merchantID, q)
	var out []*order.Order
	for _, s := range src[len(src)-1:] { // the q source is last
		for _, p := range s.prefixes {
			c := t.b.Bucket(bIndex).Cursor()
			for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
				id := string(k[len(p)+9:])
				o, statuses, err := t.loadIndexed(merchantID, id)
				if err != nil {
					return nil, err
				}
				if o != nil && storage.Matches(o, statuses, q) {
					out = append(out, o)
				}
			}
		}
	}
	return out, nil
}

// listByExpiry answers an expiry-range query from the expiry index.
func (t *tx) listByExpiry(merchantID string, q storage.OrderQuery, size int, from *position) (storage.OrderPage, error) {
	p := key(merchantID, fExpires, "", "")
	c := t.b.Bucket(bIndex).Cursor()
	start := p
	if !q.ExpiresFrom.IsZero() {
		start = append(append([]byte{}, p...), timeKey(q.ExpiresFrom)...)
	}
	var hits []*order.Order
	var pos []position
	for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		rest := k[len(p):]
		if !q.ExpiresTo.IsZero() && string(rest[:8]) >= timeKey(q.ExpiresTo) {
			break
		}
		id := string(rest[18:])
		o, statuses, err := t.loadIndexed(merchantID, id)
		if err != nil {
			return storage.OrderPage{}, err
		}
		if o != nil && storage.Matches(o, statuses, q) {
			hits = append(hits, o)
			pos = append(pos, position{created: string(rest[9:17]), id: id})
		}
	}
	return paginate(hits, pos, size, from), nil
}

// paginate orders hits newest first and cuts the page after from.
func paginate(hits []*order.Order, pos []position, size int, from *position) storage.OrderPage {
	idx := make([]int, len(hits))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return less(pos[idx[b]], pos[idx[a]]) })
	var page storage.OrderPage
	for _, i := range idx {
		if from != nil && !less(pos[i], *from) {
			continue
		}
		if len(page.Orders) == size {
			page.NextCursor = encodeCursor(pos[idx[indexOf(idx, i)-1]])
			break
		}
		page.Orders = append(page.Orders, hits[i])
	}
	return page
}

func indexOf(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}
