package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// pageChunk is how many rows a newest-first walk reads per query after its
// first, which reads size+1 (at most pageChunk): a page without filters that
// only Go can check is one query of the rows it needs.
const pageChunk = 256

// pageNewest walks a merchant's rows of table (merchant_id, id,
// created_key, body) newest first, starting strictly after the row fromID
// (missing when there is no such row), or after the position (fromKey,
// fromID) when fromKey is given, which needs no row; keeps those match accepts, and
// returns up to size of them with the id to continue from ("" on the last
// page). conds are further SQL conditions on the rows, with their args
// numbered from $2: they only narrow the rows read, match decides. It reads
// in chunks, so a selective filter does not load the table.
//
// A page also ends by its byte budget (storage.FitsPage over the stored
// bodies of the rows on it), and so does a chunk: a chunk sends a row's body
// only while the bodies before it and its own stay within budget (always the
// first row's), so rows past it are neither sent nor detoasted, and the
// next chunk starts after the last row with a body. A query reads at most
// budget bytes (or one row larger than it), whatever size and however many
// rows match fails to reject.
func pageNewest[T any](t *tx, table, merchantID, fromID string, fromKey []byte, size int, budget int64, missing error,
	match func(*T) bool, idOf func(*T) string, conds []string, args ...any) ([]*T, string, error) {
	key := fromKey // a position given: no row need be there
	id := fromID
	if fromID != "" && key == nil {
		found, err := t.scanRow(table, `SELECT created_key FROM `+table+` WHERE merchant_id = $1 AND id = $2`, []any{merchantID, fromID}, &key)
		if err != nil {
			return nil, "", err
		}
		if !found {
			return nil, "", missing
		}
	}
	where := strings.Join(append([]string{"merchant_id = $1"}, conds...), " AND ")
	args = append([]any{merchantID}, args...)
	n := len(args)
	var page []*T
	fill := storage.PageFill{Budget: budget}
	limit := min(size+1, pageChunk)
	t.planForValues()
	for {
		qargs := append(slices.Clip(args), budget, limit)
		if key != nil {
			qargs = append(qargs, key, id)
		}
		rows, err := t.tx.Query(t.ctx, chunkSQL(table, where, n, key != nil), qargs...)
		if err != nil {
			return nil, "", dbErr(err, table)
		}
		type row struct {
			ID   string
			Key  []byte
			Body []byte // nil past the chunk's budget
		}
		chunk, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return nil, "", dbErr(err, table)
		}
		cut := false
		for _, r := range chunk {
			if r.Body == nil {
				cut = true
				break
			}
			key, id = r.Key, r.ID
			v, err := decode[T](table, r.Body)
			if err != nil {
				return nil, "", err
			}
			if !match(v) {
				continue
			}
			if len(page) == size || !fill.Take(int64(len(r.Body))) {
				return page, idOf(page[len(page)-1]), nil
			}
			page = append(page, v)
		}
		if !cut && len(chunk) < limit {
			return page, "", nil
		}
		limit = pageChunk
	}
}

// chunkSQL is the query of one chunk of pageNewest (budgetedSQL): the rows
// of table that meet where ($1 to $n), at most $n+2 of them, after the
// position ($n+3, $n+4) when after is set, with the budget $n+1.
func chunkSQL(table, where string, n int, after bool) string {
	if after {
		where += fmt.Sprintf(` AND (created_key, id) < ($%d, $%d)`, n+3, n+4)
	}
	return budgetedSQL(table, where, fmt.Sprintf("$%d", n+1), fmt.Sprintf("$%d", n+2))
}

// Sessions.

func (t *tx) GetSession(merchantID, id string) (*session.Session, error) {
	return one[session.Session](t, "session", fault.NotFoundf("session_not_found", "session %s not found", id),
		`SELECT body FROM sessions WHERE merchant_id = $1 AND id = $2`+t.forUpdate(), merchantID, id)
}

func (t *tx) GetSessionByExternalID(merchantID, externalID string) (*session.Session, error) {
	return one[session.Session](t, "session", fault.NotFoundf("session_not_found", "session not found"),
		`SELECT body FROM sessions WHERE merchant_id = $1 AND external_id = $2`+t.forUpdate(), merchantID, externalID)
}

func (t *tx) GetSessionByOrderID(merchantID, orderID string) (*session.Session, error) {
	return one[session.Session](t, "session", fault.NotFoundf("session_not_found", "session not found"),
		`SELECT body FROM sessions WHERE merchant_id = $1 AND order_id = $2`+t.forUpdate(), merchantID, orderID)
}

func (t *tx) PutSession(s *session.Session) error {
	if !t.writable {
		return errReadOnly
	}
	var other string
	err := t.tx.QueryRow(t.ctx, `SELECT id FROM sessions WHERE merchant_id = $1 AND id <> $2
		AND (external_id = $3 OR order_id = $4) LIMIT 1`, s.MerchantID, s.ID, nullIfEmpty(s.ExternalSessionID), nullIfEmpty(s.OrderID)).Scan(&other)
	if err == nil {
		return fault.Conflictf("session_exists", "another session has that externalSessionId or orderId")
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return dbErr(err, "session")
	}
	b, err := encode("session", s)
	if err != nil {
		return err
	}
	_, err = t.exec("session", `INSERT INTO sessions (merchant_id, id, external_id, order_id, store_id, merchant_ref, updated_key, created_key, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (merchant_id, id) DO UPDATE
		SET external_id = EXCLUDED.external_id, order_id = EXCLUDED.order_id, store_id = EXCLUDED.store_id,
		merchant_ref = EXCLUDED.merchant_ref, updated_key = EXCLUDED.updated_key, body = EXCLUDED.body`,
		append(sessionColumns(s), timeKey(s.CreatedAt), b)...)
	if fault.CodeOf(err) == "conflict" {
		// Another transaction inserted the same reference after the check
		// above looked: the same answer the check gives.
		return fault.Conflictf("session_exists", "another session has that externalSessionId or orderId")
	}
	return err
}

// sessionColumns are the columns of s beside its id, creation key and body
// that lookups and list filters use.
func sessionColumns(s *session.Session) []any {
	return []any{s.MerchantID, s.ID, nullIfEmpty(s.ExternalSessionID), nullIfEmpty(s.OrderID), s.StoreID, s.MerchantReference, timeKey(s.UpdatedAt)}
}

// ListSessions reads only the rows the indexed filters allow (orderId,
// merchantReference, storeId, created and updated ranges; the planner picks
// the index, see docs/postgres.md) and checks each with q.Match, which alone
// decides what matches. state, source and q have no column: state depends on
// the time, source has two values and q is a substring.
func (t *tx) ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error) {
	conds, args := sessionWhere(q)
	now := t.now
	return pageNewest(t, "sessions", merchantID, q.FromID, nil, q.Size, storage.SessionPageBudget(q),
		fault.NotFoundf("session_not_found", "session %s not found", q.FromID),
		func(s *session.Session) bool { return q.Match(s, now) }, func(s *session.Session) string { return s.ID },
		conds, args...)
}

// sessionWhere is the SQL conditions of q's indexed filters, arguments from $2.
func sessionWhere(q session.Query) ([]string, []any) {
	w := listWhere()
	// One value is an equality, so that the (merchant, value, created)
	// index yields the page in order; PostgreSQL 15 sorts for = ANY.
	in := func(col string, vs []string) {
		if len(vs) == 0 {
			return
		}
		// A value no row can hold matches nothing (as on every store, and
		// as in an order list), and sent it would fail the statement.
		vs = slices.DeleteFunc(slices.Clone(vs), cannotHoldText)
		switch len(vs) {
		case 0:
			w.add("false")
		case 1:
			w.add(col + " = " + w.arg(vs[0]))
		default:
			w.add(col + " = ANY(" + w.arg(vs) + ")")
		}
	}
	in("order_id", q.OrderIDs)
	in("merchant_ref", q.MerchantReferences)
	in("store_id", q.StoreIDs)
	w.timeRange("created_key", q.CreatedFrom, q.CreatedTo)
	w.timeRange("updated_key", q.UpdatedFrom, q.UpdatedTo)
	if !q.UpdatedTo.IsZero() {
		// A session is never updated before it was created (Session.stamp),
		// so this bound is implied; said in SQL, the newest-first scan of
		// sessions_created starts there instead of reading every session
		// updated later first (as orders' expiresTo, docs/postgres.md).
		w.add("created_key < " + w.arg(timeKey(q.UpdatedTo)))
	}
	return w.conds, w.args[1:]
}

// fillSessionColumns fills the filter columns of sessions written before
// migration 6, or since by an older build, from their bodies. It runs at
// Open under the migration lock, so no replica of this build lists by a
// column still empty. A row whose body changed since it was read (an older
// replica writing) is left for the next start; one that cannot be decoded is
// left too: its reads fail the same way.
func fillSessionColumns(ctx context.Context, conn *pgxpool.Conn) error {
	var after [2]string
	for {
		rows, err := conn.Query(ctx, `SELECT merchant_id, id, body FROM sessions WHERE updated_key IS NULL
			AND (merchant_id, id) > ($1, $2) ORDER BY merchant_id, id LIMIT $3`, after[0], after[1], reindexBatch)
		if err != nil {
			return fmt.Errorf("postgres: fill session columns: %w", err)
		}
		type row struct {
			MerchantID, ID string
			Body           []byte
		}
		batch, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return fmt.Errorf("postgres: fill session columns: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		after = [2]string{batch[len(batch)-1].MerchantID, batch[len(batch)-1].ID}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, r := range batch {
				s, err := decode[session.Session]("session", r.Body)
				if err != nil {
					continue
				}
				if _, err := tx.Exec(ctx, `UPDATE sessions SET store_id = $3, merchant_ref = $4, updated_key = $5
					WHERE merchant_id = $1 AND id = $2 AND body = $6`, r.MerchantID, r.ID, s.StoreID, s.MerchantReference, timeKey(s.UpdatedAt), r.Body); err != nil {
					return fmt.Errorf("session %s/%s: %w", r.MerchantID, r.ID, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("postgres: fill session columns: %w", err)
		}
		if len(batch) < reindexBatch {
			return nil
		}
	}
}

// Settlements.

func (t *tx) QueueSettlementItems(items []settlement.Item) error {
	for i := range items {
		b, err := encode("settlement item", storage.QueuedItem(items[i]))
		if err != nil {
			return err
		}
		if err := t.later("settlement item", nil, `INSERT INTO settlement_queue (key, occurred_key, body) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET occurred_key = EXCLUDED.occurred_key, body = EXCLUDED.body`,
			items[i].Key, timeKey(items[i].OccurredAt), b); err != nil {
			return err
		}
	}
	return nil
}

// PendingSettlementItems, in an Update, first takes the settlement-run lock:
// runs on several replicas wait for each other, and a later run sees the
// items an earlier one removed as gone.
// The queue is read oldest first, ties by key (index settlement_queue_occurred).
func (t *tx) PendingSettlementItems(limit int) ([]settlement.Item, error) {
	if t.writable {
		if err := t.kindLock(lockSettlement); err != nil {
			return nil, err
		}
	}
	return t.queuedItems(`SELECT body FROM settlement_queue ORDER BY occurred_key, key COLLATE "C" LIMIT $1`, limit)
}

func (t *tx) QueuedSettlementItems(keys []string) ([]settlement.Item, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return t.queuedItems(`SELECT body FROM settlement_queue WHERE key = ANY($1)`, keys)
}

// queuedItems reads the settlement queue's items a query selects.
func (t *tx) queuedItems(sql string, args ...any) ([]settlement.Item, error) {
	bs, err := t.bodies("settlement queue", sql, args...)
	if err != nil {
		return nil, err
	}
	items, err := decodeAll[storage.QueuedItem]("settlement item", bs)
	if err != nil {
		return nil, err
	}
	out := make([]settlement.Item, len(items))
	for i, it := range items {
		out[i] = settlement.Item(*it)
	}
	return out, nil
}

func (t *tx) SaveSettlement(b settlement.Batch) error {
	if !t.writable {
		return errReadOnly
	}
	if len(b.Keys) > 0 {
		n, err := t.exec("settlement queue", `DELETE FROM settlement_queue WHERE key = ANY($1)`, b.Keys)
		if err != nil {
			return err
		}
		if n != int64(len(b.Keys)) {
			return fault.Conflictf("settlement_item_gone", "%d of the batch's settlement items are not pending", int64(len(b.Keys))-n)
		}
	}
	s := b.Settlement
	if s.ID == "" {
		return nil
	}
	body, err := encode("settlement", s)
	if err != nil {
		return err
	}
	if _, err := t.exec("settlement", `INSERT INTO settlements (merchant_id, id, created_key, body) VALUES ($1, $2, $3, $4)`,
		s.MerchantID, s.ID, timeKey(s.CreatedAt), body); err != nil {
		return err
	}
	rows := make([][]any, len(b.Transactions))
	for i, tr := range b.Transactions {
		tb, err := encode("settlement transaction", tr)
		if err != nil {
			return err
		}
		rows[i] = []any{s.MerchantID, s.ID, tr.Seq, tr.ID, tb}
	}
	if _, err := t.tx.CopyFrom(t.ctx, pgx.Identifier{"settlement_transactions"},
		[]string{"merchant_id", "settlement_id", "seq", "id", "body"}, pgx.CopyFromRows(rows)); err != nil {
		return dbErr(err, "settlement transactions")
	}
	return nil
}

func (t *tx) GetSettlement(merchantID, id string) (*settlement.Settlement, error) {
	return one[settlement.Settlement](t, "settlement", fault.NotFoundf("settlement_not_found", "settlement %s not found", id),
		`SELECT body FROM settlements WHERE merchant_id = $1 AND id = $2`, merchantID, id)
}

func (t *tx) ListSettlements(merchantID string, q settlement.Query) ([]*settlement.Settlement, string, error) {
	// Settlement records are a few hundred bytes: a page of 1 000 is far
	// below the budget. A created range bounds the scan in SQL, as sessions'
	// does, rather than reading and matching every settlement of the
	// merchant outside it (a daily run makes one per store and currency).
	w := listWhere()
	w.timeRange("created_key", q.CreatedFrom, q.CreatedTo)
	return pageNewest(t, "settlements", merchantID, q.FromID, nil, q.Size, storage.MaxPageBytes,
		fault.NotFoundf("settlement_not_found", "settlement %s not found", q.FromID),
		q.Match, func(s *settlement.Settlement) string { return s.ID }, w.conds, w.args[1:]...)
}

func (t *tx) SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error) {
	if _, err := t.GetSettlement(merchantID, settlementID); err != nil {
		return nil, "", err
	}
	after := 0
	if fromID != "" {
		found, err := t.scanRow("settlement transactions", `SELECT seq FROM settlement_transactions WHERE merchant_id = $1 AND settlement_id = $2 AND id = $3`,
			[]any{merchantID, settlementID, fromID}, &after)
		if err != nil {
			return nil, "", err
		}
		if !found {
			return nil, "", fault.Invalidf("fromId", "is not a transaction of this settlement")
		}
	}
	bs, err := t.bodies("settlement transactions", `SELECT body FROM settlement_transactions
		WHERE merchant_id = $1 AND settlement_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`, merchantID, settlementID, after, size+1)
	if err != nil {
		return nil, "", err
	}
	txs, err := decodeAll[settlement.Transaction]("settlement transaction", bs)
	if err != nil {
		return nil, "", err
	}
	out := make([]settlement.Transaction, 0, len(txs))
	for _, tr := range txs {
		out = append(out, *tr)
	}
	if len(out) > size {
		return out[:size], out[size-1].ID, nil
	}
	return out, "", nil
}
