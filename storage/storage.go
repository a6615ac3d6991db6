// Package storage defines the transactional store behind kassa. It knows the
// domain records (orders, tokens, merchants) but no database: storage/bolt is
// the embedded default and storage/postgres fits the same interface.
//
// Every change kassa acknowledges happens inside one Update transaction: load,
// apply the domain rule, save, record the idempotency result and outbox
// entries. When Update returns nil the transaction is durable on disk.
package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kassahq/kassa/fault"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/token"
)

// ErrClosed, of kind fault.Internal, is the error of Update and View on a
// closed store, so that an embedder can tell a shutdown apart (errors.Is)
// from other failures. Every store returns this one value.
var ErrClosed error = fault.Internalf(errors.New("storage: the store is closed"), "the store is closed")

// ErrContended is in the chain of the error of an Update or View that lost
// to other transactions on every attempt the store makes (a PostgreSQL
// store's serialization failures, deadlocks, and rows locked NOWAIT or past
// lock_timeout): each attempt was rolled back, so nothing was written, and
// the error is the store_unavailable fault. errors.Is tells it apart from
// a store out of reach: the contention is over the rows the transaction
// wanted, so a background task that meets it is set aside and the run goes
// on with the tasks behind it.
var ErrContended = errors.New("storage: lost to other transactions on every attempt")

// WaitEnded is the error of an Update or View whose caller's context ended
// before the transaction could commit: it was still waiting for the store (a
// free database connection, a row or advisory lock held by another
// transaction, its turn behind other writes, a database that does not
// answer), and it was rolled back, or never began, so nothing was written.
// It is the store_unavailable fault (503 with Retry-After when served): the
// same request, with its idempotency key, may be sent again. errors.Is finds
// the context's error (context.DeadlineExceeded or context.Canceled) in it,
// and the failure it caused, if any.
func WaitEnded(ctx context.Context, cause error) error {
	err := ctx.Err()
	if cause != nil && !errors.Is(cause, err) {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable",
		Message: "the store did not answer in time (a lock held by another request, or every database connection busy); nothing was done, retry shortly",
		Err:     err}
}

// Store opens transactions. Implementations are safe for concurrent use.
type Store interface {
	// Update runs fn in a read-write transaction and commits it durably when fn
	// returns nil; any error rolls everything back. fn may be retried by the
	// store (for example after a serialization failure), so it must not have
	// effects outside the transaction.
	//
	// ctx may end the wait for the transaction and fn's statements (bolt:
	// a write still queued behind others; PostgreSQL: a connection, a lock,
	// a statement), which then returns WaitEnded's error; once the commit
	// is under way (bolt: once fn ran) it no longer decides the outcome,
	// which is the commit's: Update returns nil if and only if the change is committed
	// (durably, on a durable store), and an error means nothing was written
	// (the conformance suite's DeadlinesNeverHideACommit). The one exception
	// is a database that stops answering a COMMIT it was sent (PostgreSQL, a
	// broken connection or 15 s without an answer): that error says the
	// outcome is unknown, and only a retry with the same idempotency key is
	// then safe.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Close lets the transactions under way end, then releases the store;
	// later ones fail with ErrClosed. Closing twice is not an error.
	Close() error
}

// SharedClock is implemented by the transactions of a store that several
// processes share (storage/postgres): SharedNow reads a clock all of them
// read alike, the database server's. What one process sets for another to
// judge, a delivery's lease, is kept on it: each process's own clock is only
// as close to the others' as NTP keeps it (seconds when it fails, minutes on
// a VM resumed from suspend). A store of one process needs none.
type SharedClock interface {
	SharedNow() (time.Time, error)
}

// Tx is one transaction. Its methods return errors of kind fault.NotFound for
// unknown records and fault.Conflict for version or uniqueness conflicts.
// A Tx must not be used after its function returns.
type Tx interface {
	// Now is the single time of this transaction: every record it writes is
	// stamped with it.
	Now() time.Time

	// Merchants.
	// GetMerchant reads a merchant (fault.NotFound when there is none).
	GetMerchant(id string) (*Merchant, error)
	// GetMerchantByClientID reads the merchant a client id belongs to
	// (fault.NotFound when none does).
	GetMerchantByClientID(clientID string) (*Merchant, error)
	// PutMerchant creates or replaces a merchant; a client id belongs to one merchant.
	PutMerchant(m *Merchant) error
	// ListMerchants returns every merchant, by id.
	ListMerchants() ([]*Merchant, error)
	// HasMerchants reports whether the store holds any merchant, without
	// reading them all (a server asks at every start).
	HasMerchants() (bool, error)

	// Orders. A merchant sees only its own orders.
	GetOrder(merchantID, orderID string) (*order.Order, error)
	// OrderVersion is the stored version of an order, read without decoding
	// it (NotFound like GetOrder), so that a caller holding a rendering of
	// that version can tell it is current.
	OrderVersion(merchantID, orderID string) (int64, error)
	// CreateOrder stores a new order with Version 1 (set on o).
	CreateOrder(o *order.Order) error
	// UpdateOrder replaces an order if o.Version is the stored version, and
	// increments o.Version; otherwise it fails with fault.Conflict.
	UpdateOrder(o *order.Order) error
	// ListOrders returns one page of the merchant's orders that q selects,
	// newest first (an OrderPage).
	ListOrders(merchantID string, q OrderQuery) (OrderPage, error)
	// OrdersExpiringBefore lists orders of any merchant whose expiresAt is
	// before t (at most limit), for the expiry job.
	OrdersExpiringBefore(t time.Time, limit int) ([]*order.Order, error)

	// Authorization tokens.
	// GetAuthorization reads a merchant's token (fault.NotFound when there is none).
	GetAuthorization(merchantID, tok string) (*token.Authorization, error)
	// PutAuthorization creates or replaces a token.
	PutAuthorization(a *token.Authorization) error
	// DeleteAuthorizationsExpiredBefore removes up to limit tokens (used,
	// expired, deleted or not) whose ExpiresAt is before t, earliest first,
	// and reports how many it removed: the retention sweep of authorization
	// tokens (a token is used before its ExpiresAt, if ever, so one past it
	// can never be used again). Sweeps in concurrent transactions remove
	// each token once.
	DeleteAuthorizationsExpiredBefore(t time.Time, limit int) (int, error)

	// Customer tokens.
	// GetCustomerToken reads a merchant's customer token (fault.NotFound
	// when there is none).
	GetCustomerToken(merchantID, id string) (*token.Customer, error)
	// PutCustomerToken creates or replaces a customer token.
	PutCustomerToken(c *token.Customer) error

	// Checkout and payment sessions. A session can be found by its id, by
	// the merchant's external id, and by the id of the order created from it.
	// GetSession, GetSessionByExternalID and GetSessionByOrderID read a
	// merchant's session by each of those (fault.NotFound when there is none).
	GetSession(merchantID, id string) (*session.Session, error)
	GetSessionByExternalID(merchantID, externalID string) (*session.Session, error)
	GetSessionByOrderID(merchantID, orderID string) (*session.Session, error)
	// PutSession creates or replaces a session; an external id belongs to one
	// session of a merchant (fault.Conflict otherwise).
	PutSession(s *session.Session) error
	// ListSessions returns one page of the merchant's sessions, newest first,
	// and the id to continue from ("" on the last page). q must be validated.
	ListSessions(merchantID string, q session.Query) ([]*session.Session, string, error)

	// Settlements. Captures, refunds and voids are queued as settlement items
	// in the transaction that makes them; a run saves its batches and removes
	// the items they settle in one transaction.
	// QueueSettlementItems queues items under their keys; an item queued
	// again under its key replaces it, at its new OccurredAt.
	QueueSettlementItems(items []settlement.Item) error
	// PendingSettlementItems returns up to limit queued items, oldest first
	// by OccurredAt, ties by Key: a run that reads only part of a large
	// queue takes the oldest, and what it leaves is the next run's first,
	// so no item waits behind newer ones (keys are random ids; key order
	// would leave those sorting late unread for as long as the queue is
	// larger than a run reads).
	PendingSettlementItems(limit int) ([]settlement.Item, error)
	// QueuedSettlementItems returns the queued items of keys, in no
	// particular order; a key not queued is left out. A run whose read
	// ended at its limit fetches with it the voids of the captures it read
	// (settlement.MissingVoids), which may lie beyond the limit.
	QueuedSettlementItems(keys []string) ([]settlement.Item, error)
	// SaveSettlement stores a batch's settlement (when it has one) and its
	// transactions, and removes its keys from the queue.
	SaveSettlement(b settlement.Batch) error
	// GetSettlement reads a merchant's settlement (fault.NotFound when there is none).
	GetSettlement(merchantID, id string) (*settlement.Settlement, error)
	// ListSettlements pages the merchant's settlements, newest first; q must be validated.
	ListSettlements(merchantID string, q settlement.Query) ([]*settlement.Settlement, string, error)
	// SettlementTransactions pages a settlement's transactions in order,
	// starting after the transaction fromID.
	SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error)

	// Scheduled tasks (e.g. auto-capture), due at a time.
	// ScheduleTask creates or replaces a task.
	ScheduleTask(t *Task) error
	// DueTasks lists up to limit tasks due at or before at, earliest first.
	DueTasks(at time.Time, limit int) ([]*Task, error)
	// DeleteTask removes a task (fault.NotFound when there is none).
	DeleteTask(id string) error

	// NextSequence returns the next number of a merchant's gapless series
	// (1, 2, 3, …); a rolled-back transaction gives its number back.
	NextSequence(merchantID, series string) (int64, error)

	// Idempotency records, keyed by merchant and key.
	// GetIdempotency returns (nil, nil) when there is none.
	GetIdempotency(merchantID, key string) (*IdempotencyRecord, error)
	// PutIdempotency stores a record; a record with the same merchant and key
	// already present is a fault.Conflict with code idempotency_key_exists,
	// returned by PutIdempotency or, by a store that sends the record with
	// the commit, by the Update.
	PutIdempotency(r *IdempotencyRecord) error
	// DeleteExpiredIdempotency removes up to limit records that expired before t
	// and reports how many it removed.
	DeleteExpiredIdempotency(t time.Time, limit int) (int, error)

	// Outbox of notifications, written with the change they announce.
	AddOutbox(m *OutboxMessage) error
	// PendingOutbox lists up to limit messages due at or before t, oldest
	// first, with at most perMerchant (each merchant's oldest) of any one
	// merchant, so that one merchant's backlog does not hide the others'
	// messages; perMerchant <= 0 sets no such cap.
	PendingOutbox(t time.Time, limit, perMerchant int) ([]*OutboxMessage, error)
	// UpdateOutbox replaces a message (attempts, next attempt, delivery state).
	UpdateOutbox(m *OutboxMessage) error
	// GetOutbox reads one message of a merchant.
	GetOutbox(merchantID, id string) (*OutboxMessage, error)
	// ListOutbox pages a merchant's messages newest first (by CreatedAt, then
	// id), starting after the message fromID, and returns the id to continue
	// from ("" on the last page): the merchant's delivery log. With at set,
	// it starts after the position (at, fromID) instead, which needs no
	// message there: a page taken before the retention sweep removed its
	// last message still goes on.
	ListOutbox(merchantID, fromID string, at time.Time, size int) ([]*OutboxMessage, string, error)
	// DeleteDoneOutbox removes up to limit messages that are done (delivered
	// or failed) and were created before t, oldest first, with their
	// delivery logs, and reports how many it removed: the retention sweep of
	// the delivery log. A pending message is never removed, however old.
	// Sweeps in concurrent transactions remove each message once.
	DeleteDoneOutbox(t time.Time, limit int) (int, error)
}

// Merchant is an API client of kassa.
type Merchant struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	ClientID string `json:"clientId"`
	// SecretHash is SHA-256 over Salt and the client secret. Generated
	// secrets are 20 random bytes, so a fast hash with a salt is enough (an
	// operator's own secret must be as long; docs/decisions.md); secrets are
	// never stored.
	SecretHash []byte `json:"secretHash"`
	Salt       []byte `json:"salt"`
	RequireAck bool   `json:"requireAck,omitempty"`
	Sandbox    bool   `json:"sandbox,omitempty"`
	// Notifications: where they go, the HMAC key they are signed with (kept
	// in clear because signing needs it; the API shows it only when made) and
	// the topics the merchant subscribed to (acknowledgement requests are
	// always sent).
	WebhookURL    string   `json:"webhookUrl,omitempty"`
	WebhookSecret string   `json:"webhookSecret,omitempty"`
	WebhookEvents []string `json:"webhookEvents,omitempty"`
	// The secret a rotation replaced, still signed with until
	// WebhookPreviousUntil: receivers take the new one only when deployed.
	WebhookPreviousSecret string    `json:"webhookPreviousSecret,omitempty"`
	WebhookPreviousUntil  time.Time `json:"webhookPreviousUntil,omitzero"`
	// WebhookDeclared is the SHA-256 (hex) of the operator's declared
	// settings last applied (the reference server's --webhook-* flags), so
	// that declaring the same ones again does not undo the merchant's changes.
	WebhookDeclared string `json:"webhookDeclared,omitempty"`
	// Fees charged per capture in settlements.
	FeeBasisPoints     int64     `json:"feeBasisPoints,omitempty"`
	FeeFixedPerCapture int64     `json:"feeFixedPerCapture,omitempty"`
	CreatedAt          time.Time `json:"createdAt"`
}

// Clone returns a copy of m that shares no memory with it.
func (m *Merchant) Clone() *Merchant {
	c := *m
	c.SecretHash, c.Salt, c.WebhookEvents = slices.Clone(m.SecretHash), slices.Clone(m.Salt), slices.Clone(m.WebhookEvents)
	return &c
}

// OrderQuery selects orders of one merchant. Every filter is optional and all
// given filters must hold (AND). Within a list filter any value may match,
// except StatusAnd (all must hold) and StatusNot (none may hold).
type OrderQuery struct {
	IDs                []string
	StoreIDs           []string
	OrderReferences    []string
	MerchantReferences []string
	Status             []order.Status
	StatusAnd          []order.Status
	StatusNot          []order.Status
	Categories         []order.Category
	CreatedFrom        time.Time // inclusive; zero means unbounded
	CreatedTo          time.Time // exclusive
	ExpiresFrom        time.Time // inclusive
	ExpiresTo          time.Time // exclusive
	// Q matches an order id, orderReference or merchantReference exactly.
	Q string
	// Cursor is the NextCursor of the previous page ("" for the first).
	Cursor string
	// Size is the page size, 1 to MaxPageSize; 0 means DefaultPageSize.
	Size int
	// PageBytes lowers the page's budget of stored order bytes below
	// MaxPageBytes (0, or more than MaxPageBytes, means MaxPageBytes). It
	// is a hook for tests, which cannot build 16 MiB of orders per page; no
	// request sets it.
	PageBytes int
}

// Page sizes of order lists.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// MaxPageBytes is the budget of one page of an order list: the sum of its
// orders' stored JSON lengths. An order may hold thousands of lines (MiBs),
// and a page is decoded whole, so Size alone would let one merchant's list
// take GiBs of a server every merchant shares. A page therefore ends before
// the first order that would take it past the budget, except that its first
// order is always on it (so a page holds at least one order, unless PostgreSQL
// passed over rows a replica of another build indexed, docs/postgres.md), and
// carries NextCursor as when it is full. Every store applies the same rule
// (FitsPage).
const MaxPageBytes = 16 << 20

// PageBudget is the byte budget of a page of q: MaxPageBytes, or the lower
// q.PageBytes.
func PageBudget(q OrderQuery) int64 { return budget(q.PageBytes) }

// SessionPageBudget is the byte budget of a page of a session list, by the
// same rule as an order list's: a session holds up to 1 000 lines too (a few
// hundred KB to MBs of JSON), and a page is decoded and answered whole, so
// ListSessions ends a page by FitsPage on every store. Sessions read but not
// matching the query are not on the page and do not count.
func SessionPageBudget(q session.Query) int64 { return budget(q.PageBytes) }

func budget(lowered int) int64 {
	if lowered > 0 && lowered < MaxPageBytes {
		return int64(lowered)
	}
	return MaxPageBytes
}

// FitsPage reports whether an item (order, session) of n stored bytes goes on
// a page whose items so far hold used bytes (count of them): the first always
// does, a later one while the page stays within budget.
func FitsPage(count int, used, n, budget int64) bool {
	return count == 0 || used+n <= budget
}

// PageFill keeps count of the items a store puts on a page and their stored
// bytes, against the page's budget.
type PageFill struct {
	Budget int64
	count  int
	used   int64
}

// Take puts an item of n stored bytes on the page if it fits (FitsPage), and
// reports whether it did.
func (p *PageFill) Take(n int64) bool {
	if !FitsPage(p.count, p.used, n, p.Budget) {
		return false
	}
	p.count++
	p.used += n
	return true
}

// OrderPage is one page of a list, newest first.
type OrderPage struct {
	Orders     []*order.Order
	NextCursor string // "" on the last page
}

// IdempotencyRecord remembers the outcome of a mutating request so that a
// retry with the same key replays it instead of running it again.
type IdempotencyRecord struct {
	MerchantID  string            `json:"merchantId"`
	Key         string            `json:"key"`
	Fingerprint string            `json:"fingerprint"` // hash of method, path and body
	Status      int               `json:"status"`
	Header      map[string]string `json:"header,omitempty"`
	Body        []byte            `json:"body,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	ExpiresAt   time.Time         `json:"expiresAt"`
}

// Task is work scheduled for a time, done by a background job.
type Task struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"` // "autoCapture"
	MerchantID string    `json:"merchantId"`
	OrderID    string    `json:"orderId"`
	DueAt      time.Time `json:"dueAt"`
	Attempts   int       `json:"attempts,omitempty"`
}

// FirstPerMerchant keeps, of ms in due order, each merchant's first per
// (all when per <= 0), in place: PendingOutbox's cap on every store.
func FirstPerMerchant(ms []*OutboxMessage, per int) []*OutboxMessage {
	if per <= 0 {
		return ms
	}
	taken := map[string]int{}
	return slices.DeleteFunc(ms, func(m *OutboxMessage) bool {
		taken[m.MerchantID]++
		return taken[m.MerchantID] > per
	})
}

// OutboxMessage is a notification to deliver to a merchant. Its ID is the
// event id the merchant sees, the same on every attempt.
type OutboxMessage struct {
	ID          string    `json:"id"`
	MerchantID  string    `json:"merchantId"`
	Topic       string    `json:"topic"` // e.g. "order.acknowledgementRequired", "order.partialCapture"
	OrderID     string    `json:"orderId,omitempty"`
	Payload     []byte    `json:"payload"`
	CreatedAt   time.Time `json:"createdAt"`
	NextAttempt time.Time `json:"nextAttempt"`
	Attempts    int       `json:"attempts"`
	Delivered   bool      `json:"delivered"`
	// Failed: the deliverer gave up after its last allowed attempt.
	Failed    bool              `json:"failed,omitempty"`
	LastError string            `json:"lastError,omitempty"`
	Log       []DeliveryAttempt `json:"log,omitempty"`
	// Claim names the deliverer's claim on the message (set when claimed,
	// cleared when an attempt is recorded or a redelivery asked for): only
	// that claim records an attempt, so a deliverer that outlived its lease
	// cannot record over another's attempt or a merchant's redelivery.
	Claim string `json:"claim,omitempty"`
	// LeaseUntil ends the claim's lease on the wall clock, or on the
	// store's SharedClock when its transactions have one. NextAttempt
	// follows the store's clock, which the sandbox moves and replicas need
	// not agree on; a lease must not end early when it jumps.
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
}

// Done reports whether the message needs no more delivery attempts; stores
// list only messages that are not done as pending.
func (m *OutboxMessage) Done() bool { return m.Delivered || m.Failed }

// DeliveryAttempt is one entry of a message's delivery log.
type DeliveryAttempt struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"statusCode,omitempty"` // 0: no HTTP answer
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"durationMs"`
}

// Matches reports whether o, with the given statuses, satisfies every filter
// of q except the cursor and size. Stores use it to check candidates an index
// produced against the remaining filters, so that all stores agree.
func Matches(o *order.Order, statuses []order.Status, q OrderQuery) bool {
	switch {
	case !anyOf(q.IDs, o.ID), !anyOf(q.StoreIDs, o.StoreID), !anyOf(q.OrderReferences, o.OrderReference),
		!anyOf(q.MerchantReferences, o.MerchantReference), !anyOf(q.Categories, o.PaymentMethod.Category()),
		!anyOf(q.Status, statuses...):
		return false
	case !q.CreatedFrom.IsZero() && o.CreatedAt.Before(q.CreatedFrom), !q.CreatedTo.IsZero() && !o.CreatedAt.Before(q.CreatedTo),
		!q.ExpiresFrom.IsZero() && o.ExpiresAt.Before(q.ExpiresFrom), !q.ExpiresTo.IsZero() && !o.ExpiresAt.Before(q.ExpiresTo):
		return false
	case q.Q != "" && q.Q != o.ID && q.Q != o.OrderReference && q.Q != o.MerchantReference:
		return false
	}
	for _, s := range q.StatusAnd {
		if !slices.Contains(statuses, s) {
			return false
		}
	}
	for _, s := range q.StatusNot {
		if slices.Contains(statuses, s) {
			return false
		}
	}
	return true
}

func anyOf[T comparable](want []T, have ...T) bool {
	if len(want) == 0 {
		return true
	}
	for _, h := range have {
		if slices.Contains(want, h) {
			return true
		}
	}
	return false
}

// PageSize validates q.Size and applies the default.
func PageSize(q OrderQuery) (int, error) {
	switch {
	case q.Size == 0:
		return DefaultPageSize, nil
	case q.Size < 1 || q.Size > MaxPageSize:
		return 0, fault.Invalidf("size", "must be between 1 and %d", MaxPageSize)
	}
	return q.Size, nil
}
