package main

import (
	"testing"
	"time"
)

func tx(typ, ledger string, amount int64) txRecord {
	return txRecord{Type: typ, LedgerID: ledger, Amount: money{amount}}
}

func TestFeeMismatches(t *testing.T) {
	pct := feePolicy{basisPoints: 250, fixed: 100} // 2.5 % + 1.00
	for _, c := range []struct {
		name   string
		policy feePolicy
		txs    []txRecord
		want   int
	}{
		{"no fees, none charged", serveFees, []txRecord{tx("capture", "c1", 1000), tx("refund", "r1", -400)}, 0},
		{"no fees, one credited: paid out one minor unit too much", serveFees, []txRecord{tx("capture", "c1", 1000), tx("fee", "c1", 1)}, 1},
		{"no fees, one charged", serveFees, []txRecord{tx("capture", "c1", 1000), tx("fee", "c1", -1)}, 1},
		{"fees charged right", pct, []txRecord{tx("capture", "c1", 1000), tx("fee", "c1", -125), tx("capture", "c2", 1020), tx("fee", "c2", -126)}, 0},
		{"fee one minor unit short", pct, []txRecord{tx("capture", "c1", 1000), tx("fee", "c1", -124)}, 1},
		{"fee left out", pct, []txRecord{tx("capture", "c1", 1000)}, 1},
		{"fee on no capture of the settlement", serveFees, []txRecord{tx("fee", "c9", -5)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := feeMismatches(c.txs, c.policy); len(got) != c.want {
				t.Fatalf("feeMismatches = %q, want %d", got, c.want)
			}
		})
	}
}

func TestFeePolicyRoundsHalfAwayFromZero(t *testing.T) {
	p := feePolicy{basisPoints: 50} // 0.5 %
	for amount, want := range map[int64]int64{100: 1, 99: 0, 300: 2, 0: 0, -100: -1, -300: -2} {
		if got := p.fee(amount); got != want {
			t.Errorf("fee(%d) = %d, want %d", amount, got, want)
		}
	}
}

func TestSettlementMismatches(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(id, ref string, made time.Time) settlementRecord {
		return settlementRecord{ID: id, Reference: ref, CreatedAt: made, PeriodEnd: at}
	}
	for _, c := range []struct {
		name string
		all  []settlementRecord
		want int
	}{
		{"none", nil, 0},
		{"gapless, in any order", []settlementRecord{rec("b", "S-000002", at), rec("a", "S-000001", at.Add(time.Second)), rec("c", "S-000003", at)}, 0},
		{"a gap", []settlementRecord{rec("a", "S-000001", at), rec("c", "S-000003", at)}, 1},
		{"one reference twice", []settlementRecord{rec("a", "S-000001", at), rec("b", "S-000001", at)}, 2}, // twice, and S-000002 missing
		{"not from S-000001", []settlementRecord{rec("a", "S-000002", at)}, 1},
		{"not a reference", []settlementRecord{rec("a", "S-1", at)}, 2},
		{"made before its period's end", []settlementRecord{rec("a", "S-000001", at.Add(-time.Nanosecond))}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := settlementMismatches(c.all); len(got) != c.want {
				t.Fatalf("settlementMismatches = %q, want %d", got, c.want)
			}
		})
	}
}
