package kassa_test

import (
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/settlement"
)

// feeFixture is a fixture whose merchant pays 1.5 % + 1.00 per capture, so
// a capture settled alone shows in the fees.
func feeFixture(t *testing.T, now func() time.Time) *fixture {
	t.Helper()
	f := newFixtureWith(t, now, kassa.Options{})
	creds, _, err := f.ledger.EnsureMerchant(f.ctx, kassa.MerchantOptions{Name: "fees", FeeBasisPoints: 150, FeeFixedPerCapture: 100})
	if err != nil {
		t.Fatal(err)
	}
	f.merchant = creds.MerchantID
	return f
}

// captured creates an order of amount, captures it in full and returns the
// order's and the capture's ids.
func (f *fixture) captured(t *testing.T, tok string, amount int64) (orderID, ledgerID string) {
	t.Helper()
	o := f.order(t, tok, amount)
	res, err := f.ledger.Capture(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID, res.Order.Captured[0].ID
}

func (f *fixture) void(t *testing.T, orderID, ledgerID string) {
	t.Helper()
	if _, err := f.ledger.CancelLedger(f.ctx, kassa.Call{MerchantID: f.merchant}, orderID, ledgerID); err != nil {
		t.Fatal(err)
	}
}

type settled struct{ gross, fees, adjustments int64 }

func sums(made []settlement.Settlement) []settled {
	var out []settled
	for _, s := range made {
		out = append(out, settled{s.Gross, s.Fees, s.Adjustments})
	}
	return out
}

// TestReadCutBetweenCaptureAndVoid: docs/settlements.md, a capture voided
// before any run cancels out, neither paid nor charged a fee. A run reads
// the oldest items only (100 000); when the read ended between a capture
// and its void, the run paid the capture with its fee and left the void to
// the next run as an adjustment. The run now takes the void with it.
func TestReadCutBetweenCaptureAndVoid(t *testing.T) {
	kassa.SetSettlementRunSize(t, 2)
	start := time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC)
	now := start
	f := feeFixture(t, func() time.Time { return now })
	voided, voidedCapture := f.captured(t, "voided", 1000)
	now = start.Add(time.Minute)
	f.captured(t, "kept", 2000)
	now = start.Add(2 * time.Minute)
	f.void(t, voided, voidedCapture)
	now = start.Add(3 * time.Minute)
	f.captured(t, "later", 4000)

	now = start.Add(time.Hour)
	made, err := f.ledger.RunSettlements(f.ctx)
	// 2000 at 1.5 % + 100: a fee of 130.
	if want := []settled{{2000, 130, 0}}; err != nil || len(made) != 1 || sums(made)[0] != want[0] {
		t.Fatalf("first run: %+v %v; want %v, the voided capture cancelled out", sums(made), err, want)
	}
	made, err = f.ledger.RunSettlements(f.ctx)
	// 4000 at 1.5 % + 100: a fee of 160; no adjustment of the void.
	if want := []settled{{4000, 160, 0}}; err != nil || len(made) != 1 || sums(made)[0] != want[0] {
		t.Fatalf("second run: %+v %v; want %v, the capture left over and no adjustment", sums(made), err, want)
	}
	if made, err := f.ledger.RunSettlements(f.ctx); err != nil || len(made) != 0 {
		t.Fatalf("third run: %+v %v; want nothing left", sums(made), err)
	}
}

// TestDailyReadCutBetweenCaptureAndVoid: the daily run takes the void of a
// capture before its cutoff also when the void came after it (captured
// before 02:00, voided before the run), and also when the read ended
// between them.
func TestDailyReadCutBetweenCaptureAndVoid(t *testing.T) {
	kassa.SetSettlementRunSize(t, 2)
	cutoff := time.Date(2026, 2, 2, 2, 0, 0, 0, time.UTC)
	now := cutoff.Add(-2 * time.Hour)
	f := feeFixture(t, func() time.Time { return now })
	voided, voidedCapture := f.captured(t, "voided", 1000)
	now = cutoff.Add(-time.Hour)
	f.captured(t, "kept", 2000)
	now = cutoff.Add(time.Minute)
	f.void(t, voided, voidedCapture)

	now = cutoff.Add(2 * time.Minute)
	made, err := f.ledger.RunSettlementsBefore(f.ctx, cutoff)
	if want := []settled{{2000, 130, 0}}; err != nil || len(made) != 1 || sums(made)[0] != want[0] {
		t.Fatalf("daily run: %+v %v; want %v, the voided capture cancelled out", sums(made), err, want)
	}
	now = cutoff.Add(24*time.Hour + time.Minute)
	if made, err := f.ledger.RunSettlementsBefore(f.ctx, cutoff.Add(24*time.Hour)); err != nil || len(made) != 0 {
		t.Fatalf("next day's run: %+v %v; want no adjustment of the void", sums(made), err)
	}
}
