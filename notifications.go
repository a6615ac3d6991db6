package kassa

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// Envelope is the JSON body of every notification. ID is the event id: the
// same on every delivery attempt of one event, so receivers deduplicate on it.
type Envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	CreatedAt  time.Time       `json:"createdAt"`
	MerchantID string          `json:"merchantId"`
	Data       json.RawMessage `json:"data"`
}

// OrderEventData is the data of "order.<event type>" notifications.
type OrderEventData struct {
	OrderID   string       `json:"orderId"`
	EventID   string       `json:"eventId"`
	LedgerID  string       `json:"ledgerId,omitempty"`
	EventType string       `json:"eventType"`
	Amount    money.Record `json:"amount"`
}

// notifier writes a transaction's notifications for one merchant, reading
// the merchant's settings once. Notifications are recorded only while the
// merchant has a webhook URL and wants the topic; they are written in the
// transaction of the change they announce (the outbox), so a change and its
// notification commit or roll back together.
type notifier struct {
	l        *Ledger
	tx       storage.Tx
	merchant *storage.Merchant
}

func (l *Ledger) notifier(tx storage.Tx, merchantID string) (*notifier, error) {
	m, err := tx.GetMerchant(merchantID)
	if err != nil {
		return nil, err
	}
	return &notifier{l: l, tx: tx, merchant: m}, nil
}

func (n *notifier) send(topic, orderID string, data any) error {
	if n.merchant.WebhookURL == "" || !notify.Wants(n.merchant.WebhookEvents, topic) {
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fault.Internalf(err, "encode notification data")
	}
	now := n.tx.Now()
	id := n.l.opts.IDs.NewID("event")
	body, err := json.Marshal(Envelope{ID: id, Type: topic, CreatedAt: now, MerchantID: n.merchant.ID, Data: raw})
	if err != nil {
		return fault.Internalf(err, "encode notification")
	}
	return n.tx.AddOutbox(&storage.OutboxMessage{ID: id, MerchantID: n.merchant.ID, Topic: topic, OrderID: orderID,
		Payload: body, CreatedAt: now, NextAttempt: now})
}

// orderChanged announces what an operation did to an order: every event it
// appended, and an acknowledgement request when the order newly awaits one.
func (n *notifier) orderChanged(before, after *order.Order) error {
	from := 0
	if before != nil {
		from = len(before.Events)
	}
	for _, e := range after.Events[from:] {
		if err := n.send("order."+string(e.Type), after.ID, OrderEventData{OrderID: after.ID, EventID: e.ID,
			LedgerID: e.LedgerID, EventType: string(e.Type), Amount: money.New(e.Amount, after.Currency).Record()}); err != nil {
			return err
		}
	}
	if after.Unacknowledged && (before == nil || !before.Unacknowledged) {
		if err := n.send(notify.TopicAcknowledgementRequired, after.ID, map[string]string{"orderId": after.ID}); err != nil {
			return err
		}
		return scheduleAckReminder(n.tx, after)
	}
	return nil
}

// WebhookSettings is a merchant's notification configuration as the API
// shows it. Secret is set only in the answer that made it.
type WebhookSettings struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Secret string   `json:"secret,omitempty"`
}

// SetWebhookRequest configures notifications. A new secret is made when the
// merchant had none or asks to rotate it; it is shown only in that answer.
type SetWebhookRequest struct {
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	RotateSecret bool     `json:"rotateSecret,omitempty"`
	// Secret, when set, is used instead of a new random one (the reference
	// server's --webhook-secret); at least 24 characters.
	Secret string `json:"-"`
	// Declared marks settings of the operator's configuration (the reference
	// server's --webhook-* flags), not the merchant's: they are applied only
	// when they differ from the declared settings last applied, so a restart
	// with the same configuration keeps what the merchant set since.
	Declared bool `json:"-"`
}

// Validate checks the settings on their own, without the store: what
// SetWebhook refuses before it reads anything, so that a configuration (the
// reference server's --webhook-* flags) can be refused before anything is
// written.
func (r SetWebhookRequest) Validate() error {
	if err := notify.ValidateURL(r.URL); err != nil {
		return err
	}
	if err := notify.ValidateSubscriptions(r.Events); err != nil {
		return err
	}
	if r.Secret != "" && len(r.Secret) < 24 {
		return fault.Invalidf("secret", "a webhook secret needs at least 24 characters")
	}
	return nil
}

// WebhookSecretOverlap is how long deliveries are signed with the replaced
// secret as well after a rotation: the time a merchant has to deploy the new
// one before its receiver starts refusing them.
const WebhookSecretOverlap = 24 * time.Hour

// SetWebhook stores the merchant's notification settings.
func (l *Ledger) SetWebhook(ctx context.Context, merchantID string, req SetWebhookRequest) (WebhookSettings, error) {
	if err := req.Validate(); err != nil {
		return WebhookSettings{}, err
	}
	var out WebhookSettings
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		m, err := tx.GetMerchant(merchantID)
		if err != nil {
			return err
		}
		events := slices.Compact(slices.Sorted(slices.Values(req.Events)))
		if req.Declared {
			// Compared and recorded in this transaction, so replicas starting
			// together apply the same declaration once.
			declared := declaredFingerprint(m.ID, req.URL, events, req.Secret)
			if declared == m.WebhookDeclared {
				out = WebhookSettings{URL: m.WebhookURL, Events: nonNil(m.WebhookEvents)}
				return nil
			}
			m.WebhookDeclared = declared
		}
		m.WebhookURL, m.WebhookEvents = req.URL, events
		out = WebhookSettings{URL: m.WebhookURL, Events: nonNil(m.WebhookEvents)}
		secret := m.WebhookSecret
		switch {
		case req.Secret != "":
			secret = req.Secret
		case secret == "" || req.RotateSecret:
			secret = notify.NewSecret()
			out.Secret = secret
		}
		if m.WebhookSecret != "" && secret != m.WebhookSecret {
			// Real time, as the receiver's deploy is: a sandbox moving
			// its clock must not end the overlap.
			m.WebhookPreviousSecret, m.WebhookPreviousUntil = m.WebhookSecret, wallClock().Add(WebhookSecretOverlap)
		}
		m.WebhookSecret = secret
		return tx.PutMerchant(m)
	})
	return out, err
}

// declaredFingerprint names declared settings without keeping their secret in
// clear. The merchant id keeps two merchants declared alike from matching.
// Each field is prefixed with its length, so no two declarations hash the
// same bytes.
func declaredFingerprint(merchantID, url string, events []string, secret string) string {
	h := sha256.New()
	for _, f := range append([]string{merchantID, url, secret}, events...) {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Webhook reads the merchant's notification settings, without the secret.
func (l *Ledger) Webhook(ctx context.Context, merchantID string) (WebhookSettings, error) {
	m, err := l.Merchant(ctx, merchantID)
	if err != nil {
		return WebhookSettings{}, err
	}
	if m.WebhookURL == "" {
		return WebhookSettings{}, fault.NotFoundf("webhook_not_configured", "no notification URL is configured")
	}
	return WebhookSettings{URL: m.WebhookURL, Events: nonNil(m.WebhookEvents)}, nil
}

// DeleteWebhook stops notifications: nothing new is recorded, and messages
// already recorded fail at their next attempt. The secret is kept, so a
// merchant that configures a URL again keeps verifying with it.
func (l *Ledger) DeleteWebhook(ctx context.Context, merchantID string) error {
	return l.store.Update(ctx, func(tx storage.Tx) error {
		m, err := tx.GetMerchant(merchantID)
		if err != nil {
			return err
		}
		if m.WebhookURL == "" {
			return fault.NotFoundf("webhook_not_configured", "no notification URL is configured")
		}
		m.WebhookURL, m.WebhookEvents = "", nil
		return tx.PutMerchant(m)
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Notification is one message of the delivery log as the API shows it.
type Notification struct {
	ID            string                    `json:"id"`
	Type          string                    `json:"type"`
	OrderID       string                    `json:"orderId,omitempty"`
	CreatedAt     time.Time                 `json:"createdAt"`
	Status        string                    `json:"status"` // pending, delivered or failed
	Attempts      int                       `json:"attempts"`
	NextAttemptAt *time.Time                `json:"nextAttemptAt,omitempty"`
	LastError     string                    `json:"lastError,omitempty"`
	Log           []storage.DeliveryAttempt `json:"deliveries"`
	// Payload is the exact body delivered (and signed).
	Payload json.RawMessage `json:"payload"`
}

func notificationOf(m *storage.OutboxMessage) Notification {
	n := Notification{ID: m.ID, Type: m.Topic, OrderID: m.OrderID, CreatedAt: m.CreatedAt, Attempts: m.Attempts,
		LastError: m.LastError, Payload: m.Payload, Status: "pending"}
	switch {
	case m.Delivered:
		n.Status = "delivered"
	case m.Failed:
		n.Status = "failed"
	default:
		next := m.NextAttempt
		n.NextAttemptAt = &next
	}
	// In UTC, as every other time: attempts recorded before their times
	// were stored in UTC carry the zone the server ran in (TZ).
	n.Log = make([]storage.DeliveryAttempt, len(m.Log))
	for i, a := range m.Log {
		a.At = a.At.UTC()
		n.Log[i] = a
	}
	return n
}

// NotificationPage is one page of the delivery log.
type NotificationPage struct {
	Notifications []Notification `json:"notifications"`
	NextFromID    string         `json:"nextFromId,omitempty"`
}

// Notification page sizes.
const (
	DefaultNotificationPage = 100
	MaxNotificationPage     = 1000
)

// ListNotifications pages the merchant's delivery log, newest first.
func (l *Ledger) ListNotifications(ctx context.Context, merchantID, fromID string, size int) (NotificationPage, error) {
	if size == 0 {
		size = DefaultNotificationPage
	}
	if size < 1 || size > MaxNotificationPage {
		return NotificationPage{}, fault.Invalidf("size", "must be 1 to %d", MaxNotificationPage)
	}
	page := NotificationPage{Notifications: []Notification{}}
	// A cursor pages from its position, whether its notification is still
	// there or the retention sweep has removed it; a bare id must name one.
	fromID, created := openLogCursor(fromID)
	err := l.store.View(ctx, func(tx storage.Tx) error {
		ms, next, err := tx.ListOutbox(merchantID, fromID, created, size)
		if err != nil {
			return err
		}
		for _, m := range ms {
			page.Notifications = append(page.Notifications, notificationOf(m))
		}
		if next != "" {
			last := ms[len(ms)-1]
			page.NextFromID = sealLogCursor(last.ID, last.CreatedAt)
		}
		return nil
	})
	return page, listFrom(err, fromID)
}

// The delivery log's nextFromId is the last notification's position, its
// creation time and id, sealed as order-list cursors are: the next page
// starts after that position even once the retention sweep has removed the
// notification, so a client paging the log as old ones are swept goes on.
// A bare notification id still pages (from that notification, 400 when it
// names none).
func sealLogCursor(id string, created time.Time) string {
	return sealCursor(id + "@" + strconv.FormatInt(created.UnixNano(), 36))
}

// openLogCursor reads a sealed cursor's position; a bare id comes back with
// a zero time. A position whose id is no text a store holds (invalid UTF-8,
// NUL) is none the server handed out: the seal is a checksum, not a secret,
// and PostgreSQL would refuse the id where bbolt pages from it, so it is
// read as a bare id, which names no notification.
func openLogCursor(fromID string) (id string, created time.Time) {
	pos, ok := openCursor(fromID)
	if !ok {
		return fromID, time.Time{}
	}
	id, at, ok := strings.Cut(pos, "@")
	n, err := strconv.ParseInt(at, 36, 64)
	if !ok || err != nil || n == 0 || !order.Storable(id) {
		return fromID, time.Time{}
	}
	return id, time.Unix(0, n)
}

// listFrom makes a list's unknown fromId the caller's mistake (400 naming
// it), not a missing resource: a page cannot start after an item the list
// does not hold.
func listFrom(err error, fromID string) error {
	if err != nil && fromID != "" && fault.Is(err, fault.NotFound) {
		return fault.Invalidf("fromId", "is not the id of an item on this list")
	}
	return err
}

// GetNotification reads one message of the merchant's delivery log.
func (l *Ledger) GetNotification(ctx context.Context, merchantID, id string) (Notification, error) {
	var n Notification
	err := l.store.View(ctx, func(tx storage.Tx) error {
		m, err := tx.GetOutbox(merchantID, id)
		if err != nil {
			return err
		}
		n = notificationOf(m)
		return nil
	})
	return n, err
}

// RedeliverNotification queues a failed or delivered message for one more
// delivery now, with the same event id and body.
func (l *Ledger) RedeliverNotification(ctx context.Context, merchantID, id string) (Notification, error) {
	var n Notification
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		m, err := tx.GetOutbox(merchantID, id)
		if err != nil {
			return err
		}
		if !m.Done() {
			return fault.Conflictf("notification_pending", "the notification is still being delivered")
		}
		m.Delivered, m.Failed, m.Attempts, m.NextAttempt = false, false, 0, tx.Now()
		m.Claim, m.LeaseUntil = "", time.Time{} // a late record of an earlier claim must not close the new series
		if err := tx.UpdateOutbox(m); err != nil {
			return err
		}
		n = notificationOf(m)
		return nil
	})
	return n, err
}
