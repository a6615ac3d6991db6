package kassa_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
	"github.com/kassahq/kassa/storage/storagetest"
	"github.com/kassahq/kassa/token"
)

// injector makes the at-th store call (counted across the transactions of
// one operation) fail with an internal error of its own, as a database
// would: before the call does anything or, late, after it did its work
// (wrote), as a statement whose answer is lost. at 0 fails none.
type injector struct {
	mu      sync.Mutex
	at, n   int
	late    bool
	pending bool
	err     error
	method  string
}

func (f *injector) arm(at int, late bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at, f.n, f.late, f.pending, f.err, f.method = at, 0, late, false, nil, ""
}

// fired reports the error injected since arm, if any.
func (f *injector) fired() (error, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err, f.method
}

// Before counts a call, and fails it if it is the one, unless late.
func (f *injector) Before(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.at == 0 || f.n != f.at {
		return nil
	}
	f.err = fault.Internalf(nil, "injected failure of store call %d (%s, late %v)", f.n, name, f.late)
	f.method = name
	if f.late {
		f.pending = true
		return nil
	}
	return f.err
}

// After is the error of a call that ran: the injected one if it is the one
// to fail late.
func (f *injector) After(_ string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending {
		f.pending = false
		return f.err
	}
	return err
}

func (f *injector) wrap(tx storage.Tx) storage.Tx { return storagetest.Hooked(tx, f) }

// undoStore is a store under test with a reading of everything it holds.
type undoStore struct {
	name     string
	store    storage.Store
	snapshot func(t *testing.T) string
	check    func(t *testing.T) // the store's own consistency check, if any
}

func undoStores(t *testing.T, clock func() time.Time) []func(t *testing.T) undoStore {
	return []func(t *testing.T) undoStore{
		func(t *testing.T) undoStore {
			st := memory.New(clock)
			return undoStore{name: "memory", store: st, snapshot: func(t *testing.T) string { return memorySnapshot(st) }}
		},
		func(t *testing.T) undoStore {
			dir := t.TempDir()
			st, err := bolt.Open(filepath.Join(dir, "k.db"), bolt.Options{Clock: clock, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return undoStore{name: "bolt", store: st,
				snapshot: func(t *testing.T) string { return boltSnapshot(t, st) },
				check: func(t *testing.T) {
					if err := st.Check(); err != nil {
						t.Fatalf("bolt Check: %v", err)
					}
				}}
		},
		func(t *testing.T) undoStore {
			u := pgtest.FreshSchema(t)
			st, err := postgres.Open(context.Background(), u, postgres.Options{MaxConns: 4, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			conn, err := pgx.Connect(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			return undoStore{name: "postgres", store: st, snapshot: func(t *testing.T) string { return pgSnapshot(t, conn) }}
		},
	}
}

// memorySnapshot reads every record of a memory store.
func memorySnapshot(st *memory.Store) string {
	v := reflect.ValueOf(st).Elem().FieldByName("data")
	var lines []string
	for _, k := range v.MapKeys() {
		lines = append(lines, k.String()+" = "+string(v.MapIndex(k).Bytes()))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// boltSnapshot reads every key of every bucket (records and indexes) of a
// copy of a bolt store's file.
func boltSnapshot(t *testing.T, st *bolt.Store) string {
	var buf bytes.Buffer
	if _, err := st.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out strings.Builder
	var walk func(prefix string, b *bbolt.Bucket) error
	walk = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			fmt.Fprintf(&out, "%s%q = %q\n", prefix, k, v)
			return nil
		})
	}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return walk(string(name)+"/", b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// pgSnapshot reads every row of every table of the store's schema.
func pgSnapshot(t *testing.T, conn *pgx.Conn) string {
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, tb := range tables {
		rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT t::text FROM %s t ORDER BY 1`, pgx.Identifier{tb}.Sanitize()))
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			fmt.Fprintf(&out, "%s: %s\n", tb, r)
		}
	}
	return out.String()
}

// firstDiff names the first line two snapshots differ in.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  before: %.400s\n  after:  %.400s", i, x, y)
		}
	}
	return ""
}

// undoFixture is one store under a ledger whose store calls an injector
// can make fail.
type undoFixture struct {
	ctx      context.Context
	st       undoStore
	inj      *injector
	l        *kassa.Ledger
	merchant string
	ackMerch string
	now      *time.Time
	n        int
}

func (f *undoFixture) key(t *testing.T) kassa.Call {
	f.n++
	return kassa.Call{MerchantID: f.merchant, IdempotencyKey: fmt.Sprintf("%s-%d", t.Name(), f.n)}
}

// token stores an authorization token of a sandbox buyer approved for
// everything, and returns it.
func (f *undoFixture) token(t *testing.T, merchantID string) string {
	t.Helper()
	auth, err := sandbox.Mint(&sandbox.TokenRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Customer: &order.CustomerInput{CompanyID: "5560000001"}},
		merchantID, "at_"+kassa.RandomSecret(20), *f.now, f.l.AuthorizationTTL())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.l.PutAuthorization(f.ctx, auth); err != nil {
		t.Fatal(err)
	}
	return auth.Token
}

var undoLines = []order.LineInput{
	{Description: ptr("Tiles"), Quantity: ptr(int64(4)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))},
	{Description: ptr("Delivery"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))},
}

func undoCreate() *order.CreateRequest {
	return &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: undoLines}
}

// order makes an order of 600.00 (tiles 500.00, delivery 100.00).
// merchants makes the fixture's two merchants, one that requires
// acknowledgement, with client ids of their own, so that two fixtures run
// side by side make the same records.
func (f *undoFixture) merchants(t *testing.T) {
	t.Helper()
	for _, ack := range []bool{false, true} {
		creds, _, err := f.l.EnsureMerchant(f.ctx, kassa.MerchantOptions{Name: "m", RequireAck: ack,
			ClientID: fmt.Sprint("client-", ack), ClientSecret: "secret"})
		if err != nil {
			t.Fatal(err)
		}
		if ack {
			f.ackMerch = creds.MerchantID
		} else {
			f.merchant = creds.MerchantID
		}
	}
}

// customerToken makes a customer token of the fixture's merchant.
func (f *undoFixture) customerToken(t *testing.T) string {
	t.Helper()
	return customerTokenOf(t, f.ctx, f.l, f.merchant, f.token(t, f.merchant))
}

// customerTokenOf makes merchant's customer token, through l, from the
// authorization token auth, and returns its id.
func customerTokenOf(t *testing.T, ctx context.Context, l *kassa.Ledger, merchant, auth string) string {
	t.Helper()
	res, err := l.CreateCustomerToken(ctx, kassa.Call{MerchantID: merchant}, auth,
		&token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", Customer: &order.CustomerInput{}})
	if err != nil {
		t.Fatal(err)
	}
	var ct struct {
		TokenID string `json:"customerToken"`
	}
	if err := json.Unmarshal(res.Body, &ct); err != nil || ct.TokenID == "" {
		t.Fatalf("customer token from %s: %v", res.Body, err)
	}
	return ct.TokenID
}

func (f *undoFixture) order(t *testing.T, merchantID string) *order.Order {
	t.Helper()
	res, err := f.l.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: merchantID}, f.token(t, merchantID), undoCreate())
	if err != nil {
		t.Fatal(err)
	}
	return res.Order
}

func (f *undoFixture) get(t *testing.T, id string) *order.Order {
	t.Helper()
	o, _, err := f.l.GetOrder(f.ctx, f.merchant, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *undoFixture) captured(t *testing.T, id string) *order.Order {
	t.Helper()
	if _, err := f.l.Capture(f.ctx, kassa.Call{MerchantID: f.merchant}, id, nil); err != nil {
		t.Fatal(err)
	}
	return f.get(t, id)
}

// undoCase is one operation: setup makes what it needs without failures
// and returns the operation, run with one idempotency key every time, and
// the check of the state it leaves once it succeeded.
type undoCase struct {
	name  string
	setup func(t *testing.T, f *undoFixture) (op func(kassa.Call) (*kassa.Result, error), verify func(t *testing.T))
}

func amountsAre(t *testing.T, f *undoFixture, id string, captured, refunded, uncaptured int64) {
	t.Helper()
	a := f.get(t, id).Amounts()
	if a.Captured != captured || a.Refunded != refunded || a.Uncaptured != uncaptured {
		t.Fatalf("captured %d refunded %d uncaptured %d, want %d %d %d", a.Captured, a.Refunded, a.Uncaptured, captured, refunded, uncaptured)
	}
}

func undoCases() []undoCase {
	return []undoCase{
		{"createFromToken", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			tok := f.token(t, f.merchant)
			var id string
			return func(c kassa.Call) (*kassa.Result, error) {
					r, err := f.l.CreateOrderFromAuthorization(f.ctx, c, tok, undoCreate())
					if err == nil && r.Order != nil {
						id = r.Order.ID
					}
					return r, err
				}, func(t *testing.T) {
					amountsAre(t, f, id, 0, 0, 60000)
				}
		}},
		{"customerToken", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			tok := f.token(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.CreateCustomerToken(f.ctx, c, tok, &token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", Customer: &order.CustomerInput{}})
				}, func(t *testing.T) {
					if _, err := f.l.CreateCustomerToken(f.ctx, kassa.Call{MerchantID: f.merchant}, tok, &token.CreateCustomerRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", Customer: &order.CustomerInput{}}); fault.CodeOf(err) != "authorization_token_used" {
						t.Fatalf("second customer token from the same authorization: %v", err)
					}
				}
		}},
		{"createFromCustomerToken", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			ct := f.customerToken(t)
			var id string
			return func(c kassa.Call) (*kassa.Result, error) {
					r, err := f.l.CreateOrderFromCustomerToken(f.ctx, c, ct, undoCreate())
					if err == nil && r.Order != nil {
						id = r.Order.ID
					}
					return r, err
				}, func(t *testing.T) {
					amountsAre(t, f, id, 0, 0, 60000)
				}
		}},
		{"revokeCustomerToken", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			ct := f.customerToken(t)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.RevokeCustomerToken(f.ctx, c, ct) },
				func(t *testing.T) {
					c, err := f.l.GetCustomerToken(f.ctx, f.merchant, ct)
					if err != nil || c.RevokedAt == nil {
						t.Fatalf("token after revoke: %+v %v", c, err)
					}
				}
		}},
		{"deleteAuthorization", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			tok := f.token(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.DeleteAuthorization(f.ctx, c, tok) },
				func(t *testing.T) {
					if _, err := f.l.CreateOrderFromAuthorization(f.ctx, kassa.Call{MerchantID: f.merchant}, tok, undoCreate()); err == nil {
						t.Fatal("an order from a deleted token")
					}
				}
		}},
		{"acknowledge", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.ackMerch)
			return func(c kassa.Call) (*kassa.Result, error) {
					c.MerchantID = f.ackMerch
					return f.l.Acknowledge(f.ctx, c, o.ID)
				}, func(t *testing.T) {
					o, _, err := f.l.GetOrder(f.ctx, f.ackMerch, o.ID)
					if err != nil || o.Unacknowledged {
						t.Fatalf("order after acknowledge: %v, unacknowledged %v", err, o.Unacknowledged)
					}
				}
		}},
		{"captureFull", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.Capture(f.ctx, c, o.ID, nil) },
				func(t *testing.T) {
					amountsAre(t, f, o.ID, 60000, 0, 0)
					if got := f.get(t, o.ID); len(got.Captured) != 1 {
						t.Fatalf("%d captures", len(got.Captured))
					}
				}
		}},
		{"capturePartial", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			tiles := o.Uncaptured.Lines[0]
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.PartialCapture(f.ctx, c, o.ID, &capture.PartialRequest{OrderLines: []order.LineInput{{ID: &tiles.ID}}, TotalCaptureAmount: ptr(tiles.TotalAmount)})
				}, func(t *testing.T) {
					amountsAre(t, f, o.ID, 50000, 0, 10000)
				}
		}},
		{"refundFull", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.Refund(f.ctx, c, o.ID, o.Captured[0].ID, nil) },
				func(t *testing.T) { amountsAre(t, f, o.ID, 60000, 60000, 0) }
		}},
		{"refundPartial", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			inv := o.Captured[0]
			broken := inv.Lines[0].Input()
			broken.Quantity, broken.TotalAmount, broken.TotalVatAmount = ptr(int64(1)), nil, nil
			return func(c kassa.Call) (*kassa.Result, error) {
				return f.l.PartialRefund(f.ctx, c, o.ID, inv.ID, &refund.PartialRequest{OrderLines: []order.LineInput{broken}, TotalRefundAmount: ptr(int64(12500))})
			}, func(t *testing.T) { amountsAre(t, f, o.ID, 60000, 12500, 0) }
		}},
		{"cancel", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.CancelOrder(f.ctx, c, o.ID) },
				func(t *testing.T) {
					if got := f.get(t, o.ID); !got.Cancelled || got.CancelledAmount != 60000 {
						t.Fatalf("cancelled %v %d", got.Cancelled, got.CancelledAmount)
					}
				}
		}},
		{"void", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.CancelLedger(f.ctx, c, o.ID, o.Captured[0].ID) },
				func(t *testing.T) { amountsAre(t, f, o.ID, 0, 0, 0) }
		}},
		{"editLines", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) {
				return f.l.EditOrder(f.ctx, c, o.ID, &order.EditRequest{OrderLines: []order.LineInput{
					{Description: ptr("Tiles"), Quantity: ptr(int64(2)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))}},
					TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(25000)), TotalOrderAmountExclVat: ptr(int64(20000)), TotalOrderVatAmount: ptr(int64(5000))}})
			}, func(t *testing.T) { amountsAre(t, f, o.ID, 0, 0, 25000) }
		}},
		{"editCustomer", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.EditCustomer(f.ctx, c, o.ID, &order.EditCustomerRequest{Phone: ptr("+46701234567")})
				}, func(t *testing.T) {
					if got := f.get(t, o.ID); got.Customer.Phone != "+46701234567" {
						t.Fatalf("phone %q", got.Customer.Phone)
					}
				}
		}},
		{"editPaymentMethod", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.EditPaymentMethod(f.ctx, c, o.ID, &order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{
						Provider: order.ProviderService, Type: order.PayAdvanceInvoice}})
				}, func(t *testing.T) {
					if got := f.get(t, o.ID); got.PaymentMethod.Type != order.PayAdvanceInvoice {
						t.Fatalf("payment method %v", got.PaymentMethod)
					}
				}
		}},
		{"reference", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.SetReference(f.ctx, c, o.ID, &order.ReferenceRequest{Reference: ptr("ref-1")})
				}, func(t *testing.T) {
					if got := f.get(t, o.ID); got.MerchantReference != "ref-1" {
						t.Fatalf("reference %q", got.MerchantReference)
					}
				}
		}},
		{"extendExpiry", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.ExtendExpiry(f.ctx, c, o.ID) },
				func(t *testing.T) {
					if got := f.get(t, o.ID); !got.ExpiresAt.After(o.ExpiresAt) {
						t.Fatalf("expiry %v, was %v", got.ExpiresAt, o.ExpiresAt)
					}
				}
		}},
		{"resend", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			return func(c kassa.Call) (*kassa.Result, error) { return f.l.ResendDocument(f.ctx, c, o.ID, o.Captured[0].ID) },
				func(t *testing.T) {
					if got := f.get(t, o.ID); got.Version != o.Version+1 {
						t.Fatalf("version %d, want %d: changed once", got.Version, o.Version+1)
					}
				}
		}},
		{"pay", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.RegisterPayment(f.ctx, c, o.ID, o.Captured[0].ID, 20000)
				}, func(t *testing.T) {
					if got := f.get(t, o.ID); got.Version != o.Version+1 {
						t.Fatalf("version %d, want %d: changed once", got.Version, o.Version+1)
					}
				}
		}},
		{"recourse", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.Recourse(f.ctx, c, o.ID, o.Captured[0].ID, &order.RecourseRequest{Reason: ptr("unpaid")})
				}, func(t *testing.T) {
					if got := f.get(t, o.ID); got.Version != o.Version+1 {
						t.Fatalf("version %d, want %d: changed once", got.Version, o.Version+1)
					}
				}
		}},
		{"sessionCreate", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.CreateSession(f.ctx, c, session.SourceCheckout, &session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE",
						OrderLines: undoLines, ExternalSessionID: "ext-" + strings.ReplaceAll(c.IdempotencyKey, "/", "-")})
				}, func(t *testing.T) {
					page, err := f.l.ListSessions(f.ctx, f.merchant, session.Query{})
					if err != nil {
						t.Fatal(err)
					}
					_ = page
				}
		}},
		{"sessionUpdate", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			id := f.session(t)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.UpdateSession(f.ctx, c, id, session.SourceCheckout, &session.UpdateRequest{MerchantReference: ptr("r")})
				}, func(t *testing.T) {
					rec, err := f.l.GetSession(f.ctx, f.merchant, id, session.SourceCheckout)
					if err != nil || rec.Session.MerchantReference != "r" {
						t.Fatalf("session after update: %v %q", err, rec.Session.MerchantReference)
					}
				}
		}},
		{"sessionCancel", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			id := f.session(t)
			return func(c kassa.Call) (*kassa.Result, error) {
					return f.l.DeleteSession(f.ctx, c, id, session.SourceCheckout)
				},
				func(t *testing.T) {
					rec, err := f.l.GetSession(f.ctx, f.merchant, id, session.SourceCheckout)
					if err != nil || rec.Session.StateAt(*f.now) == session.StateAuthorized {
						t.Fatalf("session after cancel: %v %v", err, rec.Session.StateAt(*f.now))
					}
				}
		}},
		{"sessionApprove", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			id := f.session(t)
			seen, err := f.l.GetSession(f.ctx, f.merchant, id, session.SourceCheckout)
			if err != nil {
				t.Fatal(err)
			}
			return func(c kassa.Call) (*kassa.Result, error) {
					_, err := f.l.ApproveSession(f.ctx, f.merchant, id, kassa.Approval{Terms: seen.Terms(), CompanyName: "Approved Byggvaror AB",
						PaymentMethod: order.PayInvoice, Customer: order.CustomerInput{CompanyID: "5560000001", Country: "SE", Email: "a@example.com",
							FirstName: "A", LastName: "B", BillingAddress: &order.Address{CompanyName: "Approved Byggvaror AB", StreetAddress: "Gatan 1",
								PostalCode: "11122", City: "Stockholm", Country: "SE"}}})
					return nil, err
				}, func(t *testing.T) {
					rec, err := f.l.GetSession(f.ctx, f.merchant, id, session.SourceCheckout)
					if err != nil || rec.Session.StateAt(*f.now) != session.StateAuthorized {
						t.Fatalf("session after approve: %v %v", err, rec.Session.StateAt(*f.now))
					}
				}
		}},
		{"settlementRun", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.captured(t, f.order(t, f.merchant).ID)
			if _, err := f.l.PartialRefund(f.ctx, kassa.Call{MerchantID: f.merchant}, o.ID, o.Captured[0].ID, &refund.PartialRequest{
				OrderLines: []order.LineInput{o.Captured[0].Lines[1].Input()}, TotalRefundAmount: ptr(int64(10000))}); err != nil {
				t.Fatal(err)
			}
			var made []settlement.Settlement
			return func(kassa.Call) (*kassa.Result, error) {
					m, err := f.l.RunSettlements(f.ctx)
					if err == nil && made == nil {
						made = m
					} else if err == nil && len(m) > 0 {
						t.Errorf("a second run made %d settlements", len(m))
					}
					return nil, err
				}, func(t *testing.T) {
					if len(made) == 0 {
						t.Fatal("no settlement made")
					}
					var txs int
					for _, s := range made {
						page, err := f.l.SettlementTransactions(f.ctx, s.MerchantID, s.ID, "", 1000)
						if err != nil {
							t.Fatal(err)
						}
						txs += len(page.Transactions)
					}
					if txs == 0 {
						t.Fatal("settlements without transactions")
					}
				}
		}},
		{"expireOrders", func(t *testing.T, f *undoFixture) (func(kassa.Call) (*kassa.Result, error), func(*testing.T)) {
			o := f.order(t, f.merchant)
			*f.now = o.ExpiresAt.Add(time.Hour) // the last case: every order still open expires
			n := -1
			return func(kassa.Call) (*kassa.Result, error) {
					got, err := f.l.ExpireOrders(f.ctx, 1000)
					if err == nil && n < 0 {
						n = got
					} else if err == nil && got > 0 {
						t.Errorf("a second run expired %d orders", got)
					}
					return nil, err
				}, func(t *testing.T) {
					if n <= 0 {
						t.Fatalf("%d orders expired", n)
					}
					if got := f.get(t, o.ID); !got.Expired(*f.now) {
						t.Fatal("the order is not expired")
					}
				}
		}},
	}
}

func (f *undoFixture) session(t *testing.T) string {
	t.Helper()
	res, err := f.l.CreateSession(f.ctx, kassa.Call{MerchantID: f.merchant}, session.SourceCheckout,
		&session.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: undoLines})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(res.Body, &created); err != nil || created.ID == "" {
		t.Fatalf("session id from %s: %v", res.Body, err)
	}
	return created.ID
}

// TestFailedStoreCallLeavesNothing makes each store call of each operation
// fail in turn, the first, the second, …, until the operation succeeds: after
// each failure the caller has the store's error and the store holds exactly
// what it held before (every record, and on bolt every index entry); the
// operation retried with the same idempotency key then does its work once.
func TestFailedStoreCallLeavesNothing(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late=", late), func(t *testing.T) { failedStoreCallLeavesNothing(t, late) })
	}
}

// withUndoFixtures runs run, on each store in turn, on an undoFixture whose
// ledger's store calls its injector can make fail.
func withUndoFixtures(t *testing.T, run func(t *testing.T, f *undoFixture)) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, open := range undoStores(t, clock) {
		t.Run("", func(t *testing.T) {
			now = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
			st := open(t)
			inj := &injector{}
			f := &undoFixture{ctx: context.Background(), st: st, inj: inj, now: &now,
				l: kassa.New(storagetest.WrapTx{Store: st.store, Wrap: inj.wrap}, kassa.Options{})}
			f.merchants(t)
			run(t, f)
		})
	}
}

func failedStoreCallLeavesNothing(t *testing.T, late bool) {
	withUndoFixtures(t, func(t *testing.T, f *undoFixture) {
		st, inj := f.st, f.inj
		for _, c := range undoCases() {
			t.Run(c.name, func(t *testing.T) {
				op, verify := c.setup(t, f)
				call := f.key(t)
				for k := 1; ; k++ {
					if k > 200 {
						t.Fatal("no success after 200 injected failures")
					}
					before := st.snapshot(t)
					inj.arm(k, late)
					res, err := op(call)
					injected, method := inj.fired()
					inj.arm(0, false)
					if injected == nil {
						if k == 1 {
							t.Fatal("no store call was made through the injector: it would fail none")
						}
						if err != nil {
							t.Fatalf("after %d failures, with none injected: %v", k-1, err)
						}
						verify(t)
						if st.check != nil {
							st.check(t)
						}
						after := st.snapshot(t)
						if after == before {
							t.Fatal("the store is the same after the operation succeeded")
						}
						again, err := op(call)
						if res == nil && err != nil {
							t.Logf("again: %v (no idempotency key)", err)
						} else if err != nil {
							t.Fatalf("replay: %v", err)
						}
						if res != nil && (again == nil || !again.Replayed || !bytes.Equal(again.Body, res.Body)) {
							t.Fatalf("replay %+v, want the first answer replayed", again)
						}
						verify(t)
						if d := firstDiff(after, st.snapshot(t)); d != "" {
							t.Fatalf("a replay changed the store: %s", d)
						}
						t.Logf("%d store calls", k-1)
						return
					}
					if err == nil {
						t.Errorf("call %d (%s) failed and the operation succeeded", k, method)
					} else if !errors.Is(err, injected) || !fault.Is(err, fault.Internal) {
						t.Errorf("call %d (%s) failed: the caller got %v (kind %v), want the store's error", k, method, err, fault.KindOf(err))
					}
					if d := firstDiff(before, st.snapshot(t)); d != "" {
						t.Errorf("call %d (%s) failed and the store changed: %s", k, method, d)
					}
					if st.check != nil {
						st.check(t)
					}
				}
			})
		}
	})
}

// failOrderTx fails, late (after the write), the update of one order, as a
// statement whose answer is lost.
type failOrderTx struct {
	storage.Tx
	orderID string
	err     error
}

func (t failOrderTx) UpdateOrder(o *order.Order) error {
	if err := t.Tx.UpdateOrder(o); err != nil || o.ID != t.orderID {
		return err
	}
	return t.err
}

// TestBoltBatchKeepsOthersWork: on bolt, functions committed in one
// transaction (group commit) are isolated: one that fails after it wrote
// (a capture whose order update fails, a function writing a token then
// returning an error) leaves nothing, indexes and document numbers
// included, while the captures beside it commit once; one that panics after
// it wrote leaves nothing either, and the others, run again in a fresh
// transaction, still commit exactly once.
func TestBoltBatchKeepsOthersWork(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprint("panics=", panics), func(t *testing.T) { boltBatchKeepsOthersWork(t, panics) })
	}
}

func boltBatchKeepsOthersWork(t *testing.T, panics bool) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "k.db"), bolt.Options{Clock: func() time.Time { return now }, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	errLost := fault.Internalf(nil, "the answer was lost")
	var failing string
	var mu sync.Mutex
	l := kassa.New(storagetest.WrapTx{Store: st, Wrap: func(tx storage.Tx) storage.Tx {
		mu.Lock()
		defer mu.Unlock()
		return failOrderTx{tx, failing, errLost}
	}}, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	f := &undoFixture{ctx: ctx, l: l, merchant: creds.MerchantID, now: &now}
	const n = 8
	var ids []string
	for range n {
		ids = append(ids, f.order(t, f.merchant).ID)
	}
	if !panics {
		// Otherwise no capture fails; a function beside them panics.
		mu.Lock()
		failing = ids[3]
		mu.Unlock()
	}

	// Hold the committer, so that everything below is queued into one batch.
	hold, held := make(chan struct{}), make(chan struct{})
	go st.Update(ctx, func(storage.Tx) error { close(held); <-hold; return nil })
	<-held
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Capture(ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: "cap-" + id}, id, nil)
		}()
	}
	var rawErr, panicErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		rawErr = st.Update(ctx, func(tx storage.Tx) error {
			if err := tx.PutAuthorization(&token.Authorization{Token: "at_undone", MerchantID: f.merchant, Country: "SE", Currency: "SEK",
				CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
			if _, err := tx.NextSequence(f.merchant, order.SeriesInvoice); err != nil {
				return err
			}
			return errLost
		})
	}()
	go func() {
		defer wg.Done()
		if !panics {
			return
		}
		panicErr = st.Update(ctx, func(tx storage.Tx) error {
			if err := tx.PutAuthorization(&token.Authorization{Token: "at_panicked", MerchantID: f.merchant, Country: "SE", Currency: "SEK",
				CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
			if _, err := tx.NextSequence(f.merchant, order.SeriesInvoice); err != nil {
				return err
			}
			panic("after writing")
		})
	}()
	time.Sleep(100 * time.Millisecond) // every one queued behind the held function
	close(hold)
	wg.Wait()

	if rawErr != errLost {
		t.Errorf("the function that failed after writing: %v", rawErr)
	}
	if panics && !fault.Is(panicErr, fault.Internal) {
		t.Errorf("the function that panicked: %v, want an internal error", panicErr)
	}
	var invoices []string
	for i, id := range ids {
		o := f.get(t, id)
		if !panics && i == 3 {
			if !errors.Is(errs[i], errLost) {
				t.Errorf("the failing capture: %v", errs[i])
			}
			if len(o.Captured) != 0 || o.Version != 1 {
				t.Errorf("the failing capture left %d captures, version %d", len(o.Captured), o.Version)
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("capture %d beside the failing one: %v", i, errs[i])
			continue
		}
		if len(o.Captured) != 1 || o.Version != 2 || o.Amounts().Captured != 60000 {
			t.Errorf("capture %d: %d captures, version %d, captured %d", i, len(o.Captured), o.Version, o.Amounts().Captured)
			continue
		}
		invoices = append(invoices, o.Captured[0].DocumentReference)
	}
	slices.Sort(invoices)
	var want []string
	for i := range invoices {
		want = append(want, fmt.Sprintf("INV-%08d", i+1))
	}
	if !slices.Equal(invoices, want) {
		t.Errorf("invoice numbers %v, want %v (gapless)", invoices, want)
	}
	for _, tok := range []string{"at_undone", "at_panicked"} {
		err := st.View(ctx, func(tx storage.Tx) error { _, err := tx.GetAuthorization(f.merchant, tok); return err })
		if !fault.Is(err, fault.NotFound) {
			t.Errorf("token %s written by a failed function: %v", tok, err)
		}
	}
	if err := st.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !panics {
		// The failed capture, retried with its key, is made once.
		mu.Lock()
		failing = ""
		mu.Unlock()
		if _, err := l.Capture(ctx, kassa.Call{MerchantID: f.merchant, IdempotencyKey: "cap-" + ids[3]}, ids[3], nil); err != nil {
			t.Fatal(err)
		}
		if o := f.get(t, ids[3]); len(o.Captured) != 1 || o.Captured[0].DocumentReference != fmt.Sprintf("INV-%08d", n) {
			t.Errorf("retried capture: %d captures, %q", len(o.Captured), o.Captured[0].DocumentReference)
		}
	}
}
