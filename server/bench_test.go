package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// BenchmarkGetOrder measures GET /v1/orders/{id} through the real handler
// (auth, store read, rendering, encoding, logging, metrics) without a network.
//
//	go test -run '^$' -bench GetOrder -benchmem ./server/
func BenchmarkGetOrder(b *testing.B) {
	e := newEnv(b, false)
	o := e.order("5560000001", "invoice")
	h := e.ts.Config.Handler
	path := "/v1/orders/" + o["id"].(string)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", e.auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkPartialCapture50Lines is one HTTP partial capture through the real
// handler (auth, body decode, Ledger under an Idempotency-Key, store, the
// answer's encoding and write), one line of a 50-line order a request, on the
// memory store and on bbolt; a new order (made outside the timer) every 50
// requests, so a multiple of 50 iterations averages over an order's life.
//
//	go test -run '^$' -bench PartialCapture50Lines -benchmem -benchtime 3000x ./server/
func BenchmarkPartialCapture50Lines(b *testing.B) {
	for _, store := range []string{"memory", "bolt"} {
		b.Run("store="+store, func(b *testing.B) {
			clock := NewClock(true)
			var st storage.Store
			if store == "memory" {
				st = memory.New(clock.Now)
			} else {
				st = openStore(b, clock.Now)
			}
			e := newEnvOn(b, false, clock, st, nil)
			h := e.ts.Config.Handler
			creds, _, err := e.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{ClientID: "m1", ClientSecret: "s1"})
			if err != nil {
				b.Fatal(err)
			}
			var n int
			newOrder := func() *order.Order {
				n++
				ctx := context.Background()
				tok := fmt.Sprint("at_bench", n)
				now := clock.Now()
				if err := e.ledger.PutAuthorization(ctx, &token.Authorization{Token: tok, MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK", Locale: "sv-SE",
					Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Approved Byggvaror AB"},
					PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
					b.Fatal(err)
				}
				req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"}
				for i := range 50 {
					desc, q, p, v := fmt.Sprintf("Article %d of a long order", i), int64(1+i%4), int64(1000+37*i), []int64{2500, 1200, 600, 0}[i%4]
					req.OrderLines = append(req.OrderLines, order.LineInput{Description: &desc, Reference: fmt.Sprintf("SKU-%06d", i), Quantity: &q, UnitPrice: &p, Vat: &v})
				}
				res, err := e.ledger.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, tok, req)
				if err != nil {
					b.Fatal(err)
				}
				return res.Order
			}
			var o *order.Order
			next := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if o == nil || next == len(o.Uncaptured.Lines) {
					b.StopTimer()
					o, next = newOrder(), 0
					b.StartTimer()
				}
				l := o.Uncaptured.Lines[next]
				body := `{"orderLines":[{"id":"` + l.ID + `"}],"totalCaptureAmount":` + strconv.FormatInt(l.TotalAmount, 10) + `}`
				r := httptest.NewRequest("POST", "/v1/orders/"+o.ID+"/partialcapture", strings.NewReader(body))
				r.Header.Set("Authorization", e.auth)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", o.ID+"-"+strconv.Itoa(next))
				w := &discardWriter{header: http.Header{}}
				h.ServeHTTP(w, r)
				if w.code != 200 || w.n < 10_000 {
					b.Fatal(w.code, w.n)
				}
				next++
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps the status and counts the
// body, as a connection's buffered writer costs next to nothing per byte,
// so that the benchmark measures the server, not a recorder's growing buffer.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
