// Package kassa is the embedding API of kassa: the use cases of a B2B payment
// provider over a transactional store.
//
// A platform opens a store (storage/bolt by default), calls New, and then one
// method per operation: create an order from a buyer's authorization,
// capture, refund, cancel, edit, read and list. Each mutating method is one
// store transaction that loads the order, applies the domain rule (packages
// order, capture, refund, token), saves it, and records the idempotency
// result and outbox entries atomically: when a method returns without error,
// its effect is durable, and a retry with the same idempotency key replays
// the original outcome instead of running again.
//
// A Ledger runs no background work of its own: an embedder schedules what
// kassa serve runs in a loop, or it is never done. DeliverNotifications posts
// the webhooks; RunTasks does auto-captures, token expiries and reminders;
// ExpireOrders moves expired orders in the list's status filters;
// RunSettlementsBefore (or RunSettlements) makes the settlements;
// SweepIdempotencyOnce, SweepNotificationsOnce and SweepAuthorizationsOnce
// remove what is past its retention. The README's Embedding section says how often each runs there.
//
// The reference server (package server, binary cmd/kassa) calls only this API;
// to serve it from a mux of one's own, see server.Server.Handler.
package kassa

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/ordercache"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Options configure a Ledger. The zero value is usable.
type Options struct {
	// IDs mints identifiers; default RandomIDs.
	IDs order.IDSource
	// Policy holds the expiry periods; a zero or negative period takes its
	// value in order.DefaultPolicy(), and MaxExpiry is at least ExpiryPeriod.
	Policy order.Policy
	// IdempotencyTTL is how long an idempotency key is remembered; zero or
	// negative: 24 h.
	IdempotencyTTL time.Duration
	// NotificationRetention is how long the delivery log keeps a delivered
	// or failed notification, counted from its creation on the store's
	// clock, before SweepNotifications removes it; zero or negative:
	// DefaultNotificationRetention. A pending one is kept however old.
	NotificationRetention time.Duration
	// AuthorizationTTL is how long a minted authorization token lives; default 60 min.
	AuthorizationTTL time.Duration
	// AuthorizationRetention is how long an authorization token is kept
	// past its expiry, on the store's clock, before SweepAuthorizations
	// removes it (used, expired or deleted: a token is used before its
	// expiry, if ever); zero or negative: DefaultAuthorizationRetention. It
	// is never shorter than IdempotencyTTL.
	AuthorizationRetention time.Duration
	// DocumentURL links a sub-order's document (set by the server, which serves them).
	// A link may depend on the wall clock but must stay the same within a
	// wall-clock hour: rendered responses holding links are cached until the
	// hour ends (package ordercache).
	DocumentURL order.DocumentURLFunc
	// CheckoutURL links a session's hosted checkout page (set by the server).
	CheckoutURL func(merchantID, sessionID string) string
	// OrderCacheBytes bounds the rendered order responses kept for OrderJSON
	// (package ordercache); 0 is ordercache.DefaultMaxBytes, negative none.
	OrderCacheBytes int64
}

// Ledger runs kassa's use cases over a store. It is safe for concurrent use.
type Ledger struct {
	store storage.Store
	opts  Options
	cache *ordercache.Cache

	mu       sync.Mutex
	inFlight map[string]struct{} // merchant + idempotency key of requests being executed here
	// delivering holds, per merchant, the claims of this Ledger's runs
	// still going: a run that starts while another waits on a merchant's
	// receiver leaves that merchant alone.
	delivering map[string]*merchantClaims
	// slow holds, per merchant whose receiver this Ledger last found slow
	// or failing, until when runs with SkipSlowReceivers leave it alone.
	slow map[string]time.Time
	// claiming makes a run's claim and its entry in delivering one step:
	// a run that claimed in between would not see the other's merchants
	// as busy, and both would post to them (kassa serve starts two runs at
	// the same instant each tick).
	claiming sync.Mutex

	orders gate // one change of an order at a time goes to the store
}

// New returns a Ledger over store.
func New(store storage.Store, opts Options) *Ledger {
	if opts.IDs == nil {
		opts.IDs = RandomIDs{}
	}
	// Each period defaults on its own: an embedder who sets one must not
	// get orders that expire at creation, or never offer an extension.
	if opts.Policy.ExpiryPeriod <= 0 {
		opts.Policy.ExpiryPeriod = order.DefaultPolicy().ExpiryPeriod
	}
	if opts.Policy.MaxExpiry <= 0 {
		opts.Policy.MaxExpiry = order.DefaultPolicy().MaxExpiry
	}
	opts.Policy.MaxExpiry = max(opts.Policy.MaxExpiry, opts.Policy.ExpiryPeriod)
	if opts.IdempotencyTTL <= 0 {
		// Zero or less would keep no key at all: retries would run again.
		opts.IdempotencyTTL = 24 * time.Hour
	}
	if opts.NotificationRetention <= 0 {
		opts.NotificationRetention = DefaultNotificationRetention
	}
	if opts.AuthorizationTTL <= 0 {
		opts.AuthorizationTTL = token.DefaultAuthorizationTTL // a token must outlive its minting
	}
	if opts.AuthorizationRetention <= 0 {
		opts.AuthorizationRetention = DefaultAuthorizationRetention
	}
	// A retry of a create-order whose key has expired runs again: the
	// token must still be there to answer it "used (order:…)", naming the
	// order it made, rather than "not found".
	opts.AuthorizationRetention = max(opts.AuthorizationRetention, opts.IdempotencyTTL)
	return &Ledger{store: store, opts: opts, cache: ordercache.New(opts.OrderCacheBytes), inFlight: map[string]struct{}{}}
}

// Store returns the underlying store.
func (l *Ledger) Store() storage.Store { return l.store }

// Policy returns the order policy in force.
func (l *Ledger) Policy() order.Policy { return l.opts.Policy }

// Call identifies who calls and, for mutations, the optional idempotency key.
type Call struct {
	MerchantID     string
	IdempotencyKey string
	// ReadOnlyBody promises that the caller never changes Result.Body, only
	// reads or writes it out (the reference server). The answer of a change
	// of an order is then the very bytes the cache of rendered responses
	// keeps for the next read, not a copy of them: a capture of a 50-line
	// order copies about 50 KB less. Without it Body is the caller's own.
	ReadOnlyBody bool
}

// Result is the outcome of a mutating operation. Status is the HTTP status
// the reference server answers with (200, 201 or 204) and Body its JSON body,
// both exactly as first produced: a replay returns them unchanged, with
// Replayed set. Order is the order after the operation (nil on a replay or
// when the operation concerns no order); a capture or refund made by it is the
// last of Order.Captured or Order.Refunded. For a change of an existing order
// (capture, refund, cancel, edit and the like) Body is the order's response,
// order.Response, which is what a replay is read from.
type Result struct {
	Status   int
	Body     []byte
	Location string
	Replayed bool
	Order    *order.Order
	// renderedAt is set when Body is Order's response rendered at that time
	// (orderResult), which may then be kept for OrderJSON once committed
	// until linksUntil (see Ledger.linksUntil).
	renderedAt, linksUntil time.Time
}

// MaxIdempotencyKeyLen bounds the Idempotency-Key header.
const MaxIdempotencyKeyLen = 255

func validKey(k string) error {
	if len(k) > MaxIdempotencyKeyLen {
		return fault.Invalidf("Idempotency-Key", "must be at most %d characters", MaxIdempotencyKeyLen)
	}
	for _, r := range k {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return fault.Invalidf("Idempotency-Key", "must be printable ASCII")
		}
	}
	return nil
}

// missingRequest is the error of a method given a nil request where it
// needs one (Capture and Refund read nil as "everything"): an embedder's
// bad input, not a panic inside the transaction.
func missingRequest(req any) error {
	if v := reflect.ValueOf(req); v.Kind() == reflect.Pointer && v.IsNil() {
		return fault.Invalidf("body", "a request is required")
	}
	return nil
}

// fingerprint identifies a request for idempotency: the operation, its
// targets and its decoded body, so a reused key with another request is caught.
func fingerprint(op string, targets []string, req any) string {
	h := sha256.New()
	h.Write([]byte(op))
	for _, t := range targets {
		h.Write([]byte{0})
		h.Write([]byte(t))
	}
	h.Write([]byte{0})
	b, _ := json.Marshal(req)
	h.Write(b)
	// json.Marshal leaves out an omitempty list or map sent empty as it
	// leaves out one not sent. Where the two mean different things (a
	// session update's "metadata": {} clears the metadata; a full capture's
	// "orderLines": [] is refused, where none captures everything), the
	// field is tagged kassa:"emptydiffers", and its name, when sent empty,
	// is added after the body (which holds no NUL). Every other request,
	// "metadata": {} on an order included, keeps the fingerprint it always
	// had, which records stored before an upgrade hold.
	for _, name := range sentEmpty(reflect.ValueOf(req)) {
		h.Write([]byte{0})
		h.Write([]byte(name))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sentEmpty lists the JSON names of req's fields tagged
// kassa:"emptydiffers" that hold an empty, non-nil list or map.
func sentEmpty(v reflect.Value) []string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range v.NumField() {
		sf, fv := v.Type().Field(i), v.Field(i)
		if !slices.Contains(strings.Split(sf.Tag.Get("kassa"), ","), "emptydiffers") {
			continue
		}
		if k := fv.Kind(); (k == reflect.Slice || k == reflect.Map) && !fv.IsNil() && fv.Len() == 0 {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}

// run executes fn in one Update transaction under the call's idempotency key.
// Without a key it simply runs. With one: a key already executed with the
// same request replays the stored result; with another request it is
// refused (KeyReused); a key being executed right now by this process is a
// Conflict. The record is written in the same transaction as the change, so
// a crash can never leave one without the other.
func (l *Ledger) run(ctx context.Context, call Call, req request, fn func(tx storage.Tx) (*Result, error)) (*Result, error) {
	return l.runOrder(ctx, call, req, "", fn)
}

// request is what a call asks, whose fingerprint an idempotency key is
// checked against: taken only for a call with a key, as it marshals the
// whole body.
type request struct {
	op      string
	targets []string
	body    any
}

// runOrder is run for a change of the order orderID (none: ""), which
// waits for its turn at l.orders, after the key's in-flight check, so that
// a twin request is still refused at once rather than queued.
func (l *Ledger) runOrder(ctx context.Context, call Call, req request, orderID string, fn func(tx storage.Tx) (*Result, error)) (*Result, error) {
	if call.MerchantID == "" {
		return nil, fault.New(fault.Unauthorized, "unauthorized", "no merchant")
	}
	if call.IdempotencyKey != "" {
		if err := validKey(call.IdempotencyKey); err != nil {
			return nil, err
		}
		slot := call.MerchantID + "\x00" + call.IdempotencyKey
		l.mu.Lock()
		if _, busy := l.inFlight[slot]; busy {
			l.mu.Unlock()
			return nil, inProgress()
		}
		l.inFlight[slot] = struct{}{}
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.inFlight, slot)
			l.mu.Unlock()
		}()
	}
	release, err := l.orders.enter(ctx, call.MerchantID, orderID)
	if err != nil {
		return nil, err
	}
	defer release()
	if call.IdempotencyKey == "" {
		var res *Result
		err := l.store.Update(ctx, func(tx storage.Tx) error {
			r, err := fn(tx)
			res = r
			return err
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	fp := fingerprint(req.op, req.targets, req.body)
	var res *Result
	err = l.store.Update(ctx, func(tx storage.Tx) error {
		rec, err := tx.GetIdempotency(call.MerchantID, call.IdempotencyKey)
		if err != nil {
			return err
		}
		if rec != nil {
			if rec.Fingerprint != fp {
				return fault.New(fault.KeyReused, "idempotency_key_reused",
					"this Idempotency-Key was used with a different request")
			}
			res = &Result{Status: rec.Status, Body: rec.Body, Location: rec.Header["Location"], Replayed: true}
			return nil
		}
		r, err := fn(tx)
		if err != nil {
			return err
		}
		hdr := map[string]string{}
		if r.Location != "" {
			hdr["Location"] = r.Location
		}
		// Retention is real time, not the store's clock: a sandbox that moves
		// its clock a day ahead must not free a key its merchant may retry.
		wall := wallClock()
		if err := tx.PutIdempotency(&storage.IdempotencyRecord{
			MerchantID: call.MerchantID, Key: call.IdempotencyKey, Fingerprint: fp,
			Status: r.Status, Header: hdr, Body: r.Body,
			CreatedAt: wall, ExpiresAt: wall.Add(l.opts.IdempotencyTTL),
		}); err != nil {
			return err
		}
		res = r
		return nil
	})
	if fault.CodeOf(err) == "idempotency_key_exists" {
		// Another replica stored the key first: its request is the one that
		// counts. Stores report this from PutIdempotency or, when they send
		// the record with the commit (storage/postgres), from the commit.
		return nil, inProgress()
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func inProgress() error {
	return fault.Conflictf("idempotency_request_in_progress", "a request with this Idempotency-Key is still being processed")
}

// sequencer binds a merchant's document series to a transaction.
type sequencer struct {
	tx       storage.Tx
	merchant string
}

func (s sequencer) Next(series string) (int64, error) { return s.tx.NextSequence(s.merchant, series) }

func (l *Ledger) env(tx storage.Tx, merchantID string) order.Env {
	return order.Env{Now: tx.Now(), IDs: l.opts.IDs, Docs: sequencer{tx, merchantID}, Policy: l.opts.Policy, Language: i18n.Language}
}

// Render returns the spec's LedgerOrderResponse of o at now.
func (l *Ledger) Render(o *order.Order, now time.Time) order.Response {
	return o.Response(now, l.opts.Policy, l.opts.DocumentURL)
}

func (l *Ledger) orderResult(o *order.Order, now time.Time) (*Result, error) {
	until := l.linksUntil(o)
	body, err := json.Marshal(l.Render(o, now))
	if err != nil {
		return nil, fault.Internalf(err, "encode order")
	}
	return &Result{Status: http.StatusOK, Body: body, Order: o, renderedAt: now, linksUntil: until}, nil
}

// remember keeps res, a rendered order, in the cache of responses: its own
// bytes when shared (no one changes res.Body from now on), else a copy, as
// res.Body is then the caller's, to change as it likes.
func (l *Ledger) remember(res *Result, shared bool) {
	body := res.Body
	if !shared {
		body = bytes.Clone(body)
	}
	l.cache.Put(res.Order, res.renderedAt, res.linksUntil, body)
}

// linksUntil is, for a response of o about to be rendered, the wall-clock
// time from which a render would produce other document links: the end of
// the current hour, since Options.DocumentURL changes its links at most
// hourly. Zero when the response has no document link. Read before the
// render, so that a render that crosses the hour is kept too short, never
// too long.
func (l *Ledger) linksUntil(o *order.Order) time.Time {
	if l.opts.DocumentURL == nil || !o.HasDocument() {
		return time.Time{}
	}
	return wallClock().Truncate(time.Hour).Add(time.Hour)
}

// wallClock is the real time, which document links are signed for and
// idempotency keys are kept by (the store's clock may be a sandbox's); a
// variable so tests can move it.
var wallClock = time.Now

func jsonResult(status int, v any) (*Result, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fault.Internalf(err, "encode result")
	}
	return &Result{Status: status, Body: body}, nil
}

// checkLimit refuses a job's batch limit under one, which would do nothing
// (or, in a loop that runs until a batch comes back short, never end).
func checkLimit(limit int) error {
	if limit < 1 {
		return fault.Invalidf("limit", "must be at least 1")
	}
	return nil
}

// AuthorizationTTL is the lifetime of newly minted authorization tokens.
func (l *Ledger) AuthorizationTTL() time.Duration { return l.opts.AuthorizationTTL }

// DefaultNotificationRetention is how long the delivery log keeps a done
// notification by default: as long as a merchant may reasonably look into
// a delivery, well past the schedule's last attempt (14.5 hours).
const DefaultNotificationRetention = 30 * 24 * time.Hour

// SweepNotifications removes from the delivery log the delivered and
// failed notifications, with their attempts, created longer than the
// retention (Options.NotificationRetention) ago, oldest first and at most
// limit (at least 1) per transaction, until none is left or ctx ends; it
// never removes a pending one. It reports how many it removed. Each
// transaction removes whole messages, so a crash leaves none half removed,
// and it runs safely beside traffic, the deliverer and sweeps of other
// replicas (a store removes each message once).
//
// A first sweep of a store that holds millions of old notifications runs for
// as long as they take: a caller that runs other jobs after it sweeps with
// SweepNotificationsOnce instead, a transaction at a time, between them.
func (l *Ledger) SweepNotifications(ctx context.Context, limit int) (int, error) {
	return l.sweep(ctx, "notification retention sweep", limit, l.deleteDoneOutbox)
}

// SweepNotificationsOnce is one transaction of SweepNotifications: it removes
// up to limit (at least 1) notifications past their retention, and reports
// how many, and whether more may be left (it removed limit).
func (l *Ledger) SweepNotificationsOnce(ctx context.Context, limit int) (removed int, more bool, err error) {
	return l.sweepOnce(ctx, limit, l.deleteDoneOutbox)
}

func (l *Ledger) deleteDoneOutbox(tx storage.Tx, limit int) (int, error) {
	return tx.DeleteDoneOutbox(tx.Now().Add(-l.opts.NotificationRetention), limit)
}

// DefaultAuthorizationRetention is how long an authorization token is kept
// past its expiry by default: a used token answers a create-order sent
// again (without its Idempotency-Key, or after the key's 24 h) "used",
// naming the order it made, and an expired one "expired", for a month
// rather than "not found".
const DefaultAuthorizationRetention = 30 * 24 * time.Hour

// SweepAuthorizations removes the authorization tokens whose expiry is
// longer than the retention (Options.AuthorizationRetention) ago on the
// store's clock, used, expired and deleted alike, earliest first and at
// most limit (at least 1) per transaction, until none is left or ctx ends,
// and reports how many it removed. A removed token answers as one never
// minted (404 authorization_token_not_found), and its id may be put again;
// the orders and customer tokens made from it keep their own copy of what
// it approved. It runs safely beside traffic and sweeps of other replicas
// (a store removes each token once).
func (l *Ledger) SweepAuthorizations(ctx context.Context, limit int) (int, error) {
	return l.sweep(ctx, "authorization token retention sweep", limit, l.deleteExpiredAuthorizations)
}

// SweepAuthorizationsOnce is one transaction of SweepAuthorizations: it
// removes up to limit (at least 1) tokens past their retention, and reports
// how many, and whether more may be left (it removed limit).
func (l *Ledger) SweepAuthorizationsOnce(ctx context.Context, limit int) (removed int, more bool, err error) {
	return l.sweepOnce(ctx, limit, l.deleteExpiredAuthorizations)
}

func (l *Ledger) deleteExpiredAuthorizations(tx storage.Tx, limit int) (int, error) {
	return tx.DeleteAuthorizationsExpiredBefore(tx.Now().Add(-l.opts.AuthorizationRetention), limit)
}

// SweepIdempotency removes idempotency records whose retention has passed,
// at most limit (at least 1) per transaction, until none is left or ctx ends. It reports
// how many it removed. Safe to run concurrently with traffic.
func (l *Ledger) SweepIdempotency(ctx context.Context, limit int) (int, error) {
	return l.sweep(ctx, "idempotency sweep", limit, deleteExpiredIdempotency)
}

// SweepIdempotencyOnce is one transaction of SweepIdempotency: it removes up
// to limit (at least 1) records, and reports how many, and whether more may
// be left (it removed limit).
func (l *Ledger) SweepIdempotencyOnce(ctx context.Context, limit int) (removed int, more bool, err error) {
	return l.sweepOnce(ctx, limit, deleteExpiredIdempotency)
}

func deleteExpiredIdempotency(tx storage.Tx, limit int) (int, error) {
	return tx.DeleteExpiredIdempotency(wallClock(), limit)
}

// sweep runs del, which removes at most limit records, one transaction at a
// time until a transaction removes fewer (none left) or ctx ends, and
// reports how many were removed in all. Its error names the sweep (job) and
// what it removed before it. A ctx that ended between two transactions is
// the error of one that ended in a transaction (storage.WaitEnded:
// store_unavailable, errors.Is finding the context's error), as the next
// transaction of ExpireOrders or RunTasks gives, not a bare context error
// of kind internal that says nothing of which job stopped.
func (l *Ledger) sweep(ctx context.Context, job string, limit int, del func(storage.Tx, int) (int, error)) (int, error) {
	total := 0
	for {
		if ctx.Err() != nil {
			return total, fmt.Errorf("%s, after removing %d: %w", job, total, storage.WaitEnded(ctx, nil))
		}
		n, more, err := l.sweepOnce(ctx, limit, del)
		total += n
		if err != nil {
			return total, fmt.Errorf("%s, after removing %d: %w", job, total, err)
		}
		if !more {
			return total, nil
		}
	}
}

// sweepOnce runs del in one transaction.
func (l *Ledger) sweepOnce(ctx context.Context, limit int, del func(storage.Tx, int) (int, error)) (int, bool, error) {
	if err := checkLimit(limit); err != nil {
		return 0, false, err
	}
	n := 0
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		var err error
		n, err = del(tx, limit)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return n, n >= limit, nil
}
