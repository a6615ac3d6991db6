package ordercache_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/ordercache"
)

// TestDecodedIsAPrivateCopyOfTheSameBytes: an order served from the cache
// encodes to exactly the bytes it came from, changing it does not change
// what the next reader gets, and other bytes under the same key are decoded
// afresh.
func TestDecodedIsAPrivateCopyOfTheSameBytes(t *testing.T) {
	d := ordercache.NewDecoded(1 << 20)
	rapid.Check(t, func(t *rapid.T) {
		o := randomOrder(t)
		js, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		key := "m/" + o.ID
		for i := range 3 {
			got, err := d.Order(key, js)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(got)
			if !bytes.Equal(again, js) {
				t.Fatalf("read %d: re-encoded order differs from its bytes", i)
			}
			// A caller scribbling over its copy must not reach the cache.
			got.Metadata = map[string]string{"x": "y"}
			got.Events = append(got.Events[:0], order.Event{Type: "scribbled"})
			if len(got.Uncaptured.Lines) > 0 {
				got.Uncaptured.Lines[0].Description = "scribbled"
			}
			if len(got.Captured) > 0 {
				got.Captured[0].Lines[0].Quantity = 999
			}
			got.Customer.Email = "scribbled"
		}
		other := *o
		other.MerchantReference = "changed"
		js2, _ := json.Marshal(&other)
		got, err := d.Order(key, js2)
		if err != nil || got.MerchantReference != "changed" {
			t.Fatalf("other bytes under the same key served the old order: %q %v", got.MerchantReference, err)
		}
	})
	// Written keeps a copy: the writer changing its order afterwards (as a
	// rolled-back or continuing transaction may) does not change the entry.
	o := &order.Order{ID: "w", MerchantReference: "written"}
	js, _ := json.Marshal(o)
	d.Written("m/w", js, o)
	o.MerchantReference = "changed after the write"
	if got, err := d.Order("m/w", js); err != nil || got.MerchantReference != "written" {
		t.Fatalf("written entry: %q %v", got.MerchantReference, err)
	}
	var off *ordercache.Decoded
	off.Written("k", js, o)
	if _, err := off.Order("k", []byte(`{"id":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Order("k", []byte(`{"id":`)); err == nil {
		t.Fatal("malformed JSON decoded")
	}
}

// A reader that started before a write committed reads the older bytes; it
// must not evict the written version, which the writer's next change reads.
func TestDecodedReadOfOlderVersionKeepsTheWrittenOne(t *testing.T) {
	d := ordercache.NewDecoded(1 << 20)
	o := &order.Order{ID: "o1", MerchantID: "m", Version: 1, Metadata: map[string]string{"v": "1"}}
	v1, _ := json.Marshal(o)
	if _, err := d.Order("m/o1", v1); err != nil || d.Misses() != 1 {
		t.Fatalf("first read: %v, %d misses", err, d.Misses())
	}
	o2 := o.Clone()
	o2.Version, o2.Metadata["v"] = 2, "2"
	v2, _ := json.Marshal(o2)
	d.Written("m/o1", v2, o2)
	if got, err := d.Order("m/o1", v1); err != nil || got.Version != 1 || d.Misses() != 2 {
		t.Fatalf("stale reader: %v %v, %d misses", got, err, d.Misses())
	}
	got, err := d.Order("m/o1", v2)
	if err != nil || got.Version != 2 || got.Metadata["v"] != "2" {
		t.Fatalf("writer's next read: %+v %v", got, err)
	}
	if d.Misses() != 2 {
		t.Fatalf("the stale read evicted the written version: %d misses, want 2", d.Misses())
	}
	// A newer version read (written elsewhere, another replica) replaces it.
	o3 := o2.Clone()
	o3.Version = 3
	v3, _ := json.Marshal(o3)
	d.Order("m/o1", v3)
	d.Order("m/o1", v3)
	if d.Misses() != 3 {
		t.Fatalf("newer version read was not kept: %d misses, want 3", d.Misses())
	}
}

// Readers and writers of the same keys at once: every read returns the order
// its bytes encode, never another version's (run under -race by .ci/run).
func TestDecodedConcurrentReadersAndWriters(t *testing.T) {
	d := ordercache.NewDecoded(64 << 10) // small: eviction runs too
	versions := make([][]byte, 6)
	orders := make([]*order.Order, len(versions))
	for v := range versions {
		orders[v] = &order.Order{ID: "o", MerchantID: "m", Version: int64(v + 1), Metadata: map[string]string{"v": string(rune('a' + v))}}
		versions[v], _ = json.Marshal(orders[v])
	}
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 2000 {
				v := (i*7 + w) % len(versions)
				key := []string{"m/o", "m/p", "m/q"}[i%3]
				if w%2 == 0 {
					d.Written(key, versions[v], orders[v])
					continue
				}
				got, err := d.Order(key, versions[v])
				if err != nil {
					done <- err
					return
				}
				if got.Version != int64(v+1) || got.Metadata["v"] != string(rune('a'+v)) {
					done <- fmt.Errorf("read version %d bytes, got version %d %q", v+1, got.Version, got.Metadata["v"])
					return
				}
				got.Metadata["v"] = "scribbled"
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

// TestDecodedDoesNotRetainTheCallersBytes: a store may reuse the buffer it
// read an order into (bbolt's memory map, a reused row buffer); the cache
// must have copied the bytes it compares, or it would serve the order
// decoded from the old bytes for whatever the buffer holds next.
func TestDecodedDoesNotRetainTheCallersBytes(t *testing.T) {
	d := ordercache.NewDecoded(1 << 20)
	js1, _ := json.Marshal(&order.Order{ID: "o", MerchantID: "m", Version: 1, Metadata: map[string]string{"v": "a"}})
	js2, _ := json.Marshal(&order.Order{ID: "o", MerchantID: "m", Version: 1, Metadata: map[string]string{"v": "b"}})
	buf := bytes.Clone(js1)
	if got, err := d.Order("m/o", buf); err != nil || got.Metadata["v"] != "a" {
		t.Fatalf("first read: %+v %v", got, err)
	}
	copy(buf, js2)
	if got, err := d.Order("m/o", buf); err != nil || got.Metadata["v"] != "b" {
		t.Fatalf("read of the reused buffer: %q %v, want b", got.Metadata["v"], err)
	}
}

// TestDecodedHoldsItsBudgetsWorth: as TestCacheHoldsItsBudgetsWorth, for
// decoded orders: about the budget's worth held (not one per shard, nor 16
// times it), the one just read kept, less after one order changed many
// times, and no entry larger than a shard may hold.
func TestDecodedHoldsItsBudgetsWorth(t *testing.T) {
	const budget = 256 << 10 // 16 KiB per shard
	d := ordercache.NewDecoded(budget)
	encode := func(id string, version int64) []byte {
		js, err := json.Marshal(&order.Order{ID: id, MerchantID: "m", Version: version, MerchantReference: string(make([]byte, 300))})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	fill := func() {
		for i := range 2000 {
			key := fmt.Sprintf("m/order-%04d", i)
			js := encode(key[2:], 1)
			d.Order(key, js)
			misses := d.Misses()
			if _, err := d.Order(key, js); err != nil || d.Misses() != misses {
				t.Fatalf("%s: the order just read was evicted (%v)", key, err)
			}
		}
	}
	fill()
	full := d.Len()
	size := len(encode("order-0000", 1))
	if most := budget / (3 * size); full < 2*16 || full > most {
		t.Fatalf("a full cache holds %d orders of %d bytes, want from 32 to %d", full, size, most)
	}
	for v := range int64(500) {
		o := &order.Order{ID: "order-9999", MerchantID: "m", Version: 2 + v, MerchantReference: string(make([]byte, 300))}
		js, _ := json.Marshal(o)
		d.Written("m/order-9999", js, o)
	}
	fill()
	if n := d.Len(); n != full {
		t.Fatalf("after one order changed 500 times the cache holds %d orders, want %d", n, full)
	}
	big, _ := json.Marshal(&order.Order{ID: "big", MerchantReference: string(make([]byte, 6<<10))})
	d.Order("m/big", big)
	misses := d.Misses()
	if _, err := d.Order("m/big", big); err != nil || d.Misses() != misses+1 {
		t.Fatalf("held an order larger than a shard's budget (%v)", err)
	}
}

// TestDecodedMemoryStaysWithinBudget: what a full cache of decoded orders
// holds, bytes and orders, stays near its budget.
func TestDecodedMemoryStaysWithinBudget(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t, ordertest.Line("Widget", 1, 10000, 2500), ordertest.Line("Gadget", 2, 5000, 2500))
	o.MerchantID = "m"
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 4 << 20
	before := heapInUse()
	d := ordercache.NewDecoded(budget)
	for i := range 3 * budget / len(js) {
		d.Order(fmt.Sprintf("m/order-%08d", i), bytes.Clone(js))
	}
	used := heapInUse() - before
	runtime.KeepAlive(d)
	if used > budget*5/4 {
		t.Fatalf("a cache of %d MiB holds %.1f MiB (%d orders of %d bytes)", budget>>20, float64(used)/(1<<20), d.Len(), len(js))
	}
	t.Logf("%.1f MiB, %d orders of %d bytes", float64(used)/(1<<20), d.Len(), len(js))
}
