package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Buckets. Keys join their parts with a zero byte, which no id contains.
var (
	bMerchants = []byte("merchants") // merchantID → Merchant
	bClients   = []byte("clients")   // clientID → merchantID
	bOrders    = []byte("orders")    // merchant·orderID → Order
	bOrderMeta = []byte("ordermeta") // merchant·orderID → meta (index keys written)
	bIndex     = []byte("index")     // merchant·field·value·created·orderID → ∅
	bDue       = []byte("due")       // expires·merchant·orderID → ∅ (open orders only)
	bAuth      = []byte("auth")      // merchant·token → Authorization
	bCustomer  = []byte("customer")  // merchant·tokenID → Customer
	bSeq       = []byte("seq")       // merchant·series → uint64
	bIdem      = []byte("idem")      // merchant·key → IdempotencyRecord
	bIdemExp   = []byte("idemexp")   // expires·merchant·key → ∅
	bOutbox    = []byte("outbox")    // id → OutboxMessage
	bOutboxDue = []byte("outboxdue") // nextAttempt·id → ∅ (undelivered only)
)

func key(parts ...string) []byte {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(p)
	}
	return b.Bytes()
}

// timeKey encodes t so that byte order is time order (nanoseconds, offset so
// that times before 1970 still sort correctly).
func timeKey(t time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano())^(1<<63))
	return string(b[:])
}

func timeOf(k string) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64([]byte(k))^(1<<63))).UTC()
}

type tx struct {
	b        *bbolt.Tx
	now      time.Time
	writable bool
}

var errReadOnly = fault.Internalf(nil, "write in a read-only transaction")

func (t *tx) Now() time.Time { return t.now }

func (t *tx) put(bucket, k []byte, v any) error {
	if !t.writable {
		return errReadOnly
	}
	var raw []byte
	switch x := v.(type) {
	case nil:
		raw = []byte{}
	case []byte:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return fault.Internalf(err, "encode")
		}
	}
	if err := t.b.Bucket(bucket).Put(k, raw); err != nil {
		return fault.Internalf(err, "put %s", bucket)
	}
	return nil
}

func (t *tx) del(bucket, k []byte) error {
	if !t.writable {
		return errReadOnly
	}
	if err := t.b.Bucket(bucket).Delete(k); err != nil {
		return fault.Internalf(err, "delete %s", bucket)
	}
	return nil
}

func (t *tx) get(bucket, k []byte, v any) (bool, error) {
	raw := t.b.Bucket(bucket).Get(k)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fault.Internalf(err, "decode %s", bucket)
	}
	return true, nil
}

// Merchants.

func (t *tx) GetMerchant(id string) (*storage.Merchant, error) {
	var m storage.Merchant
	ok, err := t.get(bMerchants, key(id), &m)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("merchant_not_found", "merchant %s not found", id)
	}
	return &m, nil
}

func (t *tx) GetMerchantByClientID(clientID string) (*storage.Merchant, error) {
	id := t.b.Bucket(bClients).Get(key(clientID))
	if id == nil {
		return nil, fault.NotFoundf("merchant_not_found", "no merchant with that client id")
	}
	return t.GetMerchant(string(id))
}

func (t *tx) PutMerchant(m *storage.Merchant) error {
	if owner := t.b.Bucket(bClients).Get(key(m.ClientID)); owner != nil && string(owner) != m.ID {
		return fault.Conflictf("client_id_taken", "client id %s belongs to another merchant", m.ClientID)
	}
	if old, err := t.GetMerchant(m.ID); err == nil && old.ClientID != m.ClientID {
		if err := t.del(bClients, key(old.ClientID)); err != nil {
			return err
		}
	}
	if err := t.put(bClients, key(m.ClientID), []byte(m.ID)); err != nil {
		return err
	}
	return t.put(bMerchants, key(m.ID), m)
}

func (t *tx) ListMerchants() ([]*storage.Merchant, error) {
	var out []*storage.Merchant
	err := t.b.Bucket(bMerchants).ForEach(func(_, v []byte) error {
		var m storage.Merchant
		if err := json.Unmarshal(v, &m); err != nil {
			return fault.Internalf(err, "decode merchant")
		}
		out = append(out, &m)
		return nil
	})
	return out, err
}

// Tokens.

func (t *tx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	var a token.Authorization
	ok, err := t.get(bAuth, key(merchantID, tok), &a)
	if err != nil {
		return nil, err
	}
	if !ok || a.Deleted {
		return nil, fault.NotFoundf("authorization_token_not_found", "authorization token not found")
	}
	return &a, nil
}

func (t *tx) PutAuthorization(a *token.Authorization) error {
	return t.put(bAuth, key(a.MerchantID, a.Token), a)
}

func (t *tx) GetCustomerToken(merchantID, id string) (*token.Customer, error) {
	var c token.Customer
	ok, err := t.get(bCustomer, key(merchantID, id), &c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("customer_token_not_found", "customer token not found")
	}
	return &c, nil
}

func (t *tx) PutCustomerToken(c *token.Customer) error {
	return t.put(bCustomer, key(c.MerchantID, c.TokenID), c)
}

// Sequences.

func (t *tx) NextSequence(merchantID, series string) (int64, error) {
	k := key(merchantID, series)
	var n uint64
	if raw := t.b.Bucket(bSeq).Get(k); len(raw) == 8 {
		n = binary.BigEndian.Uint64(raw)
	}
	n++
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	if err := t.put(bSeq, k, b[:]); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// Idempotency records.

func (t *tx) GetIdempotency(merchantID, k string) (*storage.IdempotencyRecord, error) {
	var r storage.IdempotencyRecord
	ok, err := t.get(bIdem, key(merchantID, k), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (t *tx) PutIdempotency(r *storage.IdempotencyRecord) error {
	k := key(r.MerchantID, r.Key)
	if t.b.Bucket(bIdem).Get(k) != nil {
		return fault.Conflictf("idempotency_key_exists", "idempotency key %s exists", r.Key)
	}
	if err := t.put(bIdem, k, r); err != nil {
		return err
	}
	return t.put(bIdemExp, key(timeKey(r.ExpiresAt), r.MerchantID, r.Key), nil)
}

func (t *tx) DeleteExpiredIdempotency(at time.Time, limit int) (int, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	c := t.b.Bucket(bIdemExp).Cursor()
	var dead [][]byte
	for k, _ := c.First(); k != nil && len(dead) < limit; k, _ = c.Next() {
		if len(k) < 8 || !timeOf(string(k[:8])).Before(at) {
			break
		}
		dead = append(dead, append([]byte(nil), k...))
	}
	for _, k := range dead {
		if err := t.del(bIdemExp, k); err != nil {
			return 0, err
		}
		if err := t.del(bIdem, k[9:]); err != nil {
			return 0, err
		}
	}
	return len(dead), nil
}

// Outbox.

func (t *tx) AddOutbox(m *storage.OutboxMessage) error {
	if t.b.Bucket(bOutbox).Get(key(m.ID)) != nil {
		return fault.Conflictf("outbox_exists", "outbox message %s exists", m.ID)
	}
	return t.writeOutbox(m, nil)
}

func (t *tx) writeOutbox(m, old *storage.OutboxMessage) error {
	if old != nil && !old.Delivered {
		if err := t.del(bOutboxDue, key(timeKey(old.NextAttempt), old.ID)); err != nil {
			return err
		}
	}
	if !m.Delivered {
		if err := t.put(bOutboxDue, key(timeKey(m.NextAttempt), m.ID), nil); err != nil {
			return err
		}
	}
	return t.put(bOutbox, key(m.ID), m)
}

func (t *tx) PendingOutbox(at time.Time, limit int) ([]*storage.OutboxMessage, error) {
	var out []*storage.OutboxMessage
	c := t.b.Bucket(bOutboxDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if timeOf(string(k[:8])).After(at) {
			break
		}
		var m storage.OutboxMessage
		if ok, err := t.get(bOutbox, k[9:], &m); err != nil {
			return nil, err
		} else if ok {
			out = append(out, &m)
		}
	}
	return out, nil
}

func (t *tx) UpdateOutbox(m *storage.OutboxMessage) error {
	var old storage.OutboxMessage
	ok, err := t.get(bOutbox, key(m.ID), &old)
	if err != nil {
		return err
	}
	if !ok {
		return fault.NotFoundf("outbox_not_found", "outbox message %s not found", m.ID)
	}
	return t.writeOutbox(m, &old)
}
