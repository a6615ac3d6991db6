package kassa

import "time"

// SetWallClock replaces the wall clock for a test and restores it at cleanup.
func SetWallClock(t interface{ Cleanup(func()) }, now func() time.Time) {
	old := wallClock
	wallClock = now
	t.Cleanup(func() { wallClock = old })
}
