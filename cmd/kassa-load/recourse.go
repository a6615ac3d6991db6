package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The -recourse part of kassa-load replicas: buyer payments, recourses and
// refunds after a recourse on invoices, with settlement runs sent to
// several replicas at once throughout, and afterwards every capture's
// payout over all settlements checked against docs/settlements.md:
// captured − refunded − the claim the merchant still holds, fees aside.

// recourseFlow takes one capture of the order at least 1000 minor units
// (not one the flow refunded) and, from different replicas at once, pays
// part of it, recourses it and refunds part of it; then tries a payment
// after the recourse (which must be refused) and refunds part of what is
// left, which may go beyond the claim the merchant still holds.
func (r *contended) recourseFlow(rng *mrand.Rand, prefix string, k int, id string, o apiOrder) {
	if rng.IntN(3) == 0 || len(o.Captured) < 3 {
		return
	}
	capID, amount := "", int64(0)
	for _, c := range o.Captured[2:] {
		if c.TotalOrderAmount.MinorUnits >= 1000 {
			capID, amount = c.LedgerID, c.TotalOrderAmount.MinorUnits
			break
		}
	}
	if capID == "" {
		return
	}
	var wg sync.WaitGroup
	var recourseOK, r1OK bool
	var mu sync.Mutex
	note := func(answered *bool, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		*answered = ok
	}
	paid := rng.Int64N(amount / 2)
	payBoth := rng.IntN(2) == 0
	if paid > 0 {
		wg.Go(func() {
			body := map[string]any{"amount": paid}
			path := "/sandbox/v1/orders/" + id + "/ledgers/" + capID + "/payments"
			apply := func(response) { r.payments.Add(1); r.notePaid(capID, paid) }
			if payBoth {
				r.bothOr(r.pick(k+1), r.pick(k+2), "POST", path, body, prefix+"-pay", true, apply)
			} else {
				r.sendOr(r.pick(k+1), "POST", path, body, prefix+"-pay", true, apply)
			}
		})
	}
	rcBoth := rng.IntN(2) == 0
	wg.Go(func() {
		body := map[string]any{"reason": "buyer does not pay"}
		path := "/v1/orders/" + id + "/recourse/" + capID
		apply := func(response) { r.recoursed.Add(1) }
		var ok bool
		if rcBoth {
			ok = r.both(r.pick(k), r.pick(k+2), "POST", path, body, prefix+"-rc", apply)
		} else {
			_, ok = r.send(r.pick(k), "POST", path, body, prefix+"-rc", apply)
		}
		note(&recourseOK, ok)
	})
	// Below half each, payment and refund leave a claim whichever comes
	// first, so the recourse is always offered.
	r1 := 1 + rng.Int64N(amount/2-1)
	wg.Go(func() {
		_, ok := r.send(r.pick(k+1), "POST", "/v1/orders/"+id+"/partialrefund/"+capID, refundBody(capID, r1), prefix+"-rr1", r.refunded(id, r1))
		note(&r1OK, ok)
	})
	wg.Wait()
	if !recourseOK || !r1OK {
		return // left to the retries after the run
	}
	// After the recourse, on another replica: the provider no longer takes
	// payments on the invoice, so the claim settled stays what it was.
	if _, ok := r.sendOr(r.pick(k+2), "POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", map[string]any{"amount": 1},
		prefix+"-pay2", true, nil); ok {
		r.extras.Add(1)
		fmt.Printf("PAID AFTER RECOURSE: order %s capture %s took a payment after its recourse was answered\n", id, capID)
	}
	// Within what is left, and not all of it (that is a refund's last,
	// which must credit each VAT rate): within the claim still held, or
	// beyond it when the buyer paid part.
	r2 := 1 + rng.Int64N(amount-r1-1)
	path := "/v1/orders/" + id + "/partialrefund/" + capID
	if rng.IntN(2) == 0 {
		r.both(r.pick(k+1), r.pick(k+2), "POST", path, refundBody(capID, r2), prefix+"-rr2", r.refunded(id, r2))
	} else {
		r.send(r.pick(k), "POST", path, refundBody(capID, r2), prefix+"-rr2", r.refunded(id, r2))
	}
}

// refundBody is a refund of amount at 0 % VAT whose line names the capture
// it is made on: the order record does not say, and the payout check
// counts it against that capture.
func refundBody(capID string, amount int64) map[string]any {
	return map[string]any{"orderLines": []any{map[string]any{"description": "Return " + capID, "quantity": 1, "unitPrice": amount, "vat": 0}},
		"totalRefundAmount": amount}
}

func (r *contended) refunded(id string, amount int64) func(response) {
	return func(response) {
		r.refunds.Add(1)
		r.tl.apply(id, func(e *expect) { e.refunded += amount; e.refunds++ })
	}
}

func (r *contended) notePaid(capID string, amount int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paid == nil {
		r.paid = map[string]int64{}
	}
	r.paid[capID] += amount
}

// settleRuns sends a settlement run to two replicas at once every few
// hundred milliseconds until ctx ends.
func (r *contended) settleRuns(ctx context.Context) {
	for i := 0; ctx.Err() == nil && i < 10000; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(150+mrand.IntN(250)) * time.Millisecond):
		}
		live := r.cl.live()
		a := live[i%len(live)]
		b := live[(i+1)%len(live)]
		var wg sync.WaitGroup
		wg.Go(func() { r.runOn(a) })
		wg.Go(func() { r.runOn(b) })
		wg.Wait()
	}
}

// runOn runs the settlements on replica i; a lost answer (a replica
// killed) is no failure: the run committed or did not, and the final
// check counts what was made either way.
func (r *contended) runOn(i int) {
	r.runsSent.Add(1)
	resp, err := r.clientOf(i).do(context.Background(), "POST", "/sandbox/v1/settlements/run", nil, "")
	if err != nil {
		return
	}
	if resp.status != 200 {
		r.failed.Add(1)
		fmt.Fprintf(os.Stderr, "unexpected %d on a settlement run on replica %d: %s\n", resp.status, i, resp.body)
		return
	}
	var b struct{ Settlements []json.RawMessage }
	json.Unmarshal(resp.body, &b)
	r.runsMade.Add(int64(len(b.Settlements)))
}

type txRecord struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	OrderID  string `json:"orderId"`
	LedgerID string `json:"ledgerId"`
	Amount   money  `json:"amount"`
}

type settlementRecord struct {
	ID                                                     string
	Reference                                              string
	GrossAmount, RefundAmount, FeeAmount, AdjustmentAmount money
	RecourseAmount, NetAmount                              money
	TransactionCount                                       int
	CreatedAt, PeriodEnd                                   time.Time
}

// settlementMismatches checks what the merchant's settlements say of
// themselves (docs/settlements.md): references S-000001 on, gapless and
// each once, over every settlement the merchant has; and none made before
// the last item it holds.
func settlementMismatches(all []settlementRecord) []string {
	var out []string
	seen := map[int]string{}
	for _, s := range all {
		digits, ok := strings.CutPrefix(s.Reference, "S-")
		n, err := strconv.Atoi(digits)
		switch {
		case !ok || err != nil || n < 1 || len(digits) < 6 || (len(digits) > 6 && digits[0] == '0'):
			out = append(out, fmt.Sprintf("settlement %s has reference %q, not S-000001 on", s.ID, s.Reference))
		case seen[n] != "":
			out = append(out, fmt.Sprintf("reference %s is on settlements %s and %s", s.Reference, seen[n], s.ID))
		default:
			seen[n] = s.ID
		}
		if s.CreatedAt.Before(s.PeriodEnd) {
			out = append(out, fmt.Sprintf("settlement %s made at %s, before its period's end %s", s.Reference,
				s.CreatedAt.Format(time.RFC3339Nano), s.PeriodEnd.Format(time.RFC3339Nano)))
		}
	}
	for n := 1; n <= len(all); n++ {
		if seen[n] == "" {
			out = append(out, fmt.Sprintf("reference S-%06d is missing: %d settlements have a gap", n, len(all)))
		}
	}
	return out
}

// verifyPayouts runs one last settlement (and a second, which must find
// nothing), reads every settlement and its transactions, and checks: the
// references are gapless, no settlement is made before its period's end, each
// settlement's transactions sum to its net and to its per-type amounts, no
// transaction (type and ledger) is settled twice, and every capture of
// every order was paid out captured − refunded − the claim still held.
func (r *contended) verifyPayouts(ctx context.Context, c *client, out io.Writer) (bad int) {
	runs := 0
	for _, want := range []bool{true, false} {
		resp, err := c.do(ctx, "POST", "/sandbox/v1/settlements/run", nil, "")
		var b struct{ Settlements []json.RawMessage }
		if err != nil || resp.status != 200 || json.Unmarshal(resp.body, &b) != nil {
			fmt.Fprintf(out, "PAYOUT: final settlement run failed: %v %d %s\n", err, resp.status, resp.body)
			return bad + 1
		}
		if !want && len(b.Settlements) > 0 {
			fmt.Fprintf(out, "PAYOUT: a second final run made %d settlements: items were left queued\n", len(b.Settlements))
			bad++
		}
		runs += len(b.Settlements)
	}
	all, err := everyPage[settlementRecord](ctx, c, "/v1/settlements", "settlements")
	if err != nil {
		fmt.Fprintf(out, "PAYOUT: cannot list settlements: %v\n", err)
		return bad + 1
	}
	for _, m := range settlementMismatches(all) {
		fmt.Fprintf(out, "PAYOUT: %s\n", m)
		bad++
	}
	seen := map[string]string{}    // type + ledger → settlement reference
	byLedger := map[string]int64{} // ledger → sum of its non-fee transactions
	txCount := 0
	for _, s := range all {
		txs, err := everyPage[txRecord](ctx, c, "/v1/settlements/"+s.ID+"/tx", "transactions")
		if err != nil {
			fmt.Fprintf(out, "PAYOUT: cannot read %s's transactions: %v\n", s.Reference, err)
			return bad + 1
		}
		txCount += len(txs)
		sums := map[string]int64{}
		var net int64
		for _, t := range txs {
			net += t.Amount.MinorUnits
			sums[t.Type] += t.Amount.MinorUnits
			k := t.Type + " " + t.LedgerID
			if prev, ok := seen[k]; ok {
				fmt.Fprintf(out, "PAYOUT: %s settled twice (%s and %s)\n", k, prev, s.Reference)
				bad++
			}
			seen[k] = s.Reference
			if t.Type != "fee" {
				byLedger[t.LedgerID] += t.Amount.MinorUnits
			}
		}
		for _, m := range feeMismatches(txs, serveFees) {
			fmt.Fprintf(out, "PAYOUT: settlement %s: %s\n", s.Reference, m)
			bad++
		}
		if net != s.NetAmount.MinorUnits || len(txs) != s.TransactionCount ||
			sums["capture"] != s.GrossAmount.MinorUnits || -sums["refund"] != s.RefundAmount.MinorUnits ||
			-sums["fee"] != s.FeeAmount.MinorUnits || -sums["adjustment"] != s.AdjustmentAmount.MinorUnits ||
			-sums["recourse"] != s.RecourseAmount.MinorUnits {
			fmt.Fprintf(out, "PAYOUT: settlement %s: transactions %d sum %d by type %v, record %+v\n", s.Reference, len(txs), net, sums, s)
			bad++
		}
	}
	ids := make([]string, 0, len(r.tl.orders))
	for id := range r.tl.orders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	captures, recoursed, paidCaptures := 0, 0, 0
	var paidOut, claims int64
	accounted := map[string]bool{}
	for _, id := range ids {
		resp, err := c.do(ctx, "GET", "/v1/orders/"+id, nil, "")
		var o struct {
			Captured []struct {
				LedgerID         string   `json:"ledgerId"`
				TotalOrderAmount money    `json:"totalOrderAmount"`
				Status           []string `json:"status"`
			} `json:"captured"`
			Refunded []struct {
				LedgerID         string `json:"ledgerId"`
				TotalOrderAmount money  `json:"totalOrderAmount"`
				OrderLines       []struct {
					Description string `json:"description"`
				} `json:"orderLines"`
			} `json:"refunded"`
			Events []struct {
				Type     string `json:"type"`
				LedgerID string `json:"ledgerId"`
				Amount   money  `json:"amount"`
			} `json:"events"`
		}
		if err != nil || resp.status != 200 || json.Unmarshal(resp.body, &o) != nil {
			fmt.Fprintf(out, "PAYOUT: cannot read order %s\n", id)
			bad++
			continue
		}
		refundsOf := map[string][]string{}
		refunded := map[string]int64{}
		for _, f := range o.Refunded {
			if len(f.OrderLines) == 0 {
				continue
			}
			capID, ok := strings.CutPrefix(f.OrderLines[0].Description, "Return ")
			if !ok {
				continue
			}
			refundsOf[capID] = append(refundsOf[capID], f.LedgerID)
			refunded[capID] += f.TotalOrderAmount.MinorUnits
		}
		paid := map[string]int64{}
		for _, e := range o.Events {
			if e.Type == "paid" {
				paid[e.LedgerID] += e.Amount.MinorUnits
			}
		}
		for _, l := range o.Captured {
			captures++
			captured := l.TotalOrderAmount.MinorUnits
			var claim int64
			for _, st := range l.Status {
				if st == "recourse" {
					claim = max(0, captured-refunded[l.LedgerID]-paid[l.LedgerID])
					recoursed++
				}
			}
			if paid[l.LedgerID] > 0 {
				paidCaptures++
			}
			r.mu.Lock()
			acked := r.paid[l.LedgerID]
			r.mu.Unlock()
			if acked != paid[l.LedgerID] {
				fmt.Fprintf(out, "PAYOUT: capture %s of %s: payments acknowledged %d, the order records %d\n", l.LedgerID, id, acked, paid[l.LedgerID])
				bad++
			}
			want := captured - refunded[l.LedgerID] - claim
			got := byLedger[l.LedgerID]
			accounted[l.LedgerID] = true
			for _, f := range refundsOf[l.LedgerID] {
				got += byLedger[f]
				accounted[f] = true
			}
			paidOut += got
			claims += claim
			if got != want {
				fmt.Fprintf(out, "PAYOUT: capture %s of %s: paid out %d over all settlements, want %d (captured %d, refunded %d, paid by the buyer %d, claim still held %d)\n",
					l.LedgerID, id, got, want, captured, refunded[l.LedgerID], paid[l.LedgerID], claim)
				bad++
			}
		}
	}
	for l, v := range byLedger {
		if !accounted[l] {
			fmt.Fprintf(out, "PAYOUT: ledger %s has %d settled but belongs to no capture read\n", l, v)
			bad++
		}
	}
	fmt.Fprintf(out, "payouts: %d settlements (%d by runs during the load on %d run requests, %d by the final run), %d transactions; %d captures (%d paid in part, %d recoursed; %d payments, %d recourses acknowledged, %d refused as raced), paid out %d, claims still held %d: %d mismatches\n",
		len(all), r.runsMade.Load(), r.runsSent.Load(), runs, txCount, captures, paidCaptures, recoursed, r.payments.Load(), r.recoursed.Load(), r.refused.Load(), paidOut, claims, bad)
	return bad
}

// feePolicy is a merchant's fee per capture (docs/settlements.md):
// basisPoints of the amount, rounded half away from zero, plus fixed.
type feePolicy struct{ basisPoints, fixed int64 }

// serveFees is the policy of the merchant "kassa serve --client-id" makes,
// which the replicas run settles for: none.
var serveFees = feePolicy{}

func (p feePolicy) fee(amount int64) int64 {
	v := amount * p.basisPoints
	if v < 0 {
		return -((-v + 5000) / 10000) + p.fixed
	}
	return (v+5000)/10000 + p.fixed
}

// feeMismatches checks one settlement's fee transactions against policy:
// each capture's fee, in the capture's settlement, and no other fee. The
// payout check per capture leaves fees aside, so a fee charged wrong (or
// credited: a payout one minor unit too high) shows only here.
func feeMismatches(txs []txRecord, policy feePolicy) []string {
	fees := map[string]int64{}
	charged := map[string]bool{}
	for _, t := range txs {
		if t.Type == "fee" {
			fees[t.LedgerID] -= t.Amount.MinorUnits
			charged[t.LedgerID] = true
		}
	}
	var out []string
	for _, t := range txs {
		if t.Type != "capture" {
			continue
		}
		if want := policy.fee(t.Amount.MinorUnits); fees[t.LedgerID] != want {
			out = append(out, fmt.Sprintf("capture %s of %d charged a fee of %d, want %d", t.LedgerID, t.Amount.MinorUnits, fees[t.LedgerID], want))
		}
		delete(charged, t.LedgerID)
	}
	for l := range charged {
		out = append(out, fmt.Sprintf("fee %d on ledger %s, which this settlement pays no capture of", fees[l], l))
	}
	sort.Strings(out)
	return out
}

// everyPage reads every page of a fromId-paged list at path, whose records
// are in the answer's field named key.
func everyPage[T any](ctx context.Context, c *client, path, key string) ([]T, error) {
	var all []T
	for from := ""; ; {
		q := path + "?size=1000"
		if from != "" {
			q += "&fromId=" + url.QueryEscape(from)
		}
		resp, err := c.do(ctx, "GET", q, nil, "")
		if err != nil {
			return nil, err
		}
		if resp.status != 200 {
			return nil, fmt.Errorf("GET %s: %d", q, resp.status)
		}
		var page map[string]json.RawMessage
		var items []T
		var next string
		if err := json.Unmarshal(resp.body, &page); err != nil {
			return nil, fmt.Errorf("GET %s: %w", q, err)
		}
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("GET %s: %s: %w", q, key, err)
		}
		if raw, ok := page["nextFromId"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, fmt.Errorf("GET %s: nextFromId: %w", q, err)
			}
		}
		all = append(all, items...)
		if from = next; from == "" {
			return all, nil
		}
	}
}
