package bolt_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

func ptr[T any](v T) *T { return &v }

// counterIDs mints unique ids "<prefix><kind>-<n>"; safe for concurrent use.
type counterIDs struct {
	prefix string
	n      atomic.Int64
}

func (c *counterIDs) NewID(kind string) string {
	return fmt.Sprintf("%s%s-%06d", c.prefix, kind, c.n.Add(1))
}

// txDocs numbers documents inside the store transaction, as kassa does.
type txDocs struct {
	tx       storage.Tx
	merchant string
}

func (d txDocs) Next(series string) (int64, error) { return d.tx.NextSequence(d.merchant, series) }

func env(tx storage.Tx, merchant string, ids order.IDSource) order.Env {
	return order.Env{Now: tx.Now(), IDs: ids, Docs: txDocs{tx, merchant}, Policy: order.DefaultPolicy()}
}

func line(desc string, quantity, unitPrice, vat int64) order.LineInput {
	return order.LineInput{Description: ptr(desc), Quantity: ptr(quantity), UnitPrice: ptr(unitPrice), Vat: ptr(vat), Type: "physical"}
}

// newOrder creates an invoice order of n lines of 10.00 SEK incl. 25 % VAT.
func newOrder(t testing.TB, merchant string, n int, e order.Env) *order.Order {
	t.Helper()
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", StoreID: fmt.Sprint("store-", n%7),
		Reference: "ref"}
	for i := range n {
		req.OrderLines = append(req.OrderLines, line(fmt.Sprint("item ", i), 1, 1000, 2500))
	}
	auth := order.Authorization{TokenID: "tok", Country: "SE", Currency: "SEK",
		Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Buyer AB", Country: "SE"},
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}}
	lines, mode, err := order.ValidateCreate(req, false, e.IDs)
	if err != nil {
		t.Fatal(err)
	}
	o, err := order.Create(merchant, req, lines, mode, auth, e)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// fixedClock is a test clock that a test may move.
type fixedClock struct{ t atomic.Pointer[time.Time] }

func newClock(t time.Time) *fixedClock {
	c := &fixedClock{}
	c.t.Store(&t)
	return c
}

func (c *fixedClock) Now() time.Time { return *c.t.Load() }

// mkdirTemp makes a directory that outlives one benchmark run, so that a
// dataset built once serves every sub-benchmark of the process.
func mkdirTemp() (string, error) { return os.MkdirTemp("", "kassa-bolt-bench-") }
