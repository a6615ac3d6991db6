package storage

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

func encodeMerchant(t testing.TB, m Merchant) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMerchantCacheServesOnlyIdenticalBytes(t *testing.T) {
	var c MerchantCache
	v1 := encodeMerchant(t, Merchant{ID: "m1", Name: "One", SecretHash: []byte{1}, Salt: []byte{3}, WebhookEvents: []string{"a"}})
	v2 := encodeMerchant(t, Merchant{ID: "m1", Name: "Renamed", SecretHash: []byte{2}, Salt: []byte{4}, WebhookEvents: []string{"b"}})

	scribble := func(m *Merchant) { m.SecretHash[0], m.Salt[0], m.WebhookEvents[0] = 9, 9, "scribbled" }
	first, err := c.Decode("m1", v1)
	if err != nil || first.Name != "One" {
		t.Fatalf("first decode: %+v %v", first, err)
	}
	scribble(first)
	for i := range 2 { // the second read is a hit after a hit's copy was scribbled on
		cached, err := c.Decode("m1", v1)
		if err != nil || cached.Name != "One" || cached.SecretHash[0] != 1 || cached.Salt[0] != 3 || cached.WebhookEvents[0] != "a" {
			t.Fatalf("read %d: cached decode is not a clean copy: %+v %v", i, cached, err)
		}
		scribble(cached)
	}
	changed, err := c.Decode("m1", v2)
	if err != nil || changed.Name != "Renamed" || changed.SecretHash[0] != 2 || changed.Salt[0] != 4 || changed.WebhookEvents[0] != "b" {
		t.Fatalf("changed bytes served the old merchant: %+v %v", changed, err)
	}
	if _, err := c.Decode("m1", []byte("{not json")); err == nil {
		t.Fatal("undecodable bytes accepted")
	}
}

// Readers of two versions of one merchant, at once: each always gets the
// version its bytes hold (run under -race by .ci/run).
func TestMerchantCacheConcurrentVersions(t *testing.T) {
	var c MerchantCache
	versions := [][]byte{
		encodeMerchant(t, Merchant{ID: "m1", Name: "v0", SecretHash: []byte{0}}),
		encodeMerchant(t, Merchant{ID: "m1", Name: "v1", SecretHash: []byte{1}}),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				v := (g + i) % 2
				m, err := c.Decode("m1", versions[v])
				if err != nil || m.Name != fmt.Sprintf("v%d", v) || m.SecretHash[0] != byte(v) {
					errs <- fmt.Errorf("read of v%d got %+v %v", v, m, err)
					return
				}
				m.SecretHash[0] = 7
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Clone must copy every field and share no memory: a field added later
// that Clone misses fails here.
func TestMerchantCloneIsDeep(t *testing.T) {
	var m Merchant
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(time.Time{}) {
				t.Fatalf("field %s: teach this test its kind", v.Type().Field(i).Name)
			}
			f.Set(reflect.ValueOf(time.Unix(1, 0)))
		default:
			t.Fatalf("field %s of kind %s: Clone and this test must learn to copy it", v.Type().Field(i).Name, f.Kind())
		}
	}
	c := m.Clone()
	if !reflect.DeepEqual(*c, m) {
		t.Fatalf("clone differs: %+v vs %+v", *c, m)
	}
	cv := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Pointer() == cv.Field(i).Pointer() {
			t.Fatalf("field %s shares memory with the original", v.Type().Field(i).Name)
		}
	}
}

// TestMerchantCacheCopiesAndBounds: the bytes an entry is compared with are
// its own (a store may reuse the buffer it read into: bbolt's memory map),
// a changed merchant's new bytes are kept, and the cache holds exactly
// maxCachedMerchants merchants however many are read.
func TestMerchantCacheCopiesAndBounds(t *testing.T) {
	var c MerchantCache
	v1 := encodeMerchant(t, Merchant{ID: "m1", Name: "aaa"})
	v2 := encodeMerchant(t, Merchant{ID: "m1", Name: "bbb"})
	buf := append([]byte(nil), v1...)
	if m, err := c.Decode("m1", buf); err != nil || m.Name != "aaa" {
		t.Fatalf("first decode: %+v %v", m, err)
	}
	copy(buf, v2)
	if m, err := c.Decode("m1", buf); err != nil || m.Name != "bbb" {
		t.Fatalf("decode of the reused buffer: %+v %v, want bbb", m, err)
	}
	if v, ok := c.m.Load("m1"); !ok || string(v.(*merchantEntry).raw) != string(v2) {
		t.Fatal("a changed merchant's new bytes were not kept")
	}
	for i := range maxCachedMerchants + 10 {
		id := fmt.Sprintf("m%05d", i)
		if _, err := c.Decode(id, encodeMerchant(t, Merchant{ID: id})); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	c.m.Range(func(any, any) bool { held++; return true })
	if held != maxCachedMerchants || len(c.ring) != maxCachedMerchants {
		t.Fatalf("holds %d merchants (counted %d), want %d", held, len(c.ring), maxCachedMerchants)
	}
}

// TestMerchantCacheMakesRoomForActiveMerchants: once the cache is full, a
// merchant read after the first maxCachedMerchants is still cached (another
// entry makes room), and a merchant read between the newcomers keeps its
// entry however many of them come: a process that outlives its first
// 10 000 merchants (signed up, deleted, gone quiet) does not decode every
// later merchant's JSON on each request for the rest of its life.
func TestMerchantCacheMakesRoomForActiveMerchants(t *testing.T) {
	var c MerchantCache
	hot := encodeMerchant(t, Merchant{ID: "hot", Name: "busy"})
	if _, err := c.Decode("hot", hot); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxCachedMerchants {
		id := fmt.Sprintf("m%05d", i)
		if _, err := c.Decode(id, encodeMerchant(t, Merchant{ID: id})); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Decode("hot", hot); err != nil {
			t.Fatal(err)
		}
	}
	last := fmt.Sprintf("m%05d", 3*maxCachedMerchants-1)
	if _, ok := c.m.Load(last); !ok {
		t.Fatalf("the latest merchant read (%s) is not cached", last)
	}
	if _, ok := c.m.Load("hot"); !ok {
		t.Fatal("the merchant read on every request lost its entry")
	}
	held := 0
	c.m.Range(func(any, any) bool { held++; return true })
	if held != maxCachedMerchants || len(c.ring) != maxCachedMerchants {
		t.Fatalf("holds %d merchants (counted %d), want %d", held, len(c.ring), maxCachedMerchants)
	}
}

// fillHot fills c to its bound with merchants m00000…, each read again
// since, so that every entry is marked as used.
func fillHot(t testing.TB, c *MerchantCache) {
	raw := make([][]byte, maxCachedMerchants)
	for i := range raw {
		id := fmt.Sprintf("m%05d", i)
		raw[i] = encodeMerchant(t, Merchant{ID: id})
		if _, err := c.Decode(id, raw[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range raw {
		if _, err := c.Decode(fmt.Sprintf("m%05d", i), raw[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMerchantCacheEvictionIsBounded: with the cache full and every entry
// read lately, making room for one more merchant looks at a bounded number
// of entries (the marks it clears), not at all 10 000 of them (about 300 µs
// a miss, docs/benchmarks.md), and the next evictions go on from there
// rather than over the same entries.
func TestMerchantCacheEvictionIsBounded(t *testing.T) {
	var c MerchantCache
	fillHot(t, &c)
	unmarked := func() (n int) {
		c.m.Range(func(_, v any) bool {
			if !v.(*merchantEntry).used.Load() {
				n++
			}
			return true
		})
		return n
	}
	for i := range 3 {
		id := fmt.Sprintf("new%d", i)
		if _, err := c.Decode(id, encodeMerchant(t, Merchant{ID: id})); err != nil {
			t.Fatal(err)
		}
		// The newcomers are unmarked (read once); each eviction clears
		// evictScan-1 marks and removes the entry after them, going on
		// from where the last one stopped: exactly evictScan more
		// unmarked entries each time (the newcomer among them). An
		// eviction that cleared no marks, or started again where it began,
		// would leave fewer.
		if n, want := unmarked(), (i+1)*evictScan; n != want {
			t.Fatalf("after %d evictions %d entries are unmarked, want %d", i+1, n, want)
		}
		// Those are the ring's first ones, the hand having started at its
		// start: it skipped none.
		for k, key := range c.ring[:(i+1)*evictScan] {
			if v, ok := c.m.Load(key); !ok || v.(*merchantEntry).used.Load() {
				t.Fatalf("after %d evictions the ring's entry %d (%s) is marked or gone (%v); the hand passed it", i+1, k, key, ok)
			}
		}
		// The hand has passed the newcomers' places: the next eviction
		// does not take the merchant read just before it.
		for j := range i + 1 {
			if _, ok := c.m.Load(fmt.Sprintf("new%d", j)); !ok {
				t.Fatalf("after %d evictions new%d, read once since the hand passed, was evicted", i+1, j)
			}
		}
	}
	held := 0
	c.m.Range(func(any, any) bool { held++; return true })
	if held != maxCachedMerchants {
		t.Fatalf("holds %d merchants, want %d", held, maxCachedMerchants)
	}
}

// Readers of many merchants at once, more than the cache holds: each gets
// the merchant its bytes hold, and the cache ends holding exactly its bound,
// each key once in the eviction order (run under -race by .ci/run).
func TestMerchantCacheConcurrentEvictions(t *testing.T) {
	var c MerchantCache
	const keys = maxCachedMerchants + 3000
	raw := make([][]byte, keys)
	for i := range raw {
		raw[i] = encodeMerchant(t, Merchant{ID: fmt.Sprintf("m%05d", i), Name: fmt.Sprintf("n%d", i)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 2 * keys {
				k := (i*7 + g*keys/4) % keys
				if g%2 == 1 {
					k = i % 500 // hot merchants, read over and over
				}
				m, err := c.Decode(fmt.Sprintf("m%05d", k), raw[k])
				if err != nil || m.Name != fmt.Sprintf("n%d", k) {
					errs <- fmt.Errorf("read of m%05d got %+v %v", k, m, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	held := map[any]bool{}
	c.m.Range(func(k, _ any) bool { held[k] = true; return true })
	if len(held) != maxCachedMerchants || len(c.ring) != maxCachedMerchants {
		t.Fatalf("holds %d merchants, %d in the eviction order, want %d", len(held), len(c.ring), maxCachedMerchants)
	}
	for _, k := range c.ring {
		if !held[k] {
			t.Fatalf("%s is in the eviction order twice or not held", k)
		}
		delete(held, k)
	}
}

// BenchmarkMerchantCacheEvictAllHot: one newly read merchant with the cache
// full and every entry read since the last eviction (the timer stops while
// they are read again).
func BenchmarkMerchantCacheEvictAllHot(b *testing.B) {
	var c MerchantCache
	fillHot(b, &c)
	raw := encodeMerchant(b, Merchant{ID: "x"})
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		c.m.Range(func(_, v any) bool { v.(*merchantEntry).used.Store(true); return true })
		b.StartTimer()
		if _, err := c.Decode(fmt.Sprintf("x%d", i), raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerchantCacheHit: a merchant read again, the path every request
// takes, on all cores.
func BenchmarkMerchantCacheHit(b *testing.B) {
	var c MerchantCache
	fillHot(b, &c)
	raw := encodeMerchant(b, Merchant{ID: "m00042"})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Decode("m00042", raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
