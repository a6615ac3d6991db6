package kassa_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/token"
)

// BenchmarkLineByLineIdempotent captures an order line by line and refunds
// each capture, every call under its own Idempotency-Key, as the spec
// recommends. Every answer is the whole order and each idempotency record
// keeps its answer for a day, so what is stored grows with the square of the
// line count; db-MB is the bbolt file after the run.
func BenchmarkLineByLineIdempotent(b *testing.B) {
	for _, n := range []int{100, 300} {
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			var size int64
			for b.Loop() {
				size = lineByLine(b, n)
			}
			b.ReportMetric(float64(size)/(1<<20), "db-MB")
		})
	}
}

func lineByLine(b *testing.B, n int) int64 {
	path := filepath.Join(b.TempDir(), "kassa.db")
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ledger := kassa.New(st, kassa.Options{})
	creds, _, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	call := kassa.Call{MerchantID: creds.MerchantID}
	if err := ledger.PutAuthorization(ctx, &token.Authorization{
		Token: "at_bench", MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Approved Byggvaror AB"},
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt:     time.Now(), ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		b.Fatal(err)
	}
	lines := make([]order.LineInput, n)
	for i := range lines {
		lines[i] = order.LineInput{Description: ptr(fmt.Sprintf("Article %d of a long order", i)), Reference: fmt.Sprintf("SKU-%06d", i),
			Quantity: ptr(int64(1)), UnitPrice: ptr(int64(1000 + i)), Vat: ptr(int64(2500))}
	}
	created, err := ledger.CreateOrderFromAuthorization(ctx, call, "at_bench", &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE", OrderLines: lines})
	if err != nil {
		b.Fatal(err)
	}
	o := created.Order
	for i, l := range o.Uncaptured.Lines {
		call.IdempotencyKey = fmt.Sprintf("capture-%d", i)
		if _, err := ledger.PartialCapture(ctx, call, o.ID, &capture.PartialRequest{
			OrderLines: []order.LineInput{{ID: ptr(l.ID)}}, TotalCaptureAmount: ptr(l.TotalAmount)}); err != nil {
			b.Fatal(err)
		}
	}
	o, _, err = ledger.GetOrder(ctx, creds.MerchantID, o.ID)
	if err != nil {
		b.Fatal(err)
	}
	for i, c := range o.Captured {
		call.IdempotencyKey = fmt.Sprintf("refund-%d", i)
		if _, err := ledger.Refund(ctx, call, o.ID, c.ID, nil); err != nil {
			b.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
