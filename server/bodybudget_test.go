package server

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// budgetState is the budget's bytes in use and its waiters.
func budgetState(b *bodyBudget) (used int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.waiting.Len()
}

// TestBodyBudgetTable: shares are granted in arrival order, a share larger
// than the budget is clamped to all of it, and a waiter whose context ends
// takes nothing and lets those behind it through.
func TestBodyBudgetTable(t *testing.T) {
	b := newBodyBudget(100)
	ctx := context.Background()
	if n, err := b.acquire(ctx, 60); n != 60 || err != nil {
		t.Fatalf("first 60: %d %v", n, err)
	}
	// 50 does not fit; 30 behind it would, but waits its turn.
	got50, got30 := make(chan int64), make(chan int64)
	go func() { n, _ := b.acquire(ctx, 50); got50 <- n }()
	waitFor(t, b, 60, 1)
	go func() { n, _ := b.acquire(ctx, 30); got30 <- n }()
	waitFor(t, b, 60, 2)
	b.release(60)
	if n := <-got50; n != 50 {
		t.Fatalf("50 after the release: took %d", n)
	}
	if n := <-got30; n != 30 {
		t.Fatalf("30 after 50: took %d", n)
	}
	waitFor(t, b, 80, 0)
	// Larger than the budget: clamped, and served once the budget is free.
	gotBig := make(chan int64)
	go func() { n, _ := b.acquire(ctx, 1000); gotBig <- n }()
	waitFor(t, b, 80, 1)
	// A waiter behind it whose context ends takes nothing.
	cctx, cancel := context.WithCancel(ctx)
	gotErr := make(chan error)
	go func() { n, err := b.acquire(cctx, 1); _ = n; gotErr <- err }()
	waitFor(t, b, 80, 2)
	cancel()
	if err := <-gotErr; err == nil {
		t.Fatal("a cancelled waiter got its share")
	}
	waitFor(t, b, 80, 1)
	b.release(50)
	b.release(30)
	if n := <-gotBig; n != 100 {
		t.Fatalf("a share of 1000 from a budget of 100 took %d, want 100", n)
	}
	// The front waiter leaving lets a smaller one behind it in.
	cctx, cancel = context.WithCancel(ctx)
	go func() { _, err := b.acquire(cctx, 100); gotErr <- err }()
	waitFor(t, b, 100, 1)
	b.release(40)
	go func() { n, _ := b.acquire(ctx, 40); got30 <- n }()
	waitFor(t, b, 60, 2)
	cancel()
	if err := <-gotErr; err == nil {
		t.Fatal("a cancelled waiter got its share")
	}
	if n := <-got30; n != 40 {
		t.Fatalf("40 behind a waiter that left: took %d", n)
	}
	b.release(100)
	if used, waiting := budgetState(b); used != 0 || waiting != 0 {
		t.Fatalf("after every release: %d used, %d waiting", used, waiting)
	}
	// Nothing to take: granted at once, even with the budget all taken.
	b.acquire(ctx, 100)
	if n, err := b.acquire(ctx, 0); n != 0 || err != nil {
		t.Fatalf("an empty body on a full budget: %d %v", n, err)
	}
}

// waitFor waits until the budget has used bytes taken and waiting waiters.
func waitFor(t *testing.T, b *bodyBudget, used int64, waiting int) {
	t.Helper()
	// Long enough for any machine; only a server that holds the shares
	// for ever reaches it.
	giveUp := time.Now().Add(10 * time.Second)
	for {
		u, w := budgetState(b)
		if u == used && w == waiting {
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("budget at %d used, %d waiting; want %d, %d", u, w, used, waiting)
		}
		sleepBriefly()
	}
}

// TestBodyBudgetProperty: many goroutines take and give back random shares,
// some giving up while they wait; the budget is never over its size, and
// once all are done nothing is held and no one waits.
func TestBodyBudgetProperty(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		size := int64(1 + rng.IntN(64))
		b := newBodyBudget(size)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var held, peak int64
		for range 64 {
			n := int64(rng.IntN(int(2 * size)))
			cancelled := rng.IntN(4) == 0
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if cancelled {
					go cancel()
				}
				got, err := b.acquire(ctx, n)
				if err != nil {
					if got != 0 {
						t.Errorf("a failed acquire took %d", got)
					}
					return
				}
				if got != min(n, size) {
					t.Errorf("acquire(%d) of %d took %d", n, size, got)
				}
				mu.Lock()
				held += got
				peak = max(peak, held)
				if used, _ := budgetState(b); held > size || used > size {
					t.Errorf("held %d, budget used %d, of %d", held, used, size)
				}
				mu.Unlock()
				sleepBriefly()
				mu.Lock()
				held -= got
				mu.Unlock()
				b.release(got)
			})
		}
		wg.Wait()
		if used, waiting := budgetState(b); used != 0 || waiting != 0 || held != 0 {
			t.Fatalf("seed %d: after every request: %d used, %d waiting, %d held", seed, used, waiting, held)
		}
	}
}

// sleepBriefly lets other goroutines run a while.
func sleepBriefly() { time.Sleep(10 * time.Microsecond) }
