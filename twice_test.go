package kassa_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/storage"
)

// seededStore makes every Update start from the same randomness in each
// of two stores run side by side (crypto/rand seeded by the count of
// Updates), and, when twice, runs each Update's function twice: first in a
// transaction it rolls back once the function has returned (whatever it
// returned), then again, from the same ids and randomness, in a fresh
// transaction, whose outcome is the Update's. That is what PostgreSQL does
// after a serialization failure, a deadlock or a lost PutMerchant race
// (the function ran, then the transaction is run again), and bolt to the
// functions of a batch one of which panicked.
type seededStore struct {
	storage.Store
	t     *testing.T
	ids   *ordertest.IDs
	twice bool
	// partial, late: see Update.
	partial, late bool
	mu            sync.Mutex // one Update at a time: the randomness is the process's
	n             uint64
	ran           int // runs rolled back to run again
}

var errRunAgain = errors.New("rolled back to run again")

func (s *seededStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	cryptotest.SetGlobalRandom(s.t, s.n)
	// PostgreSQL's shared clock (a delivery's lease) is the database's
	// real time, which two stores read apart: both read the deliverer's.
	fn0 := fn
	fn = func(tx storage.Tx) error { return fn0(ownClockTx{tx}) }
	if !s.twice {
		return s.Store.Update(ctx, fn)
	}
	s.ids.Mark()
	// With partial, the function is first run with its first store call
	// failing, then its second, and so on (each run rolled back), until
	// a run has no call left to fail: a retry after a failure at any point.
	for k := 1; ; k++ {
		inj := &injector{}
		if s.partial {
			inj.arm(k, s.late)
		}
		ran := false
		err := s.Store.Update(ctx, func(tx storage.Tx) error {
			ran = true
			if err := fn(inj.wrap(tx)); err != nil {
				return err
			}
			return errRunAgain
		})
		if !ran {
			return err
		}
		s.ran++
		s.ids.Rewind()
		cryptotest.SetGlobalRandom(s.t, s.n)
		if injected, _ := inj.fired(); injected == nil {
			break
		}
	}
	return s.Store.Update(ctx, fn)
}

// ownClockTx is a transaction without storage.SharedClock.
type ownClockTx struct{ storage.Tx }

// twicePair is one operation's fixture twice over: on a store whose
// functions run once, and on one of the same kind whose functions run twice.
type twicePair struct {
	once, twice *undoFixture
	onceSt      *seededStore
	twiceSt     *seededStore
}

// TestFunctionsRunTwice runs every operation (those of
// TestFailedStoreCallLeavesNothing and the jobs: delivery, sweeps, tasks,
// webhook settings, merchants) on a store that runs each transaction's
// function twice, the first run rolled back, beside the same operation on
// a store that runs it once: the answers are the same, and so is every
// record (one outbox message per event, the same document numbers, no
// claim, id or result kept from the first run). Then again with first runs
// that stop where a store call fails (partial), before or after it wrote
// (late), at each call in turn. The first runs' ids and randomness are
// drawn again by the run that counts, so the two stores can be compared
// byte for byte; the webhook receiver counts its POSTs, each made once.
func TestFunctionsRunTwice(t *testing.T) {
	for _, mode := range []struct{ partial, late bool }{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("partial=%v,late=%v", mode.partial, mode.late), func(t *testing.T) {
			functionsRunTwice(t, mode.partial, mode.late)
		})
	}
}

func functionsRunTwice(t *testing.T, partial, late bool) {
	wall := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	kassa.SetWallClock(t, func() time.Time { return wall })
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	nowOnce, nowTwice := start, start
	storesOnce := undoStores(t, func() time.Time { return nowOnce })
	storesTwice := undoStores(t, func() time.Time { return nowTwice })
	for i := range storesOnce {
		t.Run("", func(t *testing.T) {
			nowOnce, nowTwice, wall = start, start, start
			var p twicePair
			for _, side := range []struct {
				open  func(*testing.T) undoStore
				now   *time.Time
				twice bool
			}{{storesOnce[i], &nowOnce, false}, {storesTwice[i], &nowTwice, true}} {
				st := side.open(t)
				ids := &ordertest.IDs{}
				ss := &seededStore{Store: st.store, t: t, ids: ids, twice: side.twice, partial: partial, late: late}
				f := &undoFixture{ctx: context.Background(), st: st, now: side.now,
					l: kassa.New(ss, kassa.Options{IDs: ids, NotificationRetention: 48 * time.Hour})}
				if side.twice {
					p.twice, p.twiceSt = f, ss
				} else {
					p.once, p.onceSt = f, ss
				}
			}
			for _, f := range []*undoFixture{p.once, p.twice} {
				f.merchants(t)
			}
			p.compare(t, "merchants")
			for k, c := range twiceCases() {
				// What is drawn outside a transaction (a test's token, a
				// client secret) is drawn alike on both sides too.
				seed := func(step uint64) { cryptotest.SetGlobalRandom(t, uint64(k+1)<<32|step) }
				// Each case counts its Updates from its own start, so a
				// case that failed on one side only leaves the next alike.
				p.onceSt.n, p.twiceSt.n = uint64(k+1)<<40, uint64(k+1)<<40
				t.Run(c.name, func(t *testing.T) {
					seed(1)
					opOnce := c.setup(t, p.once)
					seed(1)
					opTwice := c.setup(t, p.twice)
					p.compare(t, "setup")
					before := p.twiceSt.ran
					seed(2)
					a, errA := opOnce()
					seed(2)
					b, errB := opTwice()
					if p.twiceSt.ran == before {
						t.Fatal("no function was run twice")
					}
					if fmt.Sprint(errA) != fmt.Sprint(errB) {
						t.Fatalf("run once: %v\nrun twice: %v", errA, errB)
					}
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					if string(ja) != string(jb) {
						t.Fatalf("run once answered %s\nrun twice answered %s", ja, jb)
					}
					p.compare(t, "operation")
				})
			}
		})
	}
}

// compare fails the test if the two stores hold different records.
func (p *twicePair) compare(t *testing.T, when string) {
	t.Helper()
	if d := wordDiff(maskTwice(p.once.st.snapshot(t)), maskTwice(p.twice.st.snapshot(t))); d != "" {
		t.Fatalf("after %s, the store run once and the store run twice differ: %s", when, d)
	}
	if p.twice.st.check != nil {
		p.twice.st.check(t)
	}
}

// twiceCase is an operation: setup makes what it needs, and returns the
// operation, whose answer (encoded as JSON) and error are compared.
type twiceCase struct {
	name  string
	setup func(t *testing.T, f *undoFixture) func() (any, error)
}

func twiceCases() []twiceCase {
	var out []twiceCase
	for _, c := range undoCases() {
		out = append(out, twiceCase{c.name, func(t *testing.T, f *undoFixture) func() (any, error) {
			op, verify := c.setup(t, f)
			call := f.key(t)
			return func() (any, error) {
				res, err := op(call)
				if err != nil {
					return nil, err
				}
				verify(t)
				return res, nil
			}
		}})
	}
	return append(out, jobCases()...)
}

// webhookReceiver answers 500 to the first attempt of events whose number
// ends in 3, and 200 to the others, without a network. It counts the POSTs
// of each event.
type webhookReceiver struct {
	mu    sync.Mutex
	posts map[string]int
}

func (w *webhookReceiver) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.posts[r.Header.Get(notify.HeaderEventID)+" attempt "+r.Header.Get(notify.HeaderAttempt)]++
	w.mu.Unlock()
	status := http.StatusOK
	if id := r.Header.Get(notify.HeaderEventID); id != "" && id[len(id)-1] == '3' && r.Header.Get(notify.HeaderAttempt) == "1" {
		status = http.StatusInternalServerError
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
}

func (f *undoFixture) deliveryOptions(w *webhookReceiver) kassa.DeliveryOptions {
	return kassa.DeliveryOptions{Client: &http.Client{Transport: w}, Parallel: 1,
		RandN: func(n int64) int64 { return n / 2 }, WallClock: func() time.Time { return *f.now }}
}

// jobCases are the operations TestFailedStoreCallLeavesNothing leaves out:
// webhook settings, delivery, redelivery, sweeps, tasks, merchants and the
// settlement reads.
func jobCases() []twiceCase {
	hook := func(t *testing.T, f *undoFixture) {
		t.Helper()
		if _, err := f.l.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://hooks.example.com/k",
			Events: []string{notify.AllOrderEvents}, Secret: strings.Repeat("s", 32)}); err != nil {
			t.Fatal(err)
		}
	}
	return []twiceCase{
		{"setWebhookDeclared", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) {
				return f.l.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://hooks.example.com/d",
					Secret: strings.Repeat("d", 32), Declared: true})
			}
		}},
		{"setWebhookRotate", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) {
				w, err := f.l.SetWebhook(f.ctx, f.merchant, kassa.SetWebhookRequest{URL: "https://hooks.example.com/r", RotateSecret: true})
				if err == nil {
					m, err := f.l.Merchant(f.ctx, f.merchant)
					if err != nil || m.WebhookSecret != w.Secret || w.Secret == "" {
						t.Fatalf("the answer's secret %q, the stored one %q (%v)", w.Secret, m.WebhookSecret, err)
					}
				}
				return w, err
			}
		}},
		{"deliver", func(t *testing.T, f *undoFixture) func() (any, error) {
			hook(t, f)
			for range 3 {
				f.captured(t, f.order(t, f.merchant).ID)
			}
			return func() (any, error) {
				w := &webhookReceiver{posts: map[string]int{}}
				s, err := f.l.DeliverNotifications(f.ctx, f.deliveryOptions(w))
				if err == nil && (s.Delivered == 0 || s.Retrying == 0) {
					t.Fatalf("delivery %+v: want some delivered and some retrying", s)
				}
				for post, n := range w.posts {
					if n != 1 {
						t.Errorf("%s posted %d times", post, n)
					}
				}
				return []any{s, w.posts}, err
			}
		}},
		{"deliverAgain", func(t *testing.T, f *undoFixture) func() (any, error) {
			*f.now = f.now.Add(2 * time.Hour)
			return func() (any, error) {
				w := &webhookReceiver{posts: map[string]int{}}
				s, err := f.l.DeliverNotifications(f.ctx, f.deliveryOptions(w))
				return []any{s, w.posts}, err
			}
		}},
		{"redeliver", func(t *testing.T, f *undoFixture) func() (any, error) {
			page, err := f.l.ListNotifications(f.ctx, f.merchant, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var id string
			for _, n := range page.Notifications {
				if n.Status == "delivered" {
					id = n.ID
				}
			}
			if id == "" {
				t.Fatal("nothing delivered")
			}
			return func() (any, error) { return f.l.RedeliverNotification(f.ctx, f.merchant, id) }
		}},
		{"sweepNotifications", func(t *testing.T, f *undoFixture) func() (any, error) {
			*f.now = f.now.Add(72 * time.Hour)
			return func() (any, error) {
				n, more, err := f.l.SweepNotificationsOnce(f.ctx, 1000)
				if err == nil && n == 0 {
					t.Fatal("no notification swept")
				}
				return []any{n, more}, err
			}
		}},
		{"sweepIdempotency", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) {
				kassa.SetWallClock(t, func() time.Time { return time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC) })
				n, more, err := f.l.SweepIdempotencyOnce(f.ctx, 1000)
				if err == nil && n == 0 {
					t.Fatal("no key swept")
				}
				return []any{n, more}, err
			}
		}},
		{"deleteWebhook", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) { return nil, f.l.DeleteWebhook(f.ctx, f.merchant) }
		}},
		{"ensureMerchantNew", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) {
				c, created, err := f.l.EnsureMerchant(f.ctx, kassa.MerchantOptions{Name: "new"})
				return []any{c, created}, err
			}
		}},
		{"ensureMerchantNewSecret", func(t *testing.T, f *undoFixture) func() (any, error) {
			return func() (any, error) {
				c, created, err := f.l.EnsureMerchant(f.ctx, kassa.MerchantOptions{ClientID: "client-false", ClientSecret: "another"})
				return []any{c, created}, err
			}
		}},
		{"runTasks", func(t *testing.T, f *undoFixture) func() (any, error) {
			hook(t, f)
			f.order(t, f.ackMerch) // an acknowledgement reminder
			for _, ac := range []*order.AutoCapture{{Enabled: true, DelayMinutes: 30}, {Enabled: true, DelayMinutes: 30}} {
				req := undoCreate()
				req.AutoCapture = ac
				if _, err := f.l.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, f.token(t, f.merchant), req); err != nil {
					t.Fatal(err)
				}
			}
			f.token(t, f.merchant) // expires unused
			*f.now = f.now.Add(3 * time.Hour)
			return func() (any, error) {
				s, err := f.l.RunTasks(f.ctx, 1000)
				if err == nil && (s.AutoCaptured != 2 || s.TokensExpired == 0 || s.RemindersSent == 0) {
					t.Fatalf("tasks %+v", s)
				}
				return s, err
			}
		}},
		{"settle", func(t *testing.T, f *undoFixture) func() (any, error) {
			f.captured(t, f.order(t, f.merchant).ID)
			return func() (any, error) {
				made, err := f.l.RunSettlementsBefore(f.ctx, f.now.Add(time.Second))
				if err == nil && len(made) != 1 {
					t.Errorf("%d settlements made, want 1", len(made))
				}
				return made, err
			}
		}},
		{"settlementReads", func(t *testing.T, f *undoFixture) func() (any, error) {
			f.captured(t, f.order(t, f.merchant).ID)
			made, err := f.l.RunSettlements(f.ctx)
			if err != nil || len(made) == 0 {
				t.Fatalf("settlements %v %v", made, err)
			}
			s := made[0]
			return func() (any, error) {
				var csv bytes.Buffer
				if err := f.l.ExportSettlement(f.ctx, s.MerchantID, s.ID, &csv); err != nil {
					return nil, err
				}
				page, err := f.l.SettlementTransactions(f.ctx, s.MerchantID, s.ID, "", 1000)
				// The reads write nothing: an Update of its own to run twice.
				_, _ = f.l.RunSettlements(f.ctx)
				return []any{csv.String(), page}, err
			}
		}},
	}
}

// maskTwice leaves out of a snapshot what two stores opened apart differ
// in whatever they hold: PostgreSQL's migration times and store identity.
func maskTwice(snap string) string {
	var keep []string
	for _, line := range strings.Split(snap, "\n") {
		if strings.HasPrefix(line, "schema_migrations: ") || strings.HasPrefix(line, "store_info: ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// wordDiff shows where two snapshots first differ, with some context.
func wordDiff(a, b string) string {
	if a == b {
		return ""
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-300)
	return fmt.Sprintf("at byte %d:\n  once:  …%s\n  twice: …%s", i, a[from:min(len(a), i+300)], b[from:min(len(b), i+300)])
}
