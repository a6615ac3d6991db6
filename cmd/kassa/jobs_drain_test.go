package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// TestDrainStopsAtBudgetCancelOrError: a job's steps go on while it has
// more to do, up to (not past) its budget, and no further once the context
// ends or, for a batch job, once a step fails.
func TestDrainStopsAtBudgetCancelOrError(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC)
	var at time.Time
	j := &jobs{log: slog.New(slog.NewTextHandler(io.Discard, nil)), wall: func() time.Time { return at }, budget: 10 * time.Second}
	steps := 0
	// Each step takes 5 s: the second ends at the budget, where the job stops.
	at = t0
	left := j.drain(context.Background(), func() bool {
		steps++
		at = at.Add(5 * time.Second)
		return steps < 100
	})
	if !left || steps != 2 {
		t.Errorf("steps of 5 s in a budget of 10 s: %d steps, left %v; want 2, true", steps, left)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	steps = 0
	if left := j.drain(ctx, func() bool { steps++; return steps < 100 }); left || steps != 1 {
		t.Errorf("cancelled: %d steps, left %v; want 1, false", steps, left)
	}
	steps = 0
	left = j.batches(context.Background(), "job", "done", func() (int, bool, error) {
		steps++
		return 1, steps < 100, errors.New("store down")
	})
	if left || steps != 1 {
		t.Errorf("failing batch: %d steps, left %v; want 1, false", steps, left)
	}
}

// downStore fails every write while down is set.
type downStore struct {
	storage.Store
	down atomic.Bool
}

func (s *downStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if s.down.Load() {
		return errors.New("store down")
	}
	return s.Store.Update(ctx, fn)
}

// settlementPastItsTime is a sandbox store with a capture, behind a
// downStore, a ledger on it, and a day's settlement time an hour after the
// capture, which the clock has just passed.
func settlementPastItsTime(t *testing.T) (*server.Clock, *downStore, *kassa.Ledger, kassa.Credentials, time.Time) {
	t.Helper()
	dir := t.TempDir()
	clock := sandboxClockIn(t, dir)
	now := clock.Now()
	_, st, creds := sandboxCapture(t, dir, clock)
	t.Cleanup(func() { st.Close() })
	down := &downStore{Store: st}
	settleAt := now.Add(time.Hour).UTC()
	if err := clock.Advance(time.Hour + time.Minute); err != nil {
		t.Fatal(err)
	}
	return clock, down, kassa.New(down, kassa.Options{}), creds, settleAt
}

// TestFailedSettlementRunIsTriedAgain: a day's settlement run that failed
// (the store was down) is run again at the next pass, not a day later, and
// settles what occurred before the day's settlement time, not before the
// pass (a capture after it waits for the next day's run, as on every
// replica).
func TestFailedSettlementRunIsTriedAgain(t *testing.T) {
	ctx := context.Background()
	clock, down, l, creds, settleAt := settlementPastItsTime(t)
	// A capture after the settlement time, before the pass.
	captureOneLine(t, l, creds.MerchantID, "t2", clock.Now(), "late", 5000)
	j := &jobs{ledger: l, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock, settleAt: settleAt, wall: time.Now, budget: time.Second}
	j.nextSettle = settleCutoff(clock.Now(), settleAt)
	down.down.Store(true)
	j.pass(ctx)
	down.down.Store(false)
	j.pass(ctx)
	page, err := l.ListSettlements(ctx, creds.MerchantID, settlement.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Settlements) != 1 {
		t.Fatalf("%d settlements after a failed run and a pass, want 1", len(page.Settlements))
	}
	if g := page.Settlements[0].GrossAmount.MinorUnits; g != 10000 {
		t.Fatalf("the day's settlement is of %d, want 10000 (the capture before the settlement time)", g)
	}
}

// TestSettlementRunCutShortIsNotLoggedAsRun: a settlement run that failed
// as the server shut down (its context ended) is not logged as a run that
// made settlements, and the day is not taken as settled.
func TestSettlementRunCutShortIsNotLoggedAsRun(t *testing.T) {
	clock, down, l, _, settleAt := settlementPastItsTime(t)
	var logged bytes.Buffer
	j := &jobs{ledger: l, log: slog.New(slog.NewTextHandler(&logged, nil)), clock: clock, settleAt: settleAt, wall: time.Now, budget: time.Second}
	due := settleCutoff(clock.Now(), settleAt)
	j.nextSettle = due
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	down.down.Store(true)
	j.pass(ctx)
	if strings.Contains(logged.String(), `msg="settlement run" settlements=`) {
		t.Errorf("a failed run at shutdown was logged as made:\n%s", logged.String())
	}
	if !j.nextSettle.Equal(due) {
		t.Errorf("a failed run at shutdown moved the next settlement to %v, want %v", j.nextSettle, due)
	}
}

// TestPassSweepsAuthorizationTokens: the periodic pass removes the
// authorization tokens past their retention, on the server's clock, and
// logs how many; a token within it stays.
func TestPassSweepsAuthorizationTokens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := sandboxClockIn(t, dir)
	l, st, creds := sandboxCapture(t, dir, clock) // token "t", used for the order
	defer st.Close()
	if err := clock.Advance(kassa.DefaultAuthorizationRetention + 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	captureOneLine(t, l, creds.MerchantID, "t2", clock.Now(), "grout", 5000)
	var logged bytes.Buffer
	j := &jobs{ledger: l, log: slog.New(slog.NewTextHandler(&logged, nil)), clock: clock, settleAt: clock.Now().Add(time.Hour),
		wall: time.Now, budget: time.Second}
	j.nextSettle = clock.Now().Add(time.Hour)
	j.pass(ctx)
	if !strings.Contains(logged.String(), `msg="authorization token retention sweep" removed=1`) {
		t.Errorf("the pass did not log the token it removed:\n%s", logged.String())
	}
	for tok, kept := range map[string]bool{"t": false, "t2": true} {
		err := st.View(ctx, func(tx storage.Tx) error { _, err := tx.GetAuthorization(creds.MerchantID, tok); return err })
		if (err == nil) != kept {
			t.Errorf("token %s after the pass: %v; want kept %v", tok, err, kept)
		}
	}
}
