package kassa_test

import (
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
)

// TestIdempotencyKeyLengthBound: a key of MaxIdempotencyKeyLen characters
// is taken, one character more is refused as invalid, before anything runs.
func TestIdempotencyKeyLengthBound(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000, 20000)
	longest := strings.Repeat("k", kassa.MaxIdempotencyKeyLen)
	if _, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: longest}, o.ID, partial(100)); err != nil {
		t.Fatalf("a key of %d characters: %v", len(longest), err)
	}
	_, err := f.ledger.PartialCapture(f.ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: longest + "k"}, o.ID, partial(100))
	if !fault.Is(err, fault.Invalid) {
		t.Fatalf("a key of %d characters: %v, want invalid", len(longest)+1, err)
	}
	got, _, _ := f.ledger.GetOrder(f.ctx, f.merchant, o.ID)
	if got.Amounts().Captured != 100 {
		t.Fatalf("captured %d, want 100", got.Amounts().Captured)
	}
}
