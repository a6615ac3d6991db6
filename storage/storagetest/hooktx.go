package storagetest

import (
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// TxHook is told of every call of a transaction that Hooked wraps (Now
// aside): tests count the calls, or make one fail as a database would.
type TxHook interface {
	// Before runs before the call; an error fails the call without making it.
	Before(method string) error
	// After is given the error the call returned and returns the one its
	// caller gets: another makes a call that did its work fail (a statement
	// whose answer is lost).
	After(method string, err error) error
}

// Hooked wraps tx so that hook sees every call. The transaction keeps the
// storage.SharedClock of tx, if it has one, and that call is hooked too.
func Hooked(tx storage.Tx, hook TxHook) storage.Tx {
	h := hookTx{tx: tx, hook: hook}
	if sc, ok := tx.(storage.SharedClock); ok {
		return sharedHookTx{h, sc}
	}
	return h
}

// hookTx holds the transaction as a field, not embedded, so that a method
// added to storage.Tx does not compile here until it is hooked: embedded, it
// would pass through unseen.
type hookTx struct {
	tx   storage.Tx
	hook TxHook
}

var _ storage.Tx = hookTx{}

type sharedHookTx struct {
	hookTx
	sc storage.SharedClock
}

func (h sharedHookTx) SharedNow() (r0 time.Time, err error) {
	if err = h.hook.Before("SharedNow"); err != nil {
		return
	}
	r0, err = h.sc.SharedNow()
	return r0, h.hook.After("SharedNow", err)
}

func (h hookTx) Now() time.Time { return h.tx.Now() }

func (h hookTx) GetMerchant(id string) (r0 *storage.Merchant, err error) {
	if err = h.hook.Before("GetMerchant"); err != nil {
		return
	}
	r0, err = h.tx.GetMerchant(id)
	return r0, h.hook.After("GetMerchant", err)
}

func (h hookTx) GetMerchantByClientID(clientID string) (r0 *storage.Merchant, err error) {
	if err = h.hook.Before("GetMerchantByClientID"); err != nil {
		return
	}
	r0, err = h.tx.GetMerchantByClientID(clientID)
	return r0, h.hook.After("GetMerchantByClientID", err)
}

func (h hookTx) PutMerchant(m *storage.Merchant) (err error) {
	if err = h.hook.Before("PutMerchant"); err != nil {
		return
	}
	err = h.tx.PutMerchant(m)
	return h.hook.After("PutMerchant", err)
}

func (h hookTx) ListMerchants() (r0 []*storage.Merchant, err error) {
	if err = h.hook.Before("ListMerchants"); err != nil {
		return
	}
	r0, err = h.tx.ListMerchants()
	return r0, h.hook.After("ListMerchants", err)
}

func (h hookTx) HasMerchants() (r0 bool, err error) {
	if err = h.hook.Before("HasMerchants"); err != nil {
		return
	}
	r0, err = h.tx.HasMerchants()
	return r0, h.hook.After("HasMerchants", err)
}

func (h hookTx) GetOrder(merchantID, orderID string) (r0 *order.Order, err error) {
	if err = h.hook.Before("GetOrder"); err != nil {
		return
	}
	r0, err = h.tx.GetOrder(merchantID, orderID)
	return r0, h.hook.After("GetOrder", err)
}

func (h hookTx) OrderVersion(merchantID, orderID string) (r0 int64, err error) {
	if err = h.hook.Before("OrderVersion"); err != nil {
		return
	}
	r0, err = h.tx.OrderVersion(merchantID, orderID)
	return r0, h.hook.After("OrderVersion", err)
}

func (h hookTx) CreateOrder(o *order.Order) (err error) {
	if err = h.hook.Before("CreateOrder"); err != nil {
		return
	}
	err = h.tx.CreateOrder(o)
	return h.hook.After("CreateOrder", err)
}

func (h hookTx) UpdateOrder(o *order.Order) (err error) {
	if err = h.hook.Before("UpdateOrder"); err != nil {
		return
	}
	err = h.tx.UpdateOrder(o)
	return h.hook.After("UpdateOrder", err)
}

func (h hookTx) ListOrders(merchantID string, q storage.OrderQuery) (r0 storage.OrderPage, err error) {
	if err = h.hook.Before("ListOrders"); err != nil {
		return
	}
	r0, err = h.tx.ListOrders(merchantID, q)
	return r0, h.hook.After("ListOrders", err)
}

func (h hookTx) OrdersExpiringBefore(t time.Time, limit int) (r0 []*order.Order, err error) {
	if err = h.hook.Before("OrdersExpiringBefore"); err != nil {
		return
	}
	r0, err = h.tx.OrdersExpiringBefore(t, limit)
	return r0, h.hook.After("OrdersExpiringBefore", err)
}

func (h hookTx) GetAuthorization(merchantID, tok string) (r0 *token.Authorization, err error) {
	if err = h.hook.Before("GetAuthorization"); err != nil {
		return
	}
	r0, err = h.tx.GetAuthorization(merchantID, tok)
	return r0, h.hook.After("GetAuthorization", err)
}

func (h hookTx) PutAuthorization(a *token.Authorization) (err error) {
	if err = h.hook.Before("PutAuthorization"); err != nil {
		return
	}
	err = h.tx.PutAuthorization(a)
	return h.hook.After("PutAuthorization", err)
}

func (h hookTx) DeleteAuthorizationsExpiredBefore(t time.Time, limit int) (r0 int, err error) {
	if err = h.hook.Before("DeleteAuthorizationsExpiredBefore"); err != nil {
		return
	}
	r0, err = h.tx.DeleteAuthorizationsExpiredBefore(t, limit)
	return r0, h.hook.After("DeleteAuthorizationsExpiredBefore", err)
}

func (h hookTx) GetCustomerToken(merchantID, id string) (r0 *token.Customer, err error) {
	if err = h.hook.Before("GetCustomerToken"); err != nil {
		return
	}
	r0, err = h.tx.GetCustomerToken(merchantID, id)
	return r0, h.hook.After("GetCustomerToken", err)
}

func (h hookTx) PutCustomerToken(c *token.Customer) (err error) {
	if err = h.hook.Before("PutCustomerToken"); err != nil {
		return
	}
	err = h.tx.PutCustomerToken(c)
	return h.hook.After("PutCustomerToken", err)
}

func (h hookTx) GetSession(merchantID, id string) (r0 *session.Session, err error) {
	if err = h.hook.Before("GetSession"); err != nil {
		return
	}
	r0, err = h.tx.GetSession(merchantID, id)
	return r0, h.hook.After("GetSession", err)
}

func (h hookTx) GetSessionByExternalID(merchantID, externalID string) (r0 *session.Session, err error) {
	if err = h.hook.Before("GetSessionByExternalID"); err != nil {
		return
	}
	r0, err = h.tx.GetSessionByExternalID(merchantID, externalID)
	return r0, h.hook.After("GetSessionByExternalID", err)
}

func (h hookTx) GetSessionByOrderID(merchantID, orderID string) (r0 *session.Session, err error) {
	if err = h.hook.Before("GetSessionByOrderID"); err != nil {
		return
	}
	r0, err = h.tx.GetSessionByOrderID(merchantID, orderID)
	return r0, h.hook.After("GetSessionByOrderID", err)
}

func (h hookTx) PutSession(s *session.Session) (err error) {
	if err = h.hook.Before("PutSession"); err != nil {
		return
	}
	err = h.tx.PutSession(s)
	return h.hook.After("PutSession", err)
}

func (h hookTx) ListSessions(merchantID string, q session.Query) (r0 []*session.Session, r1 string, err error) {
	if err = h.hook.Before("ListSessions"); err != nil {
		return
	}
	r0, r1, err = h.tx.ListSessions(merchantID, q)
	return r0, r1, h.hook.After("ListSessions", err)
}

func (h hookTx) QueueSettlementItems(items []settlement.Item) (err error) {
	if err = h.hook.Before("QueueSettlementItems"); err != nil {
		return
	}
	err = h.tx.QueueSettlementItems(items)
	return h.hook.After("QueueSettlementItems", err)
}

func (h hookTx) PendingSettlementItems(limit int) (r0 []settlement.Item, err error) {
	if err = h.hook.Before("PendingSettlementItems"); err != nil {
		return
	}
	r0, err = h.tx.PendingSettlementItems(limit)
	return r0, h.hook.After("PendingSettlementItems", err)
}

func (h hookTx) QueuedSettlementItems(keys []string) (r0 []settlement.Item, err error) {
	if err = h.hook.Before("QueuedSettlementItems"); err != nil {
		return
	}
	r0, err = h.tx.QueuedSettlementItems(keys)
	return r0, h.hook.After("QueuedSettlementItems", err)
}

func (h hookTx) SaveSettlement(b settlement.Batch) (err error) {
	if err = h.hook.Before("SaveSettlement"); err != nil {
		return
	}
	err = h.tx.SaveSettlement(b)
	return h.hook.After("SaveSettlement", err)
}

func (h hookTx) GetSettlement(merchantID, id string) (r0 *settlement.Settlement, err error) {
	if err = h.hook.Before("GetSettlement"); err != nil {
		return
	}
	r0, err = h.tx.GetSettlement(merchantID, id)
	return r0, h.hook.After("GetSettlement", err)
}

func (h hookTx) ListSettlements(merchantID string, q settlement.Query) (r0 []*settlement.Settlement, r1 string, err error) {
	if err = h.hook.Before("ListSettlements"); err != nil {
		return
	}
	r0, r1, err = h.tx.ListSettlements(merchantID, q)
	return r0, r1, h.hook.After("ListSettlements", err)
}

func (h hookTx) SettlementTransactions(merchantID, settlementID, fromID string, size int) (r0 []settlement.Transaction, r1 string, err error) {
	if err = h.hook.Before("SettlementTransactions"); err != nil {
		return
	}
	r0, r1, err = h.tx.SettlementTransactions(merchantID, settlementID, fromID, size)
	return r0, r1, h.hook.After("SettlementTransactions", err)
}

func (h hookTx) ScheduleTask(t *storage.Task) (err error) {
	if err = h.hook.Before("ScheduleTask"); err != nil {
		return
	}
	err = h.tx.ScheduleTask(t)
	return h.hook.After("ScheduleTask", err)
}

func (h hookTx) DueTasks(at time.Time, limit int) (r0 []*storage.Task, err error) {
	if err = h.hook.Before("DueTasks"); err != nil {
		return
	}
	r0, err = h.tx.DueTasks(at, limit)
	return r0, h.hook.After("DueTasks", err)
}

func (h hookTx) DeleteTask(id string) (err error) {
	if err = h.hook.Before("DeleteTask"); err != nil {
		return
	}
	err = h.tx.DeleteTask(id)
	return h.hook.After("DeleteTask", err)
}

func (h hookTx) NextSequence(merchantID, series string) (r0 int64, err error) {
	if err = h.hook.Before("NextSequence"); err != nil {
		return
	}
	r0, err = h.tx.NextSequence(merchantID, series)
	return r0, h.hook.After("NextSequence", err)
}

func (h hookTx) GetIdempotency(merchantID, key string) (r0 *storage.IdempotencyRecord, err error) {
	if err = h.hook.Before("GetIdempotency"); err != nil {
		return
	}
	r0, err = h.tx.GetIdempotency(merchantID, key)
	return r0, h.hook.After("GetIdempotency", err)
}

func (h hookTx) PutIdempotency(r *storage.IdempotencyRecord) (err error) {
	if err = h.hook.Before("PutIdempotency"); err != nil {
		return
	}
	err = h.tx.PutIdempotency(r)
	return h.hook.After("PutIdempotency", err)
}

func (h hookTx) DeleteExpiredIdempotency(t time.Time, limit int) (r0 int, err error) {
	if err = h.hook.Before("DeleteExpiredIdempotency"); err != nil {
		return
	}
	r0, err = h.tx.DeleteExpiredIdempotency(t, limit)
	return r0, h.hook.After("DeleteExpiredIdempotency", err)
}

func (h hookTx) AddOutbox(m *storage.OutboxMessage) (err error) {
	if err = h.hook.Before("AddOutbox"); err != nil {
		return
	}
	err = h.tx.AddOutbox(m)
	return h.hook.After("AddOutbox", err)
}

func (h hookTx) PendingOutbox(t time.Time, limit, perMerchant int) (r0 []*storage.OutboxMessage, err error) {
	if err = h.hook.Before("PendingOutbox"); err != nil {
		return
	}
	r0, err = h.tx.PendingOutbox(t, limit, perMerchant)
	return r0, h.hook.After("PendingOutbox", err)
}

func (h hookTx) UpdateOutbox(m *storage.OutboxMessage) (err error) {
	if err = h.hook.Before("UpdateOutbox"); err != nil {
		return
	}
	err = h.tx.UpdateOutbox(m)
	return h.hook.After("UpdateOutbox", err)
}

func (h hookTx) GetOutbox(merchantID, id string) (r0 *storage.OutboxMessage, err error) {
	if err = h.hook.Before("GetOutbox"); err != nil {
		return
	}
	r0, err = h.tx.GetOutbox(merchantID, id)
	return r0, h.hook.After("GetOutbox", err)
}

func (h hookTx) ListOutbox(merchantID, fromID string, at time.Time, size int) (r0 []*storage.OutboxMessage, r1 string, err error) {
	if err = h.hook.Before("ListOutbox"); err != nil {
		return
	}
	r0, r1, err = h.tx.ListOutbox(merchantID, fromID, at, size)
	return r0, r1, h.hook.After("ListOutbox", err)
}

func (h hookTx) DeleteDoneOutbox(t time.Time, limit int) (r0 int, err error) {
	if err = h.hook.Before("DeleteDoneOutbox"); err != nil {
		return
	}
	r0, err = h.tx.DeleteDoneOutbox(t, limit)
	return r0, h.hook.After("DeleteDoneOutbox", err)
}
