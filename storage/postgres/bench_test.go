package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/token"
)

// BenchmarkPartialCapture50Lines is one line captured per operation, through
// the Ledger (idempotency key, row lock, settlement queue) on PostgreSQL,
// from 16 goroutines each on its own 50-line order.
func BenchmarkPartialCapture50Lines(b *testing.B) {
	u := freshSchema(b)
	ctx := context.Background()
	l := kassa.New(openBench(b, u), kassa.Options{})
	creds, _, _ := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m"})
	var n atomic.Int64
	newOrder := func() *order.Order {
		tok := fmt.Sprint("t", n.Add(1))
		now := time.Now()
		l.PutAuthorization(ctx, &token.Authorization{Token: tok, MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK",
			PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"}
		for i := range 50 {
			req.OrderLines = append(req.OrderLines, order.LineInput{Description: ptr(fmt.Sprint("Item ", i)), Quantity: ptr(int64(1)),
				UnitPrice: ptr(int64(1000 + i)), Vat: ptr(int64(2500))})
		}
		res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, tok, req)
		if err != nil {
			b.Fatal(err)
		}
		return res.Order
	}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var o *order.Order
		i := 0
		for pb.Next() {
			if o == nil || i == len(o.Uncaptured.Lines) {
				b.StopTimer()
				o, i = newOrder(), 0
				b.StartTimer()
			}
			l0 := o.Uncaptured.Lines[i]
			if _, err := l.PartialCapture(ctx, kassa.Call{MerchantID: creds.MerchantID, IdempotencyKey: fmt.Sprint(o.ID, i)}, o.ID,
				&capture.PartialRequest{OrderLines: []order.LineInput{{ID: ptr(l0.ID)}}, TotalCaptureAmount: ptr(l0.TotalAmount)}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func openBench(b *testing.B, u string) *kassaStore {
	b.Helper()
	s, err := openStore(u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

type kassaStore = postgres.Store

func openStore(u string) (*postgres.Store, error) {
	return postgres.Open(context.Background(), u, postgres.Options{MaxConns: 16})
}
