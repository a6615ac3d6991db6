package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/token"
)

// backlog is a ledger on a memory store whose clock the test moves.
type backlog struct {
	t        *testing.T
	made     int
	ctx      context.Context
	mu       sync.Mutex
	at       time.Time
	st       storage.Store
	ledger   *kassa.Ledger
	merchant string
}

// backlogStores runs test on a bolt store, and on PostgreSQL when
// KASSA_TEST_DATABASE_URL is set.
func backlogStores(t *testing.T, test func(t *testing.T, b *backlog)) {
	t.Run("bolt", func(t *testing.T) {
		b := &backlog{t: t, ctx: context.Background(), at: time.Now().UTC()}
		st, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{Clock: b.now, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		test(t, b.open(st))
	})
	if os.Getenv("KASSA_TEST_DATABASE_URL") == "" {
		return
	}
	t.Run("postgres", func(t *testing.T) {
		b := &backlog{t: t, ctx: context.Background(), at: time.Now().UTC()}
		st, err := postgres.Open(b.ctx, pgtest.FreshSchema(t), postgres.Options{Clock: b.now, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		test(t, b.open(st))
	})
}

func (b *backlog) open(st storage.Store) *backlog {
	t := b.t
	b.st = st
	b.ledger = kassa.New(b.st, kassa.Options{})
	creds, _, err := b.ledger.EnsureMerchant(b.ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	b.merchant = creds.MerchantID
	return b
}

func (b *backlog) now() time.Time { b.mu.Lock(); defer b.mu.Unlock(); return b.at }

func (b *backlog) advance(d time.Duration) { b.mu.Lock(); b.at = b.at.Add(d); b.mu.Unlock() }

// orders creates n orders of one line of 100.00 SEK.
func (b *backlog) orders(n int) []string {
	b.t.Helper()
	ids := make([]string, n)
	for i := range n {
		b.made++
		tok := fmt.Sprint("tok-", b.made)
		a := &token.Authorization{Token: tok, MerchantID: b.merchant, Country: "SE", Currency: "SEK", Locale: "sv-SE",
			PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
			CreatedAt:     b.now(), ExpiresAt: b.now().Add(time.Hour)}
		if err := b.ledger.PutAuthorization(b.ctx, a); err != nil {
			b.t.Fatal(err)
		}
		desc, qty, price, vat := "line", int64(1), int64(10000), int64(2500)
		res, err := b.ledger.CreateOrderFromAuthorization(b.ctx, kassa.Call{MerchantID: b.merchant}, tok,
			&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: []order.LineInput{
				{Description: &desc, Quantity: &qty, UnitPrice: &price, Vat: &vat}}})
		if err != nil {
			b.t.Fatal(err)
		}
		ids[i] = res.Order.ID
	}
	return ids
}

// unmarked counts the orders of ids the expiry job has not marked.
func (b *backlog) unmarked(ids []string) int {
	b.t.Helper()
	n := 0
	for _, id := range ids {
		o, _, err := b.ledger.GetOrder(b.ctx, b.merchant, id)
		if err != nil {
			b.t.Fatal(err)
		}
		if !o.ExpiredMarked {
			n++
		}
	}
	return n
}

// delivered adds n delivered notifications created at the store's clock.
func (b *backlog) delivered(n int) {
	b.t.Helper()
	err := b.st.Update(b.ctx, func(tx storage.Tx) error {
		for i := range n {
			if err := tx.AddOutbox(&storage.OutboxMessage{ID: fmt.Sprint("n-", i), MerchantID: b.merchant,
				Topic: "order.fullCapture", Payload: []byte(`{}`), CreatedAt: tx.Now(), NextAttempt: tx.Now(),
				Attempts: 1, Delivered: true}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
}

func (b *backlog) notifications() int {
	b.t.Helper()
	n, from := 0, ""
	for range 100 {
		page, err := b.ledger.ListNotifications(b.ctx, b.merchant, from, 1000)
		if err != nil {
			b.t.Fatal(err)
		}
		n += len(page.Notifications)
		if from = page.NextFromID; from == "" {
			break
		}
	}
	return n
}

// jobs runs passes on b whose budget ends after `steps` reads of the wall
// clock past the first, one second apart: a job yields after a fixed
// number of its transactions, whatever the machine's speed.
func (b *backlog) jobs(budgetSteps int) *jobs {
	var wall time.Time
	var mu sync.Mutex
	return &jobs{ledger: b.ledger, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: server.NewClock(false),
		settleAt: time.Date(0, 1, 1, 2, 0, 0, 0, time.UTC), nextSettle: time.Now().Add(24 * time.Hour),
		budget: time.Duration(budgetSteps) * time.Second,
		wall: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			wall = wall.Add(time.Second)
			return wall
		}}
}

// TestExpiryBacklogDrainsInAPass: the expiry job marked at most 1 000 orders
// a pass, a pass a minute, so a backlog (an outage, a day of 50 000 orders
// expiring) left expired orders listed as open, and out of status=expired,
// for hours. A pass now marks them a batch per transaction until none is
// left or its budget is spent, and then the next pass follows after a
// second rather than a minute.
func TestExpiryBacklogDrainsInAPass(t *testing.T) { backlogStores(t, expiryBacklogDrainsInAPass) }

func expiryBacklogDrainsInAPass(t *testing.T, b *backlog) {
	// More than the 1 000 a pass marked before (on bolt only: on
	// PostgreSQL making them takes tens of seconds).
	n := 3*kassa.ExpiryBatch + 3
	if _, ok := b.st.(*bolt.Store); ok {
		n += 1000
	}
	ids := b.orders(n)
	b.advance(60 * 24 * time.Hour) // past every order's expiry
	if more := b.jobs(1000).pass(b.ctx); more {
		t.Fatal("a pass with budget to spare reported work left")
	}
	if n := b.unmarked(ids); n != 0 {
		t.Fatalf("%d of %d expired orders left unmarked after a pass", n, len(ids))
	}

	// A budget of two transactions: the pass yields with orders left, and
	// says so, and later passes finish them.
	ids = b.orders(5 * kassa.ExpiryBatch)
	b.advance(60 * 24 * time.Hour)
	j := b.jobs(2)
	if more := j.pass(b.ctx); !more {
		t.Fatal("a pass that ran out of budget reported nothing left")
	}
	if n := b.unmarked(ids); n == 0 || n == len(ids) {
		t.Fatalf("after one budget-limited pass %d of %d unmarked, want some marked and some left", n, len(ids))
	}
	for i := 0; j.pass(b.ctx); i++ {
		if i > 10 {
			t.Fatal("passes never finished the backlog")
		}
	}
	if n := b.unmarked(ids); n != 0 {
		t.Fatalf("%d unmarked after the passes ended", n)
	}
}

// TestRetentionSweepYieldsToTheOtherJobs: the first retention sweep after an
// upgrade, of millions of old notifications, swept until none was left
// before the scheduled tasks and the expiry job of that pass ran, holding
// up auto-captures, token expiries and expiry marking for as long. Each
// job now works for at most its budget in a pass: the money jobs run
// first, the sweep removes what its budget allows and the next passes
// remove the rest.
func TestRetentionSweepYieldsToTheOtherJobs(t *testing.T) {
	backlogStores(t, retentionSweepYieldsToTheOtherJobs)
}

func retentionSweepYieldsToTheOtherJobs(t *testing.T, b *backlog) {
	b.delivered(4*500 + 1)
	b.advance(kassa.DefaultNotificationRetention + time.Hour)
	ids := b.orders(1)
	b.advance(60 * 24 * time.Hour)
	// A token due to expire: a scheduled task.
	a := &token.Authorization{Token: "late", MerchantID: b.merchant, Country: "SE", Currency: "SEK", Locale: "sv-SE",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt:     b.now().Add(-2 * time.Hour), ExpiresAt: b.now().Add(-time.Hour)}
	if err := b.ledger.PutAuthorization(b.ctx, a); err != nil {
		t.Fatal(err)
	}
	j := b.jobs(1)
	if more := j.pass(b.ctx); !more {
		t.Fatal("the pass reported nothing left with most of the sweep to do")
	}
	if n := b.unmarked(ids); n != 0 {
		t.Fatal("the expiry job did not run in the pass")
	}
	var got *token.Authorization
	if err := b.st.View(b.ctx, func(tx storage.Tx) error {
		var err error
		got, err = tx.GetAuthorization(b.merchant, "late")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !got.Expired {
		t.Fatal("the token was not expired by the pass's scheduled tasks")
	}
	if n := b.notifications(); n <= 500 {
		t.Fatalf("%d of 2 001 notifications left after one pass with a budget of two transactions of 500", n)
	}
	for i := 0; j.pass(b.ctx); i++ {
		if i > 10 {
			t.Fatal("passes never finished the sweep")
		}
	}
	if n := b.notifications(); n != 0 {
		t.Fatalf("%d notifications past their retention left after the passes", n)
	}
}

// TestTokenSweepBacklogDrainsOverPasses: the first authorization token
// sweep after an upgrade has every token made in the store's life past its
// retention. A pass that ran out of budget with tokens left says so, as
// for the other jobs, so that the next pass follows after a second rather
// than a minute, and the passes remove them all.
func TestTokenSweepBacklogDrainsOverPasses(t *testing.T) {
	backlogStores(t, tokenSweepBacklogDrainsOverPasses)
}

func tokenSweepBacklogDrainsOverPasses(t *testing.T, b *backlog) {
	const n = 2*500 + 1
	at := b.now()
	if err := b.st.Update(b.ctx, func(tx storage.Tx) error {
		for i := range n {
			if err := tx.PutAuthorization(&token.Authorization{Token: fmt.Sprint("old-", i), MerchantID: b.merchant, Country: "SE",
				Currency: "SEK", Locale: "sv-SE", PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
				CreatedAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.advance(kassa.DefaultAuthorizationRetention + 2*time.Hour)
	left := func() int {
		t.Helper()
		k := 0
		if err := b.st.View(b.ctx, func(tx storage.Tx) error {
			for i := range n {
				if _, err := tx.GetAuthorization(b.merchant, fmt.Sprint("old-", i)); err == nil {
					k++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	j := b.jobs(1)
	if more := j.pass(b.ctx); !more {
		t.Fatal("a pass that swept one batch of tokens of three reported nothing left")
	}
	if k := left(); k != n-500 {
		t.Fatalf("%d of %d tokens left after a pass of one batch of 500", k, n)
	}
	for i := 0; j.pass(b.ctx); i++ {
		if i > 10 {
			t.Fatal("passes never finished the sweep")
		}
	}
	if k := left(); k != 0 {
		t.Fatalf("%d tokens past their retention left after the passes", k)
	}
}
