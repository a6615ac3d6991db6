// Package settlement pays captured money out to merchants: settlement runs
// gather every capture, refund and recourse not yet settled, per merchant,
// store and currency, into one settlement with its transactions (capture,
// refund, fee, adjustment, recourse), so that a finance team can reconcile it
// to the minor unit: the transactions sum to the net payout.
//
// The package does no I/O. The store keeps a queue of unsettled items,
// written in the same transaction as the capture or refund that creates
// them; a run reads the queue, builds settlements with Run, stores them and
// empties the queue in one transaction, so nothing is settled twice.
package settlement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// Kind of an item or transaction.
type Kind string

const (
	KindCapture    Kind = "capture"
	KindRefund     Kind = "refund"
	KindFee        Kind = "fee"
	KindAdjustment Kind = "adjustment" // a capture voided after it was settled
	KindRecourse   Kind = "recourse"   // a claim handed back to the merchant
	kindVoid       Kind = "void"       // queue only: becomes an adjustment
)

// Item is a captured, refunded, voided or recoursed amount waiting to be
// settled.
type Item struct {
	Key               string         `json:"key"` // unique: ledger id, or ledger id + ":void" or ":recourse"
	MerchantID        string         `json:"merchantId"`
	StoreID           string         `json:"storeId"`
	Currency          money.Currency `json:"currency"`
	OrderID           string         `json:"orderId"`
	LedgerID          string         `json:"ledgerId"`
	Kind              Kind           `json:"kind"`
	Amount            int64          `json:"amount"` // positive minor units including VAT
	DocumentReference string         `json:"documentReference,omitempty"`
	MerchantReference string         `json:"merchantReference,omitempty"`
	// SettlementReference is the order's settlementReference: the key the
	// merchant's books match a payout by.
	SettlementReference string    `json:"settlementReference,omitempty"`
	OccurredAt          time.Time `json:"occurredAt"`
}

// NewItems lists what an operation made settleable: the captures, refunds,
// voids and recourses of after that before did not have. before is nil for a
// new order.
//
// A recourse hands the merchant the claim on the buyer (captured − refunded
// − paid), having paid it the capture: the claim is taken back. A refund
// after a recourse first lowers the buyer's debt to the merchant, which the
// merchant then no longer collects: only the part beyond the claim the
// merchant still holds is taken from it, and a refund within it queues
// nothing. So the merchant gets, over all settlements of a capture (fees
// aside), captured − refunded − the claim it still holds.
func NewItems(before, after *order.Order) []Item {
	had := map[string]bool{}
	voided := map[string]bool{}
	claimLeft := map[string]int64{} // captures recoursed before this operation: the claim left then
	if before != nil {
		for i := range before.Captured {
			l := &before.Captured[i]
			had[l.ID] = true
			voided[l.ID] = l.Void()
			if l.RecourseClaim > 0 {
				claimLeft[l.ID] = before.ClaimLeft(l)
			}
		}
		for _, l := range before.Refunded {
			had[l.ID] = true
		}
	}
	item := func(l *order.Ledger, k Kind, key string) Item {
		return Item{Key: key, MerchantID: after.MerchantID, StoreID: after.StoreID, Currency: after.Currency,
			OrderID: after.ID, LedgerID: l.ID, Kind: k, Amount: order.SumLines(l.Lines, after.VATMode).Gross,
			DocumentReference: l.DocumentReference, MerchantReference: after.MerchantReference,
			SettlementReference: after.SettlementReference, OccurredAt: after.UpdatedAt}
	}
	// A void or recourse takes back what the capture paid: the merchant's
	// books match it by the references the capture was settled under.
	reversal := func(l *order.Ledger, k Kind, key string) Item {
		it := item(l, k, key)
		if l.Issued != nil && l.Issued.SettlementReference != nil {
			it.MerchantReference, it.SettlementReference = l.Issued.MerchantReference, *l.Issued.SettlementReference
		}
		return it
	}
	var out []Item
	for i := range after.Captured {
		l := &after.Captured[i]
		if !had[l.ID] {
			out = append(out, item(l, KindCapture, l.ID))
		}
		if l.Void() && !voided[l.ID] {
			out = append(out, reversal(l, kindVoid, voidKey(l.ID)))
		}
		// A recourse appends no event, so updatedAt is not its time.
		if _, settled := claimLeft[l.ID]; l.RecourseClaim > 0 && !settled {
			it := reversal(l, KindRecourse, l.ID+":recourse")
			it.Amount, it.OccurredAt = l.RecourseClaim, l.RecoursedAt
			out = append(out, it)
		}
	}
	for i := range after.Refunded {
		l := &after.Refunded[i]
		if had[l.ID] {
			continue
		}
		it := item(l, KindRefund, l.ID)
		if left, ok := claimLeft[l.RefundOf]; ok {
			absorbed := min(left, it.Amount)
			claimLeft[l.RefundOf] = left - absorbed
			if it.Amount -= absorbed; it.Amount == 0 {
				continue // within the merchant's claim: nothing to take back
			}
		}
		out = append(out, it)
	}
	return out
}

// FeePolicy is what a merchant pays per capture: basis points of the captured
// amount (rounded half away from zero) plus a fixed amount.
type FeePolicy struct {
	BasisPoints     int64 `json:"basisPoints"`
	FixedPerCapture int64 `json:"fixedPerCapture"`
}

// Fee of one capture.
func (p FeePolicy) Fee(amount int64) int64 {
	return money.DivRound(amount*p.BasisPoints, 10000) + p.FixedPerCapture
}

// Settlement is one payout to a merchant for one store and currency. Every
// amount is positive minor units; Net = Gross − Refunds − Fees − Adjustments
// − Recourses and equals the sum of the signed transaction amounts.
type Settlement struct {
	ID               string         `json:"id"`
	Reference        string         `json:"reference"`
	MerchantID       string         `json:"merchantId"`
	StoreID          string         `json:"storeId"`
	Currency         money.Currency `json:"currency"`
	CreatedAt        time.Time      `json:"createdAt"`
	PeriodStart      time.Time      `json:"periodStart"`
	PeriodEnd        time.Time      `json:"periodEnd"`
	PayoutDate       string         `json:"payoutDate"` // YYYY-MM-DD, the next banking day after creation
	Gross            int64          `json:"gross"`
	Refunds          int64          `json:"refunds"`
	Fees             int64          `json:"fees"`
	Adjustments      int64          `json:"adjustments"`
	Recourses        int64          `json:"recourses,omitempty"` // absent on settlements made before recourses were settled
	Net              int64          `json:"net"`
	TransactionCount int            `json:"transactionCount"`
}

// Transaction is one line of a settlement, signed as it affects the payout:
// captures positive; refunds, fees, adjustments and recourses negative.
type Transaction struct {
	ID                string `json:"id"`
	SettlementID      string `json:"settlementId"`
	Seq               int    `json:"seq"` // order within the settlement, from 1
	Type              Kind   `json:"type"`
	OrderID           string `json:"orderId"`
	LedgerID          string `json:"ledgerId"`
	DocumentReference string `json:"documentReference,omitempty"`
	MerchantReference string `json:"merchantReference,omitempty"`
	// SettlementReference is the order's, as when the item was made.
	SettlementReference string         `json:"settlementReference,omitempty"`
	Amount              int64          `json:"amount"`
	Currency            money.Currency `json:"currency"`
	OccurredAt          time.Time      `json:"occurredAt"`
}

// Batch is a settlement with its transactions.
type Batch struct {
	Settlement   Settlement
	Transactions []Transaction
	Keys         []string // the queue items it settles
}

// Env is what a run needs from outside.
type Env struct {
	Now  time.Time
	IDs  order.IDSource
	Fees func(merchantID string) FeePolicy
	// Reference numbers a merchant's settlements gaplessly (series "settlement").
	Reference func(merchantID string) (int64, error)
}

// Group is what a settlement gathers: one merchant's items of one store in
// one currency.
type Group struct {
	Merchant, Store string
	Currency        money.Currency
}

// Group is the group the item is settled in.
func (it Item) Group() Group { return Group{it.MerchantID, it.StoreID, it.Currency} }

// Group is the group the settlement gathers.
func (s *Settlement) Group() Group { return Group{s.MerchantID, s.StoreID, s.Currency} }

// Before is what a run to cutoff settles of the queued items: those that
// occurred before it, and the voids, of whenever, of the captures among
// them. A capture voided before any run cancels out (Run), also when the
// void came after the cutoff: taken alone, the capture was paid and charged
// its fee, and its void left to the next day's run as an adjustment.
func Before(items []Item, cutoff time.Time) []Item {
	captured := map[string]bool{}
	for _, it := range items {
		if it.Kind == KindCapture && it.OccurredAt.Before(cutoff) {
			captured[it.LedgerID] = true
		}
	}
	var out []Item
	for _, it := range items {
		if it.OccurredAt.Before(cutoff) || it.Kind == kindVoid && captured[it.LedgerID] {
			out = append(out, it)
		}
	}
	return out
}

// voidKey is the queue key of the void of capture ledgerID.
func voidKey(ledgerID string) string { return ledgerID + ":void" }

// MissingVoids lists the queue keys of the voids that the captures among
// items may have and items lack. A run reads the queue oldest first up to a
// limit, and a capture's void, which comes after it, may lie beyond the
// limit: the run fetches them by key (storage.Tx.QueuedSettlementItems), so
// that Run cancels the pair out instead of paying the capture with its fee
// and leaving the void to the next run as an adjustment. A void never lies
// before its capture: an order's events are never older than the one before
// (order.Order.AppendEvent), and at the same instant the capture's key, the
// void's without ":void", sorts first.
func MissingVoids(items []Item) []string {
	voids := map[string]bool{}
	for _, it := range items {
		if it.Kind == kindVoid {
			voids[it.LedgerID] = true
		}
	}
	var keys []string
	for _, it := range items {
		if it.Kind == KindCapture && !voids[it.LedgerID] {
			keys = append(keys, voidKey(it.LedgerID))
		}
	}
	return keys
}

// Run builds one settlement per merchant, store and currency from the queued
// items. A capture voided before it was settled cancels out: neither it nor
// its void is paid. A void of an earlier-settled capture is an adjustment.
// A recourse is its own transaction, whether its capture is settled in the
// same settlement or was in an earlier one.
// Keys lists every item consumed, including cancelled-out pairs.
func Run(items []Item, env Env) ([]Batch, error) {
	captured := map[string]bool{}
	for _, it := range items {
		if it.Kind == KindCapture {
			captured[it.LedgerID] = true
		}
	}
	groups := map[Group][]Item{}
	var order []Group
	var dropped []string
	voidedHere := map[string]bool{}
	for _, it := range items {
		if it.Kind == kindVoid && captured[it.LedgerID] {
			voidedHere[it.LedgerID] = true
		}
	}
	for _, it := range items {
		if voidedHere[it.LedgerID] && (it.Kind == KindCapture || it.Kind == kindVoid) {
			dropped = append(dropped, it.Key)
			continue
		}
		k := it.Group()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.Merchant != b.Merchant {
			return a.Merchant < b.Merchant
		}
		if a.Store != b.Store {
			return a.Store < b.Store
		}
		return a.Currency < b.Currency
	})
	var out []Batch
	for gi, k := range order {
		its := groups[k]
		sort.SliceStable(its, func(i, j int) bool {
			if !its[i].OccurredAt.Equal(its[j].OccurredAt) {
				return its[i].OccurredAt.Before(its[j].OccurredAt)
			}
			return its[i].Key < its[j].Key
		})
		n, err := env.Reference(k.Merchant)
		if err != nil {
			return nil, err
		}
		// A settlement is never dated before an item it holds. Its run may
		// read items stamped after the run's own time: on PostgreSQL a run
		// waits for another replica's run and meanwhile captures commit; a
		// replica's clock may lag another's; a sandbox clock may be set back.
		created, end := env.Now, its[len(its)-1].OccurredAt
		if end.After(created) {
			created = end
		}
		s := Settlement{ID: env.IDs.NewID("settlement"), Reference: reference(n), MerchantID: k.Merchant,
			StoreID: k.Store, Currency: k.Currency, CreatedAt: created, PeriodStart: its[0].OccurredAt,
			PeriodEnd: end, PayoutDate: payoutDate(created)}
		b := Batch{}
		fees := env.Fees(k.Merchant)
		add := func(it Item, t Kind, amount int64) {
			b.Transactions = append(b.Transactions, Transaction{ID: env.IDs.NewID("settlementTx"), SettlementID: s.ID,
				Seq: len(b.Transactions) + 1, Type: t, OrderID: it.OrderID, LedgerID: it.LedgerID,
				DocumentReference: it.DocumentReference, MerchantReference: it.MerchantReference,
				SettlementReference: it.SettlementReference, Amount: amount,
				Currency: k.Currency, OccurredAt: it.OccurredAt})
		}
		for _, it := range its {
			b.Keys = append(b.Keys, it.Key)
			switch it.Kind {
			case KindCapture:
				s.Gross += it.Amount
				add(it, KindCapture, it.Amount)
				if fee := fees.Fee(it.Amount); fee != 0 {
					s.Fees += fee
					add(it, KindFee, -fee)
				}
			case KindRefund:
				s.Refunds += it.Amount
				add(it, KindRefund, -it.Amount)
			case kindVoid:
				s.Adjustments += it.Amount
				add(it, KindAdjustment, -it.Amount)
			case KindRecourse:
				s.Recourses += it.Amount
				add(it, KindRecourse, -it.Amount)
			}
		}
		s.Net = s.Gross - s.Refunds - s.Fees - s.Adjustments - s.Recourses
		s.TransactionCount = len(b.Transactions)
		if gi == 0 {
			b.Keys = append(b.Keys, dropped...)
		}
		b.Settlement = s
		out = append(out, b)
	}
	if len(out) == 0 && len(dropped) > 0 {
		out = append(out, Batch{Keys: dropped}) // nothing to pay, but the pairs leave the queue
	}
	return out, nil
}

// payoutDate is the next weekday after t (UTC).
func payoutDate(t time.Time) string {
	d := t.UTC().AddDate(0, 0, 1)
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, 1)
	}
	return d.Format("2006-01-02")
}

// Series is the document series a merchant's settlement references are
// numbered in (storage.Tx.NextSequence), gapless like its invoices.
const Series = "settlement"

// reference is the reference of a merchant's settlement number n.
func reference(n int64) string { return fmt.Sprintf("S-%06d", n) }

// ReferenceNumber is the number reference ref was made of ("S-000042": 42),
// false when ref is no reference.
func ReferenceNumber(ref string) (int64, bool) {
	digits, ok := strings.CutPrefix(ref, "S-")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}
