package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/ordercache"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// state is shared by every function of one bbolt transaction.
type state struct {
	b         *bbolt.Tx
	now       time.Time
	writable  bool
	bk        map[string]*bbolt.Bucket
	decoded   *ordercache.Decoded
	merchants *storage.MerchantCache
	// outboxSkips is the store's count of merchants visited by claims.
	outboxSkips *atomic.Int64
}

func newState(b *bbolt.Tx, now time.Time, writable bool, s *Store) *state {
	return &state{b: b, now: now, writable: writable, bk: make(map[string]*bbolt.Bucket),
		decoded: s.decoded, merchants: &s.merchants, outboxSkips: &s.outboxSkips}
}

func (s *state) bucket(name []byte) *bbolt.Bucket {
	b, ok := s.bk[string(name)]
	if !ok {
		b = s.b.Bucket(name)
		s.bk[string(name)] = b
	}
	return b
}

// undo is one journal entry: the value a key had before a put or delete.
type undo struct {
	bucket []byte
	key    []byte
	old    []byte // nil: the key was absent
}

// tx is what one Update or View function sees. Its journal lets the
// committer undo exactly this function's writes.
type tx struct {
	st      *state
	journal []undo
	closed  bool
	// examined counts list candidates checked, so that tests can tell an
	// index walk from a scan.
	examined int
}

var (
	errReadOnly = fault.Internalf(nil, "write in a read-only transaction")
	errTxDone   = fault.Internalf(nil, "transaction used after its function returned")
)

// present is the value of index entries. It is not empty so that Get tells
// an entry from an absent key without a cursor.
var present = []byte{1}

func (t *tx) close() { t.closed = true }

func (t *tx) check(write bool) error {
	switch {
	case t.closed:
		return errTxDone
	case write && !t.st.writable:
		return errReadOnly
	}
	return nil
}

func (t *tx) get(bucket, k []byte) []byte { return t.st.bucket(bucket).Get(k) }

// put stores v under k, journaling the previous value. bbolt keeps k and v
// until commit, so callers pass slices they do not reuse.
//
// The journal keeps the previous value as bbolt hands it out, uncopied: it is
// valid for the life of the bbolt transaction, and the journal is replayed
// (undo) only before that transaction commits. bbolt remaps its file only
// while committing, and then copies what its nodes still point to in the
// map, an undone value put back included. Copying it would cost a whole
// order record per update, the largest value most writes replace.
func (t *tx) put(bucket, k, v []byte) error {
	if err := t.check(true); err != nil {
		return err
	}
	b := t.st.bucket(bucket)
	t.journal = append(t.journal, undo{bucket: bucket, key: k, old: b.Get(k)})
	if err := b.Put(k, v); err != nil {
		t.journal = t.journal[:len(t.journal)-1]
		return fault.Internalf(err, "put %s", bucket)
	}
	return nil
}

func (t *tx) del(bucket, k []byte) error {
	if err := t.check(true); err != nil {
		return err
	}
	b := t.st.bucket(bucket)
	old := b.Get(k)
	if old == nil {
		return nil
	}
	t.journal = append(t.journal, undo{bucket: bucket, key: k, old: old}) // uncopied, as in put
	if err := b.Delete(k); err != nil {
		t.journal = t.journal[:len(t.journal)-1]
		return fault.Internalf(err, "delete %s", bucket)
	}
	return nil
}

// undo replays the journal backwards, restoring what the function found.
func (t *tx) undo() error {
	for i := len(t.journal) - 1; i >= 0; i-- {
		u := t.journal[i]
		b := t.st.bucket(u.bucket)
		var err error
		if u.old == nil {
			err = b.Delete(u.key)
		} else {
			err = b.Put(u.key, u.old)
		}
		if err != nil {
			return err
		}
	}
	t.journal = nil
	return nil
}

func (t *tx) putRecord(bucket, k []byte, v any) error {
	b, err := storage.EncodeRecord(v)
	if err != nil {
		return fault.Internalf(err, "encode %s", bucket)
	}
	return t.put(bucket, k, b)
}

// getRecord decodes the record at k into v and reports whether it exists.
func (t *tx) getRecord(bucket, k []byte, v any) (bool, error) {
	if err := t.check(false); err != nil {
		return false, err
	}
	b := t.get(bucket, k)
	if b == nil {
		return false, nil
	}
	if err := storage.DecodeRecord(b, v); err != nil {
		return false, fault.Internalf(err, "decode %s record", bucket)
	}
	return true, nil
}

func (t *tx) Now() time.Time { return t.st.now }

// Merchants.

func (t *tx) GetMerchant(id string) (*storage.Merchant, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	raw := t.get(bMerchants, []byte(id))
	if raw == nil {
		return nil, fault.NotFoundf("merchant_not_found", "merchant %s not found", id)
	}
	return t.st.merchants.Decode(id, raw)
}

func (t *tx) GetMerchantByClientID(clientID string) (*storage.Merchant, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	id := t.get(bClients, []byte(clientID))
	if id == nil {
		return nil, fault.NotFoundf("merchant_not_found", "no merchant has client id %s", clientID)
	}
	return t.GetMerchant(string(id))
}

func (t *tx) PutMerchant(m *storage.Merchant) error {
	if err := t.check(true); err != nil {
		return err
	}
	if owner := t.get(bClients, []byte(m.ClientID)); owner != nil && string(owner) != m.ID {
		return fault.Conflictf("client_id_taken", "client id %s belongs to another merchant", m.ClientID)
	}
	var old storage.Merchant
	found, err := t.getRecord(bMerchants, []byte(m.ID), &old)
	if err != nil {
		return err
	}
	if found && old.ClientID != m.ClientID {
		// The old client id stops working the moment it is replaced.
		if err := t.del(bClients, []byte(old.ClientID)); err != nil {
			return err
		}
	}
	if err := t.put(bClients, []byte(m.ClientID), []byte(m.ID)); err != nil {
		return err
	}
	return t.putRecord(bMerchants, []byte(m.ID), m)
}

func (t *tx) ListMerchants() ([]*storage.Merchant, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var out []*storage.Merchant
	err := t.st.bucket(bMerchants).ForEach(func(k, v []byte) error {
		var m storage.Merchant
		if err := json.Unmarshal(v, &m); err != nil {
			return fault.Internalf(err, "decode merchant %s", k)
		}
		out = append(out, &m)
		return nil
	})
	return out, err
}

func (t *tx) HasMerchants() (bool, error) {
	if err := t.check(false); err != nil {
		return false, err
	}
	k, _ := t.st.bucket(bMerchants).Cursor().First()
	return k != nil, nil
}

// Orders.

func (t *tx) GetOrder(merchantID, orderID string) (*order.Order, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	k := orderKey(merchantID, orderID)
	raw := t.get(bOrders, k)
	if raw == nil {
		return nil, fault.NotFoundf("order_not_found", "order %s not found", orderID)
	}
	return t.decodeOrder(k, raw)
}

// decodeOrder is decodeOrder through the store's cache of decoded orders.
func (t *tx) decodeOrder(k, raw []byte) (*order.Order, error) {
	_, js, err := splitOrder(raw)
	if err != nil {
		return nil, err
	}
	return t.st.decoded.Order(string(k), js)
}

func (t *tx) OrderVersion(merchantID, orderID string) (int64, error) {
	if err := t.check(false); err != nil {
		return 0, err
	}
	raw := t.get(bOrders, orderKey(merchantID, orderID))
	if raw == nil {
		return 0, fault.NotFoundf("order_not_found", "order %s not found", orderID)
	}
	m, err := orderMeta(raw)
	if err != nil {
		return 0, fault.Internalf(err, "decode order meta")
	}
	return m.version, nil
}

func decodeOrder(raw []byte) (*order.Order, error) {
	_, js, err := splitOrder(raw)
	if err != nil {
		return nil, err
	}
	var o order.Order
	if err := json.Unmarshal(js, &o); err != nil {
		return nil, fault.Internalf(err, "decode order")
	}
	return &o, nil
}

func (t *tx) CreateOrder(o *order.Order) error {
	if err := t.check(true); err != nil {
		return err
	}
	k := orderKey(o.MerchantID, o.ID)
	if t.get(bOrders, k) != nil {
		return fault.Conflictf("order_exists", "order %s exists", o.ID)
	}
	o.Version = 1
	if err := t.writeOrder(k, o, nil); err != nil {
		o.Version = 0
		return err
	}
	return nil
}

func (t *tx) UpdateOrder(o *order.Order) error {
	if err := t.check(true); err != nil {
		return err
	}
	k := orderKey(o.MerchantID, o.ID)
	raw := t.get(bOrders, k)
	if raw == nil {
		return fault.NotFoundf("order_not_found", "order %s not found", o.ID)
	}
	old, err := orderMeta(raw)
	if err != nil {
		return err
	}
	if old.version != o.Version {
		return fault.Conflictf("version_conflict", "order %s changed concurrently (version %d, stored %d)", o.ID, o.Version, old.version)
	}
	o.Version++
	if err := t.writeOrder(k, o, &old); err != nil {
		o.Version--
		return err
	}
	return nil
}

// writeOrder stores o and moves its index entries from old (nil for a new
// order) to those of o now. A status filter sees the statuses an order had
// at its last change (metaOf).
func (t *tx) writeOrder(k []byte, o *order.Order, old *meta) error {
	m := metaOf(o)
	v, js, err := marshalOrder(&m, o)
	if err != nil {
		return fault.Internalf(err, "encode order %s", o.ID)
	}
	if err := t.put(bOrders, k, v); err != nil {
		return err
	}
	t.st.decoded.Written(string(k), js, o)
	newKeys := m.indexKeys(o.MerchantID, o.ID)
	var oldKeys map[string]bool
	if old != nil {
		oldKeys = map[string]bool{}
		for _, ik := range old.indexKeys(o.MerchantID, o.ID) {
			oldKeys[string(ik.key)] = true
		}
		keep := map[string]bool{}
		for _, ik := range newKeys {
			keep[string(ik.key)] = true
		}
		for _, ik := range old.indexKeys(o.MerchantID, o.ID) {
			if keep[string(ik.key)] {
				continue
			}
			if err := t.del(bIndex, ik.key); err != nil {
				return err
			}
			if ik.count != nil {
				if err := t.addCount(ik.count, -1); err != nil {
					return err
				}
			}
		}
		if old.expirable {
			if err := t.del(bDue, dueKey(old.expires, o.MerchantID, o.ID)); err != nil {
				return err
			}
		}
	}
	for _, ik := range newKeys {
		if oldKeys[string(ik.key)] {
			continue
		}
		if err := t.put(bIndex, ik.key, present); err != nil {
			return err
		}
		if ik.count != nil {
			if err := t.addCount(ik.count, 1); err != nil {
				return err
			}
		}
	}
	if m.expirable {
		return t.put(bDue, dueKey(m.expires, o.MerchantID, o.ID), present)
	}
	return nil
}

func (t *tx) addCount(k []byte, d int64) error {
	n := t.count(k) + d
	if n <= 0 {
		return t.del(bCounts, k)
	}
	return t.put(bCounts, k, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

func (t *tx) count(k []byte) int64 {
	v := t.get(bCounts, k)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func dueKey(expires time.Time, merchantID, orderID string) []byte {
	return append(putTime(nil, expires), orderKey(merchantID, orderID)...)
}

func (t *tx) OrdersExpiringBefore(at time.Time, limit int) ([]*order.Order, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	end := putTime(nil, at)
	var out []*order.Order
	c := t.st.bucket(bDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		raw := t.get(bOrders, k[timeLen:])
		if raw == nil {
			return nil, fault.Internalf(nil, "expiry index names a missing order")
		}
		o, err := t.decodeOrder(k[timeLen:], raw)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Tokens.

func (t *tx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	var a token.Authorization
	ok, err := t.getRecord(bAuth, key(merchantID, tok), &a)
	if err != nil {
		return nil, err
	}
	if !ok || a.Deleted {
		return nil, fault.NotFoundf("authorization_token_not_found", "authorization token not found")
	}
	return &a, nil
}

func (t *tx) PutAuthorization(a *token.Authorization) error {
	k := key(a.MerchantID, a.Token)
	var old authExpiry
	ok, err := t.getRecord(bAuth, k, &old)
	if err != nil {
		return err
	}
	if ok && !old.ExpiresAt.Equal(a.ExpiresAt) {
		// A deleted id put again as a new token: its expiry moves.
		if err := t.del(bAuthExp, authExpiryKey(old.ExpiresAt, k)); err != nil {
			return err
		}
	}
	if err := t.put(bAuthExp, authExpiryKey(a.ExpiresAt, k), present); err != nil {
		return err
	}
	return t.putRecord(bAuth, k, a)
}

// authExpiry is what the authexp index needs of a stored token.
type authExpiry struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// authExpiryKey is a token's place in the retention sweep's walk: its
// expiry, then its key in authtokens.
func authExpiryKey(at time.Time, k []byte) []byte {
	return append(putTime(nil, at), k...)
}

// DeleteAuthorizationsExpiredBefore walks authexp from the earliest expiry.
func (t *tx) DeleteAuthorizationsExpiredBefore(before time.Time, limit int) (int, error) {
	return t.deleteIndexedBefore(bAuthExp, bAuth, before, limit)
}

// deleteIndexedBefore walks an index of time-then-key entries from the
// earliest, and deletes, with their records, at most limit whose time is
// before the given one.
func (t *tx) deleteIndexedBefore(index, records []byte, before time.Time, limit int) (int, error) {
	if err := t.check(true); err != nil {
		return 0, err
	}
	due := t.indexedBefore(index, before, limit)
	for _, k := range due {
		if err := t.del(index, k); err != nil {
			return 0, err
		}
		if err := t.del(records, k[timeLen:]); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// indexedBefore lists, earliest first, at most limit entries of an index of
// time-then-key entries whose time is before the given one. Copies: the
// callers delete them after the walk, as a bbolt cursor must not see its
// bucket change.
func (t *tx) indexedBefore(index []byte, before time.Time, limit int) [][]byte {
	end := putTime(nil, before)
	var out [][]byte
	c := t.st.bucket(index).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		out = append(out, bytes.Clone(k))
	}
	return out
}

func (t *tx) GetCustomerToken(merchantID, id string) (*token.Customer, error) {
	var c token.Customer
	ok, err := t.getRecord(bCustomer, key(merchantID, id), &c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("customer_token_not_found", "customer token not found")
	}
	return &c, nil
}

func (t *tx) PutCustomerToken(c *token.Customer) error {
	return t.putRecord(bCustomer, key(c.MerchantID, c.TokenID), c)
}

// NextSequence increments a counter in the transaction: a rolled-back
// transaction (or a failed function, through its journal) gives it back.
func (t *tx) NextSequence(merchantID, series string) (int64, error) {
	if err := t.check(true); err != nil {
		return 0, err
	}
	k := key(merchantID, series)
	var n uint64
	if v := t.get(bSeq, k); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	n++
	if err := t.put(bSeq, k, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// Idempotency records.

func (t *tx) GetIdempotency(merchantID, k string) (*storage.IdempotencyRecord, error) {
	var r storage.IdempotencyRecord
	ok, err := t.getRecord(bIdem, key(merchantID, k), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (t *tx) PutIdempotency(r *storage.IdempotencyRecord) error {
	if err := t.check(true); err != nil {
		return err
	}
	k := key(r.MerchantID, r.Key)
	if t.get(bIdem, k) != nil {
		return fault.Conflictf("idempotency_key_exists", "idempotency key %s exists", r.Key)
	}
	if err := t.putRecord(bIdem, k, r); err != nil {
		return err
	}
	return t.put(bIdemExp, append(putTime(nil, r.ExpiresAt), k...), present)
}

func (t *tx) DeleteExpiredIdempotency(at time.Time, limit int) (int, error) {
	return t.deleteIndexedBefore(bIdemExp, bIdem, at, limit)
}

// Outbox.

func outboxDueKey(m *storage.OutboxMessage) []byte {
	return append(putTime(nil, m.NextAttempt), m.ID...)
}

// outboxMerchantDueKey is a pending message's place among its merchant's:
// the merchant, then the same bytes as its outboxDueKey.
func outboxMerchantDueKey(m *storage.OutboxMessage) []byte {
	return append(putTime(lp(nil, m.MerchantID), m.NextAttempt), m.ID...)
}

func (t *tx) AddOutbox(m *storage.OutboxMessage) error {
	if err := t.check(true); err != nil {
		return err
	}
	if t.get(bOutbox, []byte(m.ID)) != nil {
		return fault.Conflictf("outbox_exists", "outbox message %s exists", m.ID)
	}
	if err := t.put(bOutboxIx, outboxCreatedKey(m), present); err != nil {
		return err
	}
	return t.writeOutbox(m)
}

func outboxCreatedKey(m *storage.OutboxMessage) []byte {
	return append(putTime(lp(nil, m.MerchantID), m.CreatedAt), m.ID...)
}

func (t *tx) GetOutbox(merchantID, id string) (*storage.OutboxMessage, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var m storage.OutboxMessage
	ok, err := t.getRecord(bOutbox, []byte(id), &m)
	if err != nil {
		return nil, err
	}
	if !ok || m.MerchantID != merchantID {
		return nil, fault.NotFoundf("notification_not_found", "notification %s not found", id)
	}
	return &m, nil
}

func (t *tx) ListOutbox(merchantID, fromID string, at time.Time, size int) ([]*storage.OutboxMessage, string, error) {
	if err := t.check(false); err != nil {
		return nil, "", err
	}
	prefix := lp(nil, merchantID)
	var from []byte
	switch {
	case !at.IsZero():
		from = outboxCreatedKey(&storage.OutboxMessage{MerchantID: merchantID, CreatedAt: at, ID: fromID})
	case fromID != "":
		m, err := t.GetOutbox(merchantID, fromID)
		if err != nil {
			return nil, "", err
		}
		from = outboxCreatedKey(m)
	}
	return pageNewest(t, bOutboxIx, prefix, from, nil, size,
		func(id string) (*storage.OutboxMessage, error) { return t.GetOutbox(merchantID, id) },
		func(*storage.OutboxMessage) bool { return true },
		func(m *storage.OutboxMessage) string { return m.ID })
}

// outboxDoneKey is a done message's place in the retention sweep's walk.
func outboxDoneKey(m *storage.OutboxMessage) []byte {
	return append(putTime(nil, m.CreatedAt), m.ID...)
}

func (t *tx) writeOutbox(m *storage.OutboxMessage) error {
	if err := t.putRecord(bOutbox, []byte(m.ID), m); err != nil {
		return err
	}
	if m.Done() {
		return t.put(bOutboxDone, outboxDoneKey(m), present)
	}
	if err := t.put(bOutboxMDue, outboxMerchantDueKey(m), present); err != nil {
		return err
	}
	return t.put(bOutboxDue, outboxDueKey(m), present)
}

func (t *tx) PendingOutbox(at time.Time, limit, perMerchant int) ([]*storage.OutboxMessage, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	if perMerchant <= 0 {
		perMerchant = limit
	}
	// Due at or before at: every time key ≤ at sorts below the successor of at's.
	end := successor(putTime(nil, at))
	// Few due (no more than limit): the time-ordered outboxdue lists them
	// all, and capping each merchant's in due order takes what the skip
	// scan below would. The skip scan visits every merchant with a message
	// pending, due or not: a merchant whose receiver is down keeps one for
	// the retry schedule's hours, and with 50 000 of them each claim (two
	// or more a second, under the writer's lock) took 7 to 20 ms.
	if out, ok, err := t.fewDueOutbox(end, limit, perMerchant); ok || err != nil {
		return out, err
	}
	// A skip scan of outboxmdue visits each merchant with pending messages
	// once and takes its oldest due ones, so a merchant's backlog costs a
	// claim no more than perMerchant reads, and cannot hide the messages of
	// others due after it (as the time-ordered outboxdue would).
	var due [][]byte // outboxDueKey of each one taken, which sorts oldest first
	c := t.st.bucket(bOutboxMDue).Cursor()
	for k, _ := c.First(); k != nil; {
		n, w := binary.Uvarint(k)
		if rest := len(k) - w - timeLen; w <= 0 || rest < 0 || n > uint64(rest) {
			return nil, fault.Internalf(nil, "outbox merchant index holds a malformed key")
		}
		merchant := k[:w+int(n)]
		t.st.outboxSkips.Add(1)
		taken := 0
		for ; k != nil && bytes.HasPrefix(k, merchant) && taken < perMerchant; k, _ = c.Next() {
			if bytes.Compare(k[len(merchant):len(merchant)+timeLen], end) >= 0 {
				break
			}
			due = append(due, k[len(merchant):])
			taken++
		}
		// Kept to the oldest limit as it grows, so that many merchants with
		// due messages cost memory in proportion to the claim, not to them.
		if len(due) >= 4*limit {
			due = oldest(due, limit)
		}
		next := successor(merchant)
		if next == nil {
			break
		}
		k, _ = c.Seek(next)
	}
	due = oldest(due, limit)
	out := make([]*storage.OutboxMessage, 0, len(due))
	for _, k := range due {
		var m storage.OutboxMessage
		ok, err := t.getRecord(bOutbox, k[timeLen:], &m)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fault.Internalf(nil, "outbox index names a missing message")
		}
		out = append(out, &m)
	}
	return out, nil
}

// fewDueOutbox reads the messages due before end from outboxdue when there
// are at most limit of them, each merchant's first perMerchant in due order;
// ok is false when more are due.
func (t *tx) fewDueOutbox(end []byte, limit, perMerchant int) (out []*storage.OutboxMessage, ok bool, err error) {
	var due [][]byte
	c := t.st.bucket(bOutboxDue).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) <= timeLen {
			return nil, false, fault.Internalf(nil, "outbox due index holds a malformed key")
		}
		if bytes.Compare(k[:timeLen], end) >= 0 {
			break
		}
		if len(due) == limit {
			return nil, false, nil
		}
		due = append(due, k)
	}
	for _, k := range due {
		var m storage.OutboxMessage
		found, err := t.getRecord(bOutbox, k[timeLen:], &m)
		if err != nil {
			return nil, false, err
		}
		if !found {
			return nil, false, fault.Internalf(nil, "outbox index names a missing message")
		}
		out = append(out, &m)
	}
	return storage.FirstPerMerchant(out, perMerchant), true, nil
}

// oldest sorts due keys oldest first and keeps up to limit of them.
func oldest(due [][]byte, limit int) [][]byte {
	slices.SortFunc(due, bytes.Compare)
	return due[:min(len(due), limit)]
}

func (t *tx) UpdateOutbox(m *storage.OutboxMessage) error {
	if err := t.check(true); err != nil {
		return err
	}
	var old storage.OutboxMessage
	ok, err := t.getRecord(bOutbox, []byte(m.ID), &old)
	if err != nil {
		return err
	}
	if !ok {
		return fault.NotFoundf("outbox_not_found", "outbox message %s not found", m.ID)
	}
	if old.MerchantID != m.MerchantID || !old.CreatedAt.Equal(m.CreatedAt) {
		return fault.Conflictf("outbox_immutable", "a message's merchant and creation time do not change")
	}
	if old.Done() {
		if err := t.del(bOutboxDone, outboxDoneKey(&old)); err != nil {
			return err
		}
	} else {
		if err := t.del(bOutboxDue, outboxDueKey(&old)); err != nil {
			return err
		}
		if err := t.del(bOutboxMDue, outboxMerchantDueKey(&old)); err != nil {
			return err
		}
	}
	return t.writeOutbox(m)
}

// DeleteDoneOutbox walks outboxdone, which holds done messages only, so a
// pending message is never read, let alone removed, and a sweep reads no
// more than it removes.
func (t *tx) DeleteDoneOutbox(before time.Time, limit int) (int, error) {
	if err := t.check(true); err != nil {
		return 0, err
	}
	done := t.indexedBefore(bOutboxDone, before, limit)
	for _, k := range done {
		var m storage.OutboxMessage
		ok, err := t.getRecord(bOutbox, k[timeLen:], &m)
		if err != nil {
			return 0, err
		}
		if !ok || !m.Done() {
			return 0, fault.Internalf(nil, "outbox done index names a message %s that is missing or pending", k[timeLen:])
		}
		for _, del := range []struct{ b, k []byte }{{bOutboxDone, k}, {bOutboxIx, outboxCreatedKey(&m)}, {bOutbox, k[timeLen:]}} {
			if err := t.del(del.b, del.k); err != nil {
				return 0, err
			}
		}
	}
	return len(done), nil
}
