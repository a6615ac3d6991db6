package kassa

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// Topics written by the order use cases (see package notify for all).
const (
	TopicAcknowledgementRequired = notify.TopicAcknowledgementRequired
	TopicDocumentResent          = notify.TopicDocumentResent
)

// mutate is the shape of every order operation: one transaction that loads
// the order, applies the rule, saves it with its version checked, and
// answers with the order as it now is.
func (l *Ledger) mutate(ctx context.Context, call Call, op, orderID string, targets []string, req any,
	apply func(tx storage.Tx, o *order.Order, env order.Env) error) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	res, err := l.runOrder(ctx, call, request{op, append([]string{orderID}, targets...), req}, orderID, func(tx storage.Tx) (*Result, error) {
		o, err := tx.GetOrder(call.MerchantID, orderID)
		if err != nil {
			return nil, err
		}
		// The merchant is read before the rule runs: a rule may take a
		// document number, whose row lock is held until commit, so the
		// work after it is kept short.
		n, err := l.notifier(tx, call.MerchantID)
		if err != nil {
			return nil, err
		}
		env := l.env(tx, call.MerchantID)
		env.Supplier = n.merchant.Name
		before := o.Clone()
		if err := apply(tx, o, env); err != nil {
			return nil, err
		}
		// Captures, refunds and voids wait for the next settlement run.
		if err := tx.QueueSettlementItems(settlement.NewItems(before, o)); err != nil {
			return nil, err
		}
		if err := n.orderChanged(before, o); err != nil {
			return nil, err
		}
		if !o.ExpiresAt.Equal(before.ExpiresAt) {
			if err := scheduleExpiryReminder(tx, o); err != nil {
				return nil, err
			}
		}
		if err := tx.UpdateOrder(o); err != nil {
			return nil, err
		}
		return l.orderResult(o, env.Now)
	})
	if err == nil && !res.Replayed && res.Order != nil && !res.renderedAt.IsZero() {
		// Committed: the answer is also what a read of this version renders.
		l.remember(res, call.ReadOnlyBody)
	}
	return res, err
}

// bounded is the rule of an operation that adds to an order at the
// merchant's request (lines, sub-orders, events), refused once the order
// would pass the size limits (order.CheckSize). Refunds, cancels, voids and
// payments are not bounded: they never fail for an order's size.
func bounded(apply func(tx storage.Tx, o *order.Order, env order.Env) error) func(tx storage.Tx, o *order.Order, env order.Env) error {
	return func(tx storage.Tx, o *order.Order, env order.Env) error {
		if err := apply(tx, o, env); err != nil {
			return err
		}
		return o.CheckSize()
	}
}

// OrderJSON is the order's response body (GET /v1/orders/{id}) as of now.
// An unchanged order is served from the cache of rendered responses: the
// stored version is read in the same transaction, so a change made anywhere
// (another replica included) is never hidden. The bytes are the caller's
// own: a copy of the cached ones.
func (l *Ledger) OrderJSON(ctx context.Context, merchantID, orderID string) ([]byte, error) {
	body, shared, err := l.orderJSON(ctx, merchantID, orderID)
	if shared {
		body = bytes.Clone(body)
	}
	return body, err
}

// ServeOrderJSON is OrderJSON for a caller that only writes the body out:
// write gets it once the read is over, and for a cached order it is the
// cache's own copy, which write must not change. Without the per-request
// copy a GET allocates about half as much under a read-heavy load, and the
// garbage collector, whose cycles set the tail latency of reads, runs half
// as often.
func (l *Ledger) ServeOrderJSON(ctx context.Context, merchantID, orderID string, write func(body []byte)) error {
	body, _, err := l.orderJSON(ctx, merchantID, orderID)
	if err != nil {
		return err
	}
	write(body)
	return nil
}

// orderJSON reads the order's response body, reporting whether it is the
// cache's copy (shared with every other reader, never to be changed).
func (l *Ledger) orderJSON(ctx context.Context, merchantID, orderID string) (body []byte, shared bool, err error) {
	err = l.store.View(ctx, func(tx storage.Tx) error {
		body, shared = nil, false
		now := tx.Now()
		if l.cache != nil {
			v, err := tx.OrderVersion(merchantID, orderID)
			if err != nil {
				return err
			}
			if b, ok := l.cache.Get(merchantID, orderID, v, now, wallClock()); ok {
				body, shared = b, true
				return nil
			}
		}
		o, err := tx.GetOrder(merchantID, orderID)
		if err != nil {
			return err
		}
		res, err := l.orderResult(o, now)
		if err != nil {
			return err
		}
		// The rendered bytes go to the cache as they are and are shared
		// from here on, as a hit's are: OrderJSON copies them, and
		// ServeOrderJSON writes them out without a copy.
		l.remember(res, true)
		body, shared = res.Body, true
		return nil
	})
	return body, shared, err
}

// GetOrder reads an order of the merchant. It also returns the time the read
// was made at, which the order's statuses and actions are computed for.
func (l *Ledger) GetOrder(ctx context.Context, merchantID, orderID string) (*order.Order, time.Time, error) {
	var o *order.Order
	var now time.Time
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		now = tx.Now()
		o, err = tx.GetOrder(merchantID, orderID)
		return err
	})
	return o, now, err
}

// checkEnums names every unknown status or category of q, by the query
// parameter that carries it over HTTP.
func checkEnums(q storage.OrderQuery) error {
	var f fault.Fields
	for _, p := range []struct {
		name     string
		statuses []order.Status
	}{{"status", q.Status}, {"statusAnd", q.StatusAnd}, {"statusNot", q.StatusNot}} {
		for _, s := range p.statuses {
			if !order.ValidStatus(string(s)) {
				f.Add(p.name, "unknown order status %q", s)
			}
		}
	}
	for _, c := range q.Categories {
		if !order.ValidCategory(c) {
			f.Add("paymentMethodCategory", "unknown payment method category %q", c)
		}
	}
	return f.Err()
}

// ListOrders lists the merchant's orders, newest first.
func (l *Ledger) ListOrders(ctx context.Context, merchantID string, q storage.OrderQuery) (storage.OrderPage, time.Time, error) {
	var page storage.OrderPage
	var now time.Time
	if q.Size < 0 || q.Size > storage.MaxPageSize {
		return page, now, fault.Invalidf("size", "must be between 1 and %d", storage.MaxPageSize)
	}
	if err := checkEnums(q); err != nil {
		return page, now, err // an unknown value would silently match nothing
	}
	if q.Cursor != "" {
		pos, ok := openCursor(q.Cursor)
		if !ok {
			return page, now, fault.Invalidf("cursor", "is not a cursor from this server (damaged, or from before an upgrade)")
		}
		q.Cursor = pos
	}
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		now = tx.Now()
		page, err = tx.ListOrders(merchantID, q)
		return err
	})
	page.NextCursor = sealCursor(page.NextCursor)
	return page, now, err
}

// Order-list cursors are the store's position with a checksum, so that a
// cursor damaged on its way (cut short, re-cased) is refused rather than
// read as another position, or as the end of the list. Not a secret: a
// made-up position only moves a merchant within its own orders.
func sealCursor(pos string) string {
	if pos == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(pos))
	return pos + "." + base64.RawURLEncoding.EncodeToString(sum[:6])
}

func openCursor(cursor string) (string, bool) {
	i := strings.LastIndexByte(cursor, '.')
	if i <= 0 || sealCursor(cursor[:i]) != cursor {
		return "", false
	}
	return cursor[:i], true
}

// ValidCursor reports whether cursor is an undamaged NextCursor of ListOrders.
func ValidCursor(cursor string) bool {
	_, ok := openCursor(cursor)
	return ok
}

// EditOrder replaces the uncaptured lines (POST /v1/orders/{id}).
func (l *Ledger) EditOrder(ctx context.Context, call Call, orderID string, req *order.EditRequest) (*Result, error) {
	return l.mutate(ctx, call, "editOrder", orderID, nil, req, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.Edit(req, env)
	}))
}

// CancelOrder releases what is uncaptured (DELETE /v1/orders/{id}).
func (l *Ledger) CancelOrder(ctx context.Context, call Call, orderID string) (*Result, error) {
	return l.mutate(ctx, call, "cancelOrder", orderID, nil, nil, func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.Cancel(env)
	})
}

// CancelLedger cancels the uncaptured sub-order or voids a captured invoice
// (DELETE /v1/orders/{id}/{ledgerId}).
func (l *Ledger) CancelLedger(ctx context.Context, call Call, orderID, ledgerID string) (*Result, error) {
	return l.mutate(ctx, call, "cancelLedger", orderID, []string{ledgerID}, nil, func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.CancelLedger(ledgerID, env)
	})
}

// Acknowledge confirms an order that awaits acknowledgement.
func (l *Ledger) Acknowledge(ctx context.Context, call Call, orderID string) (*Result, error) {
	return l.mutate(ctx, call, "acknowledge", orderID, nil, nil, func(tx storage.Tx, o *order.Order, env order.Env) error {
		if err := o.Acknowledge(env); err != nil {
			return err
		}
		return unblockAutoCapture(tx, o, env)
	})
}

// Capture captures the remainder, or the given lines as the final capture.
func (l *Ledger) Capture(ctx context.Context, call Call, orderID string, req *capture.FullRequest) (*Result, error) {
	var body any = req
	if req == nil {
		// "Everything", not a missing request; fingerprinted as the empty
		// request it means, which the HTTP server passes for a body left
		// out, so a retry sending either is the same request.
		body = &capture.FullRequest{}
	}
	return l.mutate(ctx, call, "capture", orderID, nil, body, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		_, err := capture.Full(o, req, env)
		return err
	}))
}

// PartialCapture captures the given lines.
func (l *Ledger) PartialCapture(ctx context.Context, call Call, orderID string, req *capture.PartialRequest) (*Result, error) {
	return l.mutate(ctx, call, "partialCapture", orderID, nil, req, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		_, err := capture.Partial(o, req, env)
		return err
	}))
}

// Refund refunds what remains refundable on a capture.
func (l *Ledger) Refund(ctx context.Context, call Call, orderID, ledgerID string, req *refund.FullRequest) (*Result, error) {
	var body any = req
	if req == nil {
		body = &refund.FullRequest{} // as a capture's
	}
	return l.mutate(ctx, call, "refund", orderID, []string{ledgerID}, body, func(_ storage.Tx, o *order.Order, env order.Env) error {
		_, err := refund.Full(o, ledgerID, req, env)
		return err
	})
}

// PartialRefund refunds the given lines of a capture.
func (l *Ledger) PartialRefund(ctx context.Context, call Call, orderID, ledgerID string, req *refund.PartialRequest) (*Result, error) {
	return l.mutate(ctx, call, "partialRefund", orderID, []string{ledgerID}, req, func(_ storage.Tx, o *order.Order, env order.Env) error {
		_, err := refund.Partial(o, ledgerID, req, env)
		return err
	})
}

// EditCustomer changes the buyer's contact and delivery details.
func (l *Ledger) EditCustomer(ctx context.Context, call Call, orderID string, req *order.EditCustomerRequest) (*Result, error) {
	return l.mutate(ctx, call, "editCustomer", orderID, nil, req, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.EditCustomer(req, env)
	}))
}

// EditPaymentMethod switches an order to advance invoice.
func (l *Ledger) EditPaymentMethod(ctx context.Context, call Call, orderID string, req *order.EditPaymentMethodRequest) (*Result, error) {
	return l.mutate(ctx, call, "editPaymentMethod", orderID, nil, req, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.EditPaymentMethod(req, env)
	}))
}

// ExtendExpiry moves the order's expiry date.
func (l *Ledger) ExtendExpiry(ctx context.Context, call Call, orderID string) (*Result, error) {
	return l.mutate(ctx, call, "extendExpiry", orderID, nil, nil, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.ExtendExpiry(env)
	}))
}

// SetReference sets the merchant's order reference.
func (l *Ledger) SetReference(ctx context.Context, call Call, orderID string, req *order.ReferenceRequest) (*Result, error) {
	return l.mutate(ctx, call, "setReference", orderID, nil, req, bounded(func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.SetReference(req, env)
	}))
}

// Recourse hands an unpaid invoice back to the merchant.
func (l *Ledger) Recourse(ctx context.Context, call Call, orderID, ledgerID string, req *order.RecourseRequest) (*Result, error) {
	return l.mutate(ctx, call, "recourse", orderID, []string{ledgerID}, req, func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.Recourse(ledgerID, req, env)
	})
}

// ResendDocument queues the document of a sub-order for delivery to the buyer again.
func (l *Ledger) ResendDocument(ctx context.Context, call Call, orderID, ledgerID string) (*Result, error) {
	return l.mutate(ctx, call, "resendDocument", orderID, []string{ledgerID}, nil, func(tx storage.Tx, o *order.Order, env order.Env) error {
		led, err := o.Resend(ledgerID, env)
		if err != nil {
			return err
		}
		n, err := l.notifier(tx, o.MerchantID)
		if err != nil {
			return err
		}
		return n.send(TopicDocumentResent, o.ID, map[string]string{"orderId": o.ID,
			"ledgerId": led.ID, "documentReference": led.DocumentReference})
	})
}

// RegisterPayment records a buyer's payment on a capture (sandbox simulation
// and payment reconciliation).
func (l *Ledger) RegisterPayment(ctx context.Context, call Call, orderID, ledgerID string, amount int64) (*Result, error) {
	return l.mutate(ctx, call, "registerPayment", orderID, []string{ledgerID}, amount, func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.RegisterPayment(ledgerID, amount, env)
	})
}

// MarkLedger sets a buyer-side status (reminder, debt collection, delivery failure).
func (l *Ledger) MarkLedger(ctx context.Context, call Call, orderID, ledgerID string, s order.SubStatus) (*Result, error) {
	return l.mutate(ctx, call, "markLedger", orderID, []string{ledgerID}, s, func(_ storage.Tx, o *order.Order, env order.Env) error {
		return o.MarkLedger(ledgerID, s, env)
	})
}

// ResolveHold ends a risk review of an order on hold.
func (l *Ledger) ResolveHold(ctx context.Context, call Call, orderID string, approve bool) (*Result, error) {
	return l.mutate(ctx, call, "resolveHold", orderID, nil, approve, func(tx storage.Tx, o *order.Order, env order.Env) error {
		if err := o.ResolveHold(approve, env); err != nil {
			return err
		}
		return unblockAutoCapture(tx, o, env)
	})
}

// ExpiryBatch is the most orders one expiry transaction marks. An order may
// hold thousands of lines (megabytes once decoded), and each one in the
// batch is decoded, re-encoded and written while the transaction holds the
// store's writer, which every other mutation waits for on bbolt.
const ExpiryBatch = 50

// ExpireOrders marks up to limit (at least 1) orders whose expiry has passed (the expiry
// job), in transactions of at most ExpiryBatch orders each; what one
// committed stays marked if a later one fails. It reports how many it
// marked. Safe to run concurrently with traffic:
// each order is updated with its version checked.
func (l *Ledger) ExpireOrders(ctx context.Context, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	total := 0
	for total < limit {
		want := min(ExpiryBatch, limit-total)
		n, given := 0, 0
		err := l.store.Update(ctx, func(tx storage.Tx) error {
			n = 0
			due, err := tx.OrdersExpiringBefore(tx.Now(), want)
			if err != nil {
				return err
			}
			given = len(due)
			for _, o := range due {
				if o.MarkExpired(l.env(tx, o.MerchantID)) {
					if err := tx.UpdateOrder(o); err != nil {
						return err
					}
					n++
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		// A short batch was the last due; one that changed nothing would
		// be handed out again, so the run ends rather than loop on it.
		if given < want || n == 0 {
			break
		}
	}
	return total, nil
}

// PaymentStatus is the spec's PaymentStatusResponse.
type PaymentStatus struct {
	Note string `json:"note"`
	// PaymentMethod is the method selected; nil (left out) for a session
	// the buyer has not completed, which has none yet.
	PaymentMethod *order.PaymentMethod `json:"paymentMethod,omitempty"`
	// Status summarises the order's payment: pending, authorized, partiallyCaptured,
	// captured, partiallyRefunded, refunded, partiallyPaid, paid, cancelled, expired or denied.
	Status string `json:"status"`
}

var paymentStatuses = []string{"pending", "authorized", "partiallyCaptured", "captured", "partiallyRefunded",
	"refunded", "partiallyPaid", "paid", "cancelled", "expired", "denied"}

// PaymentStatuses are the values of PaymentStatus.Status (the spec does not
// show its type); the OpenAPI document lists them as its enum. Each call
// returns a new slice, so a caller changing it changes nothing here.
func PaymentStatuses() []string { return slices.Clone(paymentStatuses) }

// PaymentStatusOf derives the payment status of an order at now.
func PaymentStatusOf(o *order.Order, now time.Time) PaymentStatus {
	st := o.Statuses(now)
	has := func(s order.Status) bool { return slices.Contains(st, s) }
	pm := o.PaymentMethod
	ps := PaymentStatus{PaymentMethod: &pm}
	switch {
	case has(order.StatusFraudDeny):
		ps.Status, ps.Note = "denied", "the buyer's authorization was denied"
	case has(order.StatusFullyPaid):
		ps.Status, ps.Note = "paid", "the buyer has paid every invoice"
	case has(order.StatusFullyRefunded):
		ps.Status, ps.Note = "refunded", "everything captured was refunded"
	case has(order.StatusPartiallyPaid):
		ps.Status, ps.Note = "partiallyPaid", "the buyer has paid in part"
	case has(order.StatusPartiallyRefunded):
		ps.Status, ps.Note = "partiallyRefunded", "part of what was captured was refunded"
	case has(order.StatusFullyCaptured):
		ps.Status, ps.Note = "captured", "every line was captured"
	case has(order.StatusPartiallyCaptured):
		ps.Status, ps.Note = "partiallyCaptured", "some lines were captured"
	case has(order.StatusExpired):
		ps.Status, ps.Note = "expired", "the authorization expired before capture"
	case has(order.StatusCancelled):
		ps.Status, ps.Note = "cancelled", "the order was cancelled"
	case has(order.StatusOnHold):
		// A held order cannot be captured, so only a cancellation or the
		// expiry outranks the review.
		ps.Status, ps.Note = "pending", "the order awaits review"
	case has(order.StatusUnacknowledged) && !has(order.StatusReadyForCapture):
		// Last among the states: an order captured (and paid) before its
		// acknowledgement reports the money, not the acknowledgement.
		ps.Status, ps.Note = "pending", "the order awaits acknowledgement"
	default:
		ps.Status, ps.Note = "authorized", "the order is authorized and awaits capture"
	}
	return ps
}
