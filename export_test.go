package kassa

import "time"

// SetWallClock replaces the wall clock for a test and restores it at cleanup.
func SetWallClock(t interface{ Cleanup(func()) }, now func() time.Time) {
	old := wallClock
	wallClock = now
	t.Cleanup(func() { wallClock = old })
}

// SetSettlementRunSize lowers how many queued items one settlement run
// reads, for a test, and restores it at cleanup.
func SetSettlementRunSize(t interface{ Cleanup(func()) }, n int) {
	old := settlementRunSize
	settlementRunSize = n
	t.Cleanup(func() { settlementRunSize = old })
}

// SetExportChunk lowers how many transactions a settlement export reads per
// read transaction, for a test, and restores it at cleanup.
func SetExportChunk(t interface{ Cleanup(func()) }, n int) {
	old := exportChunk
	exportChunk = n
	t.Cleanup(func() { exportChunk = old })
}
