package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/token"
)

// fillForCopy makes, through the library on the bolt store of dir, a bit of
// every kind of record: merchants, orders captured, refunded and cancelled,
// a settlement with its transactions and items still queued after it,
// sessions, customer tokens, tasks, idempotency records, notifications
// pending and done. It returns the sandbox merchant and a capture request
// to retry after the copy, with its first answer.
func fillForCopy(t *testing.T, dir string, now func() time.Time) (merchantID string, retry kassa.Call, orderID string, first []byte) {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := kassa.New(st, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "other", ClientID: "other-client", ClientSecret: "other-secret-123"})
	if err != nil {
		t.Fatal(err)
	}
	m := creds.MerchantID
	if _, err := l.SetWebhook(ctx, m, kassa.SetWebhookRequest{URL: "https://hooks.example.com/kassa", Events: []string{"order.*"}}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	newOrder := func(merchant, tok string, price int64) string {
		t.Helper()
		if err := l.PutAuthorization(ctx, &token.Authorization{Token: tok, MerchantID: merchant, Country: "SE", Currency: "SEK",
			PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		d := "tiles " + tok
		res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant, IdempotencyKey: "create-" + tok}, tok,
			&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
				OrderLines: []order.LineInput{{Description: &d, Quantity: &one, UnitPrice: &price, Vat: new(int64(2500))}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Order.ID
	}
	capture := func(merchant, id string) *order.Order {
		t.Helper()
		res, err := l.Capture(ctx, kassa.Call{MerchantID: merchant, IdempotencyKey: "capture-" + id}, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Order
	}
	// Captured, then refunded, then settled.
	for i, tok := range []string{"a1", "a2", "a3"} {
		o := capture(m, newOrder(m, tok, 10000*int64(i+1)))
		if i == 0 {
			if _, err := l.Refund(ctx, kassa.Call{MerchantID: m, IdempotencyKey: "refund-" + o.ID}, o.ID, o.Captured[0].ID, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	capture(other.MerchantID, newOrder(other.MerchantID, "o1", 5000))
	made, err := l.RunSettlementsBefore(ctx, now().Add(time.Minute))
	if err != nil || len(made) == 0 {
		t.Fatalf("settlements %v %v", made, err)
	}
	// After the run: a capture still queued, a cancelled order, one left
	// open (its tasks due later), a session, a customer token.
	capture(m, newOrder(m, "b1", 2500))
	cancelled := newOrder(m, "b2", 2500)
	if _, err := l.CancelOrder(ctx, kassa.Call{MerchantID: m, IdempotencyKey: "cancel"}, cancelled); err != nil {
		t.Fatal(err)
	}
	open := newOrder(m, "b3", 7000)
	newOrder(m, "b4", 3000) // left open: the expiry job's
	d := "session line"
	price := int64(1200)
	if _, err := l.CreateSession(ctx, kassa.Call{MerchantID: m, IdempotencyKey: "session"}, session.SourceCheckout, &session.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", ExternalSessionID: "ext-1", MerchantReference: "ref-1",
		OrderLines: []order.LineInput{{Description: &d, Quantity: &one, UnitPrice: &price, Vat: new(int64(2500))}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.PutAuthorization(ctx, &token.Authorization{Token: "c1", MerchantID: m, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CreateCustomerToken(ctx, kassa.Call{MerchantID: m, IdempotencyKey: "ct"}, "c1", &token.CreateCustomerRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", Customer: &order.CustomerInput{CompanyID: "5560360793", Email: "a@example.com"}}); err != nil {
		t.Fatal(err)
	}
	// One notification done, the others pending.
	var done *storage.OutboxMessage
	err = st.Update(ctx, func(tx storage.Tx) error {
		p, err := tx.PendingOutbox(now().Add(time.Hour), 2, 0)
		if err != nil || len(p) < 2 {
			return errors.Join(err, errors.New("too few pending notifications"))
		}
		done = p[0]
		done.Delivered, done.Attempts = true, 1
		done.Log = append(done.Log, storage.DeliveryAttempt{At: now(), StatusCode: 200, DurationMS: 12})
		if err := tx.UpdateOutbox(done); err != nil {
			return err
		}
		// One failed attempt, the next due in half an hour.
		retried := p[1]
		retried.Attempts, retried.NextAttempt = 1, now().Add(30*time.Minute)
		retried.Log = append(retried.Log, storage.DeliveryAttempt{At: now(), StatusCode: 503, DurationMS: 40})
		return tx.UpdateOutbox(retried)
	})
	if err != nil {
		t.Fatal(err)
	}
	retry = kassa.Call{MerchantID: m, IdempotencyKey: "capture-open-retry"}
	res, err := l.Capture(ctx, retry, open, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, retry, open, res.Body
}

// TestStoreCopyMovesEveryRecord: kassa store copy puts every record of a
// bolt store into an empty PostgreSQL database as it was, the signing key
// too, leaves the bolt file untouched, and refuses a database that holds
// kassa data already, leaving it unchanged, and a bolt file in use.
func TestStoreCopyMovesEveryRecord(t *testing.T) {
	url := pgtest.FreshSchema(t)
	t.Setenv("KASSA_KEY", "")
	ctx := context.Background()
	dir := t.TempDir()
	at := time.Date(2026, 3, 2, 10, 0, 0, 123456789, time.UTC)
	now := func() time.Time { at = at.Add(time.Second); return at }
	key, err := loadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	merchant, retry, retried, firstAnswer := fillForCopy(t, dir, now)
	boltPath := filepath.Join(dir, "kassa.db")
	sum := func() [32]byte {
		b, err := os.ReadFile(boltPath)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	before := sum()

	var out, errb bytes.Buffer
	if code := run([]string{"store", "copy", "--data", dir, "--database-url", url}, &out, &errb); code != 0 {
		t.Fatalf("store copy: %d\n%s\n%s", code, out.String(), errb.String())
	}
	if sum() != before {
		t.Fatal("the copy changed the bolt file")
	}
	for _, want := range []string{"orders", "settlement transactions", "signing key"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the copy's counts name no %s:\n%s", want, out.String())
		}
	}

	src, err := bolt.Open(boltPath, bolt.Options{Clock: now})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, url, postgres.Options{Clock: now})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	// Every record reads back equal through the storage interface.
	kinds := map[storage.RecordKind]int{}
	var sequences []storage.Record
	err = src.Dump(ctx, func(r storage.Record) error {
		kinds[r.Kind]++
		if r.Kind == storage.KindSequence {
			sequences = append(sequences, r)
			return nil
		}
		return bothRead(ctx, src, dst, func(tx storage.Tx) (any, error) { return readRecord(tx, r) })
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []storage.RecordKind{storage.KindMerchant, storage.KindOrder, storage.KindAuthorization, storage.KindCustomerToken,
		storage.KindSession, storage.KindSettlementItem, storage.KindSettlement, storage.KindSettlementTransaction, storage.KindTask,
		storage.KindSequence, storage.KindIdempotency, storage.KindOutbox} {
		if kinds[k] == 0 {
			t.Errorf("the bolt store holds no %s: the test does not cover them", k)
		}
	}
	// Lists, queues and due work come out in the same order.
	far := at.Add(365 * 24 * time.Hour)
	for name, read := range map[string]func(storage.Tx) (any, error){
		"orders": func(tx storage.Tx) (any, error) { return tx.ListOrders(merchant, storage.OrderQuery{}) },
		"orders by status": func(tx storage.Tx) (any, error) {
			return tx.ListOrders(merchant, storage.OrderQuery{Status: []order.Status{"cancelled", "captured", "refunded"}})
		},
		"sessions": func(tx storage.Tx) (any, error) {
			s, next, err := tx.ListSessions(merchant, session.Query{Size: 100})
			return []any{s, next}, err
		},
		"settlements": func(tx storage.Tx) (any, error) {
			s, next, err := tx.ListSettlements(merchant, settlement.Query{Size: 100})
			return []any{s, next}, err
		},
		"settlement queue": func(tx storage.Tx) (any, error) { return tx.PendingSettlementItems(1000) },
		"due tasks":        func(tx storage.Tx) (any, error) { return tx.DueTasks(far, 1000) },
		"pending outbox":   func(tx storage.Tx) (any, error) { return tx.PendingOutbox(far, 1000, 0) },
		"outbox due now":   func(tx storage.Tx) (any, error) { return tx.PendingOutbox(at.Add(time.Minute), 1000, 0) },
		"delivery log": func(tx storage.Tx) (any, error) {
			m, next, err := tx.ListOutbox(merchant, "", time.Time{}, 1000)
			return []any{m, next}, err
		},
		"expiring": func(tx storage.Tx) (any, error) { return tx.OrdersExpiringBefore(far, 1000) },
	} {
		if err := bothRead(ctx, src, dst, read); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Each sequence goes on from its last number.
	for _, r := range sequences {
		var next int64
		errRollback := errors.New("rollback")
		err := dst.Update(ctx, func(tx storage.Tx) error {
			n, err := tx.NextSequence(r.MerchantID, r.ID)
			next = n
			return errors.Join(err, errRollback)
		})
		if !errors.Is(err, errRollback) || next != r.Number+1 {
			t.Errorf("sequence %s/%s: next %d (%v), want %d", r.MerchantID, r.ID, next, err, r.Number+1)
		}
	}

	// Through the library: a retry replays, a new capture takes the next
	// invoice number, and the replicas sign with the bolt server's key.
	l := kassa.New(dst, kassa.Options{})
	res, err := l.Capture(ctx, retry, retried, nil)
	if err != nil || !res.Replayed || !bytes.Equal(res.Body, firstAnswer) {
		t.Fatalf("retried capture after the copy: replayed %v, same answer %v, %v", res != nil && res.Replayed, res != nil && bytes.Equal(res.Body, firstAnswer), err)
	}
	var lastInvoice int64
	err = src.View(ctx, func(tx storage.Tx) error {
		page, err := tx.ListOrders(merchant, storage.OrderQuery{})
		for _, o := range page.Orders {
			for _, c := range o.Captured {
				lastInvoice = max(lastInvoice, c.DocumentSeq)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh := "fresh"
	if err := l.PutAuthorization(ctx, &token.Authorization{Token: fresh, MerchantID: merchant, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	one, price := int64(1), int64(990)
	created, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchant}, fresh, &order.CreateRequest{Country: "SE", Currency: "SEK",
		Locale: "sv-SE", OrderLines: []order.LineInput{{Description: &fresh, Quantity: &one, UnitPrice: &price, Vat: new(int64(2500))}}})
	if err != nil {
		t.Fatal(err)
	}
	captured, err := l.Capture(ctx, kassa.Call{MerchantID: merchant}, created.Order.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := captured.Order.Captured[0].DocumentSeq; lastInvoice == 0 || got != lastInvoice+1 {
		t.Fatalf("the first capture after the copy has invoice %d, want %d", got, lastInvoice+1)
	}
	shared, err := dst.SigningKey(ctx, bytes.Repeat([]byte{7}, 32), false)
	if err != nil || !bytes.Equal(shared, key) {
		t.Fatalf("replicas sign with %x (%v), want the bolt server's key %x", shared, err, key)
	}

	// A second copy into the database, which now holds data, is refused
	// and changes nothing.
	var countBefore int
	if err := dst.Pool().QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&countBefore); err != nil {
		t.Fatal(err)
	}
	src.Close()
	out.Reset()
	errb.Reset()
	if code := run([]string{"store", "copy", "--data", dir, "--database-url", url}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "already holds kassa data") {
		t.Fatalf("second copy: %d\n%s\n%s", code, out.String(), errb.String())
	}
	var countAfter int
	if err := dst.Pool().QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&countAfter); err != nil || countAfter != countBefore {
		t.Fatalf("orders after a refused copy: %d (%v), want %d", countAfter, err, countBefore)
	}

	// A bolt file a server holds is refused, not copied while it changes.
	held, err := bolt.Open(boltPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	errb.Reset()
	if code := run([]string{"store", "copy", "--data", dir, "--database-url", pgtest.FreshSchema(t)}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "in use") {
		t.Fatalf("copy of a file in use: %d %s", code, errb.String())
	}
}

// bothRead runs read on both stores and says how the results differ.
func bothRead(ctx context.Context, src, dst storage.Store, read func(storage.Tx) (any, error)) error {
	var a, b any
	errA := src.View(ctx, func(tx storage.Tx) (err error) { a, err = read(tx); return err })
	errB := dst.View(ctx, func(tx storage.Tx) (err error) { b, err = read(tx); return err })
	if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
		return errors.New("bolt and PostgreSQL differ:\n" + dumpValue(a, errA) + "\n" + dumpValue(b, errB))
	}
	return nil
}

func dumpValue(v any, err error) string {
	b, _ := json.MarshalIndent(v, "", " ")
	if err != nil {
		return "error " + err.Error()
	}
	return string(b)
}

// readRecord reads r's record back through the storage interface.
func readRecord(tx storage.Tx, r storage.Record) (any, error) {
	switch r.Kind {
	case storage.KindMerchant:
		return tx.GetMerchant(r.ID)
	case storage.KindOrder:
		o, err := tx.GetOrder(r.MerchantID, r.ID)
		if err != nil {
			return nil, err
		}
		v, err := tx.OrderVersion(r.MerchantID, r.ID)
		return []any{o, v}, err
	case storage.KindAuthorization:
		a, err := tx.GetAuthorization(r.MerchantID, r.ID)
		return []any{a, fmtErr(err)}, nil
	case storage.KindCustomerToken:
		return tx.GetCustomerToken(r.MerchantID, r.ID)
	case storage.KindSession:
		return tx.GetSession(r.MerchantID, r.ID)
	case storage.KindSettlement:
		s, err := tx.GetSettlement(r.MerchantID, r.ID)
		if err != nil {
			return nil, err
		}
		trs, next, err := tx.SettlementTransactions(r.MerchantID, r.ID, "", 100000)
		return []any{s, trs, next}, err
	case storage.KindSettlementTransaction:
		trs, _, err := tx.SettlementTransactions(r.MerchantID, r.SettlementID, "", 100000)
		for _, tr := range trs {
			if int64(tr.Seq) == r.Number {
				return tr, err
			}
		}
		return nil, errors.Join(err, errors.New("no such transaction"))
	case storage.KindIdempotency:
		return tx.GetIdempotency(r.MerchantID, r.ID)
	case storage.KindOutbox:
		var m storage.OutboxMessage
		if err := storage.DecodeRecord(r.Body, &m); err != nil {
			return nil, err
		}
		return tx.GetOutbox(m.MerchantID, r.ID)
	case storage.KindTask, storage.KindSettlementItem:
		return nil, nil // compared as the lists they are read by
	}
	return nil, errors.New("no reader for " + string(r.Kind))
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
