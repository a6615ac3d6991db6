package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// dataTables are the tables that hold records (and the shared signing key);
// store_info and schema_migrations describe the schema and are left alone.
var dataTables = []string{"merchants", "orders", "auth_tokens", "customer_tokens", "sessions", "settlement_queue",
	"settlements", "settlement_transactions", "tasks", "sequences", "idempotency", "outbox", "signing_key"}

// Load writes another store's records into this one, which must be empty,
// in one transaction; see storage.Loader. The tables are locked against
// writes first (reads go on), so a replica started meanwhile cannot write
// beside the copy: it waits, and then finds the copied data.
func (s *Store) Load(ctx context.Context, fill func(put func(storage.Record) error) error) (map[storage.RecordKind]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Release()
	var counts map[storage.RecordKind]int
	err = s.durably(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(dataTables, ", ")+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("postgres: lock the tables: %w", err)
		}
		for _, table := range dataTables {
			var held bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+`)`).Scan(&held); err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			if held {
				return &fault.Error{Kind: fault.Conflict, Code: "store_not_empty",
					Message: fmt.Sprintf("the database already holds kassa data (table %s has rows): a copy goes only into an empty one", table)}
			}
		}
		l := &loader{ctx: ctx, tx: tx, counts: map[storage.RecordKind]int{}}
		if err := fill(l.put); err != nil {
			return err
		}
		if err := l.flush(); err != nil {
			return err
		}
		// Statistics of what was loaded, committed with it. Without them,
		// until autovacuum's first ANALYZE of each table, the planner took
		// every range condition to match a third of the rows: the
		// idempotency sweep read the whole table by a Seq Scan at every
		// pass, and a big merchant's status filter took 0.9 s on 1 000 000
		// orders (docs/postgres.md, Moving from bolt). ANALYZE counts the
		// rows this transaction inserted; it samples, a few seconds for
		// millions of rows. A role that does not own a table is warned and
		// that table skipped, not failed.
		if _, err := tx.Exec(ctx, `ANALYZE `+strings.Join(dataTables, ", ")); err != nil {
			return fmt.Errorf("postgres: analyze the loaded tables: %w", err)
		}
		counts = l.counts
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

var _ storage.Loader = (*Store)(nil)

// loader gathers rows of one table and writes them with COPY, a batch at a
// time: one round trip per batch, not per record.
type loader struct {
	ctx    context.Context
	tx     pgx.Tx
	counts map[storage.RecordKind]int
	table  string
	cols   []string
	rows   [][]any
	bytes  int
}

// Batches end at loadRows rows or loadBytes of record bodies, so that a
// store of large orders is not held in memory whole.
const (
	loadRows  = 1000
	loadBytes = 8 << 20
)

func (l *loader) put(r storage.Record) error {
	table, cols, row, err := loadRow(r)
	if err != nil {
		id := r.ID
		if r.MerchantID != "" {
			id = r.MerchantID + "/" + id
		}
		return fault.Internalf(err, "%s %s", r.Kind, id)
	}
	if table != l.table || len(l.rows) >= loadRows || l.bytes >= loadBytes {
		if err := l.flush(); err != nil {
			return err
		}
		l.table, l.cols = table, cols
	}
	l.rows = append(l.rows, row)
	l.bytes += len(r.Body)
	l.counts[r.Kind]++
	return nil
}

func (l *loader) flush() error {
	if len(l.rows) == 0 {
		return nil
	}
	if _, err := l.tx.CopyFrom(l.ctx, pgx.Identifier{l.table}, l.cols, pgx.CopyFromRows(l.rows)); err != nil {
		return dbErr(err, l.table)
	}
	l.rows, l.bytes = l.rows[:0], 0
	return nil
}

// loadRow is the table, columns and row of a record: its body as it is, and
// beside it the columns the store's own writes derive from the record, derived
// the same way.
func loadRow(r storage.Record) (table string, cols []string, row []any, err error) {
	b := r.Body
	mismatch := func(what string, got, want any) error {
		return fmt.Errorf("the record's %s is %v, kept under %v", what, got, want)
	}
	switch r.Kind {
	case storage.KindMerchant:
		m, err := decode[storage.Merchant]("merchant", b)
		if err != nil {
			return "", nil, nil, err
		}
		if m.ID != r.ID {
			return "", nil, nil, mismatch("id", m.ID, r.ID)
		}
		return "merchants", []string{"id", "client_id", "body"}, []any{m.ID, m.ClientID, b}, nil
	case storage.KindOrder:
		o, err := decode[order.Order]("order", b)
		if err != nil {
			return "", nil, nil, err
		}
		switch {
		case o.MerchantID != r.MerchantID || o.ID != r.ID:
			return "", nil, nil, mismatch("merchant and id", o.MerchantID+"/"+o.ID, r.MerchantID+"/"+r.ID)
		case o.Version != r.Number:
			return "", nil, nil, mismatch("version", o.Version, r.Number)
		}
		return "orders", []string{"merchant_id", "id", "version", "store_id", "order_ref", "merchant_ref", "category",
			"statuses", "created_key", "expires_key", "expirable", "body"}, append(orderRow(o), b), nil
	case storage.KindAuthorization:
		return "auth_tokens", []string{"merchant_id", "token", "body"}, []any{r.MerchantID, r.ID, b}, nil
	case storage.KindCustomerToken:
		return "customer_tokens", []string{"merchant_id", "id", "body"}, []any{r.MerchantID, r.ID, b}, nil
	case storage.KindSession:
		s, err := decode[session.Session]("session", b)
		if err != nil {
			return "", nil, nil, err
		}
		if s.MerchantID != r.MerchantID || s.ID != r.ID {
			return "", nil, nil, mismatch("merchant and id", s.MerchantID+"/"+s.ID, r.MerchantID+"/"+r.ID)
		}
		return "sessions", []string{"merchant_id", "id", "external_id", "order_id", "store_id", "merchant_ref", "updated_key",
			"created_key", "body"}, append(sessionColumns(s), timeKey(s.CreatedAt), b), nil
	case storage.KindSettlementItem:
		it, err := decode[storage.QueuedItem]("settlement item", b)
		if err != nil {
			return "", nil, nil, err
		}
		if it.Key != r.ID {
			return "", nil, nil, mismatch("key", it.Key, r.ID)
		}
		return "settlement_queue", []string{"key", "occurred_key", "body"}, []any{r.ID, timeKey(it.OccurredAt), b}, nil
	case storage.KindSettlement:
		s, err := decode[settlement.Settlement]("settlement", b)
		if err != nil {
			return "", nil, nil, err
		}
		if s.MerchantID != r.MerchantID || s.ID != r.ID {
			return "", nil, nil, mismatch("merchant and id", s.MerchantID+"/"+s.ID, r.MerchantID+"/"+r.ID)
		}
		return "settlements", []string{"merchant_id", "id", "created_key", "body"}, []any{r.MerchantID, r.ID, timeKey(s.CreatedAt), b}, nil
	case storage.KindSettlementTransaction:
		tr, err := decode[settlement.Transaction]("settlement transaction", b)
		if err != nil {
			return "", nil, nil, err
		}
		if int64(tr.Seq) != r.Number {
			return "", nil, nil, mismatch("seq", tr.Seq, r.Number)
		}
		return "settlement_transactions", []string{"merchant_id", "settlement_id", "seq", "id", "body"},
			[]any{r.MerchantID, r.SettlementID, tr.Seq, tr.ID, b}, nil
	case storage.KindTask:
		t, err := decode[storage.Task]("task", b)
		if err != nil {
			return "", nil, nil, err
		}
		if t.ID != r.ID {
			return "", nil, nil, mismatch("id", t.ID, r.ID)
		}
		return "tasks", []string{"id", "due_key", "body"}, []any{t.ID, timeKey(t.DueAt), b}, nil
	case storage.KindSequence:
		return "sequences", []string{"merchant_id", "series", "value"}, []any{r.MerchantID, r.ID, r.Number}, nil
	case storage.KindIdempotency:
		rec, err := decode[storage.IdempotencyRecord]("idempotency record", b)
		if err != nil {
			return "", nil, nil, err
		}
		if rec.MerchantID != r.MerchantID || rec.Key != r.ID {
			return "", nil, nil, mismatch("merchant and key", rec.MerchantID+"/"+rec.Key, r.MerchantID+"/"+r.ID)
		}
		return "idempotency", []string{"merchant_id", "key", "expires_key", "body"}, []any{r.MerchantID, r.ID, timeKey(rec.ExpiresAt), b}, nil
	case storage.KindOutbox:
		m, err := decode[storage.OutboxMessage]("outbox message", b)
		if err != nil {
			return "", nil, nil, err
		}
		if m.ID != r.ID {
			return "", nil, nil, mismatch("id", m.ID, r.ID)
		}
		return "outbox", []string{"id", "merchant_id", "created_key", "next_key", "done", "body"},
			[]any{m.ID, m.MerchantID, timeKey(m.CreatedAt), timeKey(m.NextAttempt), m.Done(), b}, nil
	case storage.KindSigningKey:
		if len(b) < 32 {
			return "", nil, nil, fmt.Errorf("a signing key of %d bytes (at least 32)", len(b))
		}
		key := b
		if r.KeyCheckOnly {
			key = nil
		}
		return "signing_key", []string{"id", "key_check", "key"}, []any{int16(1), storage.SigningKeyCheck(b), key}, nil
	}
	return "", nil, nil, fmt.Errorf("no table takes records of kind %q", r.Kind)
}
