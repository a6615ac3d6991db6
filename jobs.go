package kassa

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Kinds of scheduled task.
const (
	// TaskAutoCapture captures an order at its autoCapture delay.
	TaskAutoCapture = "autoCapture"
	// TaskTokenExpiry marks an unused authorization token expired.
	TaskTokenExpiry = "tokenExpiry"
	// TaskAckReminder reminds a merchant of an order still awaiting acknowledgement.
	TaskAckReminder = "ackReminder"
	// TaskExpiryReminder reminds a merchant of uncaptured lines before the order expires.
	TaskExpiryReminder = "expiryReminder"
)

// Reminder timing.
const (
	// AckReminderAfter is how long an order awaits acknowledgement before the reminder.
	AckReminderAfter = time.Hour
	// ExpiryReminderBefore is how long before an order's expiry the reminder goes out.
	ExpiryReminderBefore = 24 * time.Hour
)

// A task that cannot be done yet looks again after taskRetry, doubling each
// time up to taskRetryMax: an auto-capture order can stay blocked (awaiting
// acknowledgement, on hold) until it expires, weeks of a look a minute, and
// a task that fails may fail for as long. What unblocks an auto-capture
// (acknowledge, a hold approved) brings the capture forward itself
// (unblockAutoCapture), so the wait costs nothing then.
const (
	taskRetry    = time.Minute
	taskRetryMax = time.Hour
)

func taskRetryAfter(attempts int) time.Duration {
	return min(taskRetry<<min(attempts, 10), taskRetryMax)
}

// autoCaptureDue is when an order's auto-capture falls due: its delay after
// creation (the zero time for an order without one).
func autoCaptureDue(o *order.Order) time.Time {
	if o.AutoCapture == nil {
		return time.Time{}
	}
	return o.CreatedAt.Add(time.Duration(o.AutoCapture.DelayMinutes) * time.Minute)
}

// scheduleAutoCapture (re)schedules the order's auto-capture task for at;
// tasks are replaced by id.
func scheduleAutoCapture(tx storage.Tx, o *order.Order, at time.Time) error {
	if o.AutoCapture == nil || !o.AutoCapture.Enabled {
		return nil
	}
	return tx.ScheduleTask(&storage.Task{ID: "autocapture-" + o.ID, Kind: TaskAutoCapture, MerchantID: o.MerchantID,
		OrderID: o.ID, DueAt: at})
}

// unblockAutoCapture runs after an operation that may have unblocked an
// auto-capture order: if its delay has passed and it can be captured now,
// the auto-capture is due at once instead of at its backed-off retry.
func unblockAutoCapture(tx storage.Tx, o *order.Order, env order.Env) error {
	if o.AutoCapture == nil || !o.AutoCapture.Enabled || autoCaptureDue(o).After(env.Now) {
		return nil // none, or the task scheduled at creation is still ahead
	}
	if _, err := o.Require(o.Uncaptured.ID, order.ActionCapture, env); err != nil {
		return nil
	}
	return scheduleAutoCapture(tx, o, env.Now)
}

func scheduleAckReminder(tx storage.Tx, o *order.Order) error {
	return tx.ScheduleTask(&storage.Task{ID: "ackreminder-" + o.ID, Kind: TaskAckReminder, MerchantID: o.MerchantID,
		OrderID: o.ID, DueAt: tx.Now().Add(AckReminderAfter)})
}

// scheduleExpiryReminder (re)schedules the reminder for the order's current
// expiry; an extension moves it, since tasks are replaced by id.
func scheduleExpiryReminder(tx storage.Tx, o *order.Order) error {
	if o.ExpiresAt.IsZero() {
		return nil
	}
	return tx.ScheduleTask(&storage.Task{ID: "expiryreminder-" + o.ID, Kind: TaskExpiryReminder, MerchantID: o.MerchantID,
		OrderID: o.ID, DueAt: o.ExpiresAt.Add(-ExpiryReminderBefore)})
}

func scheduleTokenExpiry(tx storage.Tx, merchantID, tok string, at time.Time) error {
	return tx.ScheduleTask(&storage.Task{ID: "tokenexpiry-" + merchantID + "-" + tok, Kind: TaskTokenExpiry,
		MerchantID: merchantID, OrderID: tok, DueAt: at})
}

// TaskStats counts what one RunTasks did, by effect.
type TaskStats struct {
	AutoCaptured  int `json:"autoCaptured"`
	TokensExpired int `json:"tokensExpired"`
	RemindersSent int `json:"remindersSent"`
	Rescheduled   int `json:"rescheduled"`
	NothingToDo   int `json:"nothingToDo"`
	// Failed counts tasks that failed and were set aside to try again later
	// (RunTasks answers their errors as a *TasksSetAside).
	Failed         int `json:"failed"`
	TasksProcessed int `json:"tasksProcessed"`
}

// TasksSetAside is RunTasks' error when the only failures were tasks it set
// aside to try again later: the run itself went on, and TaskStats.Failed
// counts them. Any other error of RunTasks ended the run.
type TasksSetAside struct{ Failures []error }

// Error joins the failures' messages, one per line.
func (e *TasksSetAside) Error() string { return errors.Join(e.Failures...).Error() }

// Unwrap returns the failures, for errors.Is and errors.As.
func (e *TasksSetAside) Unwrap() []error { return e.Failures }

// RunTasks works through up to limit (at least 1) due tasks, earliest first. Each task is
// claimed, done and deleted (or rescheduled) in one transaction, so the job
// runs safely beside API traffic and on several replicas (a store hands a
// due task to one transaction at a time), and a crash either did all of a
// task or none of it: nothing is done twice.
//
// A task that fails (a record it cannot read, a bug it runs into) is set
// aside to try again after a growing delay, and the run goes on: the
// earliest task failing on every run would otherwise hold up every task of
// every merchant behind it. RunTasks then reports the failures as its
// error, beside the counts. A store that cannot be reached ends the run.
func (l *Ledger) RunTasks(ctx context.Context, limit int) (TaskStats, error) {
	var stats TaskStats
	if err := checkLimit(limit); err != nil {
		return stats, err
	}
	var failures []error
	failed := map[string]bool{}
	for range limit {
		var outcome taskOutcome
		var claimed *storage.Task
		again := false
		err := l.store.Update(ctx, func(tx storage.Tx) error {
			claimed, outcome, again = nil, outcomeNone, false
			due, err := tx.DueTasks(tx.Now(), 1)
			if err != nil || len(due) == 0 {
				return err
			}
			if failed[due[0].ID] {
				// Failed in this run and not set aside (another replica
				// held it then): leave it to the next run.
				again = true
				return nil
			}
			claimed = due[0]
			outcome, err = l.runTask(tx, due[0])
			return err
		})
		// A store that is out of reach, or a commit whose outcome it cannot
		// tell (a database crash lost the answer), is no fault of the task:
		// the run ends, and the next one does the task if it was not done,
		// rather than set it aside for a growing delay. Contention that
		// outlasted the store's retries (the task's order locked by a
		// change that goes on, a transaction left open) is the task's
		// own rows': ending the run would hold up every task behind it
		// for as long as the lock is held.
		storeOut := fault.Is(err, fault.Unavailable) && !errors.Is(err, storage.ErrContended)
		if err != nil && claimed != nil && ctx.Err() == nil && !storeOut && !fault.IsOutcomeUnknown(err) {
			if err := l.setTaskAside(ctx, claimed); err != nil {
				return stats, errors.Join(append(failures, err)...)
			}
			failed[claimed.ID] = true
			stats.Failed++
			stats.TasksProcessed++
			failures = append(failures, fmt.Errorf("task %s: %w", taskName(claimed), err))
			continue
		}
		if err != nil {
			return stats, errors.Join(append(failures, err)...)
		}
		if claimed == nil || again {
			break
		}
		stats.TasksProcessed++
		switch outcome {
		case outcomeCaptured:
			stats.AutoCaptured++
		case outcomeExpired:
			stats.TokensExpired++
		case outcomeReminded:
			stats.RemindersSent++
		case outcomeRescheduled:
			stats.Rescheduled++
		default:
			stats.NothingToDo++
		}
	}
	if len(failures) > 0 {
		return stats, &TasksSetAside{Failures: failures}
	}
	return stats, nil
}

// taskName is how a failure names task, which kassa serve logs: a token
// expiry's id and subject hold the authorization token, which shows as its
// fingerprint (as in the access log), never itself.
func taskName(task *storage.Task) string {
	if task.Kind == TaskTokenExpiry {
		fp := token.Fingerprint(task.OrderID)
		return strings.Replace(task.ID, task.OrderID, fp, 1) + " (" + task.Kind + ", authorization token " + fp + ")"
	}
	return task.ID + " (" + task.Kind + ", order " + task.OrderID + ")"
}

// setTaskAside makes a task that failed due again after a delay that grows
// with its attempts, if it is still the one that failed: one another
// replica has taken, done or moved meanwhile is left to it. It looks at the
// earliest due task it can claim, which is the failed one unless another
// replica holds that one now or an earlier one fell due; then nothing is
// set aside, and RunTasks stops when the failed task comes round again.
func (l *Ledger) setTaskAside(ctx context.Context, failed *storage.Task) error {
	return l.store.Update(ctx, func(tx storage.Tx) error {
		due, err := tx.DueTasks(tx.Now(), 1)
		if err != nil || len(due) == 0 {
			return err
		}
		t := due[0]
		if t.ID != failed.ID || !t.DueAt.Equal(failed.DueAt) || t.Attempts != failed.Attempts {
			return nil
		}
		t.DueAt, t.Attempts = tx.Now().Add(taskRetryAfter(t.Attempts)), t.Attempts+1
		return tx.ScheduleTask(t)
	})
}

type taskOutcome int

const (
	outcomeNone taskOutcome = iota
	outcomeCaptured
	outcomeExpired
	outcomeReminded
	outcomeRescheduled
)

func (l *Ledger) runTask(tx storage.Tx, task *storage.Task) (taskOutcome, error) {
	var outcome taskOutcome
	var err error
	switch task.Kind {
	case TaskAutoCapture:
		outcome, err = l.autoCapture(tx, task)
	case TaskTokenExpiry:
		outcome, err = expireToken(tx, task)
	case TaskAckReminder, TaskExpiryReminder:
		outcome, err = l.remind(tx, task)
	}
	if err != nil || outcome == outcomeRescheduled {
		return outcome, err
	}
	return outcome, tx.DeleteTask(task.ID) // done, or of a kind this version does not know
}

// RunAutoCapture runs the due scheduled tasks and reports how many orders it
// captured.
func (l *Ledger) RunAutoCapture(ctx context.Context, limit int) (int, error) {
	s, err := l.RunTasks(ctx, limit)
	return s.AutoCaptured, err
}

// autoCapture captures the remainder of an order whose delay has passed and
// queues the capture for settlement.
func (l *Ledger) autoCapture(tx storage.Tx, task *storage.Task) (taskOutcome, error) {
	o, err := tx.GetOrder(task.MerchantID, task.OrderID)
	if fault.Is(err, fault.NotFound) {
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, err
	}
	// The merchant is read before the invoice number is taken, whose row
	// lock is held until commit (as in mutate); its name is the invoice's
	// seller.
	n, err := l.notifier(tx, o.MerchantID)
	if err != nil {
		return outcomeNone, err
	}
	env := l.env(tx, task.MerchantID)
	env.Supplier = n.merchant.Name
	before := o.Clone()
	if _, err := o.Require(o.Uncaptured.ID, order.ActionCapture, env); err != nil {
		if o.HasStatus(order.StatusUncaptured, env.Now) && !o.Expired(env.Now) && o.Hold != order.HoldFraudDeny {
			// Still open but blocked (acknowledgement, hold): look again later.
			task.DueAt, task.Attempts = env.Now.Add(taskRetryAfter(task.Attempts)), task.Attempts+1
			return outcomeRescheduled, tx.ScheduleTask(task)
		}
		return outcomeNone, nil // closed: nothing to capture
	}
	if _, err := capture.Full(o, nil, env); err != nil {
		if fault.Is(err, fault.Invalid) || fault.Is(err, fault.NotAvailable) {
			// The rules refuse capturing what remains (it would pass the
			// authorization, or sum below zero): the merchant's to resolve,
			// and no later run would capture it either.
			return outcomeNone, nil
		}
		// The store failed (the invoice number could not be taken): the
		// task stays, to be set aside and run again.
		return outcomeNone, err
	}
	if err := tx.QueueSettlementItems(settlement.NewItems(before, o)); err != nil {
		return outcomeNone, err
	}
	if err := n.orderChanged(before, o); err != nil {
		return outcomeNone, err
	}
	return outcomeCaptured, tx.UpdateOrder(o)
}

func expireToken(tx storage.Tx, task *storage.Task) (taskOutcome, error) {
	a, err := tx.GetAuthorization(task.MerchantID, task.OrderID)
	if fault.Is(err, fault.NotFound) {
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, err
	}
	if !a.Expire(tx.Now()) {
		return outcomeNone, nil
	}
	return outcomeExpired, tx.PutAuthorization(a)
}

// ExpiryReminderData is the data of an order.expiryReminder notification.
type ExpiryReminderData struct {
	OrderID    string       `json:"orderId"`
	ExpiresAt  time.Time    `json:"expiresAt"`
	Uncaptured money.Record `json:"uncapturedAmount"`
}

// remind sends a reminder if the order still needs the merchant: awaiting
// acknowledgement, or holding uncaptured lines that will expire.
func (l *Ledger) remind(tx storage.Tx, task *storage.Task) (taskOutcome, error) {
	o, err := tx.GetOrder(task.MerchantID, task.OrderID)
	if fault.Is(err, fault.NotFound) {
		return outcomeNone, nil
	}
	if err != nil {
		return outcomeNone, err
	}
	now := tx.Now()
	n, err := l.notifier(tx, o.MerchantID)
	if err != nil {
		return outcomeNone, err
	}
	switch task.Kind {
	case TaskAckReminder:
		if !o.Unacknowledged || o.Closed(now) { // remind exactly when acknowledging is possible
			return outcomeNone, nil
		}
		return outcomeReminded, n.send(notify.TopicAcknowledgementReminder, o.ID, map[string]string{"orderId": o.ID})
	default:
		// Remind exactly when the merchant can act on it, by capturing or
		// extending: an order denied for fraud offers only cancel, and its
		// authorization lapsing needs nothing from the merchant. Lines, not
		// their amount: uncaptured lines that sum to 0 expire all the same.
		if len(o.Uncaptured.Lines) == 0 || o.Cancelled || o.Expired(now) || o.Hold == order.HoldFraudDeny {
			return outcomeNone, nil
		}
		return outcomeReminded, n.send(notify.TopicExpiryReminder, o.ID, ExpiryReminderData{OrderID: o.ID,
			ExpiresAt: o.ExpiresAt, Uncaptured: money.New(o.Amounts().Uncaptured, o.Currency).Record()})
	}
}
