package storage

import (
	"log/slog"
	"time"

	"github.com/kassahq/kassa/order"
)

// SweepLog tells the operator of the sweep of the orders' statuses a store
// runs at Open after a change of order.StatusRules, before it serves: its
// start, its progress every so often, and its end. Such a sweep takes a
// minute or more on a large store, and a start silent that long looks hung.
// Both durable stores log it alike, prefixed with the store's name.
type SweepLog struct {
	log           *slog.Logger
	store         string
	every         time.Duration
	start, next   time.Time
	began         bool
	read, updated int
}

// NewSweepLog logs to log (none when nil) as store ("bolt", "postgres"),
// with progress at most once every every.
func NewSweepLog(log *slog.Logger, store string, every time.Duration) *SweepLog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	return &SweepLog{log: log, store: store, every: every, start: now, next: now.Add(every)}
}

// Begin logs the start once, with the first batch that read any order
// (not before: a new store has none to sweep); serving says when the store
// serves, attrs follow the rules.
func (l *SweepLog) Begin(serving string, attrs ...any) {
	if l.began {
		return
	}
	l.began = true
	l.log.Info(l.store+": sweeping the orders' statuses to the current status rules; "+serving,
		append([]any{"rules", order.StatusRules}, attrs...)...)
}

// Add counts a batch's orders read and rewritten.
func (l *SweepLog) Add(read, updated int) { l.read, l.updated = l.read+read, l.updated+updated }

// Progress logs the counts so far when the last such line is every old.
func (l *SweepLog) Progress(attrs ...any) {
	if now := time.Now(); now.After(l.next) {
		l.next = now.Add(l.every)
		l.log.Info(l.store+": sweeping the orders' statuses", append([]any{"read", l.read, "updated", l.updated}, append(attrs,
			"took", time.Since(l.start).Round(time.Second).String())...)...)
	}
}

// Done logs the end, when any order was read.
func (l *SweepLog) Done() {
	if l.read > 0 {
		l.log.Info(l.store+": swept the orders' statuses", "rules", order.StatusRules, "read", l.read, "updated", l.updated,
			"took", time.Since(l.start).Round(time.Millisecond).String())
	}
}
