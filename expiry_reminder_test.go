package kassa_test

import (
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
)

// TestExtendExpiryMovesTheExpiryReminder: the expiry reminder is due a set
// time before the order's expiry, so an extension moves it with the expiry
// rather than reminding the merchant of the old date.
func TestExtendExpiryMovesTheExpiryReminder(t *testing.T) {
	now := time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func() time.Time { return now }, kassa.Options{})
	o := f.order(t, "t1", 10000)
	res, err := f.ledger.ExtendExpiry(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Order.ExpiresAt.After(o.ExpiresAt) {
		t.Fatalf("expiry %v not extended past %v", res.Order.ExpiresAt, o.ExpiresAt)
	}
	var reminders []time.Time
	if err := f.store.View(f.ctx, func(tx storage.Tx) error {
		tasks, err := tx.DueTasks(res.Order.ExpiresAt.Add(time.Hour), 100)
		for _, task := range tasks {
			if task.Kind == kassa.TaskExpiryReminder && task.OrderID == o.ID {
				reminders = append(reminders, task.DueAt)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := res.Order.ExpiresAt.Add(-kassa.ExpiryReminderBefore); len(reminders) != 1 || !reminders[0].Equal(want) {
		t.Fatalf("expiry reminders due %v, want one due %v", reminders, want)
	}
}
