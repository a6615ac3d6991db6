package kassa_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/storagetest"
	"github.com/kassahq/kassa/token"
)

// troubledTx fails the reads troubled names with an internal error, as a
// database does when it breaks a deadlock: the ledger must pass such an
// error on (to the store's retry, then the client), never take it for
// "not found" and carry on.
type troubledTx struct {
	storage.Tx
	troubled bool
}

var errTrouble = fault.Internalf(nil, "deadlock detected")

func (t troubledTx) GetAuthorization(merchantID, tok string) (*token.Authorization, error) {
	if t.troubled {
		return nil, errTrouble
	}
	return t.Tx.GetAuthorization(merchantID, tok)
}

func (t troubledTx) GetSessionByExternalID(merchantID, id string) (*session.Session, error) {
	if t.troubled {
		return nil, errTrouble
	}
	return t.Tx.GetSessionByExternalID(merchantID, id)
}

func TestSessionsPassStoreErrorsOn(t *testing.T) {
	ctx := context.Background()
	var troubled bool
	l, merchantID := sandboxLedger(t, storagetest.WrapTx{Store: memory.New(nil), Wrap: func(tx storage.Tx) storage.Tx { return troubledTx{tx, troubled} }})
	call := kassa.Call{MerchantID: merchantID}
	lines := []order.LineInput{{Description: ptr("line"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))}}
	res, err := l.CreateSession(ctx, call, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: lines})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &created); err != nil || created.ID == "" {
		t.Fatalf("session id from %s: %v", res.Body, err)
	}
	seen, err := l.GetSession(ctx, merchantID, created.ID, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApproveSession(ctx, merchantID, created.ID, kassa.Approval{Terms: seen.Terms(), CompanyName: "Approved Byggvaror AB",
		PaymentMethod: order.PayInvoice, Customer: order.CustomerInput{CompanyID: "5560000001", Country: "SE", Email: "a@example.com",
			FirstName: "A", LastName: "B", BillingAddress: &order.Address{CompanyName: "Approved Byggvaror AB", StreetAddress: "Gatan 1",
				PostalCode: "11122", City: "Stockholm", Country: "SE"}}}); err != nil {
		t.Fatal(err)
	}

	troubled = true
	if _, err := l.DeleteSession(ctx, call, created.ID, session.SourceCheckout); err != errTrouble {
		t.Errorf("delete while the token read fails: %v, want the store's error", err)
	}
	ext := "shop-order-1"
	_, err = l.CreateSession(ctx, call, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: lines, ExternalSessionID: ext})
	if err != errTrouble {
		t.Errorf("create while the external id lookup fails: %v, want the store's error", err)
	}
	troubled = false
	rec, err := l.GetSession(ctx, merchantID, created.ID, session.SourceCheckout)
	if err != nil {
		t.Fatal(err)
	}
	if st := rec.Session.StateAt(rec.Session.UpdatedAt); st != session.StateAuthorized {
		t.Errorf("session %s after the failed delete, want it still authorized", st)
	}
}

// poisoned is a store in which one order cannot be read (*orderID; none
// while it is ""); pinned also keeps that order's task where it is, as when
// another replica holds it while this one would set it aside.
func poisoned(st storage.Store, orderID *string, pinned bool) storage.Store {
	return storagetest.WrapTx{Store: st, Wrap: func(tx storage.Tx) storage.Tx {
		return pinnedTask{storagetest.UnreadableOrder{Tx: tx, OrderID: *orderID}, pinned}
	}}
}

type pinnedTask struct {
	storagetest.UnreadableOrder
	pinned bool
}

func (t pinnedTask) ScheduleTask(task *storage.Task) error {
	if t.pinned && task.OrderID == t.OrderID {
		return nil
	}
	return t.UnreadableOrder.ScheduleTask(task)
}

// TestFailingTaskHoldsUpNoOtherTask: a task that fails every time (here an
// auto-capture whose order cannot be read) is set aside with a growing
// delay, and the tasks due after it still run. It used to be taken first
// by every run and fail it, so no auto-capture, token expiry or reminder of
// any merchant ran again.
func TestFailingTaskHoldsUpNoOtherTask(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var unreadable string
	l, merchantID := sandboxLedger(t, poisoned(memory.New(func() time.Time { return now }), &unreadable, false))
	bad := autoCaptureOrder(t, l, merchantID, "t-bad", now)
	now = now.Add(time.Second) // due a second after the bad one
	good := autoCaptureOrder(t, l, merchantID, "t-good", now)
	unreadable = bad

	now = now.Add(15 * time.Minute)
	st, err := l.RunTasks(ctx, 10)
	if aside := (*kassa.TasksSetAside)(nil); !errors.As(err, &aside) || len(aside.Failures) != 1 {
		t.Fatalf("error %v, want the failed task reported as set aside", err)
	}
	if st.AutoCaptured != 1 || st.Failed != 1 {
		t.Fatalf("stats %+v, want the good order captured and one failure", st)
	}
	o, _, err := l.GetOrder(ctx, merchantID, good)
	if err != nil || o.Amounts().Captured != 10000 {
		t.Fatalf("the order due after the failing one: %v", err)
	}
	// Set aside: not taken again at once, but again after its delay, and
	// captured once it can be read.
	if st, err := l.RunTasks(ctx, 10); err != nil || st.TasksProcessed != 0 {
		t.Fatalf("run right after: %+v %v, want nothing due", st, err)
	}
	now = now.Add(time.Minute)
	if st, _ := l.RunTasks(ctx, 10); st.Failed != 1 {
		t.Fatalf("run a minute later: %+v, want the task tried again", st)
	}
	now = now.Add(90 * time.Second)
	if st, _ := l.RunTasks(ctx, 10); st.TasksProcessed != 0 {
		t.Fatalf("the second delay is longer than the first: %+v", st)
	}
	unreadable = ""
	now = now.Add(time.Minute)
	if st, err := l.RunTasks(ctx, 10); err != nil || st.AutoCaptured != 1 {
		t.Fatalf("once readable: %+v %v, want it captured", st, err)
	}
}

// TestTaskFailingAgainEndsTheRun: a failed task that could not be set aside
// (another replica held it) and comes round again in the same run ends the
// run, instead of being taken and failed up to the run's limit.
func TestTaskFailingAgainEndsTheRun(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	unreadable := ""
	l, merchantID := sandboxLedger(t, poisoned(memory.New(func() time.Time { return now }), &unreadable, true))
	orderID := autoCaptureOrder(t, l, merchantID, "t", now)
	unreadable = orderID
	now = now.Add(15 * time.Minute)
	st, err := l.RunTasks(ctx, 50)
	if err == nil || st.Failed != 1 || st.TasksProcessed != 1 {
		t.Fatalf("stats %+v (%v), want the task failed once and the run ended", st, err)
	}
}

// sequenceFailing is a store whose document numbers fail with *failing
// (none while it is nil), as a store error in the middle of a transaction
// would.
func sequenceFailing(st storage.Store, failing *error) storage.Store {
	return storagetest.WrapTx{Store: st, Wrap: func(tx storage.Tx) storage.Tx { return sequenceFailingTx{tx, *failing} }}
}

type sequenceFailingTx struct {
	storage.Tx
	failing error
}

func (t sequenceFailingTx) NextSequence(merchantID, series string) (int64, error) {
	if t.failing != nil {
		return 0, t.failing
	}
	return t.Tx.NextSequence(merchantID, series)
}

// TestAutoCaptureKeptWhenTheInvoiceNumberFails: an auto-capture whose invoice
// number cannot be taken (a store failure) is set aside and captured by a
// later run. The failure used to be taken for a refusal of the rules: the
// task was deleted and the order never captured, with no error anywhere.
func TestAutoCaptureKeptWhenTheInvoiceNumberFails(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var failing error
	l, merchantID := sandboxLedger(t, sequenceFailing(memory.New(func() time.Time { return now }), &failing))
	orderID := autoCaptureOrder(t, l, merchantID, "t", now)
	failing = fault.Internalf(nil, "next invoice number: disk I/O error")
	now = now.Add(15 * time.Minute)
	if st, err := l.RunTasks(ctx, 10); err == nil || st.Failed != 1 || st.AutoCaptured != 0 {
		t.Fatalf("run while numbers fail: %+v (%v), want the task failed and set aside", st, err)
	}
	failing = nil
	now = now.Add(2 * time.Minute)
	if st, err := l.RunTasks(ctx, 10); err != nil || st.AutoCaptured != 1 {
		t.Fatalf("run once numbers work: %+v (%v), want the order auto-captured", st, err)
	}
	o, _, err := l.GetOrder(ctx, merchantID, orderID)
	if err != nil || o.Amounts().Captured != 10000 {
		t.Fatalf("order after the runs: %v, captured %d, want 10000", err, o.Amounts().Captured)
	}
}

// autoCaptureOrder makes an order of one line from a fresh authorization
// token, to be captured by the task run ten minutes after now.
func autoCaptureOrder(t *testing.T, l *kassa.Ledger, merchantID, tok string, now time.Time) string {
	t.Helper()
	ctx := context.Background()
	putToken(t, l, merchantID, tok, order.PayInvoice, now)
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchantID}, tok, &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		AutoCapture: &order.AutoCapture{Enabled: true, DelayMinutes: 10},
		OrderLines:  []order.LineInput{{Description: ptr("tiles"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Order.ID
}

// TestDocumentNumberUnavailableKeepsItsKind: a store that cannot be reached
// while a capture or refund takes its document number answers as
// unavailable (503, retry), not as an internal error (500).
func TestDocumentNumberUnavailableKeepsItsKind(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var failing error
	l, merchantID := sandboxLedger(t, sequenceFailing(memory.New(func() time.Time { return now }), &failing))
	orderID := autoCaptureOrder(t, l, merchantID, "t", now)
	call := kassa.Call{MerchantID: merchantID}
	unavailable := &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable", Message: "the database cannot be reached"}
	failing = unavailable
	if _, err := l.Capture(ctx, call, orderID, nil); !fault.Is(err, fault.Unavailable) {
		t.Errorf("capture while numbers are unavailable: %v (kind %v), want unavailable", err, fault.KindOf(err))
	}
	failing = nil
	if _, err := l.Capture(ctx, call, orderID, nil); err != nil {
		t.Fatal(err)
	}
	o, _, err := l.GetOrder(ctx, merchantID, orderID)
	if err != nil {
		t.Fatal(err)
	}
	failing = unavailable
	if _, err := l.Refund(ctx, call, orderID, o.Captured[0].ID, nil); !fault.Is(err, fault.Unavailable) {
		t.Errorf("refund while numbers are unavailable: %v (kind %v), want unavailable", err, fault.KindOf(err))
	}
}

// putToken stores an authorization token of the merchant, a Swedish buyer's
// approval of pm in SEK made at now and ending an hour later.
func putToken(t *testing.T, l *kassa.Ledger, merchantID, tok string, pm order.PaymentType, now time.Time, tags ...order.RiskTag) {
	t.Helper()
	if err := l.PutAuthorization(context.Background(), &token.Authorization{Token: tok, MerchantID: merchantID, Country: "SE",
		Currency: "SEK", PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: pm},
		RiskTags: tags, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// sandboxLedger is a ledger on st with one sandbox merchant, whose id it
// returns.
func sandboxLedger(t *testing.T, st storage.Store) (*kassa.Ledger, string) {
	t.Helper()
	l := kassa.New(st, kassa.Options{})
	creds, _, err := l.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	return l, creds.MerchantID
}

// TestFailedTokenExpiryNamesNoToken: a token expiry that fails is reported
// (and kassa serve logs it) by the token's fingerprint, as the access log
// shows a token in a path, not by the token: an authorization token creates
// an order with the merchant's credentials, and must not reach a log
// shipped to a log store. Its task's id and subject held it, twice.
func TestFailedTokenExpiryNamesNoToken(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var troubled bool
	l, merchantID := sandboxLedger(t, storagetest.WrapTx{Store: memory.New(func() time.Time { return now }),
		Wrap: func(tx storage.Tx) storage.Tx { return troubledTx{tx, troubled} }})
	const tok = "at_SECRETSECRETSECRETSECRETSECRET"
	putToken(t, l, merchantID, tok, order.PayInvoice, now)
	now = now.Add(time.Hour)
	troubled = true
	st, err := l.RunTasks(ctx, 10)
	if aside := (*kassa.TasksSetAside)(nil); !errors.As(err, &aside) || len(aside.Failures) != 1 || st.Failed != 1 {
		t.Fatalf("%+v %v, want the token expiry set aside", st, err)
	}
	sum := sha256.Sum256([]byte(tok))
	fp := "{token:" + hex.EncodeToString(sum[:6]) + "}"
	want := "task tokenexpiry-" + merchantID + "-" + fp + " (tokenExpiry, authorization token " + fp + "): internal: deadlock detected"
	if msg := err.Error(); msg != want || strings.Contains(msg, "SECRET") {
		t.Fatalf("error %q, want %q", msg, want)
	}
	if !errors.Is(err, errTrouble) {
		t.Fatalf("error %v does not wrap the store's", err)
	}
}

// TestTaskOfUnknownOutcomeIsNotSetAside: a task whose commit's outcome the
// store cannot tell (a database crash lost the answer) is not a failing task
// to set aside for a growing delay: the run ends with the store's error, and
// the next run does the task if it was not done (here it rolled back).
func TestTaskOfUnknownOutcomeIsNotSetAside(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	st := &scriptedFailures{Store: memory.New(func() time.Time { return now })}
	l, merchantID := sandboxLedger(t, st)
	const tok = "at_UNKNOWNUNKNOWNUNKNOWNUNKNOWN00"
	putToken(t, l, merchantID, tok, order.PayInvoice, now)
	now = now.Add(time.Hour)
	st.arm("unknown")
	stats, err := l.RunTasks(ctx, 10)
	if aside := (*kassa.TasksSetAside)(nil); errors.As(err, &aside) || fault.CodeOf(err) != fault.CodeOutcomeUnknown || stats.Failed != 0 {
		t.Fatalf("%+v %v, want the run ended with outcome_unknown and nothing set aside", stats, err)
	}
	if stats, err := l.RunTasks(ctx, 10); err != nil || stats.TasksProcessed != 1 {
		t.Fatalf("the next run: %+v %v, want the token expiry done", stats, err)
	}
}
