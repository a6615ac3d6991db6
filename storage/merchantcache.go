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
}

// maxCachedMerchants bounds the cache; merchants past it are decoded each time.
const maxCachedMerchants = 10000

// Decode returns the merchant encoded in raw, which a store read under key
// (any string naming the row, e.g. its id): a private copy of the one
// decoded from the same bytes before, or a newly decoded one.
func (c *MerchantCache) Decode(key string, raw []byte) (*Merchant, error) {
	if v, ok := c.m.Load(key); ok {
		if e := v.(*merchantEntry); bytes.Equal(e.raw, raw) {
			return e.m.Clone(), nil
		}
	}
	m := new(Merchant)
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fault.Internalf(err, "decode merchant %s", key)
	}
	e := &merchantEntry{raw: bytes.Clone(raw), m: m.Clone()}
	if _, loaded := c.m.Swap(key, e); !loaded && c.n.Add(1) > maxCachedMerchants {
		c.m.Delete(key)
		c.n.Add(-1)
	}
	return m, nil
}
