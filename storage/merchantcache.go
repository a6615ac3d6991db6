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
	n atomic.Int64
}

type merchantEntry struct {
	raw []byte
	m   *Merchant
	// used is set by each hit and cleared by an eviction passing over the
	// entry: a merchant read between two evictions keeps its place.
	used atomic.Bool
}

// maxCachedMerchants bounds the cache. Past it, each newly decoded merchant
// takes the place of one not read since the last eviction (evict): a
// process that outlives its first merchants keeps caching the active ones.
const maxCachedMerchants = 10000

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
	if _, loaded := c.m.Swap(key, e); !loaded && c.n.Add(1) > maxCachedMerchants {
		c.evict(key)
	}
	return m, nil
}

// evict removes one entry other than keep, the first one not read since an
// eviction last passed over it (a second chance, as in the CLOCK page
// replacement): the scan clears the marks it passes, so a second pass
// always finds one. Entries replaced meanwhile are left to their writer.
func (c *MerchantCache) evict(keep string) {
	for range 2 {
		done := false
		c.m.Range(func(k, v any) bool {
			e := v.(*merchantEntry)
			if k == keep || e.used.Swap(false) {
				return true
			}
			if c.m.CompareAndDelete(k, v) {
				c.n.Add(-1)
				done = true
				return false
			}
			return true
		})
		if done {
			return
		}
	}
}
