package ordercache

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// Decoded keeps decoded orders by the exact bytes they were decoded from, so
// that a store reading an unchanged order hands out a copy instead of
// running the JSON decoder again. The stored bytes are the key's proof: an
// entry is used only when the bytes read now equal the bytes it was made
// from, whatever transactions, rollbacks or replicas came in between.
// A nil *Decoded decodes every time.
type Decoded struct {
	budget int64 // per shard
	shard  [shards]decodedShard
	misses atomic.Int64
}

type decodedShard struct {
	mu    sync.Mutex
	m     map[string]*decodedEntry
	bytes int64
}

type decodedEntry struct {
	raw []byte
	o   *order.Order
}

// NewDecoded returns a cache using about maxBytes (0: the default;
// negative: none, nil).
func NewDecoded(maxBytes int64) *Decoded {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	d := &Decoded{budget: max(maxBytes/shards, 1)}
	for i := range d.shard {
		d.shard[i].m = make(map[string]*decodedEntry)
	}
	return d
}

// decodedCost estimates the memory of an entry: the bytes kept and the
// decoded order, which takes about twice its JSON.
func decodedCost(raw []byte) int64 { return 3 * int64(len(raw)) }

func shardIndex(key string) int {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % shards)
}

// Order decodes js, the stored JSON of the order under key, or returns a
// private copy of the order decoded from the same bytes before. The caller
// may modify the result; js is not retained unless copied.
func (d *Decoded) Order(key string, js []byte) (*order.Order, error) {
	if d == nil {
		return decode(js)
	}
	s := &d.shard[shardIndex(key)]
	s.mu.Lock()
	e := s.m[key]
	s.mu.Unlock()
	if e != nil && bytes.Equal(e.raw, js) {
		return e.o.Clone(), nil
	}
	d.misses.Add(1)
	o, err := decode(js)
	if err != nil {
		return nil, err
	}
	d.keep(key, bytes.Clone(js), o.Clone(), false)
	return o, nil
}

// Misses counts the reads that ran the decoder, for tests and metrics.
func (d *Decoded) Misses() int64 {
	if d == nil {
		return 0
	}
	return d.misses.Load()
}

// Written records that js, which the caller must not modify afterwards, is
// the encoding of o, just written under key: the next read of those bytes
// skips the decoder. Safe whether or not the write commits, since an entry
// is only used for identical bytes.
func (d *Decoded) Written(key string, js []byte, o *order.Order) {
	if d != nil {
		d.keep(key, js, o.Clone(), true)
	}
}

// keep stores an entry. A read does not replace an entry of a newer version:
// readers that started before a write commits still see the older bytes,
// and under load they would otherwise keep evicting what the writer (whose
// next change reads the new bytes) has just put. The cost: a write that
// rolled back leaves a newer version no read can replace, so reads of that
// order decode until its next committed change (or eviction). Never a wrong
// answer, since an entry serves only identical bytes.
func (d *Decoded) keep(key string, js []byte, o *order.Order, written bool) {
	cost := decodedCost(js)
	if cost > d.budget {
		return
	}
	s := &d.shard[shardIndex(key)]
	e := &decodedEntry{raw: js, o: o}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[key]; old != nil {
		if !written && old.o.Version > o.Version {
			return
		}
		s.bytes -= decodedCost(old.raw)
	}
	s.m[key] = e
	s.bytes += cost
	for victim, ve := range s.m { // random eviction, as in Cache.Put
		if s.bytes <= d.budget {
			break
		}
		if victim == key {
			continue
		}
		s.bytes -= decodedCost(ve.raw)
		delete(s.m, victim)
	}
}

func decode(js []byte) (*order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(js, &o); err != nil {
		return nil, fault.Internalf(err, "decode order")
	}
	return &o, nil
}
