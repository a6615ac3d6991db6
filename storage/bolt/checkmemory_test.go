package bolt

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/storage"
)

// kassa store check compares each index with what the records say it should
// hold, a map of every expected key. Walking the index it kept a second map
// of every key it had seen, copied, to find the expected ones it lacks: at a
// million orders (ten million order index entries) that doubled the check's
// heap. The walk now strikes each key it meets off the expected ones, so
// what is left is what is missing, and it allocates nothing per entry.
func TestCheckComparesAnIndexWithoutCopyingItsKeys(t *testing.T) {
	_, _, s := openFresh(t)
	defer s.Close()
	const n = 5000
	want := map[string][]byte{}
	err := s.db.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bTaskDue)
		for i := range n {
			k := fmt.Sprintf("key-%06d", i)
			if i%1000 == 7 {
				want[k] = nil // missing from the bucket
				continue
			}
			if err := b.Put([]byte(k), present); err != nil {
				return err
			}
			if i%1000 != 9 { // in the bucket, indexing nothing
				want[k] = nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []Problem
	var before, after runtime.MemStats
	err = s.db.View(func(btx *bbolt.Tx) error {
		c := &checker{btx: btx, mode: checkOpen, problem: func(p Problem) { problems = append(problems, p) }}
		runtime.ReadMemStats(&before)
		c.sameKeys(bTaskDue, want)
		runtime.ReadMemStats(&after)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 10 {
		t.Fatalf("got %d problems, want 5 missing and 5 stray entries: %v", len(problems), problems)
	}
	missing, stray := 0, 0
	for _, p := range problems {
		switch p.What {
		case "is missing":
			missing++
		case "indexes nothing stored":
			stray++
		}
	}
	if missing != 5 || stray != 5 {
		t.Errorf("got %d missing and %d stray entries, want 5 and 5: %v", missing, stray, problems)
	}
	// The problems themselves, and the sorted keys left over, are a few
	// allocations each; the 4 990 keys that agree must cost none.
	if mallocs := after.Mallocs - before.Mallocs; mallocs > 200 {
		t.Errorf("comparing an index of %d entries made %d allocations, want at most 200 (none per entry)", n, mallocs)
	}
}

// The order index holds about ten entries an order. The check compared it
// with a map of every entry the orders' meta records name, which at a
// million orders took gigabytes; it now looks each order's entries up in
// the index and each index entry up in its order, and holds nothing per
// entry. Stray entries that sort last are reported while each index is
// walked: the heap then must not hold a set of its entries.
func TestCheckOfTheOrderIndexHoldsNoSetOfItsEntries(t *testing.T) {
	_, f, s := openFresh(t)
	defer s.Close()
	const n = 3000
	err := s.Update(context.Background(), func(tx storage.Tx) error {
		for range n {
			o := f.Order(t)
			o.MerchantID = "m1"
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An order index entry and an expiry entry dropped, and one of each
	// naming no order, the index's sorting last.
	var dropped, droppedDue []byte
	stray := append(valuePrefix("zz", kindStore, "s"), position(f.Clock.Now(), "no-such-order")...)
	strayDue := dueKey(f.Clock.Now(), "m1", "no-such-order")
	err = s.db.Update(func(btx *bbolt.Tx) error {
		ix, due := btx.Bucket(bIndex), btx.Bucket(bDue)
		k, _ := ix.Cursor().First()
		dropped = bytes.Clone(k)
		k, _ = due.Cursor().First()
		droppedDue = bytes.Clone(k)
		for _, err := range []error{ix.Delete(dropped), ix.Put(stray, present), due.Delete(droppedDue), due.Put(strayDue, present)} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var base, during runtime.MemStats
	err = s.db.View(func(btx *bbolt.Tx) error {
		c := &checker{btx: btx, mode: checkOpen, problem: func(p Problem) {
			if strings.Contains(p.Key, "no-such-order") {
				var now runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&now)
				if now.HeapAlloc > during.HeapAlloc {
					during = now
				}
			}
			problems = append(problems, p.String())
		}}
		runtime.GC() // twice: the first leaves sync.Pools' victims
		runtime.GC()
		runtime.ReadMemStats(&base)
		c.orderIndexes()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"index " + shownKey(bIndex, dropped) + ": is missing",
		"index " + shownKey(bIndex, stray) + ": indexes nothing stored",
		"index " + shownKey(bDue, droppedDue) + ": is missing",
		"index " + shownKey(bDue, strayDue) + ": indexes nothing stored",
	}
	slices.Sort(problems)
	slices.Sort(want)
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if during.NumGC == 0 {
		t.Fatal("the stray entries were not reported")
	}
	// 3 000 orders have about 30 000 entries: a set of them is megabytes.
	if live := int64(during.HeapAlloc) - int64(base.HeapAlloc); live > 256<<10 {
		t.Errorf("the check held %d KiB while walking the order index of %d orders, want under 256 KiB", live>>10, n)
	}
}

// Looking each index entry up in the order it names read the orders bucket
// without asking whether the file has one: a file whose orders bucket is
// gone, its indexes left, made the walk panic on a nil bucket, and the check
// said a page was damaged (and stopped before the counters) where it had
// named every entry that indexes nothing, as it does for an index whose
// orders are gone one by one.
func TestCheckOfTheOrderIndexWithoutAnOrdersBucket(t *testing.T) {
	path, f, s := openFresh(t)
	err := s.Update(context.Background(), func(tx storage.Tx) error {
		for range 3 {
			o := f.Order(t)
			o.ExpiresAt = f.Clock.Now().Add(time.Hour) // in the expiry index
			if err := tx.CreateOrder(o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	err = s.db.Update(func(btx *bbolt.Tx) error {
		for _, b := range [][]byte{bIndex, bDue, bCounts} {
			want[string(b)] = btx.Bucket(b).Stats().KeyN
		}
		return btx.DeleteBucket(bOrders)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string]int{}
	_, err = r.Check(context.Background(), func(p Problem) {
		switch {
		case strings.HasPrefix(p.Key, string(bIndex)+" ") && p.What == "indexes nothing stored":
			got[string(bIndex)]++
		case strings.HasPrefix(p.Key, string(bDue)+" ") && p.What == "indexes nothing stored":
			got[string(bDue)]++
		case strings.HasPrefix(p.Key, string(bCounts)+" ") && p.What == "counts entries of no stored order":
			got[string(bCounts)]++
		case p.Kind == "page":
			t.Errorf("the check blamed a page: %v", p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want[string(bIndex)] < 3*2 || want[string(bDue)] != 3 || want[string(bCounts)] == 0 {
		t.Fatalf("the indexes held %v entries before the orders went", want)
	}
	if !maps.Equal(got, want) {
		t.Errorf("entries named as indexing nothing: %v, want every entry: %v", got, want)
	}
}
