package kassa

import (
	"bytes"
	"context"
	"io"
	"slices"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// settlementRunSize is how many queued items one run reads: the oldest
// (the store returns the queue oldest first), so what a run leaves over is
// the next run's first. A variable so tests can lower it.
var settlementRunSize = 100_000

// RunSettlements settles everything captured, refunded or voided since the
// last run: one settlement per merchant, store and currency, saved together
// with the removal of the items it settles, in one transaction, so a crash
// mid-run settles nothing and a second run settles nothing twice. It returns
// the settlements made: none with an error, since the run was rolled back.
func (l *Ledger) RunSettlements(ctx context.Context) ([]settlement.Settlement, error) {
	return l.runSettlements(ctx, time.Time{})
}

// RunSettlementsBefore is RunSettlements for what occurred before cutoff, on
// the store's clock; later items wait for the next run, except the void of a
// capture taken, which cancels it out (settlement.Before). A daily run with the
// day's settlement time as its cutoff settles a day once however many
// replicas run it: the first takes the items, and the others, a few seconds
// later, find none before the cutoff instead of settling those few seconds.
func (l *Ledger) RunSettlementsBefore(ctx context.Context, cutoff time.Time) ([]settlement.Settlement, error) {
	if cutoff.IsZero() {
		return nil, fault.Invalidf("cutoff", "is required")
	}
	return l.runSettlements(ctx, cutoff)
}

func (l *Ledger) runSettlements(ctx context.Context, cutoff time.Time) ([]settlement.Settlement, error) {
	var made []settlement.Settlement
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		made = nil
		items, err := tx.PendingSettlementItems(settlementRunSize)
		if err != nil {
			return err
		}
		if len(items) == settlementRunSize {
			// The read may have ended between a capture and its void: the
			// void comes with it, or the capture is paid with its fee and
			// the void left to the next run as an adjustment, where a
			// capture voided before any run cancels out. At most one more
			// item per capture read.
			voids, err := tx.QueuedSettlementItems(settlement.MissingVoids(items))
			if err != nil {
				return err
			}
			items = append(items, voids...)
		}
		if !cutoff.IsZero() {
			items = settlement.Before(items, cutoff)
			if items, err = withoutSettledDay(tx, items, cutoff); err != nil {
				return err
			}
		}
		if len(items) == 0 {
			return nil
		}
		fees := map[string]settlement.FeePolicy{}
		for _, it := range items {
			if _, ok := fees[it.MerchantID]; !ok {
				m, err := tx.GetMerchant(it.MerchantID)
				if err != nil {
					return err
				}
				fees[it.MerchantID] = settlement.FeePolicy{BasisPoints: m.FeeBasisPoints, FixedPerCapture: m.FeeFixedPerCapture}
			}
		}
		batches, err := settlement.Run(items, settlement.Env{Now: tx.Now(), IDs: l.opts.IDs,
			Fees:      func(m string) settlement.FeePolicy { return fees[m] },
			Reference: func(m string) (int64, error) { return tx.NextSequence(m, settlement.Series) }})
		if err != nil {
			return err
		}
		for _, b := range batches {
			if err := tx.SaveSettlement(b); err != nil {
				return err
			}
			if b.Settlement.ID != "" {
				made = append(made, b.Settlement)
			}
		}
		return nil
	})
	if err != nil {
		// Rolled back: what the transaction built was not made.
		return nil, err
	}
	return made, nil
}

// withoutSettledDay keeps back the items of every merchant, store and
// currency that already has a settlement made in the day from cutoff: the
// day was settled by an earlier run (another replica's, a minute before).
// What is kept back here is an item whose transaction began before the
// cutoff but committed after that run; it waits for the next day rather
// than make a second settlement for this one. Settlements dated later than
// that day (a clock that was ahead, then set right) hold nothing back.
func withoutSettledDay(tx storage.Tx, items []settlement.Item, cutoff time.Time) ([]settlement.Item, error) {
	dayEnd := cutoff.AddDate(0, 0, 1)
	settled := map[settlement.Group]bool{}
	looked := map[string]bool{}
	for _, it := range items {
		if looked[it.MerchantID] {
			continue
		}
		looked[it.MerchantID] = true
		// Newest first, so the walk ends at the first settlement made
		// before the cutoff instead of reading the merchant's history.
		q := settlement.Query{Size: 20}
	walk:
		for {
			page, next, err := tx.ListSettlements(it.MerchantID, q)
			if err != nil {
				return nil, err
			}
			for _, s := range page {
				if s.CreatedAt.Before(cutoff) {
					break walk
				}
				if s.CreatedAt.Before(dayEnd) {
					settled[s.Group()] = true
				}
			}
			if next == "" {
				break
			}
			q.FromID = next
		}
	}
	return slices.DeleteFunc(items, func(it settlement.Item) bool {
		return settled[it.Group()]
	}), nil
}

// SettlementPage is one page of GET /v1/settlements.
type SettlementPage struct {
	Settlements []settlement.Record `json:"settlements"`
	NextFromID  string              `json:"nextFromId,omitempty"`
}

// ListSettlements lists the merchant's settlements, newest first.
func (l *Ledger) ListSettlements(ctx context.Context, merchantID string, q settlement.Query) (SettlementPage, error) {
	if err := q.Validate(); err != nil {
		return SettlementPage{}, err
	}
	out := SettlementPage{Settlements: []settlement.Record{}}
	err := l.store.View(ctx, func(tx storage.Tx) error {
		page, next, err := tx.ListSettlements(merchantID, q)
		for _, s := range page {
			out.Settlements = append(out.Settlements, s.View())
		}
		out.NextFromID = next
		return err
	})
	return out, listFrom(err, q.FromID)
}

// GetSettlement reads one settlement of the merchant.
func (l *Ledger) GetSettlement(ctx context.Context, merchantID, id string) (settlement.Record, error) {
	var r settlement.Record
	err := l.store.View(ctx, func(tx storage.Tx) error {
		s, err := tx.GetSettlement(merchantID, id)
		if err == nil {
			r = s.View()
		}
		return err
	})
	return r, err
}

// TransactionPage is one page of GET /v1/settlements/{id}/tx.
type TransactionPage struct {
	Transactions []settlement.TransactionRecord `json:"transactions"`
	NextFromID   string                         `json:"nextFromId,omitempty"`
}

// SettlementTransactions pages a settlement's transactions in order, size
// (1 to settlement.MaxPageSize; 0 is settlement.DefaultPageSize) at a time.
func (l *Ledger) SettlementTransactions(ctx context.Context, merchantID, id, fromID string, size int) (TransactionPage, error) {
	// Checked here, as the other lists check theirs: the stores take the
	// size as given, and a page of 0 would end on a transaction before it.
	if size == 0 {
		size = settlement.DefaultPageSize
	}
	if size < 1 || size > settlement.MaxPageSize {
		return TransactionPage{}, fault.Invalidf("size", "must be between 1 and %d", settlement.MaxPageSize)
	}
	out := TransactionPage{Transactions: []settlement.TransactionRecord{}}
	err := l.store.View(ctx, func(tx storage.Tx) error {
		txs, next, err := tx.SettlementTransactions(merchantID, id, fromID, size)
		for i := range txs {
			out.Transactions = append(out.Transactions, txs[i].View())
		}
		out.NextFromID = next
		return err
	})
	return out, err
}

// exportChunk is how many transactions an export reads per read
// transaction. A variable so tests can lower it.
var exportChunk = 1000

// ExportSettlement writes a settlement's transactions as CSV for accounting.
// They are read first and written after the read transactions ended: a
// client reading slowly must not hold a transaction open (on bolt, an open
// read transaction stalls the commit that needs to grow the file, and with
// it every writer), and a read that fails midway must not leave the client
// a file that looks whole. They are read in chunks and kept as CSV rows,
// not as decoded transactions: a settlement of 100 000 held about 190 MB
// of decoded records and their JSON for each export under way; the rows
// are a twentieth of that. A settlement never changes once saved, so the
// chunks read in separate transactions are one settlement's.
func (l *Ledger) ExportSettlement(ctx context.Context, merchantID, id string, w io.Writer) error {
	var s *settlement.Settlement
	var buf bytes.Buffer
	var out *settlement.CSVWriter
	from := ""
	for {
		var txs []settlement.Transaction
		var next string
		err := l.store.View(ctx, func(tx storage.Tx) error {
			var err error
			if s == nil {
				if s, err = tx.GetSettlement(merchantID, id); err != nil {
					return err
				}
			}
			txs, next, err = tx.SettlementTransactions(merchantID, id, from, exportChunk)
			return err
		})
		if err != nil {
			return err
		}
		if out == nil {
			out = settlement.NewCSVWriter(&buf, s)
		}
		if err := out.Write(txs); err != nil {
			return err
		}
		if next == "" {
			break
		}
		from = next
	}
	if err := out.Close(); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}
