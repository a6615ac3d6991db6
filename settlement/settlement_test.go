package settlement

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

func TestFee(t *testing.T) {
	for _, c := range []struct{ amount, bp, fixed, want int64 }{
		{10000, 150, 0, 150}, {10033, 150, 0, 150}, {10034, 150, 0, 151}, // 150.51 → 151
		{33, 150, 0, 0}, {34, 150, 0, 1}, // 0.51 → 1, half away from zero
		{10000, 0, 250, 250}, {0, 150, 250, 250}, {123456, 199, 100, 2557},
	} {
		if got := (FeePolicy{c.bp, c.fixed}).Fee(c.amount); got != c.want {
			t.Errorf("fee(%d, %d bp + %d) = %d, want %d", c.amount, c.bp, c.fixed, got, c.want)
		}
	}
}

func testEnv(now time.Time) Env {
	refs := map[string]int64{}
	return Env{Now: now, IDs: &ordertest.IDs{}, Fees: func(string) FeePolicy { return FeePolicy{BasisPoints: 150, FixedPerCapture: 100} },
		Reference: func(m string) (int64, error) { refs[m]++; return refs[m], nil }}
}

func TestRunGroupsAndCancelsVoidedPairs(t *testing.T) {
	at := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC) // a Friday: payout on Monday
	items := []Item{
		{Key: "c1", MerchantID: "m1", StoreID: "a", Currency: "SEK", LedgerID: "c1", Kind: KindCapture, Amount: 10000, OccurredAt: at},
		{Key: "r1", MerchantID: "m1", StoreID: "a", Currency: "SEK", LedgerID: "r1", Kind: KindRefund, Amount: 2500, OccurredAt: at.Add(time.Minute)},
		{Key: "c2", MerchantID: "m1", StoreID: "b", Currency: "SEK", LedgerID: "c2", Kind: KindCapture, Amount: 5000, OccurredAt: at},
		{Key: "c3", MerchantID: "m1", StoreID: "a", Currency: "EUR", LedgerID: "c3", Kind: KindCapture, Amount: 700, OccurredAt: at},
		{Key: "c4", MerchantID: "m1", StoreID: "a", Currency: "SEK", LedgerID: "c4", Kind: KindCapture, Amount: 999, OccurredAt: at},
		{Key: "c4:void", MerchantID: "m1", StoreID: "a", Currency: "SEK", LedgerID: "c4", Kind: kindVoid, Amount: 999, OccurredAt: at},
		{Key: "c0:void", MerchantID: "m2", StoreID: "", Currency: "SEK", LedgerID: "c0", Kind: kindVoid, Amount: 300, OccurredAt: at},
	}
	bs, err := Run(items, testEnv(at))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 4 {
		t.Fatalf("%d settlements", len(bs))
	}
	sek := bs[1].Settlement // m1, store a, SEK (EUR sorts first)
	if sek.Currency != "SEK" || sek.StoreID != "a" || sek.Gross != 10000 || sek.Refunds != 2500 || sek.Fees != 250 ||
		sek.Net != 7250 || sek.TransactionCount != 3 || sek.PayoutDate != "2026-03-09" || sek.Reference != "S-000002" {
		t.Fatalf("SEK settlement %+v", sek)
	}
	adj := bs[3].Settlement // m2: a void of an earlier-settled capture
	if adj.Adjustments != 300 || adj.Net != -300 || adj.Reference != "S-000001" {
		t.Fatalf("adjustment %+v", adj)
	}
	var keys []string
	for _, b := range bs {
		keys = append(keys, b.Keys...)
	}
	if len(keys) != len(items) {
		t.Fatalf("consumed %d keys of %d: %v", len(keys), len(items), keys)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, &sek, bs[1].Transactions); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 5 || rows[4][2] != "net" || rows[4][8] != "72.50" || rows[1][8] != "100.00" || rows[2][8] != "-2.50" {
		t.Fatalf("csv %v %v", rows, err)
	}
}

// TestSettlementProperty runs random captures, refunds, voids, payments,
// recourses and settlement runs over real orders and checks after every
// step: every capture and refund is in exactly one settlement once a run came
// after it, none twice; each settlement's net = gross − refunds − fees −
// adjustments − recourses = sum of its transactions; fees follow the
// formula; per capture, settled and queued money is captured − refunded −
// the claim the merchant holds after a recourse.
func TestSettlementProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := ordertest.New()
		env := testEnv(f.Clock.Now())
		var orders []*order.Order
		var queue []Item
		settledIn := map[string]string{} // item key → settlement id
		var all []Batch
		enqueue := func(before, after *order.Order) { queue = append(queue, NewItems(before, after)...) }
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			f.Clock.Advance(time.Minute)
			switch op := rapid.IntRange(0, 7).Draw(rt, "op"); {
			case op == 0 || len(orders) == 0:
				o := f.Order(rt)
				orders = append(orders, o)
				enqueue(nil, o)
			case op == 1:
				o := orders[rapid.IntRange(0, len(orders)-1).Draw(rt, "o")]
				before := o.Clone()
				amt := rapid.Int64Range(1, 5000).Draw(rt, "amt")
				if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("x", 1, amt, 2500)},
					TotalCaptureAmount: &amt}, f.Env()); err == nil {
					enqueue(before, o)
				}
			case op == 2:
				o := orders[rapid.IntRange(0, len(orders)-1).Draw(rt, "o")]
				if len(o.Captured) == 0 {
					continue
				}
				before := o.Clone()
				l := o.Captured[rapid.IntRange(0, len(o.Captured)-1).Draw(rt, "l")]
				amt := rapid.Int64Range(1, 3000).Draw(rt, "ramt")
				if _, err := refund.Partial(o, l.ID, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("r", 1, amt, 2500)},
					TotalRefundAmount: &amt}, f.Env()); err == nil {
					enqueue(before, o)
				}
			case op == 3:
				o := orders[rapid.IntRange(0, len(orders)-1).Draw(rt, "o")]
				if len(o.Captured) == 0 {
					continue
				}
				before := o.Clone()
				if err := o.CancelLedger(o.Captured[len(o.Captured)-1].ID, f.Env()); err == nil {
					enqueue(before, o)
				}
			case op == 4: // the buyer pays the provider
				o := orders[rapid.IntRange(0, len(orders)-1).Draw(rt, "o")]
				if len(o.Captured) == 0 {
					continue
				}
				l := &o.Captured[rapid.IntRange(0, len(o.Captured)-1).Draw(rt, "l")]
				due := o.Outstanding(l)
				if due <= 0 || l.Void() {
					continue
				}
				before := o.Clone()
				err := o.RegisterPayment(l.ID, rapid.Int64Range(1, due).Draw(rt, "paid"), f.Env())
				switch {
				case l.Recourse != "" && !fault.Is(err, fault.NotAvailable):
					rt.Fatalf("a payment after the recourse of %s: %v, want refused", l.ID, err)
				case l.Recourse == "" && err != nil:
					rt.Fatalf("payment: %v", err)
				}
				enqueue(before, o)
			case op == 5: // the invoice is handed back to the merchant
				o := orders[rapid.IntRange(0, len(orders)-1).Draw(rt, "o")]
				if len(o.Captured) == 0 {
					continue
				}
				before := o.Clone()
				l := o.Captured[rapid.IntRange(0, len(o.Captured)-1).Draw(rt, "l")]
				if err := o.Recourse(l.ID, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")}, f.Env()); err == nil {
					enqueue(before, o)
				}
			default:
				env.Now = f.Clock.Now()
				bs, err := Run(queue, env)
				if err != nil {
					rt.Fatal(err)
				}
				for _, b := range bs {
					for _, k := range b.Keys {
						if prev, dup := settledIn[k]; dup {
							rt.Fatalf("item %s settled twice (%s and %s)", k, prev, b.Settlement.ID)
						}
						settledIn[k] = b.Settlement.ID
					}
				}
				all = append(all, bs...)
				queue = nil
			}
			// Every item ever queued and not still queued was settled exactly once.
			inQueue := map[string]bool{}
			for _, it := range queue {
				inQueue[it.Key] = true
			}
			// A refund within the claim a recourse handed the merchant
			// queues nothing: the money check below covers it.
			for _, o := range orders {
				for _, l := range append(append([]order.Ledger{}, o.Captured...), o.Refunded...) {
					if c := o.Ledger(l.RefundOf); c != nil && c.RecourseClaim > 0 {
						continue
					}
					if _, ok := settledIn[l.ID]; !ok && !inQueue[l.ID] {
						rt.Fatalf("ledger %s neither settled nor queued", l.ID)
					}
				}
			}
			// Money, per capture, fees aside: what its settlements pay and
			// what is still queued for them sums to captured − refunded − the
			// claim the merchant still holds after a recourse (nothing for a
			// voided capture).
			captureOf := map[string]string{} // ledger id → its capture
			for _, o := range orders {
				for _, c := range o.Captured {
					captureOf[c.ID] = c.ID
				}
				for _, r := range o.Refunded {
					captureOf[r.ID] = r.RefundOf
				}
			}
			got := map[string]int64{}
			for _, it := range queue {
				sign := int64(-1)
				if it.Kind == KindCapture {
					sign = 1
				}
				got[captureOf[it.LedgerID]] += sign * it.Amount
			}
			for _, b := range all {
				for _, tx := range b.Transactions {
					if tx.Type != KindFee {
						got[captureOf[tx.LedgerID]] += tx.Amount
					}
				}
			}
			for _, o := range orders {
				for i := range o.Captured {
					c := &o.Captured[i]
					want := int64(0)
					if !c.Void() {
						want = order.SumLines(c.Lines, o.VATMode).Gross - o.RefundedOf(c.ID) - o.ClaimLeft(c)
					}
					if got[c.ID] != want {
						rt.Fatalf("capture %s (recourse claim %d, paid %d) pays the merchant %d, want %d", c.ID, c.RecourseClaim, c.Paid, got[c.ID], want)
					}
				}
			}
			for _, b := range all {
				s := b.Settlement
				if s.ID == "" {
					continue
				}
				var sum, gross, refunds, fees, adj, recourses int64
				for _, tx := range b.Transactions {
					sum += tx.Amount
					switch tx.Type {
					case KindCapture:
						gross += tx.Amount
						if fee := env.Fees(s.MerchantID).Fee(tx.Amount); fee != 0 {
							var found bool
							for _, f := range b.Transactions {
								found = found || (f.Type == KindFee && f.LedgerID == tx.LedgerID && f.Amount == -fee)
							}
							if !found {
								rt.Fatalf("no fee %d for capture %s", fee, tx.LedgerID)
							}
						}
					case KindRefund:
						refunds -= tx.Amount
					case KindFee:
						fees -= tx.Amount
					case KindAdjustment:
						adj -= tx.Amount
					case KindRecourse:
						recourses -= tx.Amount
					}
				}
				if s.Net != s.Gross-s.Refunds-s.Fees-s.Adjustments-s.Recourses || s.Net != sum || s.Gross != gross ||
					s.Refunds != refunds || s.Fees != fees || s.Adjustments != adj || s.Recourses != recourses ||
					s.TransactionCount != len(b.Transactions) {
					rt.Fatalf("settlement %s does not add up: %+v (sum %d)", s.ID, s, sum)
				}
			}
		}
	})
}

func TestCSVKeepsMerchantTextFromBeingAFormula(t *testing.T) {
	s := &Settlement{Reference: "S-1", Currency: "SEK"}
	txs := []Transaction{
		{Seq: 1, Type: "capture", MerchantReference: "=HYPERLINK(\"http://x\")", Amount: 20000, Currency: "SEK"},
		{Seq: 2, Type: "refund", MerchantReference: "-1+2", Amount: -5000, Currency: "SEK"},
		{Seq: 3, Type: "capture", MerchantReference: "PO-7", Amount: 100, Currency: "SEK"},
		{Seq: 4, Type: "capture", MerchantReference: "@SUM(A1)", Amount: 100, Currency: "SEK"},
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, s, txs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ ref, amount string }{
		{`'=HYPERLINK("http://x")`, "200.00"}, {"'-1+2", "-50.00"}, {"PO-7", "1.00"}, {"'@SUM(A1)", "1.00"},
	} {
		if got := rows[i+1]; got[7] != want.ref || got[8] != want.amount {
			t.Errorf("row %d: reference %q amount %q, want %q %q", i+1, got[7], got[8], want.ref, want.amount)
		}
	}
}

// textCell's parts after a ";" (the cells a spreadsheet with ";" as its
// separator sees): each that starts as a formula past its quotes and spaces
// gets the apostrophe, tab and CR being formula starts too; the text's own
// start is a formula only by its first character, as it was before.
func TestTextCellPartsAfterASemicolon(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"PO-7", "PO-7"},
		{"=1;=2", "'=1;'=2"},
		{";=1", ";'=1"},
		{"PO-1;@SUM(1+1)", "PO-1;'@SUM(1+1)"},
		{`PO-2; " -2+3`, `PO-2;' " -2+3`},
		{"PO-3;\tplain", "PO-3;'\tplain"},
		{"PO-4;\r=1", "PO-4;'\r=1"},
		{"PO-5;ok;+1;x=1", "PO-5;ok;'+1;x=1"},
		{`PO-6;;" ;`, `PO-6;;" ;`},
		{` -5 kr;ok`, ` -5 kr;ok`},
		{`"=1";ok`, `"=1";ok`},
	} {
		if got := textCell(c.in); got != c.want {
			t.Errorf("textCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSettlementNeverDatedBeforeItsItems: a run may read items stamped after
// its own time (on PostgreSQL a run waits for another replica's run while
// captures commit; a replica's clock lags another's). A probe across three
// PostgreSQL replicas saw 178 of 2 908 settlements dated up to 0.73 s before
// their last transaction, with payoutDate and the createdFrom/createdTo
// filters following the early date.
func TestSettlementNeverDatedBeforeItsItems(t *testing.T) {
	run := time.Date(2026, 3, 6, 23, 59, 59, 500_000_000, time.UTC) // Friday: payout on Monday
	for _, tc := range []struct {
		name        string
		last        time.Time
		wantCreated time.Time
		wantPayout  string
	}{
		{"items before the run", run.Add(-time.Hour), run, "2026-03-09"},
		{"an item at the run's time", run, run, "2026-03-09"},
		{"an item after the run's time", run.Add(time.Second), run.Add(time.Second), "2026-03-09"}, // Saturday: Monday
		{"an item a day later", run.Add(49 * time.Hour), run.Add(49 * time.Hour), "2026-03-10"},    // Monday: Tuesday
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := []Item{
				{Key: "c1", MerchantID: "m1", Currency: "SEK", LedgerID: "c1", Kind: KindCapture, Amount: 100, OccurredAt: run.Add(-2 * time.Hour)},
				{Key: "c2", MerchantID: "m1", Currency: "SEK", LedgerID: "c2", Kind: KindCapture, Amount: 200, OccurredAt: tc.last},
			}
			bs, err := Run(items, testEnv(run))
			if err != nil || len(bs) != 1 {
				t.Fatalf("%d settlements, %v", len(bs), err)
			}
			s := bs[0].Settlement
			if !s.CreatedAt.Equal(tc.wantCreated) || !s.PeriodEnd.Equal(tc.last) || s.PayoutDate != tc.wantPayout {
				t.Fatalf("created %v, period end %v, payout %s; want %v, %v, %s",
					s.CreatedAt, s.PeriodEnd, s.PayoutDate, tc.wantCreated, tc.last, tc.wantPayout)
			}
		})
	}
}

// TestNewItemsOfARecourse: a recourse hands the merchant the claim K =
// captured − refunded − paid, which it was paid at settlement: the claim is
// taken back once, keyed so a retry queues the same item. A refund after
// the recourse first lowers the buyer's debt to the merchant: only the part
// beyond the claim still left is taken back, and a refund within it queues
// nothing.
func TestNewItemsOfARecourse(t *testing.T) {
	type step struct {
		op     string // pay, refund, recourse, legacy (a recourse made before kassa settled them)
		amount int64
		want   []Item // Kind and Amount only
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"unpaid", []step{{op: "recourse", want: []Item{{Kind: KindRecourse, Amount: 10000}}}}},
		{"paid and refunded in part first", []step{
			{op: "pay", amount: 3000},
			{op: "refund", amount: 2000, want: []Item{{Kind: KindRefund, Amount: 2000}}},
			{op: "recourse", want: []Item{{Kind: KindRecourse, Amount: 5000}}},
		}},
		{"refunds within the claim, then beyond it", []step{
			{op: "pay", amount: 3000},
			{op: "recourse", want: []Item{{Kind: KindRecourse, Amount: 7000}}},
			{op: "refund", amount: 2000},
			{op: "refund", amount: 4000},
			{op: "refund", amount: 3000, want: []Item{{Kind: KindRefund, Amount: 2000}}},
			{op: "refund", amount: 1000, want: []Item{{Kind: KindRefund, Amount: 1000}}},
		}},
		{"a refund larger than the claim", []step{
			{op: "pay", amount: 6000},
			{op: "recourse", want: []Item{{Kind: KindRecourse, Amount: 4000}}},
			{op: "refund", amount: 7000, want: []Item{{Kind: KindRefund, Amount: 3000}}},
		}},
		{"recoursed before kassa settled recourses", []step{
			{op: "legacy"},
			{op: "refund", amount: 2500, want: []Item{{Kind: KindRefund, Amount: 2500}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ordertest.New()
			o := f.Order(t)
			amt := int64(10000)
			if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("x", 1, amt, 2500)},
				TotalCaptureAmount: &amt}, f.Env()); err != nil {
				t.Fatal(err)
			}
			capID := o.Captured[0].ID
			for i, s := range tc.steps {
				f.Clock.Advance(time.Minute)
				before := o.Clone()
				var err error
				switch s.op {
				case "pay":
					err = o.RegisterPayment(capID, s.amount, f.Env())
				case "refund":
					_, err = refund.Partial(o, capID, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("r", 1, s.amount, 2500)},
						TotalRefundAmount: &s.amount}, f.Env())
				case "recourse", "legacy":
					err = o.Recourse(capID, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")}, f.Env())
					if s.op == "legacy" {
						o.Captured[0].RecourseClaim, o.Captured[0].RecoursedAt = 0, time.Time{}
						before = o.Clone() // stored long ago: its item, had there been one, is not this step's
					}
				}
				if err != nil {
					t.Fatalf("step %d %s: %v", i, s.op, err)
				}
				got := NewItems(before, o)
				if len(got) != len(s.want) {
					t.Fatalf("step %d %s: items %+v, want %+v", i, s.op, got, s.want)
				}
				for j, it := range got {
					if it.Kind != s.want[j].Kind || it.Amount != s.want[j].Amount {
						t.Fatalf("step %d %s: item %+v, want %s of %d", i, s.op, it, s.want[j].Kind, s.want[j].Amount)
					}
					if it.Kind == KindRecourse && (it.Key != capID+":recourse" || it.LedgerID != capID || !it.OccurredAt.Equal(f.Clock.Now())) {
						t.Fatalf("recourse item %+v: want key %s:recourse at %v", it, capID, f.Clock.Now())
					}
				}
				if again := NewItems(o, o); len(again) != 0 {
					t.Fatalf("step %d: nothing new queues %+v", i, again)
				}
			}
			if o.Captured[0].Recourse != "" {
				err := o.RegisterPayment(capID, 1, f.Env())
				if o.Outstanding(&o.Captured[0]) > 0 && !fault.Is(err, fault.NotAvailable) {
					t.Fatalf("a payment after the recourse: %v, want refused", err)
				}
			}
		})
	}
}

// TestRunSettlesARecourse: a recourse is its own transaction, negative,
// counted in the settlement's recourses; with its capture in the same
// settlement the net is what the merchant keeps.
func TestRunSettlesARecourse(t *testing.T) {
	at := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	items := []Item{
		{Key: "c1", MerchantID: "m1", Currency: "SEK", LedgerID: "c1", Kind: KindCapture, Amount: 10000, OccurredAt: at},
		{Key: "c1:recourse", MerchantID: "m1", Currency: "SEK", LedgerID: "c1", Kind: KindRecourse, Amount: 7000, OccurredAt: at.Add(time.Minute)},
	}
	bs, err := Run(items, testEnv(at.Add(time.Hour)))
	if err != nil || len(bs) != 1 {
		t.Fatalf("%d settlements, %v", len(bs), err)
	}
	s, txs := bs[0].Settlement, bs[0].Transactions
	// fee: 1.5 % of 100.00 + 1.00 = 2.50
	if s.Gross != 10000 || s.Recourses != 7000 || s.Fees != 250 || s.Net != 2750 || len(txs) != 3 ||
		txs[2].Type != KindRecourse || txs[2].Amount != -7000 || len(bs[0].Keys) != 2 {
		t.Fatalf("settlement %+v, transactions %+v", s, txs)
	}
	if r := s.View(); r.RecourseAmount.Amount != "70.00" {
		t.Fatalf("record %+v", r)
	}
}
