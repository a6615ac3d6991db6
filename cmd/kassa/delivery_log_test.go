package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// readOnlyStore refuses its first refuse transactions at once, as a
// PostgreSQL store does whose database turned read-only (a standby during a
// failover): no retries, so every delivery run fails within its tick. Then
// it answers again. It counts the transactions it refused and ran, so a test
// can wait for runs rather than for time.
type readOnlyStore struct {
	storage.Store
	refuse   atomic.Int64 // refusals left
	refused  atomic.Int64
	answered atomic.Int64
}

var errReadOnly = fault.New(fault.Unavailable, "store_unavailable", "the database is read-only (a standby?); nothing was done, retry shortly")

func (s *readOnlyStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if s.refuse.Add(-1) >= 0 {
		s.refused.Add(1)
		return errReadOnly
	}
	defer s.answered.Add(1)
	return s.Store.Update(ctx, fn)
}

// logLines decodes the JSON lines of a log with the message msg.
func logLines(t *testing.T, log, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestDeliveryFailuresAreLoggedAtABoundedRate: with the store failing every
// run, the delivery loop logged an error per run, two a second on a
// read-only database (60 lines in 30 s against PostgreSQL), for
// as long as it lasted. Now the first failure is logged, the next ones
// within a minute are only counted, and the first success after it is
// logged once.
//
// The test counts runs, not seconds: it waits until the store has refused
// ten of them, however long a loaded machine takes, and then wants one line
// for the ten. Within how long the lines are bounded is errorLog's, on a
// fake clock in TestErrorLogBoundsItsLines; here the minute is made an hour
// so that no stall of the machine, however long, lets a second line in.
func TestDeliveryFailuresAreLoggedAtABoundedRate(t *testing.T) {
	defer func(every time.Duration) { deliveryErrorEvery = every }(deliveryErrorEvery)
	deliveryErrorEvery = time.Hour
	const refusals = 10
	st := &readOnlyStore{Store: memory.New(time.Now)}
	st.refuse.Store(refusals)
	ledger := kassa.New(st, kassa.Options{})
	var out lockedBuffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runDelivery(ctx, ctx, ledger, log, kassa.DeliveryOptions{}); close(done) }()
	defer func() { cancel(); <-done }()

	// A run claims in one transaction, refused at once: one refusal a run.
	// Once the store answers, the recovery is logged, and two more runs
	// succeed, which log nothing more.
	recovered := func() bool { return len(logLines(t, out.String(), "notification delivery recovered")) > 0 }
	waitFor(t, recovered, "the recovery line once the store answers again")
	more := st.answered.Load() + 2
	waitFor(t, func() bool { return st.answered.Load() >= more }, "two more runs")
	errs := logLines(t, out.String(), "notification delivery")
	if len(errs) != 1 || errs[0]["level"] != "ERROR" || !strings.Contains(errs[0]["err"].(string), "read-only") {
		t.Fatalf("%d lines after %d failed runs, want the first failure alone: %v", len(errs), st.refused.Load(), errs)
	}
	// The recovery line counts the failures not logged: all but the first,
	// less those of runs that failed while others already succeeded (each
	// run fails or succeeds in its own goroutine, deliveryRuns+1 at most).
	rec := logLines(t, out.String(), "notification delivery recovered")
	if len(rec) != 1 || rec[0]["level"] != "INFO" {
		t.Fatalf("recovery lines %v, want one", rec)
	}
	if n, ok := rec[0]["notLogged"].(float64); !ok || n > refusals-1 || n < refusals-1-deliveryRuns {
		t.Fatalf("recovery line %v, want it to count the %d failures not logged (%d at least)", rec[0], refusals-1, refusals-1-deliveryRuns)
	}
}

// TestErrorLogBoundsItsLines: errorLog's lines on a fake clock, through an
// outage, a recovery, and a blip soon after.
func TestErrorLogBoundsItsLines(t *testing.T) {
	var out lockedBuffer
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	e := &errorLog{log: slog.New(slog.NewJSONHandler(&out, nil)), msg: "job", every: time.Minute, now: func() time.Time { return now }}
	fail := errors.New("down")
	lines := func() []map[string]any {
		return append(logLines(t, out.String(), "job"), logLines(t, out.String(), "job recovered")...)
	}
	at := func(d time.Duration) { now = t0.Add(d) }

	at(0)
	e.failed(fail)
	for i := range 100 {
		at(time.Second + time.Duration(i)*500*time.Millisecond)
		e.failed(fail)
	}
	if got := lines(); len(got) != 1 || got[0]["err"] != "down" || got[0]["notLogged"] != nil || got[0]["failingFor"] != nil {
		t.Fatalf("after 101 failures in 51 s: %v, want the first one's line alone", got)
	}
	at(time.Minute)
	e.failed(fail)
	got := logLines(t, out.String(), "job")
	if len(got) != 2 || got[1]["notLogged"] != float64(100) || got[1]["failingFor"] != "1m0s" {
		t.Fatalf("a minute on: %v, want a second line counting 100 not logged, failing for 1m0s", got)
	}
	at(61 * time.Second)
	e.succeeded()
	e.succeeded()
	rec := logLines(t, out.String(), "job recovered")
	if len(rec) != 1 || rec[0]["failedFor"] != "1m1s" || rec[0]["notLogged"] != float64(0) {
		t.Fatalf("recovery: %v, want one line, failed for 1m1s", rec)
	}
	// A blip within the minute of the last line is counted, not logged,
	// and so is its end; the next failure line, a minute after the last,
	// reports it.
	at(62 * time.Second)
	e.failed(fail)
	at(63 * time.Second)
	e.succeeded()
	if n := len(lines()); n != 3 {
		t.Fatalf("%d lines after a blip within the minute, want still 3", n)
	}
	at(121 * time.Second)
	e.failed(fail)
	got = logLines(t, out.String(), "job")
	if len(got) != 3 || got[2]["notLogged"] != float64(1) || got[2]["failingFor"] != nil {
		t.Fatalf("a new failure after the minute: %v, want a line counting the blip", got)
	}
}
