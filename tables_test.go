package kassa_test

import (
	"slices"
	"testing"

	"github.com/kassahq/kassa"
)

// PaymentStatuses documents the payment status enum for every instance in a
// process (the OpenAPI document lists it): what an importer does with the
// slice it is handed must not change it.
func TestPaymentStatusesCannotBeChangedByACaller(t *testing.T) {
	want := kassa.PaymentStatuses()
	got := kassa.PaymentStatuses()
	got[0] = "stolen"
	_ = append(got[:2], "forged")
	if now := kassa.PaymentStatuses(); !slices.Equal(now, want) || slices.Contains(now, "stolen") || slices.Contains(now, "forged") {
		t.Fatalf("PaymentStatuses() = %v after a caller changed its copy, want %v", now, want)
	}
}
