package server

import (
	"sync"
	"time"

	"github.com/kassahq/kassa/fault"
)

// Clock is the server's time. In the sandbox it is a test clock that can be
// moved forward so that expiry and other time rules can be exercised in
// seconds; it never moves backwards, so event logs stay ordered.
type Clock struct {
	mu       sync.Mutex
	offset   time.Duration
	settable bool
}

// NewClock returns a clock at real time; settable enables Advance and Set.
func NewClock(settable bool) *Clock { return &Clock{settable: settable} }

// Now is the clock's current time in UTC.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return time.Now().Add(off).UTC()
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
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
	return nil
}

// Set moves the clock to t, which must not be earlier than now.
func (c *Clock) Set(t time.Time) error {
	if !c.settable {
		return fault.New(fault.Forbidden, "clock_fixed", "the clock can be moved only in the sandbox")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t.Before(now.Add(c.offset)) {
		return fault.Invalidf("set", "must not be earlier than the clock's current time %s", now.Add(c.offset).UTC().Format(time.RFC3339))
	}
	c.offset = t.Sub(now)
	return nil
}
