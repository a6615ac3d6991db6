package kassa_test

import (
	"testing"

	"github.com/kassahq/kassa"
)

// TestFailedSettlementRunAnswersNone makes each store call of a settlement
// run of two merchants fail in turn, after it did its work: the run was
// rolled back, so it answers no settlement, not the ones it had built in
// the transaction before the failure (kassa serve logged their count as
// made, an embedder may book them).
func TestFailedSettlementRunAnswersNone(t *testing.T) {
	withUndoFixtures(t, func(t *testing.T, f *undoFixture) {
		f.captured(t, f.order(t, f.merchant).ID)
		ack := f.order(t, f.ackMerch)
		if _, err := f.l.Acknowledge(f.ctx, kassa.Call{MerchantID: f.ackMerch}, ack.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.l.Capture(f.ctx, kassa.Call{MerchantID: f.ackMerch}, ack.ID, nil); err != nil {
			t.Fatal(err)
		}
		for k := 1; ; k++ {
			if k > 200 {
				t.Fatal("no success after 200 injected failures")
			}
			before := f.st.snapshot(t)
			f.inj.arm(k, true)
			made, err := f.l.RunSettlements(f.ctx)
			injected, method := f.inj.fired()
			f.inj.arm(0, false)
			if injected == nil {
				if err != nil || len(made) != 2 {
					t.Fatalf("a run without failure: %d settlements, %v", len(made), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("call %d (%s) failed and the run answered no error", k, method)
			}
			if d := firstDiff(before, f.st.snapshot(t)); d != "" {
				t.Fatalf("call %d (%s) failed and the store changed: %s", k, method, d)
			}
			if len(made) != 0 {
				t.Errorf("call %d (%s) failed, nothing was stored, and the run answered %d settlements made", k, method, len(made))
			}
		}
	})
}
