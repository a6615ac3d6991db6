package kassa

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
)

// TestGateOneAtATimeAndNothingLeft: changes of one order take turns, other
// orders do not wait for them, a waiter whose context ends leaves with
// store_unavailable without taking a turn, and once everyone has left the
// gate holds no slot (it would otherwise grow by every order ever changed).
func TestGateOneAtATimeAndNothingLeft(t *testing.T) {
	var g gate
	ctx := context.Background()

	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := g.enter(ctx, "m", "o1")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d changes of one order ran at once, want 1", most.Load())
	}

	hold, err := g.enter(ctx, "m", "o1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := g.enter(ctx, "m", "o2") // another order: at once
	if err != nil {
		t.Fatal(err)
	}
	other()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.enter(short, "m", "o1"); fault.CodeOf(err) != "store_unavailable" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter whose deadline passed: %v, want store_unavailable", err)
	}
	hold()

	g.mu.Lock()
	left := len(g.slots)
	g.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d slots left with no holder or waiter", left)
	}
}
