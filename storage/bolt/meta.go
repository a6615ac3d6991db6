package bolt

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// entry is one equality index entry of an order: a kind and its value.
type entry struct {
	kind  byte
	value string
}

// meta is what the store keeps beside an order: its version (so that an
// update checks it without decoding the order), the times its range indexes
// use, whether the expiry job must look at it, and the equality index entries
// written for it. List filters are checked against meta alone, and only the
// orders that pass are decoded.
type meta struct {
	version   int64
	created   time.Time
	expires   time.Time
	expirable bool
	entries   []entry // kind-ordered as metaOf builds them
}

// metaOf computes the meta of o. Its statuses are those as of its last
// change (updatedAt), as on the other stores: a status that time alone brings
// (expired) enters the index when the expiry job marks the order, whatever
// write without an event came between.
func metaOf(o *order.Order) meta {
	m := meta{version: o.Version, created: o.CreatedAt, expires: o.ExpiresAt,
		expirable: !o.ExpiredMarked && !o.Cancelled && len(o.Uncaptured.Lines) > 0}
	m.entries = append(m.entries,
		entry{kindCreated, ""},
		entry{kindStore, o.StoreID},
		entry{kindOrderRef, o.OrderReference},
		entry{kindMerchantRef, o.MerchantReference},
		entry{kindCategory, string(o.PaymentMethod.Category())})
	for _, s := range o.Statuses(o.UpdatedAt) {
		m.entries = append(m.entries, entry{kindStatus, string(s)})
	}
	return m
}

const metaFormat = 1

func (m *meta) encode() []byte {
	b := []byte{metaFormat}
	b = binary.AppendUvarint(b, uint64(m.version))
	b = putTime(b, m.created)
	b = putTime(b, m.expires)
	if m.expirable {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(m.entries)))
	for _, e := range m.entries {
		b = append(b, e.kind)
		b = lp(b, e.value)
	}
	return b
}

var errMeta = fault.Internalf(nil, "corrupt order record")

// encodeOrder is the stored form of an order: its meta record, length
// prefixed, then its JSON. Keeping both in one value costs one B-tree entry
// (one dirty page) per order instead of two, and a list reads the meta of a
// candidate without decoding its JSON.
func encodeOrder(m *meta, js []byte) []byte {
	mb := m.encode()
	b := make([]byte, 0, binary.MaxVarintLen64+len(mb)+len(js))
	b = binary.AppendUvarint(b, uint64(len(mb)))
	b = append(b, mb...)
	return append(b, js...)
}

// marshalOrder is encodeOrder(m, json.Marshal(o)) made with one allocation
// of the record instead of two (json.Marshal's copy out of its buffer, then
// encodeOrder's): a json.Encoder writes o's JSON from its own pooled buffer
// straight after the meta record. js is the JSON within v.
func marshalOrder(m *meta, o *order.Order) (v, js []byte, err error) {
	mb := m.encode()
	w := recordWriter{b: binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(mb)), uint64(len(mb)))}
	w.b = append(w.b, mb...)
	head := len(w.b)
	if err := json.NewEncoder(&w).Encode(o); err != nil {
		return nil, nil, err
	}
	// Encode is json.Marshal's output followed by a newline.
	v = w.b[:len(w.b)-1]
	return v, v[head:], nil
}

// recordWriter appends what is written to b, growing b to the exact size
// of each write: an Encoder writes its value in one piece.
type recordWriter struct{ b []byte }

func (w *recordWriter) Write(p []byte) (int, error) {
	w.b = append(slices.Grow(w.b, len(p)), p...)
	return len(p), nil
}

// splitOrder separates a stored order into its meta record and its JSON.
func splitOrder(raw []byte) (metaBytes, js []byte, err error) {
	l, n := binary.Uvarint(raw)
	if n <= 0 || uint64(len(raw)-n) < l {
		return nil, nil, errMeta
	}
	return raw[n : n+int(l)], raw[n+int(l):], nil
}

// orderMeta decodes the meta record of a stored order.
func orderMeta(raw []byte) (meta, error) {
	mb, _, err := splitOrder(raw)
	if err != nil {
		return meta{}, err
	}
	return decodeMeta(mb)
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	if len(b) < 1 || b[0] != metaFormat {
		return m, errMeta
	}
	b = b[1:]
	v, n := binary.Uvarint(b)
	if n <= 0 || len(b) < n+2*timeLen+1 {
		return m, errMeta
	}
	m.version = int64(v)
	b = b[n:]
	m.created, m.expires = getTime(b), getTime(b[timeLen:])
	m.expirable = b[2*timeLen] == 1
	b = b[2*timeLen+1:]
	cnt, n := binary.Uvarint(b)
	if n <= 0 || cnt > uint64(len(b)) {
		return m, errMeta
	}
	b = b[n:]
	m.entries = make([]entry, 0, cnt)
	for range cnt {
		if len(b) < 1 {
			return m, errMeta
		}
		kind := b[0]
		l, n := binary.Uvarint(b[1:])
		if n <= 0 || uint64(len(b)-1-n) < l {
			return m, errMeta
		}
		m.entries = append(m.entries, entry{kind, string(b[1+n : 1+n+int(l)])})
		b = b[1+n+int(l):]
	}
	return m, nil
}

// has reports whether the order has index entry (kind, value).
func (m *meta) has(kind byte, value string) bool {
	return slices.Contains(m.entries, entry{kind, value})
}

// hasAny reports whether the order has (kind, v) for one of values.
func (m *meta) hasAny(kind byte, values []string) bool {
	for _, v := range values {
		if m.has(kind, v) {
			return true
		}
	}
	return false
}

// value returns the order's single value of an equality kind.
func (m *meta) value(kind byte) string {
	for _, e := range m.entries {
		if e.kind == kind {
			return e.value
		}
	}
	return ""
}

// indexKey is an index key and, for equality kinds, the key of the counter
// of entries under the same (merchant, kind, value).
type indexKey struct {
	key   []byte
	count []byte
}

func (m *meta) indexKeys(merchantID, orderID string) []indexKey {
	pos := position(m.created, orderID)
	out := make([]indexKey, 0, len(m.entries)+1)
	for _, e := range m.entries {
		p := valuePrefix(merchantID, e.kind, e.value)
		ik := indexKey{key: append(slices.Clip(p), pos...), count: p}
		if e.kind == kindOrderRef {
			// kassa mints order references, one per order: a counter
			// would always say 1 and cost a write per order.
			ik.count = nil
		}
		out = append(out, ik)
	}
	ek := putTime(expiresPrefix(merchantID), m.expires)
	out = append(out, indexKey{key: append(ek, pos...)})
	return out
}
