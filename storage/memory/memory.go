// Package memory is an in-memory storage.Store for tests and embedders'
// unit tests: the same semantics as the durable stores (transactions, version
// checks, merchant isolation, gapless sequences, cursor paging), no files and
// no durability. Transactions are serialized by one lock; a failed Update is
// undone from its journal.
package memory

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu    sync.RWMutex
	clock func() time.Time
	data  map[string][]byte // bucket "/" key → JSON record
	// closed refuses transactions after Close, as the durable stores do,
	// so that code tested on this store meets the same ErrClosed.
	closed bool
}

// New returns an empty store; clock defaults to time.Now.
func New(clock func() time.Time) *Store {
	if clock == nil {
		clock = time.Now
	}
	return &Store{clock: clock, data: map[string][]byte{}}
}

// Close ends the store: later transactions fail with storage.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Update runs fn in a serialized read-write transaction.
func (s *Store) Update(ctx context.Context, fn func(storage.Tx) error) (err error) {
	if !s.lock(ctx, true) {
		return storage.WaitEnded(ctx, nil)
	}
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	t := &tx{s: s, now: s.clock().UTC(), writable: true, undo: map[string][]byte{}}
	defer func() {
		if p := recover(); p != nil {
			t.rollback()
			err = fault.Internalf(fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "panic in transaction")
		}
	}()
	if err := fn(t); err != nil {
		t.rollback()
		return err
	}
	return nil
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(storage.Tx) error) error {
	if !s.lock(ctx, false) {
		return storage.WaitEnded(ctx, nil)
	}
	defer s.mu.RUnlock()
	if s.closed {
		return storage.ErrClosed
	}
	return fn(&tx{s: s, now: s.clock().UTC()})
}

// lock takes s.mu, or its read side, unless ctx ends first (false): a
// transaction waiting behind a long one gives up at its deadline, as on the
// durable stores.
func (s *Store) lock(ctx context.Context, write bool) bool {
	lock, unlock, try := s.mu.RLock, s.mu.RUnlock, s.mu.TryRLock
	if write {
		lock, unlock, try = s.mu.Lock, s.mu.Unlock, s.mu.TryLock
	}
	if ctx.Err() != nil {
		return false
	}
	if try() {
		return true
	}
	// The lock is taken by a goroutine; the caller either receives it or,
	// its context ended first, leaves it to be released: one of the two.
	const waiting, taken, abandoned = 0, 1, 2
	var state atomic.Int32
	got := make(chan struct{})
	go func() {
		lock()
		if !state.CompareAndSwap(waiting, taken) {
			unlock()
			return
		}
		close(got)
	}()
	select {
	case <-got:
		return true
	case <-ctx.Done():
		if state.CompareAndSwap(waiting, abandoned) {
			return false
		}
		<-got
		return true
	}
}

type tx struct {
	s        *Store
	now      time.Time
	writable bool
	undo     map[string][]byte // key → previous value (nil: absent)
}

var errReadOnly = fault.Internalf(nil, "write in a read-only transaction")

func (t *tx) rollback() {
	for k, v := range t.undo {
		if v == nil {
			delete(t.s.data, k)
		} else {
			t.s.data[k] = v
		}
	}
}

func (t *tx) put(key string, v any) error {
	if !t.writable {
		return errReadOnly
	}
	b, err := storage.EncodeRecord(v)
	if err != nil {
		return fault.Internalf(err, "encode %s", key)
	}
	if _, seen := t.undo[key]; !seen {
		t.undo[key] = t.s.data[key] // nil when absent
	}
	t.s.data[key] = b
	return nil
}

func (t *tx) del(key string) {
	if _, seen := t.undo[key]; !seen {
		t.undo[key] = t.s.data[key]
	}
	delete(t.s.data, key)
}

func (t *tx) get(key string, v any) (bool, error) {
	b, ok := t.s.data[key]
	if !ok {
		return false, nil
	}
	if err := storage.DecodeRecord(b, v); err != nil {
		return false, fault.Internalf(err, "decode %s", key)
	}
	return true, nil
}

func (t *tx) Now() time.Time { return t.now }

func (t *tx) GetMerchant(id string) (*storage.Merchant, error) {
	var m storage.Merchant
	if ok, err := t.get("merchant/"+id, &m); err != nil || !ok {
		return nil, notFound(err, "merchant_not_found", "merchant")
	}
	return &m, nil
}

func notFound(err error, code, what string) error {
	if err != nil {
		return err
	}
	return fault.NotFoundf(code, "%s not found", what)
}

func (t *tx) GetMerchantByClientID(clientID string) (*storage.Merchant, error) {
	var id string
	if ok, err := t.get("client/"+clientID, &id); err != nil || !ok {
		return nil, notFound(err, "merchant_not_found", "merchant")
	}
	return t.GetMerchant(id)
}

func (t *tx) PutMerchant(m *storage.Merchant) error {
	var owner string
	if ok, _ := t.get("client/"+m.ClientID, &owner); ok && owner != m.ID {
		return fault.Conflictf("client_id_taken", "client id %s belongs to another merchant", m.ClientID)
	}
	if old, err := t.GetMerchant(m.ID); err == nil && old.ClientID != m.ClientID {
		t.del("client/" + old.ClientID)
	}
	if err := t.put("client/"+m.ClientID, m.ID); err != nil {
		return err
	}
	return t.put("merchant/"+m.ID, m)
}

func (t *tx) HasMerchants() (bool, error) {
	for k := range t.s.data {
		if strings.HasPrefix(k, "merchant/") {
			return true, nil
		}
	}
	return false, nil
}

func (t *tx) ListMerchants() ([]*storage.Merchant, error) {
	var out []*storage.Merchant
	for k := range t.s.data {
		if id, ok := strings.CutPrefix(k, "merchant/"); ok {
			m, err := t.GetMerchant(id)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func orderKey(merchantID, orderID string) string { return "order/" + merchantID + "/" + orderID }

func (t *tx) GetOrder(merchantID, orderID string) (*order.Order, error) {
	var o order.Order
	if ok, err := t.get(orderKey(merchantID, orderID), &o); err != nil || !ok {
		return nil, notFound(err, "order_not_found", "order "+orderID)
	}
	return &o, nil
}

func (t *tx) OrderVersion(merchantID, orderID string) (int64, error) {
	var v struct {
		Version int64 `json:"version"`
	}
	if ok, err := t.get(orderKey(merchantID, orderID), &v); err != nil || !ok {
		return 0, notFound(err, "order_not_found", "order "+orderID)
	}
	return v.Version, nil
}

func (t *tx) CreateOrder(o *order.Order) error {
	if _, ok := t.s.data[orderKey(o.MerchantID, o.ID)]; ok {
		return fault.Conflictf("order_exists", "order %s exists", o.ID)
	}
	o.Version = 1
	return t.put(orderKey(o.MerchantID, o.ID), o)
}

func (t *tx) UpdateOrder(o *order.Order) error {
	cur, err := t.GetOrder(o.MerchantID, o.ID)
	if err != nil {
		return err
	}
	if cur.Version != o.Version {
		return fault.Conflictf("version_conflict", "order %s changed concurrently (version %d, stored %d)", o.ID, o.Version, cur.Version)
	}
	o.Version++
	if err := t.put(orderKey(o.MerchantID, o.ID), o); err != nil {
		o.Version--
		return err
	}
	return nil
}

// cursor encodes the position after an order in newest-first order.
func cursorOf(o *order.Order) string {
	return base64.RawURLEncoding.EncodeToString([]byte(o.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + o.ID))
}

func after(cur string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		return time.Time{}, "", fault.Invalidf("cursor", "is not a cursor from this server")
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	at, perr := time.Parse(time.RFC3339Nano, ts)
	if !ok || perr != nil {
		return time.Time{}, "", fault.Invalidf("cursor", "is not a cursor from this server")
	}
	return at, id, nil
}

// ListOrders scans the merchant's orders; fine for tests, not for millions.
func (t *tx) ListOrders(merchantID string, q storage.OrderQuery) (storage.OrderPage, error) {
	size, err := storage.PageSize(q)
	if err != nil {
		return storage.OrderPage{}, err
	}
	var fromAt time.Time
	var fromID string
	if q.Cursor != "" {
		var err error
		if fromAt, fromID, err = after(q.Cursor); err != nil {
			return storage.OrderPage{}, err
		}
	}
	var all []*order.Order
	prefix := "order/" + merchantID + "/"
	for k := range t.s.data {
		if id, ok := strings.CutPrefix(k, prefix); ok {
			o, err := t.GetOrder(merchantID, id)
			if err != nil {
				return storage.OrderPage{}, err
			}
			all = append(all, o)
		}
	}
	sortNewest(all, func(i int) (time.Time, string) { return all[i].CreatedAt, all[i].ID })
	var page storage.OrderPage
	fill := storage.PageFill{Budget: storage.PageBudget(q)}
	for _, o := range all {
		if q.Cursor != "" && (o.CreatedAt.After(fromAt) || o.CreatedAt.Equal(fromAt) && o.ID >= fromID) {
			continue
		}
		if !storage.Matches(o, o.Statuses(o.UpdatedAt), q) {
			continue
		}
		n := int64(len(t.s.data[orderKey(merchantID, o.ID)]))
		if len(page.Orders) == size || !fill.Take(n) {
			page.NextCursor = cursorOf(page.Orders[len(page.Orders)-1])
			break
		}
		page.Orders = append(page.Orders, o)
	}
	return page, nil
}

func (t *tx) OrdersExpiringBefore(at time.Time, limit int) ([]*order.Order, error) {
	var out []*order.Order
	for k, b := range t.s.data {
		if !strings.HasPrefix(k, "order/") {
			continue
		}
		var o order.Order
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, fault.Internalf(err, "decode %s", k)
		}
		if o.ExpiresAt.Before(at) && !o.ExpiredMarked && !o.Cancelled && len(o.Uncaptured.Lines) > 0 {
			out = append(out, &o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExpiresAt.Before(out[j].ExpiresAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *tx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	var a token.Authorization
	if ok, err := t.get("auth/"+merchantID+"/"+tok, &a); err != nil || !ok || a.Deleted {
		return nil, notFound(err, "authorization_token_not_found", "authorization token")
	}
	return &a, nil
}

func (t *tx) PutAuthorization(a *token.Authorization) error {
	return t.put("auth/"+a.MerchantID+"/"+a.Token, a)
}

func (t *tx) DeleteAuthorizationsExpiredBefore(before time.Time, limit int) (int, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	type ended struct {
		key string
		at  time.Time
	}
	var due []ended
	for k, b := range t.s.data {
		if !strings.HasPrefix(k, "auth/") {
			continue
		}
		var a token.Authorization
		if err := json.Unmarshal(b, &a); err != nil {
			return 0, fault.Internalf(err, "decode %s", k)
		}
		if a.ExpiresAt.Before(before) {
			due = append(due, ended{k, a.ExpiresAt})
		}
	}
	slices.SortFunc(due, func(a, b ended) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	due = due[:min(len(due), limit)]
	for _, e := range due {
		t.del(e.key)
	}
	return len(due), nil
}

func (t *tx) GetCustomerToken(merchantID, id string) (*token.Customer, error) {
	var c token.Customer
	if ok, err := t.get("ctok/"+merchantID+"/"+id, &c); err != nil || !ok {
		return nil, notFound(err, "customer_token_not_found", "customer token")
	}
	return &c, nil
}

func (t *tx) PutCustomerToken(c *token.Customer) error {
	return t.put("ctok/"+c.MerchantID+"/"+c.TokenID, c)
}

func (t *tx) NextSequence(merchantID, series string) (int64, error) {
	var n int64
	key := "seq/" + merchantID + "/" + series
	if _, err := t.get(key, &n); err != nil {
		return 0, err
	}
	n++
	return n, t.put(key, n)
}

func (t *tx) GetIdempotency(merchantID, key string) (*storage.IdempotencyRecord, error) {
	var r storage.IdempotencyRecord
	ok, err := t.get("idem/"+merchantID+"/"+key, &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (t *tx) PutIdempotency(r *storage.IdempotencyRecord) error {
	k := "idem/" + r.MerchantID + "/" + r.Key
	if _, ok := t.s.data[k]; ok {
		return fault.Conflictf("idempotency_key_exists", "idempotency key exists")
	}
	return t.put(k, r)
}

func (t *tx) DeleteExpiredIdempotency(at time.Time, limit int) (int, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	n := 0
	for k, b := range t.s.data {
		if n == limit || !strings.HasPrefix(k, "idem/") {
			continue
		}
		var r storage.IdempotencyRecord
		if err := storage.DecodeRecord(b, &r); err != nil {
			return n, fault.Internalf(err, "decode %s", k)
		}
		if r.ExpiresAt.Before(at) {
			t.del(k)
			n++
		}
	}
	return n, nil
}

func (t *tx) AddOutbox(m *storage.OutboxMessage) error { return t.put("outbox/"+m.ID, m) }

func (t *tx) PendingOutbox(at time.Time, limit, perMerchant int) ([]*storage.OutboxMessage, error) {
	var out []*storage.OutboxMessage
	for k, b := range t.s.data {
		if !strings.HasPrefix(k, "outbox/") {
			continue
		}
		var m storage.OutboxMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fault.Internalf(err, "decode %s", k)
		}
		if !m.Done() && !m.NextAttempt.After(at) {
			out = append(out, &m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].NextAttempt.Equal(out[j].NextAttempt) {
			return out[i].NextAttempt.Before(out[j].NextAttempt)
		}
		return out[i].ID < out[j].ID
	})
	out = storage.FirstPerMerchant(out, perMerchant)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *tx) UpdateOutbox(m *storage.OutboxMessage) error {
	var old storage.OutboxMessage
	if ok, err := t.get("outbox/"+m.ID, &old); err != nil || !ok {
		return notFound(err, "outbox_not_found", "outbox message "+m.ID)
	}
	if old.MerchantID != m.MerchantID || !old.CreatedAt.Equal(m.CreatedAt) {
		return fault.Conflictf("outbox_immutable", "a message's merchant and creation time do not change")
	}
	return t.put("outbox/"+m.ID, m)
}

func (t *tx) DeleteDoneOutbox(before time.Time, limit int) (int, error) {
	if !t.writable {
		return 0, errReadOnly
	}
	var done []*storage.OutboxMessage
	for k, b := range t.s.data {
		if !strings.HasPrefix(k, "outbox/") {
			continue
		}
		var m storage.OutboxMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return 0, fault.Internalf(err, "decode %s", k)
		}
		if m.Done() && m.CreatedAt.Before(before) {
			done = append(done, &m)
		}
	}
	slices.SortFunc(done, func(a, b *storage.OutboxMessage) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	done = done[:min(len(done), limit)]
	for _, m := range done {
		t.del("outbox/" + m.ID)
	}
	return len(done), nil
}

func (t *tx) GetOutbox(merchantID, id string) (*storage.OutboxMessage, error) {
	var m storage.OutboxMessage
	if ok, err := t.get("outbox/"+id, &m); err != nil || !ok || m.MerchantID != merchantID {
		return nil, notFound(err, "notification_not_found", "notification "+id)
	}
	return &m, nil
}

func (t *tx) ListOutbox(merchantID, fromID string, at time.Time, size int) ([]*storage.OutboxMessage, string, error) {
	var all []*storage.OutboxMessage
	for k := range t.s.data {
		if id, ok := strings.CutPrefix(k, "outbox/"); ok {
			m, err := t.GetOutbox(merchantID, id)
			if fault.Is(err, fault.NotFound) {
				continue
			}
			if err != nil {
				return nil, "", err
			}
			all = append(all, m)
		}
	}
	sortNewest(all, func(i int) (time.Time, string) { return all[i].CreatedAt, all[i].ID })
	switch {
	case !at.IsZero():
		// The first message older than the position (at, fromID).
		i := slices.IndexFunc(all, func(m *storage.OutboxMessage) bool {
			return m.CreatedAt.Before(at) || m.CreatedAt.Equal(at) && m.ID < fromID
		})
		if i < 0 {
			i = len(all)
		}
		all = all[i:]
	case fromID != "":
		i := slices.IndexFunc(all, func(m *storage.OutboxMessage) bool { return m.ID == fromID })
		if i < 0 {
			return nil, "", fault.NotFoundf("notification_not_found", "notification %s not found", fromID)
		}
		all = all[i+1:]
	}
	if len(all) > size {
		return all[:size], all[size-1].ID, nil
	}
	return all, "", nil
}

func (t *tx) GetSession(merchantID, id string) (*session.Session, error) {
	var s session.Session
	if ok, err := t.get("session/"+merchantID+"/"+id, &s); err != nil || !ok {
		return nil, notFound(err, "session_not_found", "session "+id)
	}
	return &s, nil
}

func (t *tx) sessionBy(merchantID, kind, v string) (*session.Session, error) {
	var id string
	if ok, err := t.get("sessionix/"+merchantID+"/"+kind+"/"+v, &id); err != nil || !ok {
		return nil, notFound(err, "session_not_found", "session")
	}
	return t.GetSession(merchantID, id)
}

func (t *tx) GetSessionByExternalID(merchantID, externalID string) (*session.Session, error) {
	return t.sessionBy(merchantID, "x", externalID)
}

func (t *tx) GetSessionByOrderID(merchantID, orderID string) (*session.Session, error) {
	return t.sessionBy(merchantID, "o", orderID)
}

func (t *tx) PutSession(s *session.Session) error {
	if !t.writable {
		return errReadOnly
	}
	for kind, v := range map[string]string{"x": s.ExternalSessionID, "o": s.OrderID} {
		if v == "" {
			continue
		}
		k := "sessionix/" + s.MerchantID + "/" + kind + "/" + v
		var owner string
		if ok, _ := t.get(k, &owner); ok && owner != s.ID {
			return fault.Conflictf("session_exists", "another session has that reference")
		}
		if err := t.put(k, s.ID); err != nil {
			return err
		}
	}
	if old, err := t.GetSession(s.MerchantID, s.ID); err == nil {
		for kind, v := range map[string][2]string{"x": {old.ExternalSessionID, s.ExternalSessionID}, "o": {old.OrderID, s.OrderID}} {
			if v[0] != "" && v[0] != v[1] {
				t.del("sessionix/" + s.MerchantID + "/" + kind + "/" + v[0])
			}
		}
	}
	return t.put("session/"+s.MerchantID+"/"+s.ID, s)
}

func (t *tx) ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error) {
	var all []*session.Session
	prefix := "session/" + merchantID + "/"
	for k := range t.s.data {
		if id, ok := strings.CutPrefix(k, prefix); ok {
			s, err := t.GetSession(merchantID, id)
			if err != nil {
				return nil, "", err
			}
			all = append(all, s)
		}
	}
	sortNewest(all, func(i int) (time.Time, string) { return all[i].CreatedAt, all[i].ID })
	if q.FromID != "" {
		if _, err := t.GetSession(merchantID, q.FromID); err != nil {
			return nil, "", err
		}
	}
	fill := storage.PageFill{Budget: storage.SessionPageBudget(q)}
	page, next := q.Page(all, t.now, func(s *session.Session) bool {
		return fill.Take(int64(len(t.s.data["session/"+merchantID+"/"+s.ID])))
	})
	return page, next, nil
}

func (t *tx) QueueSettlementItems(items []settlement.Item) error {
	for i := range items {
		if err := t.put("settleq/"+items[i].Key, items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) PendingSettlementItems(limit int) ([]settlement.Item, error) {
	var out []settlement.Item
	for k := range t.s.data {
		if strings.HasPrefix(k, "settleq/") {
			var it settlement.Item
			if _, err := t.get(k, &it); err != nil {
				return nil, err
			}
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b settlement.Item) int {
		if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

func (t *tx) QueuedSettlementItems(keys []string) ([]settlement.Item, error) {
	var out []settlement.Item
	for _, k := range keys {
		var it settlement.Item
		ok, err := t.get("settleq/"+k, &it)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, it)
		}
	}
	return out, nil
}

func (t *tx) SaveSettlement(b settlement.Batch) error {
	if !t.writable {
		return errReadOnly
	}
	for _, k := range b.Keys {
		if _, ok := t.s.data["settleq/"+k]; !ok {
			return fault.Conflictf("settlement_item_gone", "settlement item %s is not pending", k)
		}
		t.del("settleq/" + k)
	}
	s := b.Settlement
	if s.ID == "" {
		return nil
	}
	if err := t.put("settlement/"+s.MerchantID+"/"+s.ID, s); err != nil {
		return err
	}
	return t.put("settletx/"+s.MerchantID+"/"+s.ID, b.Transactions)
}

func (t *tx) GetSettlement(merchantID, id string) (*settlement.Settlement, error) {
	var s settlement.Settlement
	if ok, err := t.get("settlement/"+merchantID+"/"+id, &s); err != nil || !ok {
		return nil, notFound(err, "settlement_not_found", "settlement "+id)
	}
	return &s, nil
}

func (t *tx) ListSettlements(merchantID string, q settlement.Query) ([]*settlement.Settlement, string, error) {
	var all []*settlement.Settlement
	prefix := "settlement/" + merchantID + "/"
	for k := range t.s.data {
		if id, ok := strings.CutPrefix(k, prefix); ok {
			s, err := t.GetSettlement(merchantID, id)
			if err != nil {
				return nil, "", err
			}
			all = append(all, s)
		}
	}
	sortNewest(all, func(i int) (time.Time, string) { return all[i].CreatedAt, all[i].ID })
	start := 0
	if q.FromID != "" {
		if _, err := t.GetSettlement(merchantID, q.FromID); err != nil {
			return nil, "", err
		}
		for i, s := range all {
			if s.ID == q.FromID {
				start = i + 1
			}
		}
	}
	var page []*settlement.Settlement
	for _, s := range all[start:] {
		if !q.Match(s) {
			continue
		}
		if len(page) == q.Size {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, s)
	}
	return page, "", nil
}

func (t *tx) SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error) {
	if _, err := t.GetSettlement(merchantID, settlementID); err != nil {
		return nil, "", err
	}
	var txs []settlement.Transaction
	if _, err := t.get("settletx/"+merchantID+"/"+settlementID, &txs); err != nil {
		return nil, "", err
	}
	start := 0
	if fromID != "" {
		start = -1
		for i, tr := range txs {
			if tr.ID == fromID {
				start = i + 1
			}
		}
		if start < 0 {
			return nil, "", fault.Invalidf("fromId", "is not a transaction of this settlement")
		}
	}
	rest := txs[start:]
	if len(rest) > size {
		return rest[:size], rest[size-1].ID, nil
	}
	return rest, "", nil
}

// sortNewest orders records newest first (creation time, then id), the
// order every list of the stores uses.
func sortNewest[T any](all []T, key func(i int) (time.Time, string)) {
	sort.Slice(all, func(i, j int) bool {
		ti, ii := key(i)
		tj, ij := key(j)
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return ii > ij
	})
}

func (t *tx) ScheduleTask(task *storage.Task) error { return t.put("task/"+task.ID, task) }

func (t *tx) DueTasks(at time.Time, limit int) ([]*storage.Task, error) {
	var out []*storage.Task
	for k := range t.s.data {
		if !strings.HasPrefix(k, "task/") {
			continue
		}
		var task storage.Task
		if _, err := t.get(k, &task); err != nil {
			return nil, err
		}
		if !task.DueAt.After(at) {
			out = append(out, &task)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].DueAt.Equal(out[j].DueAt) {
			return out[i].DueAt.Before(out[j].DueAt)
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *tx) DeleteTask(id string) error {
	if _, ok := t.s.data["task/"+id]; !ok {
		return fault.NotFoundf("task_not_found", "task %s not found", id)
	}
	t.del("task/" + id)
	return nil
}
