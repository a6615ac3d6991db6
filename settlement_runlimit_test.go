package kassa_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
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

// TestRunSizeNeverChangesWhatIsPaid: whatever the number of items one run
// reads, runs repeated until the queue is empty settle what one run of
// everything does: the same captures, fees, refunds, adjustments and
// recourses in sum, and so the same net. A capture and its void at any
// distance in the queue, a refund or a recourse of the same instant as its
// capture (a clock that stood still) on either side of a run's last item.
func TestRunSizeNeverChangesWhatIsPaid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		type op struct {
			kind, target int // kind: 0 capture, 1 void, 2 refund, 3 recourse, 4 tick
			amount       int64
		}
		ops := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) op {
			return op{rapid.IntRange(0, 4).Draw(rt, "kind"), rapid.IntRange(0, 20).Draw(rt, "target"),
				rapid.Int64Range(1, 5000).Draw(rt, "amount")}
		}), 1, 30).Draw(rt, "ops")
		size := rapid.IntRange(1, 4).Draw(rt, "runSize")
		total := func(runSize int) (sum [5]int64, runs int) {
			kassa.SetSettlementRunSize(t, runSize)
			now := time.Date(2026, 2, 2, 10, 0, 0, 0, time.UTC)
			f := feeFixture(t, func() time.Time { return now })
			type capt struct{ order, ledger string }
			var caps []capt
			for i, o := range ops {
				call := kassa.Call{MerchantID: f.merchant}
				switch o.kind {
				case 0:
					id, l := f.captured(t, fmt.Sprint("tok", i), o.amount)
					caps = append(caps, capt{id, l})
				case 4:
					now = now.Add(time.Second)
				default:
					if len(caps) == 0 {
						continue
					}
					c := caps[o.target%len(caps)]
					var err error
					switch o.kind {
					case 1:
						_, err = f.ledger.CancelLedger(f.ctx, call, c.order, c.ledger)
					case 2:
						_, err = f.ledger.Refund(f.ctx, call, c.order, c.ledger, nil)
					case 3:
						_, err = f.ledger.Recourse(f.ctx, call, c.order, c.ledger, &order.RecourseRequest{Reason: ptr("unpaid")})
					}
					if err != nil && fault.KindOf(err) != fault.NotAvailable {
						rt.Fatalf("op %d %+v: %v", i, o, err)
					}
				}
			}
			now = now.Add(time.Hour)
			for {
				made, err := f.ledger.RunSettlements(f.ctx)
				if err != nil {
					rt.Fatal(err)
				}
				for _, s := range made {
					sum[0] += s.Gross
					sum[1] += s.Fees
					sum[2] += s.Refunds
					sum[3] += s.Adjustments
					sum[4] += s.Recourses
				}
				runs++
				left := 0
				if err := f.store.View(f.ctx, func(tx storage.Tx) error {
					items, err := tx.PendingSettlementItems(1)
					left = len(items)
					return err
				}); err != nil {
					rt.Fatal(err)
				}
				if left == 0 {
					return sum, runs
				}
				if runs > len(ops)*3+1 {
					rt.Fatalf("still items queued after %d runs of %d", runs, runSize)
				}
			}
		}
		want, _ := total(1 << 30)
		got, runs := total(size)
		if got != want {
			rt.Fatalf("%d runs of %d settled [gross fees refunds adjustments recourses] %v; one run of everything %v", runs, size, got, want)
		}
	})
}
