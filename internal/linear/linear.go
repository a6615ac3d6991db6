// Package linear checks that a recorded history of concurrent operations on
// one object is linearizable: that every answer could come from one order of
// the operations, each taking effect at some instant between its call and
// its answer, run one at a time on a sequential model. It is the search of
// Wing and Gong with Lowe's memo of (operations linearized, state) pairs, as
// in Porcupine; test support for the histories package server and cmd/kassa
// record against an order (orders.go).
package linear

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Op is one completed operation: Call and Return are positions on one clock
// shared by every client (a counter taken just before the request goes out
// and just after its answer is in), so that an operation whose Return is
// below another's Call finished before the other began.
type Op[I, O any] struct {
	Client       int
	Call, Return int64
	In           I
	Out          O
}

// Model is the sequential specification of the object.
type Model[S, I, O any] struct {
	Init func() S
	// Step applies in to s and reports whether out is what a sequential
	// object in state s answers; it returns the state after. It must not
	// modify s (the search comes back to it).
	Step func(s S, in I, out O) (S, bool)
	// Key names a state, for the memo: equal keys for equal states.
	Key func(s S) string
}

type entry struct {
	op         int
	call       bool
	t          int64
	match      *entry // a call's return
	prev, next *entry
}

// Result is the outcome of Check.
type Result int

const (
	Ok      Result = iota // linearizable
	Illegal               // no order of the operations explains the answers
	Unknown               // the search gave up (Limit)
)

func (r Result) String() string {
	return [...]string{"linearizable", "not linearizable", "undecided"}[r]
}

// Limit bounds the states the search visits. The search is exponential in
// the number of operations that overlap one another in time (n overlapping
// writes of one value leave 2^n sets to try before a read no order explains
// is refused), so a history is kept narrow: a few clients per object.
const Limit = 2_000_000

// Check reports whether ops are linearizable under m. When they are not
// (or the search gave up), the second result describes the longest prefix
// the search could order and the operations it could not place next.
func Check[S, I, O any](m Model[S, I, O], ops []Op[I, O]) (Result, string) {
	n := len(ops)
	if n == 0 {
		return Ok, ""
	}
	events := make([]*entry, 0, 2*n)
	for i, op := range ops {
		c := &entry{op: i, call: true, t: op.Call}
		r := &entry{op: i, t: op.Return}
		c.match = r
		events = append(events, c, r)
	}
	// By time; at one time a return first, so that only operations that
	// truly overlap are free to be ordered either way.
	slices.SortStableFunc(events, func(a, b *entry) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		if a.call != b.call {
			if a.call {
				return 1
			}
			return -1
		}
		return 0
	})
	head := &entry{}
	prev := head
	for _, e := range events {
		prev.next, e.prev = e, prev
		prev = e
	}
	lift := func(e *entry) {
		e.prev.next = e.next
		if e.next != nil {
			e.next.prev = e.prev
		}
		r := e.match
		r.prev.next = r.next
		if r.next != nil {
			r.next.prev = r.prev
		}
	}
	unlift := func(e *entry) {
		r := e.match
		r.prev.next = r
		if r.next != nil {
			r.next.prev = r
		}
		e.prev.next = e
		if e.next != nil {
			e.next.prev = e
		}
	}
	type frame struct {
		e     *entry
		state S
	}
	done := make([]uint64, (n+63)/64)
	seen := map[string]struct{}{}
	memo := func(s S) bool {
		var b strings.Builder
		for _, w := range done {
			fmt.Fprintf(&b, "%x.", w)
		}
		b.WriteString(m.Key(s))
		k := b.String()
		if _, ok := seen[k]; ok || len(seen) >= Limit {
			return true
		}
		seen[k] = struct{}{}
		return false
	}
	state := m.Init()
	var stack []frame
	var best []int // the longest order found, for the report
	e := head.next
	for head.next != nil {
		if e.call {
			next, ok := m.Step(state, ops[e.op].In, ops[e.op].Out)
			if ok {
				done[e.op/64] |= 1 << (e.op % 64)
				if !memo(next) {
					stack = append(stack, frame{e, state})
					state = next
					lift(e)
					if len(stack) > len(best) {
						best = best[:0]
						for _, f := range stack {
							best = append(best, f.e.op)
						}
					}
					e = head.next
					continue
				}
				done[e.op/64] &^= 1 << (e.op % 64)
			}
			e = e.next
			continue
		}
		// A return: the operation it ends must have taken effect by now,
		// and no order of what came before gets it to: undo the last choice.
		if len(stack) == 0 {
			if len(seen) >= Limit {
				return Unknown, fmt.Sprintf("undecided after %d states\n", len(seen)) + report(ops, best)
			}
			return Illegal, report(ops, best)
		}
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		state = f.state
		done[f.e.op/64] &^= 1 << (f.e.op % 64)
		unlift(f.e)
		e = f.e.next
	}
	return Ok, ""
}

// report lists the longest order found and then every operation left, by
// call, which is where a reader looks for the answer no order explains.
func report[I, O any](ops []Op[I, O], best []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the longest order found (%d of %d operations):\n", len(best), len(ops))
	placed := map[int]bool{}
	for _, i := range best {
		placed[i] = true
		fmt.Fprintf(&b, "  %s\n", describe(ops[i]))
	}
	var left []int
	for i := range ops {
		if !placed[i] {
			left = append(left, i)
		}
	}
	slices.SortFunc(left, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	b.WriteString("none of these fits next (by call):\n")
	for i, j := range left {
		if i == 8 {
			fmt.Fprintf(&b, "  … and %d more\n", len(left)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", describe(ops[j]))
	}
	return b.String()
}

func describe[I, O any](op Op[I, O]) string {
	return fmt.Sprintf("[%d,%d] client %d: %v → %v", op.Call, op.Return, op.Client, op.In, op.Out)
}
