package ordercache_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/ordercache"
)

// randomOrder is an order after a random life: some lines captured, maybe
// the rest cancelled, maybe the expiry extended, maybe marked expired.
func randomOrder(t *rapid.T) *order.Order {
	f := ordertest.New()
	n := rapid.IntRange(1, 8).Draw(t, "lines")
	var lines []order.LineInput
	for i := range n {
		lines = append(lines, ordertest.Line(fmt.Sprint("l", i), rapid.Int64Range(1, 3).Draw(t, "qty"), rapid.Int64Range(1, 50000).Draw(t, "price"), 2500))
	}
	o := f.Order(t, lines...)
	if k := rapid.IntRange(0, n).Draw(t, "captured"); k > 0 {
		var req capture.PartialRequest
		var total int64
		for _, l := range o.Uncaptured.Lines[:k] {
			req.OrderLines = append(req.OrderLines, ordertest.ByID(l.ID))
			total += l.TotalAmount
		}
		req.TotalCaptureAmount = &total
		if _, err := capture.Partial(o, &req, f.Env()); err != nil {
			t.Fatalf("capture: %v", err)
		}
	}
	if rapid.Bool().Draw(t, "extend") {
		_ = o.ExtendExpiry(f.Env()) // not offered on every order; either way is a valid life
	}
	switch rapid.IntRange(0, 2).Draw(t, "end") {
	case 1:
		_ = o.Cancel(f.Env())
	case 2:
		o.ExpiredMarked = true
	}
	return o
}

func render(o *order.Order, at time.Time) []byte {
	b, err := json.Marshal(o.Response(at, order.DefaultPolicy(), nil))
	if err != nil {
		panic(err)
	}
	return b
}

// TestResponseDependsOnTimeOnlyThroughExpiry is what makes the cache sound:
// at any two times on the same side of an order's expiry, the response is
// byte for byte the same.
func TestResponseDependsOnTimeOnlyThroughExpiry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := randomOrder(t)
		at := func(name string) time.Time {
			return o.ExpiresAt.Add(time.Duration(rapid.Int64Range(-72, 72).Draw(t, name)) * time.Hour)
		}
		t1, t2 := at("t1"), at("t2")
		if o.Expired(t1) == o.Expired(t2) && !bytes.Equal(render(o, t1), render(o, t2)) {
			t.Fatalf("same expiry state at %v and %v, different responses", t1, t2)
		}
	})
}

// TestCacheServesOnlyWhatARenderWouldProduce: random orders, versions and
// read times; whatever Get returns equals a fresh render at the read time.
func TestCacheServesOnlyWhatARenderWouldProduce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := ordercache.New(1 << 20)
		o := randomOrder(t)
		o.MerchantID, o.Version = "m", rapid.Int64Range(1, 3).Draw(t, "version")
		renderedAt := o.ExpiresAt.Add(time.Duration(rapid.Int64Range(-48, 48).Draw(t, "rendered")) * time.Hour)
		c.Put(o, renderedAt, time.Time{}, render(o, renderedAt))
		for i := range 5 {
			now := o.ExpiresAt.Add(time.Duration(rapid.Int64Range(-48, 48).Draw(t, fmt.Sprint("now", i))) * time.Hour)
			version := rapid.Int64Range(1, 3).Draw(t, fmt.Sprint("stored", i))
			b, ok := c.Get("m", o.ID, version, now, now)
			if ok && (version != o.Version || !bytes.Equal(b, render(o, now))) {
				t.Fatalf("served a stale body: version %d (cached %d) at %v", version, o.Version, now)
			}
			if !ok && version == o.Version && o.Expired(now) == o.Expired(renderedAt) {
				t.Fatalf("missed a valid entry")
			}
		}
	})
}

func TestCacheKeepsNewestVersionAndBudget(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	o.MerchantID = "m"
	now := o.CreatedAt
	c := ordercache.New(256 * 1024) // 16 KiB per shard
	o.Version = 2
	c.Put(o, now, time.Time{}, []byte("v2"))
	o.Version = 1
	c.Put(o, now, time.Time{}, []byte("v1"))
	if b, ok := c.Get("m", o.ID, 2, now, now); !ok || string(b) != "v2" {
		t.Fatalf("newer version replaced by an older one: %q %v", b, ok)
	}
	if _, ok := c.Get("other", o.ID, 2, now, now); ok {
		t.Fatal("another merchant's read hit")
	}
	for i := range 2000 {
		p := *o
		p.ID = fmt.Sprint("order-", i)
		c.Put(&p, now, time.Time{}, make([]byte, 1000))
	}
	if n := c.Len(); n > 256*1024/1000+16 || n == 0 {
		t.Fatalf("%d entries of 1000 bytes in a 256 KiB cache", n)
	}
	var nilCache *ordercache.Cache
	nilCache.Put(o, now, time.Time{}, []byte("x"))
	if _, ok := nilCache.Get("m", o.ID, 1, now, now); ok || ordercache.New(-1) != nil {
		t.Fatal("a disabled cache served something")
	}
}

// A body holding signed links is served up to, not from, the wall-clock time
// its links change at, whatever the order's own clock says.
func TestCacheServesLinkedBodyOnlyUntilItsLinksChange(t *testing.T) {
	o := ordertest.New().Order(t)
	o.MerchantID, o.Version = "m", 3
	now := o.CreatedAt
	until := time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)
	c := ordercache.New(0)
	c.Put(o, now, until, []byte("links of 10:00"))
	if b, ok := c.Get("m", o.ID, 3, now, until.Add(-time.Nanosecond)); !ok || string(b) != "links of 10:00" {
		t.Fatalf("before the links change: %q %v", b, ok)
	}
	for _, wall := range []time.Time{until, until.Add(time.Hour)} {
		if b, ok := c.Get("m", o.ID, 3, now, wall); ok {
			t.Fatalf("served %q at %v, after its links changed at %v", b, wall, until)
		}
	}
	c.Put(o, now, time.Time{}, []byte("no links"))
	if b, ok := c.Get("m", o.ID, 3, now, until.Add(24*time.Hour)); !ok || string(b) != "no links" {
		t.Fatalf("a body without links is not limited by the wall clock: %q %v", b, ok)
	}
}

// Puts and gets of the same orders at once: a get answers only the body put
// for the version asked (run under -race by .ci/run).
func TestCacheConcurrentPutsAndGets(t *testing.T) {
	c := ordercache.New(32 << 10) // small: eviction runs too
	base := ordertest.New().Order(t)
	base.MerchantID = "m"
	now := base.CreatedAt
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 2000 {
				o := *base
				o.ID = fmt.Sprint("o", i%5)
				o.Version = int64(1 + (i*3+w)%4)
				body := []byte(fmt.Sprintf("%s v%d", o.ID, o.Version))
				if w%2 == 0 {
					c.Put(&o, now, time.Time{}, body)
					continue
				}
				if b, ok := c.Get("m", o.ID, o.Version, now, now); ok && !bytes.Equal(b, body) {
					done <- fmt.Errorf("asked %s, got %q", body, b)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCacheMemoryStaysWithinBudget: what a full cache holds, entries and
// all, stays near its budget. Counting bodies alone let a cache of small
// orders' responses (about 2.4 KB each) take 1.6 times its budget, each
// entry holding an order.Order of its own besides its body.
func TestCacheMemoryStaysWithinBudget(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Widget", 1, 10000, 2500))
	o.MerchantID = "m"
	now := o.CreatedAt
	body := render(o, now)
	const budget = 16 << 20
	before := heapInUse()
	c := ordercache.New(budget)
	for i := range 3 * budget / len(body) {
		p := o.Clone()
		p.ID = fmt.Sprintf("order-%08d", i)
		c.Put(p, now, time.Time{}, bytes.Clone(body))
	}
	used := heapInUse() - before
	runtime.KeepAlive(c)
	if used > budget*5/4 {
		t.Fatalf("a cache of %d MiB holds %.1f MiB (%d entries of %d-byte bodies)", budget>>20, float64(used)/(1<<20), c.Len(), len(body))
	}
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestCacheHoldsItsBudgetsWorth: the cache's count of what it holds stays
// true through evictions and replacements, so it keeps about its budget's
// worth of entries (not one per shard, nor less after an order changed many
// times), always the one just put, and never a body larger than a shard may
// hold.
func TestCacheHoldsItsBudgetsWorth(t *testing.T) {
	o := ordertest.New().Order(t)
	o.MerchantID, o.Version = "m", 1
	now := o.CreatedAt
	c := ordercache.New(256 << 10) // 16 KiB per shard
	body := make([]byte, 1000)
	fill := func() {
		for i := range 2000 {
			p := *o
			p.ID = fmt.Sprintf("order-%04d", i)
			c.Put(&p, now, time.Time{}, body)
			if _, ok := c.Get("m", p.ID, 1, now, now); !ok {
				t.Fatalf("%s: the entry just put was evicted", p.ID)
			}
		}
	}
	fill()
	full := c.Len()
	if full < 2*16 {
		t.Fatalf("a full cache holds %d entries of 1000 bytes, about one per shard", full)
	}
	p := *o
	p.ID = "order-9999"
	for v := range int64(500) {
		p.Version = 2 + v
		c.Put(&p, now, time.Time{}, body)
	}
	fill()
	if n := c.Len(); n != full {
		t.Fatalf("after one order changed 500 times the cache holds %d entries, want %d", n, full)
	}
	big := *o
	big.ID = "order-big"
	c.Put(&big, now, time.Time{}, make([]byte, 17<<10))
	if _, ok := c.Get("m", big.ID, 1, now, now); ok {
		t.Fatal("held a body larger than a shard's budget")
	}
}
