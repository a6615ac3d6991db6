// Package rapidrun runs pgregory.net/rapid properties whose sequences are too
// slow for rapid's default of 100 checks in every go test run (whole
// businesses through the real router, several stores compared): a few by
// default, as many as -rapid.checks asks when it is given.
package rapidrun

import (
	"flag"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// Check runs prop under rapid.Check. Only the first n sequences do any work,
// or the -rapid.checks given on the command line: rapid itself always runs
// its 100, and past n they pass at once, until one has failed and rapid
// shrinks it, whose smaller sequences then run in full. prop gets the
// sequence's number, from 1.
func Check(t *testing.T, n int, prop func(rt *rapid.T, seq int)) {
	t.Helper()
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			fmt.Sscan(f.Value.String(), &n)
		}
	})
	seq, failed := 0, false
	rapid.Check(t, func(rt *rapid.T) {
		if seq++; seq > n && !failed {
			return
		}
		defer func() {
			if p := recover(); p != nil {
				failed = true
				panic(p)
			}
		}()
		prop(rt, seq)
	})
}
