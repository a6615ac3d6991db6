package postgres

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

func encode(what string, v any) ([]byte, error) {
	b, err := storage.EncodeRecord(v)
	if err != nil {
		return nil, fault.Internalf(err, "encode %s", what)
	}
	return b, nil
}

func decode[T any](what string, b []byte) (*T, error) {
	var v T
	if err := storage.DecodeRecord(b, &v); err != nil {
		return nil, fault.Internalf(err, "decode %s", what)
	}
	return &v, nil
}

// one reads one record; missing is returned when no row matched.
func one[T any](t *tx, what string, missing error, sql string, args ...any) (*T, error) {
	b, ok, err := t.body(what, sql, args...)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missing
	}
	return decode[T](what, b)
}

// Merchants.
//
// Merchant reads are not locked: every API change reads its merchant, and a
// lock would serialize them all. A change to the merchant itself is checked
// instead: PutMerchant writes only over the body this transaction read, and
// when another transaction changed it in between, the whole transaction
// runs again on the new value (so two replicas starting at once, or two
// settings changes, never undo each other).

func (t *tx) GetMerchant(id string) (*storage.Merchant, error) {
	return t.merchant(`SELECT id, body FROM merchants WHERE id = $1`, id)
}

func (t *tx) GetMerchantByClientID(clientID string) (*storage.Merchant, error) {
	m, err := t.merchant(`SELECT id, body FROM merchants WHERE client_id = $1`, clientID)
	if fault.Is(err, fault.NotFound) && t.writable {
		// Remembered so that PutMerchant can tell "created meanwhile" (run
		// again, then find it) from "belongs to another merchant".
		t.merchants["client:"+clientID] = nil
	}
	return m, err
}

// merchant reads the merchant (id, body) sql selects by arg.
func (t *tx) merchant(sql, arg string) (*storage.Merchant, error) {
	var id string
	var b []byte
	ok, err := t.scanRow("merchant", sql, []any{arg}, &id, &b)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("merchant_not_found", "merchant not found")
	}
	m, err := t.decodedMerchants.Decode(id, b)
	if err != nil {
		return nil, err
	}
	if t.writable {
		if _, seen := t.merchants[m.ID]; !seen {
			t.merchants[m.ID] = b
		}
	}
	return m, nil
}

func (t *tx) PutMerchant(m *storage.Merchant) error {
	if !t.writable {
		return errReadOnly
	}
	var owner string
	err := t.tx.QueryRow(t.ctx, `SELECT id FROM merchants WHERE client_id = $1`, m.ClientID).Scan(&owner)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return dbErr(err, "merchant")
	}
	if err == nil && owner != m.ID {
		if _, lookedUp := t.merchants["client:"+m.ClientID]; lookedUp {
			return errLostRace
		}
		return fault.Conflictf("client_id_taken", "client id %s belongs to another merchant", m.ClientID)
	}
	b, err := encode("merchant", m)
	if err != nil {
		return err
	}
	read, wasRead := t.merchants[m.ID]
	var n int64
	if wasRead {
		n, err = t.exec("merchant", `UPDATE merchants SET client_id = $2, body = $3 WHERE id = $1 AND body = $4`, m.ID, m.ClientID, b, read)
	} else {
		n, err = t.exec("merchant", `INSERT INTO merchants (id, client_id, body) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET client_id = EXCLUDED.client_id, body = EXCLUDED.body`, m.ID, m.ClientID, b)
	}
	if fault.Is(err, fault.Conflict) {
		// Another transaction took the client id since the check above.
		return errLostRace
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return errLostRace
	}
	t.merchants[m.ID] = b
	return nil
}

func (t *tx) ListMerchants() ([]*storage.Merchant, error) {
	// By the id's bytes, as bbolt orders them, whatever the database's
	// collation (a Danish one puts "aa" after "z"). Merchants are few: the
	// sort costs nothing that the primary key's order would save.
	bs, err := t.bodies("merchants", `SELECT body FROM merchants ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	out := make([]*storage.Merchant, 0, len(bs))
	for _, b := range bs {
		m, err := decode[storage.Merchant]("merchant", b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (t *tx) HasMerchants() (bool, error) {
	var has bool
	if err := t.tx.QueryRow(t.ctx, `SELECT EXISTS (SELECT 1 FROM merchants)`).Scan(&has); err != nil {
		return false, dbErr(err, "merchant")
	}
	return has, nil
}

// Tokens.

func (t *tx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	missing := fault.NotFoundf("authorization_token_not_found", "authorization token not found")
	if t.writable {
		// FOR UPDATE locks nothing when the token is absent, and a caller that
		// found it absent may put it (Ledger.PutAuthorization puts an id
		// once): two such transactions on different replicas would both pass.
		// The id's advisory lock makes the second wait and then find the
		// first's token.
		if err := t.advisoryLock(advisoryKey("authorization", merchantID, tok)); err != nil {
			return nil, err
		}
	}
	a, err := one[token.Authorization](t, "authorization token", missing,
		`SELECT body FROM auth_tokens WHERE merchant_id = $1 AND token = $2`+t.forUpdate(), merchantID, tok)
	if err == nil && a.Deleted {
		return nil, missing
	}
	return a, err
}

func (t *tx) PutAuthorization(a *token.Authorization) error {
	b, err := encode("authorization token", a)
	if err != nil {
		return err
	}
	err = t.later("authorization token", nil, `INSERT INTO auth_tokens (merchant_id, token, body) VALUES ($1, $2, $3)
		ON CONFLICT (merchant_id, token) DO UPDATE SET body = EXCLUDED.body`, a.MerchantID, a.Token, b)
	return err
}

// DeleteAuthorizationsExpiredBefore takes the tokens of the earliest expiry
// through auth_tokens_expires (the expression is the index's, so the planner
// uses it); rows another transaction holds (a token being used, a
// concurrent sweep) are skipped. The rows are deleted by position, as the
// other sweeps' (authTokensSweepSQL says why).
func (t *tx) DeleteAuthorizationsExpiredBefore(before time.Time, limit int) (int, error) {
	n, err := t.exec("authorization token sweep", authTokensSweepSQL, timeKey(before), limit)
	return int(n), err
}

// The retention sweeps (this, idempotencySweepSQL, outboxSweepSQL) lock a
// batch of rows through their index, then delete them by their position
// (ctid), which the lock holds until commit: a Tid Scan of exactly those
// rows, whatever the limit. Sweeps that named the rows by key instead
// ((merchant_id, token) IN (…)) were planned by the limit and the table's
// size: a nested loop over the primary key for a small batch, a hash
// semi-join over a Seq Scan of the whole table for a large one (a batch of
// 5 000 of 300 000 tokens: 210–300 ms, not 56–80;
// TestSweepsUseTheirIndexesAtAnyLimit, docs/postgres.md). A row
// changed and committed by another transaction after the sweep's statement
// began is locked at its new position, which that statement does not see:
// it stays, for the next sweep, as a row another transaction holds does.
const authTokensSweepSQL = `DELETE FROM auth_tokens WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM auth_tokens WHERE kassa_time_key(kassa_expires_at(body)) < $1
	ORDER BY kassa_time_key(kassa_expires_at(body)) LIMIT $2 FOR UPDATE SKIP LOCKED))`

// GetCustomerToken reads a customer token, in a write transaction under its
// row's lock, held to commit. Every order from the token takes that lock, and
// a platform's monthly run makes many at once, so of this store's
// transactions only a few at a time wait for it with a connection (turns.go).
func (t *tx) GetCustomerToken(merchantID, id string) (*token.Customer, error) {
	if t.writable {
		if err := t.takeTurn("customer token\x00" + merchantID + "\x00" + id); err != nil {
			return nil, err
		}
	}
	return one[token.Customer](t, "customer token", fault.NotFoundf("customer_token_not_found", "customer token not found"),
		`SELECT body FROM customer_tokens WHERE merchant_id = $1 AND id = $2`+t.forUpdate(), merchantID, id)
}

func (t *tx) PutCustomerToken(c *token.Customer) error {
	b, err := encode("customer token", c)
	if err != nil {
		return err
	}
	err = t.later("customer token", nil, `INSERT INTO customer_tokens (merchant_id, id, body) VALUES ($1, $2, $3)
		ON CONFLICT (merchant_id, id) DO UPDATE SET body = EXCLUDED.body`, c.MerchantID, c.TokenID, b)
	return err
}

// NextSequence takes the next number under the row's lock, held to commit:
// concurrent transactions queue on it, and a rollback undoes the increment.
// All of a merchant's captures share the row, so of this store's
// transactions only a few at a time wait for it with a connection (turns.go).
func (t *tx) NextSequence(merchantID, series string) (int64, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	if err := t.takeTurn("sequence\x00" + merchantID + "\x00" + series); err != nil {
		return 0, err
	}
	var n int64
	err := t.tx.QueryRow(t.ctx, `INSERT INTO sequences (merchant_id, series, value) VALUES ($1, $2, 1)
		ON CONFLICT (merchant_id, series) DO UPDATE SET value = sequences.value + 1 RETURNING value`, merchantID, series).Scan(&n)
	if err != nil {
		return 0, dbErr(err, "sequence")
	}
	return n, nil
}

// Idempotency.

func (t *tx) GetIdempotency(merchantID, key string) (*storage.IdempotencyRecord, error) {
	if t.writable {
		// Serialize requests with this key across replicas: a concurrent one
		// waits here until this transaction ends, then sees its record.
		if err := t.advisoryLock(advisoryKey("idempotency", merchantID, key)); err != nil {
			return nil, err
		}
	}
	b, ok, err := t.body("idempotency record", `SELECT body FROM idempotency WHERE merchant_id = $1 AND key = $2`, merchantID, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		if t.writable {
			t.unusedKeys[merchantID+"/"+key] = true
		}
		return nil, nil
	}
	return decode[storage.IdempotencyRecord]("idempotency record", b)
}

func (t *tx) PutIdempotency(r *storage.IdempotencyRecord) error {
	b, err := encode("idempotency record", r)
	if err != nil {
		return err
	}
	exists := func() error { return fault.Conflictf("idempotency_key_exists", "idempotency key exists") }
	if k := r.MerchantID + "/" + r.Key; t.unusedKeys[k] {
		// Found unused under the key's advisory lock (GetIdempotency): the
		// insert goes with the next round trip; a duplicate would still be
		// refused by the primary key there.
		delete(t.unusedKeys, k)
		return t.later("idempotency record", func(err error) error {
			if err = dbErr(err, "idempotency record"); fault.Is(err, fault.Conflict) {
				return exists()
			}
			return err
		}, `INSERT INTO idempotency (merchant_id, key, expires_key, body) VALUES ($1, $2, $3, $4)`,
			r.MerchantID, r.Key, timeKey(r.ExpiresAt), b)
	}
	n, err := t.exec("idempotency record", `INSERT INTO idempotency (merchant_id, key, expires_key, body) VALUES ($1, $2, $3, $4)
		ON CONFLICT (merchant_id, key) DO NOTHING`, r.MerchantID, r.Key, timeKey(r.ExpiresAt), b)
	if err != nil {
		return err
	}
	if n == 0 {
		return exists()
	}
	return nil
}

// DeleteExpiredIdempotency takes expired records through idempotency_expires,
// skipping rows another transaction holds, and deletes them by position
// (authTokensSweepSQL says why).
func (t *tx) DeleteExpiredIdempotency(at time.Time, limit int) (int, error) {
	n, err := t.exec("idempotency sweep", idempotencySweepSQL, timeKey(at), limit)
	return int(n), err
}

const idempotencySweepSQL = `DELETE FROM idempotency WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM idempotency WHERE expires_key < $1 LIMIT $2 FOR UPDATE SKIP LOCKED))`

// Outbox.

func (t *tx) AddOutbox(m *storage.OutboxMessage) error {
	b, err := encode("outbox message", m)
	if err != nil {
		return err
	}
	n, err := t.exec("outbox message", `INSERT INTO outbox (id, merchant_id, created_key, next_key, done, body)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
		m.ID, m.MerchantID, timeKey(m.CreatedAt), timeKey(m.NextAttempt), m.Done(), b)
	if err != nil {
		return err
	}
	if n == 0 {
		return fault.Conflictf("outbox_exists", "outbox message %s exists", m.ID)
	}
	return nil
}

func (t *tx) PendingOutbox(at time.Time, limit, perMerchant int) ([]*storage.OutboxMessage, error) {
	if perMerchant <= 0 {
		perMerchant = limit
	}
	// Few due (no more than limit): outbox_pending lists them all in due
	// order, and capping each merchant's there takes what the skip scan
	// would. The skip scan visits every merchant with a message pending,
	// due or not: a merchant whose receiver is down keeps one for the retry
	// schedule's hours, and with 50 000 of them each claim (two or more a
	// second per replica) took 260 to 280 ms of the database. They are
	// counted first, without a lock: locking limit+1 to find out would keep
	// one more row from other replicas' claims until this one commits. A
	// row locked by another claim is counted, and then skipped as there.
	var due int
	if err := t.tx.QueryRow(t.ctx, `SELECT count(*) FROM (SELECT 1 FROM outbox WHERE NOT done AND next_key <= $1
		ORDER BY next_key, id LIMIT $2) d`, timeKey(at), limit+1).Scan(&due); err != nil {
		return nil, dbErr(err, "outbox message")
	}
	if due <= limit {
		bs, err := t.bodies("outbox", `SELECT body FROM outbox WHERE NOT done AND next_key <= $1
			ORDER BY next_key, id LIMIT $2`+t.lockFor(), timeKey(at), limit)
		if err != nil {
			return nil, err
		}
		ms, err := decodeAll[storage.OutboxMessage]("outbox message", bs)
		if err != nil {
			return nil, err
		}
		return storage.FirstPerMerchant(ms, perMerchant), nil
	}
	// More due: a skip scan of outbox_merchant_pending visits each merchant with
	// pending messages once (the merchants table would visit every merchant
	// on every claim), then takes that merchant's oldest due messages from
	// the same index. The lock is taken there: rows another claim holds are
	// skipped, and a merchant's next ones taken in their place.
	t.outboxSkipScans.Add(1)
	bs, err := t.bodies("outbox", `WITH RECURSIVE merchants(id) AS (
			(SELECT merchant_id FROM outbox WHERE NOT done ORDER BY merchant_id LIMIT 1)
			UNION ALL
			SELECT (SELECT o.merchant_id FROM outbox o WHERE NOT o.done AND o.merchant_id > m.id
				ORDER BY o.merchant_id LIMIT 1)
			FROM merchants m WHERE m.id IS NOT NULL)
		SELECT d.body FROM merchants m CROSS JOIN LATERAL (
			SELECT body, next_key, id FROM outbox
			WHERE NOT done AND merchant_id = m.id AND next_key <= $1
			ORDER BY next_key, id LIMIT $3`+t.lockFor()+`) d
		WHERE m.id IS NOT NULL
		ORDER BY d.next_key, d.id LIMIT $2`, timeKey(at), limit, perMerchant)
	if err != nil {
		return nil, err
	}
	return decodeAll[storage.OutboxMessage]("outbox message", bs)
}

func decodeAll[T any](what string, bs [][]byte) ([]*T, error) {
	out := make([]*T, 0, len(bs))
	for _, b := range bs {
		v, err := decode[T](what, b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (t *tx) UpdateOutbox(m *storage.OutboxMessage) error {
	if !t.writable {
		return errReadOnly
	}
	old, err := one[storage.OutboxMessage](t, "outbox message", fault.NotFoundf("outbox_not_found", "outbox message %s not found", m.ID),
		`SELECT body FROM outbox WHERE id = $1 FOR UPDATE`, m.ID)
	if err != nil {
		return err
	}
	if old.MerchantID != m.MerchantID || !old.CreatedAt.Equal(m.CreatedAt) {
		return fault.Conflictf("outbox_immutable", "a message's merchant and creation time do not change")
	}
	b, err := encode("outbox message", m)
	if err != nil {
		return err
	}
	_, err = t.exec("outbox message", `UPDATE outbox SET next_key = $2, done = $3, body = $4 WHERE id = $1`,
		m.ID, timeKey(m.NextAttempt), m.Done(), b)
	return err
}

// DeleteDoneOutbox takes the oldest done rows through outbox_done; rows
// another transaction holds (a concurrent sweep, a redelivery under way)
// are skipped, and the done test is made again on a row's newest version
// once locked, so a message made pending meanwhile stays. The rows are
// deleted by position (authTokensSweepSQL says why).
func (t *tx) DeleteDoneOutbox(before time.Time, limit int) (int, error) {
	n, err := t.exec("outbox sweep", outboxSweepSQL, timeKey(before), limit)
	return int(n), err
}

const outboxSweepSQL = `DELETE FROM outbox WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM outbox WHERE done AND created_key < $1 ORDER BY created_key, id LIMIT $2 FOR UPDATE SKIP LOCKED))
	AND done`

func (t *tx) GetOutbox(merchantID, id string) (*storage.OutboxMessage, error) {
	return one[storage.OutboxMessage](t, "outbox message", fault.NotFoundf("notification_not_found", "notification %s not found", id),
		`SELECT body FROM outbox WHERE id = $1 AND merchant_id = $2`+t.forUpdate(), id, merchantID)
}

func (t *tx) ListOutbox(merchantID, fromID string, at time.Time, size int) ([]*storage.OutboxMessage, string, error) {
	var fromKey []byte
	if !at.IsZero() {
		fromKey = timeKey(at)
	}
	// A message is its small payload and at most 20 log entries: a page of
	// 1 000 is far below the budget.
	return pageNewest(t, "outbox", merchantID, fromID, fromKey, size, storage.MaxPageBytes,
		fault.NotFoundf("notification_not_found", "notification %s not found", fromID),
		func(*storage.OutboxMessage) bool { return true }, func(m *storage.OutboxMessage) string { return m.ID }, nil)
}

// Tasks.

func (t *tx) ScheduleTask(task *storage.Task) error {
	b, err := encode("task", task)
	if err != nil {
		return err
	}
	err = t.later("task", nil, `INSERT INTO tasks (id, due_key, body) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET due_key = EXCLUDED.due_key, body = EXCLUDED.body`, task.ID, timeKey(task.DueAt), b)
	return err
}

func (t *tx) DueTasks(at time.Time, limit int) ([]*storage.Task, error) {
	bs, err := t.bodies("tasks", `SELECT body FROM tasks WHERE due_key <= $1 ORDER BY due_key, id LIMIT $2`+t.lockFor(), timeKey(at), limit)
	if err != nil {
		return nil, err
	}
	t.claimed = t.claimed || (t.writable && len(bs) > 0)
	return decodeAll[storage.Task]("task", bs)
}

func (t *tx) DeleteTask(id string) error {
	n, err := t.exec("task", `DELETE FROM tasks WHERE id = $1`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fault.NotFoundf("task_not_found", "task %s not found", id)
	}
	return nil
}
