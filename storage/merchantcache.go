package storage

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/kassahq/kassa/fault"
)

// MerchantCache keeps decoded merchants by the exact bytes a store read:
// every request authenticates by reading its merchant, and the JSON decoder
// was a quarter of a cached GET. An entry is used only for identical bytes,
// so a change, made by this process or another one on the same database, is
// never hidden. The zero value is ready to use and safe for concurrent use.
type MerchantCache struct {
	m sync.Map // key → *merchantEntry

	// mu guards ring and hand, which only a newly decoded merchant takes:
	// a hit locks nothing. ring holds each key of m once, in the order the
	// eviction's hand goes round (a key is in m before it is in ring, and
	// leaves ring only with its entry), so len(ring) is the count.
	mu   sync.Mutex
	ring []string
	hand int
}

type merchantEntry struct {
	raw []byte
	m   *Merchant
	// used is set by each hit and cleared by the eviction's hand passing
	// over the entry: a merchant read between two passes keeps its place.
	used atomic.Bool
}

// maxCachedMerchants bounds the cache. Past it, each newly decoded merchant
// takes the place of one not read since the eviction's hand last passed it
// (evict): a process that outlives its first merchants keeps caching the
// active ones.
const maxCachedMerchants = 10000

// evictScan bounds the entries one eviction looks at: past evictScan-1
// entries read lately the next one goes, read lately or not. (A Range from
// the map's start, as eviction was, passed over all 10 000 each time when
// all were read lately: about 0.3 ms a miss, docs/benchmarks.md.)
const evictScan = 32

// Decode returns the merchant encoded in raw, which a store read under key
// (any string naming the row, e.g. its id): a private copy of the one
// decoded from the same bytes before, or a newly decoded one.
func (c *MerchantCache) Decode(key string, raw []byte) (*Merchant, error) {
	if v, ok := c.m.Load(key); ok {
		if e := v.(*merchantEntry); bytes.Equal(e.raw, raw) {
			if !e.used.Load() { // a busy merchant's hits do not all write
				e.used.Store(true)
			}
			return e.m.Clone(), nil
		}
	}
	m := new(Merchant)
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fault.Internalf(err, "decode merchant %s", key)
	}
	e := &merchantEntry{raw: bytes.Clone(raw), m: m.Clone()}
	if _, loaded := c.m.Swap(key, e); !loaded {
		c.add(key)
	}
	return m, nil
}

// add puts key, new in m, in the eviction order: at its end while the cache
// has room, else in the place of the entry evict removes.
func (c *MerchantCache) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ring) < maxCachedMerchants {
		c.ring = append(c.ring, key)
		return
	}
	c.ring[c.evict()] = key
}

// evict removes one entry and returns its place in ring (c.mu held): the
// first from the hand on not read since the hand last passed over it (a
// second chance, as in the CLOCK page replacement), clearing the marks it
// passes, and the evictScan-th when all before it were read. The hand goes
// on from there, so evictions share the scanning rather than each passing
// over the same entries. The entry is deleted whatever its version: a
// newer one swapped in meanwhile is only decoded again when next read.
func (c *MerchantCache) evict() int {
	for range evictScan - 1 {
		if v, ok := c.m.Load(c.ring[c.hand]); !ok || !v.(*merchantEntry).used.Swap(false) {
			break
		}
		c.hand = (c.hand + 1) % len(c.ring)
	}
	at := c.hand
	c.m.Delete(c.ring[at])
	c.hand = (at + 1) % len(c.ring)
	return at
}
