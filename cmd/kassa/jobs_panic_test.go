package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// panickyStore panics in Update outside the transaction's function, where
// no store recovers it, as a bug on a job's path outside a transaction does.
type panickyStore struct{ storage.Store }

func (panickyStore) Update(context.Context, func(storage.Tx) error) error { panic("job bug") }

// TestJobPanicsAreLoggedAndTheLoopsGoOn: a panic in a background job outside
// a store transaction ended the whole server. Each job's step now logs the
// panic with its stack, the loop goes on with the next job and the next
// tick, and the loops still end when their context does.
func TestJobPanicsAreLoggedAndTheLoopsGoOn(t *testing.T) {
	ledger := kassa.New(panickyStore{memory.New(time.Now)}, kassa.Options{})
	var out lockedBuffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("log:\n%s", out.String())
		}
	}()
	done := make(chan struct{}, 2)
	go func() {
		runJobs(ctx, ledger, log, server.NewClock(false), time.Date(0, 1, 1, 2, 0, 0, 0, time.UTC))
		done <- struct{}{}
	}()
	go func() { runDelivery(ctx, ctx, ledger, log, kassa.DeliveryOptions{}); done <- struct{}{} }()
	want := []string{`"msg":"settlement run"`, `"msg":"idempotency sweep"`, `"msg":"scheduled tasks"`, `"msg":"expiry job"`,
		`"msg":"notification delivery"`}
	// Bounds only turn a hang into a failure (waitFor's 30 s): a loaded
	// machine may stall the loops for seconds.
	missing := func() string {
		s := out.String()
		for _, w := range want {
			if !strings.Contains(s, w) {
				return w
			}
		}
		if strings.Count(s, `"panic":"job bug"`) < len(want) || !strings.Contains(s, "goroutine") {
			return "a stack"
		}
		return ""
	}
	waitFor(t, func() bool { return missing() == "" }, "a panic logged of every job")
	// The delivery loop ticks every second, each tick starting two runs
	// (the usual one and the one skipping slow receivers): a third
	// panicking run shows the loop went on after the first tick. Two
	// showed nothing, the first tick's pair.
	waitFor(t, func() bool { return strings.Count(out.String(), `"msg":"notification delivery"`) >= 3 },
		"the delivery loop to run again after its first tick's panics")
	cancel()
	for range 2 {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a job loop did not end with its context")
		}
	}
}
