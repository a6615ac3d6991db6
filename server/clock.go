package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/durable"
)

// Clock is the server's time. In the sandbox it is a test clock that can be
// moved forward so that expiry and other time rules can be exercised in
// seconds; it never moves backwards, so event logs stay ordered.
type Clock struct {
	mu       sync.Mutex // guards offset; held only to read or swap it
	offset   time.Duration
	settable bool
	// moving serializes moves, which may wait for a disk write; Now does
	// not wait for it.
	moving sync.Mutex
	// persist, when set, durably records a new offset before it is used: a
	// clock move answered 200 survives a restart like any other change.
	persist func(time.Duration) error
	// wall is real time; nil is time.Now. A test fixes it, so that servers
	// on several stores read the same times.
	wall func() time.Time
}

// MaxClockOffset bounds how far the sandbox clock may run ahead of real
// time (a time.Duration holds only about 292 years).
const MaxClockOffset = 100 * 365 * 24 * time.Hour

// NewClock returns a clock at real time; settable enables Advance and Set.
func NewClock(settable bool) *Clock { return &Clock{settable: settable} }

// Now is the clock's current time in UTC.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return c.real().Add(off).UTC()
}

func (c *Clock) real() time.Time {
	if c.wall != nil {
		return c.wall()
	}
	return time.Now()
}

// Offset is how far the clock is ahead of real time.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Advance moves the clock forward by d (d > 0).
func (c *Clock) Advance(d time.Duration) error {
	if !c.settable {
		return fault.New(fault.Forbidden, "clock_fixed", "the clock can be moved only in the sandbox")
	}
	if d <= 0 {
		return fault.Invalidf("advance", "must be a positive duration such as \"36h\"")
	}
	c.moving.Lock()
	defer c.moving.Unlock()
	off := c.Offset()
	if d > MaxClockOffset-off {
		return fault.Invalidf("advance", "must keep the clock within %d years of real time", MaxClockOffset/(365*24*time.Hour))
	}
	return c.move(off + d)
}

// move makes off the offset, recording it first when the clock persists.
// The caller holds moving.
func (c *Clock) move(off time.Duration) error {
	if c.persist != nil {
		if err := c.persist(off); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				// The new record did not fit beside the old one, which
				// stands, as does the clock: the move may be sent again
				// once space is freed, as a write the bbolt store has no
				// room for.
				return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable",
					Message: "the data directory's disk is full; the clock was not moved, retry once space is freed", Err: err}
			}
			return fault.Internalf(err, "record the sandbox clock")
		}
	}
	c.mu.Lock()
	c.offset = off
	c.mu.Unlock()
	return nil
}

// Set moves the clock to t, which must not be earlier than now.
func (c *Clock) Set(t time.Time) error {
	if !c.settable {
		return fault.New(fault.Forbidden, "clock_fixed", "the clock can be moved only in the sandbox")
	}
	c.moving.Lock()
	defer c.moving.Unlock()
	now := c.real()
	off := c.Offset()
	if t.Before(now.Add(off)) {
		return fault.Invalidf("set", "must not be earlier than the clock's current time %s", now.Add(off).UTC().Format(time.RFC3339))
	}
	if t.Sub(now) > MaxClockOffset {
		return fault.Invalidf("set", "must be within %d years of real time", MaxClockOffset/(365*24*time.Hour))
	}
	return c.move(t.Sub(now))
}

// PersistTo keeps the clock's offset in the file at path: it starts from the
// offset recorded there (if any) and records every move before answering.
// Real time has moved on meanwhile, so a restarted clock never reads earlier
// than before.
func (c *Clock) PersistTo(path string) error {
	var rec struct {
		Offset time.Duration `json:"offsetNanos"`
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		err := json.Unmarshal(b, &rec)
		if err == nil && (rec.Offset < 0 || rec.Offset > MaxClockOffset) {
			// Well-formed JSON has no error of its own to show.
			err = fmt.Errorf("offset %v is not from 0 to %v", rec.Offset, MaxClockOffset)
		}
		if err != nil {
			return fmt.Errorf("sandbox clock file %s is damaged (%v); remove it to restart the clock at real time", path, err)
		}
	}
	persist := func(off time.Duration) error {
		rec.Offset = off
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return durable.WriteFile(path, b, 0o600)
	}
	// Written now, found or not, so that a directory the clock cannot be
	// kept in (missing, or made read-only with the file in it) fails at
	// start rather than on the first move.
	if err := persist(rec.Offset); err != nil {
		return fmt.Errorf("sandbox clock: %w", err)
	}
	c.moving.Lock()
	defer c.moving.Unlock()
	c.mu.Lock()
	c.offset, c.persist = rec.Offset, persist
	c.mu.Unlock()
	return nil
}
