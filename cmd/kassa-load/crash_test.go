package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestAcknowledged(t *testing.T) {
	orders, captures, refunds := tallyOf(correctOrders()).acknowledged()
	if orders != 3 || captures != 3 || refunds != 1 {
		t.Fatalf("acknowledged() = %d orders, %d captures, %d refunds; want 3, 3, 1", orders, captures, refunds)
	}
	if o, c, r := newTally().acknowledged(); o+c+r != 0 {
		t.Fatalf("an empty tally acknowledged %d, %d, %d", o, c, r)
	}
}

// A round that finds an acknowledged capture missing says which order:
// before, the crash test sent verify's lines to io.Discard and printed only
// "2 mismatches", naming no order to look into.
func TestCheckRoundNamesTheOrder(t *testing.T) {
	acked := correctOrders()
	held := correctOrders()
	f := held["o1"]
	f.captures = f.captures[:1] // the second capture acknowledged, not stored
	f.uncaptured = 2500
	held["o1"] = f
	var out strings.Builder
	if _, bad := checkRound(context.Background(), fakeServer(t, held), tallyOf(acked), time.Now(), &out); bad != 1 ||
		!regexp.MustCompile(`(?m)^MISMATCH o1: `).MatchString(out.String()) {
		t.Fatalf("%d mismatches, want 1 with a line naming o1:\n%s", bad, out.String())
	}
}
