package postgres

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

func orderNotFound(id string) error {
	return fault.NotFoundf("order_not_found", "order %s not found", id)
}

// GetOrder reads an order; inside an Update it locks the row until commit,
// so a concurrent change to the same order (on any replica) waits and then
// works on this one's result.
//
// A transaction that claimed due tasks does not wait: an API change locks
// the order first and may then reschedule the very task it holds, which
// would be a deadlock that PostgreSQL only breaks after deadlock_timeout.
// NOWAIT fails at once instead (55P03), and the task transaction runs
// again, after the API change.
func (t *tx) GetOrder(merchantID, orderID string) (*order.Order, error) {
	sql := `SELECT body FROM orders WHERE merchant_id = $1 AND id = $2`
	switch {
	case t.claimed:
		sql += ` FOR UPDATE NOWAIT`
	case t.writable:
		sql += ` FOR UPDATE`
	}
	b, ok, err := t.body("order", sql, merchantID, orderID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, orderNotFound(orderID)
	}
	key := merchantID + "/" + orderID
	o, err := t.decoded.Order(key, b)
	if err == nil && t.writable {
		t.locked[key] = o.Version
	}
	return o, err
}

func (t *tx) OrderVersion(merchantID, orderID string) (int64, error) {
	var v int64
	ok, err := t.scanRow("order version", `SELECT version FROM orders WHERE merchant_id = $1 AND id = $2`, []any{merchantID, orderID}, &v)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, orderNotFound(orderID)
	}
	return v, nil
}

// statusStrings is the statuses column of o: its statuses when last written.
func statusStrings(o *order.Order) []string {
	statuses := o.Statuses(o.UpdatedAt)
	st := make([]string, len(statuses))
	for i, s := range statuses {
		st[i] = string(s)
	}
	return st
}

// orderRow is the columns of an order beside its JSON.
func orderRow(o *order.Order) []any {
	st := statusStrings(o)
	expirable := !o.ExpiredMarked && !o.Cancelled && len(o.Uncaptured.Lines) > 0
	return []any{o.MerchantID, o.ID, o.Version, o.StoreID, o.OrderReference, o.MerchantReference,
		string(o.PaymentMethod.Category()), st, timeKey(o.CreatedAt), timeKey(o.ExpiresAt), expirable}
}

func (t *tx) CreateOrder(o *order.Order) error {
	o.Version = 1
	b, err := encode("order", o)
	if err != nil {
		return err
	}
	n, err := t.exec("order", `INSERT INTO orders (merchant_id, id, version, store_id, order_ref, merchant_ref, category, statuses,
		created_key, expires_key, expirable, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (merchant_id, id) DO NOTHING`, append(orderRow(o), b)...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fault.Conflictf("order_exists", "order %s exists", o.ID)
	}
	key := o.MerchantID + "/" + o.ID
	t.locked[key] = o.Version
	t.remember(key, b, o)
	return nil
}

// remember puts a written order into the shared decoded cache once the
// transaction has committed: a version that never commits would only make
// later reads of the order decode again.
func (t *tx) remember(key string, b []byte, o *order.Order) {
	t.afterCommit = append(t.afterCommit, func() { t.decoded.Written(key, b, o) })
}

// orderUpdateSQL writes an order's columns and body over version $13.
const orderUpdateSQL = `UPDATE orders SET version = $3, store_id = $4, order_ref = $5, merchant_ref = $6, category = $7,
	statuses = $8, created_key = $9, expires_key = $10, expirable = $11, body = $12
	WHERE merchant_id = $1 AND id = $2 AND version = $13`

func (t *tx) UpdateOrder(o *order.Order) error {
	if !t.writable {
		return errReadOnly
	}
	prev := o.Version
	o.Version++
	b, err := encode("order", o)
	if err != nil {
		o.Version = prev
		return err
	}
	key := o.MerchantID + "/" + o.ID
	args := append(orderRow(o), b, prev)
	if v, ok := t.locked[key]; ok && v == prev {
		// This transaction holds the row at prev, so the update cannot miss
		// it; it goes with the next round trip, checked there all the same
		// (kassa_expect_one fails the transaction if it changed no row).
		t.locked[key] = o.Version
		t.remember(key, b, o)
		return t.later("order", nil, `WITH u AS (`+orderUpdateSQL+` RETURNING 1)
			SELECT kassa_expect_one(count(*), 'order update') FROM u`, args...)
	}
	n, err := t.exec("order", orderUpdateSQL, args...)
	if err == nil && n == 0 {
		if _, gerr := t.GetOrder(o.MerchantID, o.ID); gerr != nil {
			err = gerr
		} else {
			err = fault.Conflictf("version_conflict", "order %s changed concurrently (version %d)", o.ID, prev)
		}
	}
	if err != nil {
		o.Version = prev
		return err
	}
	t.locked[key] = o.Version
	t.remember(key, b, o)
	return nil
}

// Cursors are the (createdAt key, id) of the last order of a page,
// base64url-encoded, like storage/bolt's: the next page starts strictly
// after that position, so concurrent inserts do not shift it.
func cursorAt(createdKey []byte, id string) string {
	return base64.RawURLEncoding.EncodeToString(append(createdKey, id...))
}

func parseCursor(s string) ([]byte, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < storage.TimeKeyLen {
		return nil, "", fault.Invalidf("cursor", "is not a cursor from this server")
	}
	return b[:storage.TimeKeyLen], string(b[storage.TimeKeyLen:]), nil
}

// where builds the SQL conditions of q; every filter is one indexable
// condition, and storage.Matches checks the rows again in Go.
type where struct {
	conds []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return fmt.Sprintf("$%d", len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

// timeRange bounds a time key column: from inclusive, to exclusive, a zero
// time bounding nothing.
func (w *where) timeRange(col string, from, to time.Time) {
	if !from.IsZero() {
		w.add(col + " >= " + w.arg(timeKey(from)))
	}
	if !to.IsZero() {
		w.add(col + " < " + w.arg(timeKey(to)))
	}
}

// listWhere is a where for pageNewest, which adds the merchant's condition
// and argument itself, as $1: its conditions and args[1:] are passed.
func listWhere() *where { return &where{args: []any{nil}} }

func orderWhere(merchantID string, q storage.OrderQuery) (*where, error) {
	w := &where{}
	w.add("merchant_id = " + w.arg(merchantID))
	lists := []struct {
		col  string
		vals []string
	}{{"id", q.IDs}, {"store_id", q.StoreIDs}, {"order_ref", q.OrderReferences}, {"merchant_ref", q.MerchantReferences},
		{"category", strs(q.Categories)}}
	for _, l := range lists {
		if len(l.vals) > 0 {
			// A value no row can hold matches nothing (as on every store),
			// and sent it would fail the statement.
			w.add(l.col + " = ANY(" + w.arg(slices.DeleteFunc(slices.Clone(l.vals), cannotHoldText)) + ")")
		}
	}
	if len(q.Status) > 0 {
		w.add("statuses && " + w.arg(strs(q.Status)) + "::text[]")
	}
	if len(q.StatusAnd) > 0 {
		w.add("statuses @> " + w.arg(strs(q.StatusAnd)) + "::text[]")
	}
	if len(q.StatusNot) > 0 {
		w.add("NOT (statuses && " + w.arg(strs(q.StatusNot)) + "::text[])")
	}
	w.timeRange("created_key", q.CreatedFrom, q.CreatedTo)
	w.timeRange("expires_key", q.ExpiresFrom, q.ExpiresTo)
	if !q.ExpiresTo.IsZero() {
		// Every order is made before it expires (expiresAt is createdAt
		// plus a positive period, and only ever moves later), so an order
		// expiring before ExpiresTo was created before it too. Said in SQL,
		// the newest-first scan of orders_created starts there: without it
		// the planner, taking the two times for unrelated, read every order
		// expiring later first (2.2 s for an expiresTo half a year back on a
		// merchant of 400 000 orders, docs/postgres.md).
		w.add("created_key < " + w.arg(timeKey(q.ExpiresTo)))
	}
	if q.Q != "" && cannotHoldText(q.Q) {
		w.add("false")
	} else if q.Q != "" {
		p := w.arg(q.Q)
		w.add("(id = " + p + " OR order_ref = " + p + " OR merchant_ref = " + p + ")")
	}
	if q.Cursor != "" {
		key, id, err := parseCursor(q.Cursor)
		if err != nil {
			return nil, err
		}
		w.add("(created_key, id) < (" + w.arg(key) + ", " + w.arg(id) + ")")
	}
	return w, nil
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// listSQL is the query of one page: the first size+1 rows of w in list
// order (budgetedSQL).
func listSQL(w *where, size int, budget int64) string {
	return budgetedSQL("orders", strings.Join(w.conds, " AND "), w.arg(budget), w.arg(size+1))
}

// budgetedSQL selects id, created_key and body of the rows of table that
// meet where, newest first, at most limit of them, with the body of each
// only while the bodies so far stay within budget (always the first row's):
// storage.FitsPage in SQL, so that rows past the budget are neither sent nor
// detoasted. octet_length of a TOASTed bytea reads its header, not the
// value. The window runs over the LIMITed subquery, which keeps the plan
// (and top-N sort) of the plain query. budget and limit are placeholders.
func budgetedSQL(table, where, budget, limit string) string {
	return `SELECT id, created_key, CASE WHEN row_number() OVER page = 1 OR sum(len) OVER page <= ` + budget + ` THEN body END
		FROM (SELECT id, created_key, octet_length(body) AS len, body FROM ` + table + ` WHERE ` + where + `
			ORDER BY created_key DESC, id DESC LIMIT ` + limit + `) candidates
		WINDOW page AS (ORDER BY created_key DESC, id DESC ROWS UNBOUNDED PRECEDING)
		ORDER BY created_key DESC, id DESC`
}

func (t *tx) ListOrders(merchantID string, q storage.OrderQuery) (storage.OrderPage, error) {
	size, err := storage.PageSize(q)
	if err != nil {
		return storage.OrderPage{}, err
	}
	w, err := orderWhere(merchantID, q)
	if err != nil {
		return storage.OrderPage{}, err
	}
	type row struct {
		ID         string
		CreatedKey []byte
		Body       []byte // nil past the budget
	}
	t.planForValues()
	found, err := collect(t, "orders", pgx.RowToStructByPos[row], listSQL(w, size, storage.PageBudget(q)), w.args...)
	if err != nil {
		return storage.OrderPage{}, err
	}
	var page storage.OrderPage
	looked := -1 // the last row looked at
	for i, r := range found {
		if len(page.Orders) == size || r.Body == nil {
			break
		}
		looked = i
		// Through the decoded cache: a page mostly shows orders read or
		// written a moment ago.
		o, err := t.decoded.Order(merchantID+"/"+r.ID, r.Body)
		if err != nil {
			return storage.OrderPage{}, err
		}
		// A row whose statuses column disagrees with its order was written
		// by a replica of a build with other status rules (a rolling
		// upgrade, docs/postgres.md): the order's own statuses decide. Its
		// body counted against the budget all the same: it was decoded.
		if !storage.Matches(o, o.Statuses(o.UpdatedAt), q) {
			continue
		}
		page.Orders = append(page.Orders, o)
	}
	// Rows were left (the page is full, or at its budget), or rows were
	// passed over and the query had more: go on after the last row looked at.
	if looked >= 0 && (looked+1 < len(found) || len(found) > size) {
		page.NextCursor = cursorAt(found[looked].CreatedKey, found[looked].ID)
	}
	return page, nil
}

// OrdersExpiringBefore lists orders that can still expire and whose expiry
// is before at; in an Update it claims them (SKIP LOCKED) for the expiry job.
func (t *tx) OrdersExpiringBefore(at time.Time, limit int) ([]*order.Order, error) {
	bs, err := t.bodies("orders", `SELECT body FROM orders WHERE expirable AND expires_key < $1
		ORDER BY expires_key LIMIT $2`+t.lockFor(), timeKey(at), limit)
	if err != nil {
		return nil, err
	}
	return decodeAll[order.Order]("order", bs)
}
