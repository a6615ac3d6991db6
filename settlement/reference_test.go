package settlement

import "testing"

// TestReferenceNumber: a reference reads back as the number it was made of,
// and text that is no reference as none.
func TestReferenceNumber(t *testing.T) {
	for _, n := range []int64{1, 42, 999999, 1234567} {
		if got, ok := ReferenceNumber(reference(n)); !ok || got != n {
			t.Errorf("ReferenceNumber(%q) = %d, %v; want %d", reference(n), got, ok, n)
		}
	}
	if got := reference(42); got != "S-000042" {
		t.Errorf("reference(42) = %q, want S-000042", got)
	}
	for _, ref := range []string{"", "S-", "S-12x", "X-000001", "S--1", "S-0", "s-000001"} {
		if got, ok := ReferenceNumber(ref); ok {
			t.Errorf("ReferenceNumber(%q) = %d, true; want none", ref, got)
		}
	}
}
