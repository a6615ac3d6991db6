package main

import "testing"

func TestAcknowledged(t *testing.T) {
	orders, captures, refunds := tallyOf(correctOrders()).acknowledged()
	if orders != 3 || captures != 3 || refunds != 1 {
		t.Fatalf("acknowledged() = %d orders, %d captures, %d refunds; want 3, 3, 1", orders, captures, refunds)
	}
	if o, c, r := newTally().acknowledged(); o+c+r != 0 {
		t.Fatalf("an empty tally acknowledged %d, %d, %d", o, c, r)
	}
}
