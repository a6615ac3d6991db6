// Package ordercache keeps rendered order responses, so that reading an order
// that has not changed costs a version lookup instead of decoding the stored
// order, rendering it and encoding the JSON again.
//
// An entry is the response body of one order at one version. It is served
// only for that version (the caller reads the stored version in its own
// transaction, so a change on any replica is seen) and only while the time
// of the read is on the same side of the order's expiry as the time it was
// rendered at: expiry is the one thing a response depends on besides the
// order itself (statuses and available actions; see TestResponseDependsOnTimeOnlyThroughExpiry).
// A response that embeds time-limited links (signed document links) is also
// served only until the wall-clock time its caller says they change at.
package ordercache

import (
	"hash/maphash"
	"sync"
	"time"
	"unsafe"

	"github.com/kassahq/kassa/order"
)

// DefaultMaxBytes bounds the memory of the entries a cache holds when New is given 0.
const DefaultMaxBytes = 64 << 20

const shards = 16

// Cache is safe for concurrent use. A nil *Cache caches nothing.
type Cache struct {
	seed   maphash.Seed
	budget int64 // per shard
	shard  [shards]shard
}

type shard struct {
	mu    sync.Mutex
	m     map[key]*entry
	bytes int64
}

type key struct{ merchantID, orderID string }

type entry struct {
	version int64
	body    []byte
	// probe carries the fields order.Order.Expired reads, so that the
	// expiry of the cached version is decided by the same code as a render.
	probe   order.Order
	expired bool // Expired at render time
	// until is the wall-clock time from which body is no longer served
	// (zero: no limit).
	until time.Time
}

// entryOverhead is the memory an entry takes besides its body and key: the
// entry (its probe is a whole order.Order), the probe's one line and a map
// slot. It is counted with the body: a small order's body is about 2.5 KB,
// and counting bodies alone let the entries take 1.6 times the budget.
const entryOverhead = int64(unsafe.Sizeof(entry{}) + unsafe.Sizeof(order.Line{}) + 64)

// cost is the memory an entry of body under k takes.
func cost(k key, body []byte) int64 {
	return int64(len(body)+len(k.merchantID)+len(k.orderID)) + entryOverhead
}

// New returns a cache holding entries of at most about maxBytes (0: the
// default; negative: no cache, nil).
func New(maxBytes int64) *Cache {
	if maxBytes < 0 {
		return nil
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	c := &Cache{seed: maphash.MakeSeed(), budget: max(maxBytes/shards, 1)}
	for i := range c.shard {
		c.shard[i].m = make(map[key]*entry)
	}
	return c
}

func (c *Cache) shardOf(k key) *shard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(k.merchantID)
	h.WriteByte(0)
	h.WriteString(k.orderID)
	return &c.shard[h.Sum64()%shards]
}

// Get returns the body rendered for the order's stored version, if it is
// held and still what a render at now (the order's clock) and wall (the
// wall clock, see Put) would produce. The caller must not modify it.
func (c *Cache) Get(merchantID, orderID string, version int64, now, wall time.Time) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	k := key{merchantID, orderID}
	s := c.shardOf(k)
	s.mu.Lock()
	e := s.m[k]
	s.mu.Unlock()
	if e == nil || e.version != version || e.probe.Expired(now) != e.expired {
		return nil, false
	}
	if !e.until.IsZero() && !wall.Before(e.until) {
		return nil, false
	}
	return e.body, true
}

// Put keeps body, the response of o rendered at renderedAt (the order's
// clock, which decides expiry). until, when not zero, is the wall-clock time
// from which body must no longer be served, because something in it (a
// signed link) would then be rendered differently. An entry for a newer
// version is not replaced by an older one (two changes may finish in either
// order).
func (c *Cache) Put(o *order.Order, renderedAt time.Time, until time.Time, body []byte) {
	if c == nil {
		return
	}
	k := key{o.MerchantID, o.ID}
	if cost(k, body) > c.budget {
		return
	}
	e := &entry{version: o.Version, body: body, expired: o.Expired(renderedAt), until: until}
	e.probe.ExpiresAt, e.probe.Cancelled, e.probe.ExpiredMarked = o.ExpiresAt, o.Cancelled, o.ExpiredMarked
	if len(o.Uncaptured.Lines) > 0 {
		e.probe.Uncaptured.Lines = make([]order.Line, 1)
	}
	s := c.shardOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[k]; old != nil {
		if old.version > e.version {
			return
		}
		s.bytes -= cost(k, old.body)
	}
	s.m[k] = e
	s.bytes += cost(k, body)
	// Over budget: drop entries in map order, which Go randomizes; a
	// random victim is as good as LRU for reads spread over many orders and
	// costs no bookkeeping on the read path.
	for victim, ve := range s.m {
		if s.bytes <= c.budget {
			break
		}
		if victim == k {
			continue
		}
		s.bytes -= cost(victim, ve.body)
		delete(s.m, victim)
	}
}

// Len is the number of entries, for tests and metrics.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shard {
		c.shard[i].mu.Lock()
		n += len(c.shard[i].m)
		c.shard[i].mu.Unlock()
	}
	return n
}
