package bolt

import (
	"fmt"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"
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
