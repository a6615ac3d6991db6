package settlement

import (
	"encoding/csv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
)

// Record is a settlement as the API returns it, with Money records.
type Record struct {
	ID               string       `json:"id"`
	Reference        string       `json:"reference"`
	MerchantID       string       `json:"merchantId"`
	StoreID          string       `json:"storeId"`
	Currency         string       `json:"currency"`
	CreatedAt        time.Time    `json:"createdAt"`
	PeriodStart      time.Time    `json:"periodStart"`
	PeriodEnd        time.Time    `json:"periodEnd"`
	PayoutDate       string       `json:"payoutDate"`
	GrossAmount      money.Record `json:"grossAmount"`
	RefundAmount     money.Record `json:"refundAmount"`
	FeeAmount        money.Record `json:"feeAmount"`
	AdjustmentAmount money.Record `json:"adjustmentAmount"`
	RecourseAmount   money.Record `json:"recourseAmount"`
	NetAmount        money.Record `json:"netAmount"`
	TransactionCount int          `json:"transactionCount"`
}

// View renders s.
func (s *Settlement) View() Record {
	m := func(v int64) money.Record { return money.New(v, s.Currency).Record() }
	return Record{ID: s.ID, Reference: s.Reference, MerchantID: s.MerchantID, StoreID: s.StoreID, Currency: string(s.Currency),
		CreatedAt: s.CreatedAt.UTC(), PeriodStart: s.PeriodStart.UTC(), PeriodEnd: s.PeriodEnd.UTC(), PayoutDate: s.PayoutDate,
		GrossAmount: m(s.Gross), RefundAmount: m(s.Refunds), FeeAmount: m(s.Fees), AdjustmentAmount: m(s.Adjustments),
		RecourseAmount: m(s.Recourses), NetAmount: m(s.Net), TransactionCount: s.TransactionCount}
}

// TransactionRecord is a transaction as the API returns it.
type TransactionRecord struct {
	ID                string `json:"id"`
	SettlementID      string `json:"settlementId"`
	Type              Kind   `json:"type"`
	OrderID           string `json:"orderId"`
	LedgerID          string `json:"ledgerId"`
	DocumentReference string `json:"documentReference,omitempty"`
	MerchantReference string `json:"merchantReference,omitempty"`
	// SettlementReference is the order's settlementReference.
	SettlementReference string       `json:"settlementReference,omitempty"`
	Amount              money.Record `json:"amount"`
	OccurredAt          time.Time    `json:"occurredAt"`
}

// View renders t.
func (t *Transaction) View() TransactionRecord {
	return TransactionRecord{ID: t.ID, SettlementID: t.SettlementID, Type: t.Type, OrderID: t.OrderID, LedgerID: t.LedgerID,
		DocumentReference: t.DocumentReference, MerchantReference: t.MerchantReference, SettlementReference: t.SettlementReference,
		Amount: money.New(t.Amount, t.Currency).Record(), OccurredAt: t.OccurredAt.UTC()}
}

// Query selects settlements (GET /v1/settlements).
type Query struct {
	StoreIDs, IDs, References, Currencies []string
	CreatedFrom, CreatedTo                time.Time // inclusive, exclusive
	FromID                                string    // continue after this settlement
	Size                                  int
}

// Page sizes.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Validate applies the default size and checks bounds.
func (q *Query) Validate() error {
	switch {
	case q.Size == 0:
		q.Size = DefaultPageSize
	case q.Size < 1 || q.Size > MaxPageSize:
		return fault.Invalidf("size", "must be between 1 and %d", MaxPageSize)
	}
	return nil
}

func anyOf(want []string, v string) bool { return len(want) == 0 || slices.Contains(want, v) }

// Match reports whether s satisfies the filters (not FromID or Size).
func (q *Query) Match(s *Settlement) bool {
	return anyOf(q.StoreIDs, s.StoreID) && anyOf(q.IDs, s.ID) && anyOf(q.References, s.Reference) &&
		anyOf(q.Currencies, string(s.Currency)) &&
		(q.CreatedFrom.IsZero() || !s.CreatedAt.Before(q.CreatedFrom)) && (q.CreatedTo.IsZero() || s.CreatedAt.Before(q.CreatedTo))
}

// textCell keeps a spreadsheet from reading merchant-supplied text as a
// formula ("CSV injection"): a cell that starts with = + - @ tab or CR gets
// a leading apostrophe. So does each part after a ";" that starts so, past
// any quotes and spaces: a spreadsheet in a locale with a decimal comma
// (Swedish, Norwegian, Danish, Finnish, German Excel) opens a .csv with ";"
// as its separator, so there every ";" starts a new cell, whatever the
// commas and quotes of the row around it. Amounts are ours and never pass
// through here.
func textCell(s string) string {
	if startsFormula(s) {
		s = "'" + s
	}
	if !strings.Contains(s, ";") {
		return s // the common case
	}
	parts := strings.Split(s, ";")
	for i := 1; i < len(parts); i++ {
		if startsFormula(strings.TrimLeft(parts[i], `" `)) {
			parts[i] = "'" + parts[i]
		}
	}
	return strings.Join(parts, ";")
}

// startsFormula: a spreadsheet reads a cell starting so as a formula.
func startsFormula(s string) bool { return s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) }

// WriteCSV writes a settlement's transactions for accounting: a header, one
// row per transaction (amounts as decimals with two digits), and a final
// row with the totals, whose amount is the net payout. The first column is
// the settlement's own reference; the order's settlementReference is the
// last, orderSettlementReference, added after the columns readers already
// had.
func WriteCSV(w io.Writer, s *Settlement, txs []Transaction) error {
	c := NewCSVWriter(w, s)
	if err := c.Write(txs); err != nil {
		return err
	}
	return c.Close()
}

// CSVWriter writes the export of WriteCSV in parts: the header when made,
// the transactions as they are given, the net row at Close. A large
// settlement's export then needs only a part of its transactions decoded at
// a time.
type CSVWriter struct {
	cw  *csv.Writer
	s   *Settlement
	sum int64
}

// NewCSVWriter writes the header of s's export to w.
func NewCSVWriter(w io.Writer, s *Settlement) *CSVWriter {
	c := &CSVWriter{cw: csv.NewWriter(w), s: s}
	c.cw.Write([]string{"settlementReference", "seq", "type", "occurredAt", "orderId", "ledgerId", "documentReference",
		"merchantReference", "amount", "currency", "orderSettlementReference"})
	return c
}

// Write writes one row per transaction, in the order given.
func (c *CSVWriter) Write(txs []Transaction) error {
	for _, t := range txs {
		c.sum += t.Amount
		c.cw.Write([]string{c.s.Reference, strconv.Itoa(t.Seq), string(t.Type), t.OccurredAt.UTC().Format(time.RFC3339), t.OrderID,
			t.LedgerID, t.DocumentReference, textCell(t.MerchantReference), money.New(t.Amount, t.Currency).Amount(), string(t.Currency),
			textCell(t.SettlementReference)})
	}
	return c.cw.Error()
}

// Close writes the net row, the sum of the transactions written, and
// flushes.
func (c *CSVWriter) Close() error {
	c.cw.Write([]string{c.s.Reference, "", "net", c.s.CreatedAt.UTC().Format(time.RFC3339), "", "", "", "",
		money.New(c.sum, c.s.Currency).Amount(), string(c.s.Currency), ""})
	c.cw.Flush()
	return c.cw.Error()
}
