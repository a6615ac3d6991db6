package kassa_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/token"
)

// TestSettlementsPayWhatOrdersSay drives orders of both VAT modes through
// random captures, refunds, payments, recourses, voids, replays of the same
// idempotency key and settlement runs, and checks that what the settlements
// paid per capture (fees aside) is captured − refunded − the claim the
// merchant still holds after a recourse (0 for a voided capture).
func TestSettlementsPayWhatOrdersSay(t *testing.T) {
	stores := map[string]func(t *rapid.T, now func() time.Time) storage.Store{
		"memory": func(_ *rapid.T, now func() time.Time) storage.Store { return memory.New(now) },
	}
	dir := t.TempDir()
	n := 0
	stores["bolt"] = func(rt *rapid.T, now func() time.Time) storage.Store {
		n++
		b, err := bolt.Open(filepath.Join(dir, fmt.Sprint(n, ".db")), bolt.Options{Clock: now, NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		return b
	}
	if os.Getenv("KASSA_TEST_DATABASE_URL") != "" {
		u := pgtest.FreshSchema(t)
		var clock func() time.Time
		pg, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 4, Clock: func() time.Time { return clock() }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		stores["postgres"] = func(_ *rapid.T, now func() time.Time) storage.Store { clock = now; return unclosed{pg} }
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { settlementMoneyRun(rt, open) })
		})
	}

}

func settlementMoneyRun(t *rapid.T, open func(t *rapid.T, now func() time.Time) storage.Store) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	st := open(t, func() time.Time { return now })
	if c, ok := st.(interface{ Close() error }); ok {
		defer c.Close()
	}
	l := kassa.New(st, kassa.Options{})
	ctx := context.Background()
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", FeeBasisPoints: 150, FeeFixedPerCapture: 100})
	if err != nil {
		t.Fatal(err)
	}
	mid := creds.MerchantID
	var ids []string
	var settlements []settlement.Settlement
	var last func() error
	key := 0
	call := func() kassa.Call { key++; return kassa.Call{MerchantID: mid, IdempotencyKey: fmt.Sprint("k", key)} }
	get := func(id string) *order.Order {
		o, _, err := l.GetOrder(ctx, mid, id)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	settle := func() {
		ss, err := l.RunSettlements(ctx)
		if err != nil {
			t.Fatal(err)
		}
		settlements = append(settlements, ss...)
	}
	steps := rapid.IntRange(1, 40).Draw(t, "steps")
	for i := 0; i < steps; i++ {
		now = now.Add(time.Minute)
		op := rapid.IntRange(0, 10).Draw(t, "op")
		if op == 0 || len(ids) == 0 {
			tok := fmt.Sprint("tok", i)
			req, lines, vm := ordertest.DrawCreate(t, &ordertest.IDs{}, 3, 20000)
			total := order.SumLines(lines, vm).Gross
			a := &token.Authorization{Token: tok, MerchantID: mid, Country: "SE", Currency: "SEK", Locale: "sv-SE",
				PaymentMethod:  order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
				ApprovedAmount: total + 5000, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if err := l.PutAuthorization(ctx, a); err != nil {
				t.Fatal(err)
			}
			res, err := l.CreateOrderFromAuthorization(ctx, call(), tok, req)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			ids = append(ids, res.Order.ID)
			continue
		}
		id := ids[rapid.IntRange(0, len(ids)-1).Draw(t, "order")]
		o := get(id)
		var capt *order.Ledger
		if len(o.Captured) > 0 {
			capt = &o.Captured[rapid.IntRange(0, len(o.Captured)-1).Draw(t, "capture")]
		}
		c := call()
		var do func() error
		switch op {
		case 1:
			do = func() error { _, err := l.Capture(ctx, c, id, nil); return err }
		case 2:
			if len(o.Uncaptured.Lines) == 0 {
				continue
			}
			u := o.Uncaptured.Lines[rapid.IntRange(0, len(o.Uncaptured.Lines)-1).Draw(t, "line")]
			req := &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(u.ID)}, TotalCaptureAmount: ordertest.Ptr(u.TotalAmount)}
			do = func() error { _, err := l.PartialCapture(ctx, c, id, req); return err }
		case 3:
			amt := rapid.Int64Range(1, 8000).Draw(t, "capAmount")
			ln := ordertest.Line("part", 1, amt, rapid.SampledFrom([]int64{0, 2500}).Draw(t, "capVat"))
			req := &capture.PartialRequest{OrderLines: []order.LineInput{ln}, TotalCaptureAmount: &amt}
			do = func() error { _, err := l.PartialCapture(ctx, c, id, req); return err }
		case 4:
			if capt == nil {
				continue
			}
			cid := capt.ID
			do = func() error { _, err := l.Refund(ctx, c, id, cid, nil); return err }
		case 5:
			if capt == nil {
				continue
			}
			cid := capt.ID
			amt := rapid.Int64Range(1, 6000).Draw(t, "refAmount")
			ln := ordertest.Line("back", 1, amt, rapid.SampledFrom([]int64{0, 2500}).Draw(t, "refVat"))
			req := &refund.PartialRequest{OrderLines: []order.LineInput{ln}, TotalRefundAmount: &amt, Note: ordertest.Ptr("n")}
			do = func() error { _, err := l.PartialRefund(ctx, c, id, cid, req); return err }
		case 6:
			if capt == nil || o.Outstanding(capt) <= 0 {
				continue
			}
			cid, amt := capt.ID, rapid.Int64Range(1, o.Outstanding(capt)).Draw(t, "paid")
			do = func() error { _, err := l.RegisterPayment(ctx, c, id, cid, amt); return err }
		case 7:
			if capt == nil {
				continue
			}
			cid := capt.ID
			do = func() error {
				_, err := l.Recourse(ctx, c, id, cid, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")})
				return err
			}
		case 8:
			if capt == nil {
				continue
			}
			cid := capt.ID
			do = func() error { _, err := l.CancelLedger(ctx, c, id, cid); return err }
		case 9:
			settle()
			continue
		case 10: // the last request again, same key
			if last != nil {
				_ = last()
			}
			continue
		}
		_ = do()
		last = do
	}
	settle()
	paid := map[string]int64{} // capture id → settled to the merchant, fees aside
	captureOf := map[string]string{}
	for _, id := range ids {
		o := get(id)
		for _, c := range o.Captured {
			captureOf[c.ID] = c.ID
		}
		for _, r := range o.Refunded {
			captureOf[r.ID] = r.RefundOf
		}
	}
	for _, s := range settlements {
		if s.MerchantID != mid {
			continue
		}
		page, err := l.SettlementTransactions(ctx, mid, s.ID, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, tx := range page.Transactions {
			sum += tx.Amount.MinorUnits
			if tx.Type != settlement.KindFee {
				paid[captureOf[tx.LedgerID]] += tx.Amount.MinorUnits
			}
		}
		if sum != s.Net || s.Net != s.Gross-s.Refunds-s.Fees-s.Adjustments-s.Recourses {
			t.Fatalf("settlement %s does not add up: %+v, transactions sum to %d", s.ID, s, sum)
		}
	}
	for _, id := range ids {
		o := get(id)
		for i := range o.Captured {
			c := &o.Captured[i]
			want := int64(0)
			if !c.Void() {
				want = order.SumLines(c.Lines, o.VATMode).Gross - o.RefundedOf(c.ID) - o.ClaimLeft(c)
			}
			if paid[c.ID] != want {
				t.Fatalf("%s capture %s (%s, paid %d, claim %d): settled %d, want %d", id, c.ID, o.VATMode, c.Paid, c.RecourseClaim, paid[c.ID], want)
			}
		}
	}
}

// unclosed shares one store among runs: each run closes what it opened.
type unclosed struct{ storage.Store }

func (unclosed) Close() error { return nil }
