package kassa

import (
	"context"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// TaskAutoCapture is the task kind that captures an order at its autoCapture delay.
const TaskAutoCapture = "autoCapture"

// autoCaptureRetry is how long a due auto-capture waits while the order is
// blocked (awaiting acknowledgement or on hold) before it looks again.
const autoCaptureRetry = time.Minute

func scheduleAutoCapture(tx storage.Tx, o *order.Order) error {
	if o.AutoCapture == nil || !o.AutoCapture.Enabled {
		return nil
	}
	return tx.ScheduleTask(&storage.Task{ID: "autocapture-" + o.ID, Kind: TaskAutoCapture, MerchantID: o.MerchantID,
		OrderID: o.ID, DueAt: o.CreatedAt.Add(time.Duration(o.AutoCapture.DelayMinutes) * time.Minute)})
}

// RunAutoCapture captures the remainder of every order whose autoCapture
// delay has passed, one transaction per order, so it runs safely beside API
// traffic (a concurrent change simply wins or loses the version check) and
// resumes after a crash without capturing twice: the task is deleted in the
// same transaction as the capture. It reports how many orders it captured.
func (l *Ledger) RunAutoCapture(ctx context.Context, limit int) (int, error) {
	var due []*storage.Task
	if err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		due, err = tx.DueTasks(tx.Now(), limit)
		return err
	}); err != nil {
		return 0, err
	}
	captured := 0
	for _, task := range due {
		if task.Kind != TaskAutoCapture {
			continue
		}
		done := false
		err := l.store.Update(ctx, func(tx storage.Tx) error {
			done = false
			o, err := tx.GetOrder(task.MerchantID, task.OrderID)
			if err != nil {
				return tx.DeleteTask(task.ID)
			}
			env := l.env(tx, task.MerchantID)
			before := o.Clone()
			if _, err := o.Require(o.Uncaptured.ID, order.ActionCapture, env); err != nil {
				if o.HasStatus(order.StatusUncaptured, env.Now) && !o.Expired(env.Now) && o.Hold != order.HoldFraudDeny {
					// Still open but blocked (acknowledgement, hold): look again later.
					task.DueAt, task.Attempts = env.Now.Add(autoCaptureRetry), task.Attempts+1
					return tx.ScheduleTask(task)
				}
				return tx.DeleteTask(task.ID) // closed: nothing to capture
			}
			if _, err := capture.Full(o, nil, env); err != nil {
				return tx.DeleteTask(task.ID)
			}
			if err := tx.QueueSettlementItems(settlement.NewItems(before, o)); err != nil {
				return err
			}
			if err := tx.UpdateOrder(o); err != nil {
				return err
			}
			done = true
			return tx.DeleteTask(task.ID)
		})
		if err != nil {
			return captured, err
		}
		if done {
			captured++
		}
	}
	return captured, nil
}
