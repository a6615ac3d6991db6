package linear

import (
	"strconv"
	"strings"
	"testing"
)

// A register: writes of a value, reads that answer one.
type regIn struct {
	write bool
	v     int
}

var register = Model[int, regIn, int]{
	Init: func() int { return 0 },
	Step: func(s int, in regIn, out int) (int, bool) {
		if in.write {
			return in.v, true
		}
		return s, out == s
	},
	Key: strconv.Itoa,
}

func w(c int, call, ret int64, v int) Op[regIn, int] {
	return Op[regIn, int]{Client: c, Call: call, Return: ret, In: regIn{true, v}}
}
func r(c int, call, ret int64, v int) Op[regIn, int] {
	return Op[regIn, int]{Client: c, Call: call, Return: ret, In: regIn{false, 0}, Out: v}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []Op[regIn, int]
		ok   bool
	}{
		{"empty", nil, true},
		{"sequential", []Op[regIn, int]{w(0, 1, 2, 1), r(1, 3, 4, 1), w(0, 5, 6, 2), r(1, 7, 8, 2)}, true},
		// A read overlapping a write may see either value…
		{"overlap old", []Op[regIn, int]{w(0, 1, 4, 1), r(1, 2, 3, 0)}, true},
		{"overlap new", []Op[regIn, int]{w(0, 1, 4, 1), r(1, 2, 3, 1)}, true},
		// …but once a read saw the new value, a later read must too
		// (a stale cache read).
		{"stale after new", []Op[regIn, int]{w(0, 1, 10, 1), r(1, 2, 3, 1), r(2, 4, 5, 0)}, false},
		// A read after the write answered must see it.
		{"stale after ack", []Op[regIn, int]{w(0, 1, 2, 1), r(1, 3, 4, 0)}, false},
		// Two overlapping writes, reads that order them one way: fine.
		{"writes ordered by reads", []Op[regIn, int]{w(0, 1, 10, 1), w(1, 1, 10, 2), r(2, 2, 3, 1), r(2, 4, 5, 2)}, true},
		// Reads that order them both ways: no single order.
		{"writes ordered both ways", []Op[regIn, int]{w(0, 1, 10, 1), w(1, 1, 10, 2), r(2, 2, 3, 1), r(2, 4, 5, 2), r(3, 6, 7, 1)}, false},
		// A lost update: a value never written.
		{"value from nowhere", []Op[regIn, int]{w(0, 1, 2, 1), r(1, 3, 4, 7)}, false},
	} {
		res, why := Check(register, c.ops)
		if want := map[bool]Result{true: Ok, false: Illegal}[c.ok]; res != want {
			t.Errorf("%s: %v, want %v\n%s", c.name, res, want, why)
		}
		if res != Ok && !strings.Contains(why, "the longest order found") {
			t.Errorf("%s: report %q", c.name, why)
		}
	}
}

// Overlapping operations check fast thanks to the memo: 12 writes of one
// value and reads, all overlapping, take 2^12 sets of writes to refuse a
// stale read after them all.
func TestCheckWide(t *testing.T) {
	var ops []Op[regIn, int]
	for i := range 12 {
		ops = append(ops, w(i, 1, 1000, 1))
		ops = append(ops, r(i+100, int64(2+i), int64(3+i), 1))
	}
	if res, why := Check(register, ops); res != Ok {
		t.Fatal(why)
	}
	ops = append(ops, r(500, 2000, 2001, 0))
	if res, _ := Check(register, ops); res != Illegal {
		t.Fatalf("a read of 0 after every write of 1 answered: %v", res)
	}
}
