package kassa_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/token"
)

// An embedder's whole flow: open the embedded store, register a merchant,
// store the buyer's authorization, create an order, capture part of it,
// refund part of the capture, and read the order back.
func Example() {
	dir, err := os.MkdirTemp("", "kassa-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx := context.Background()
	ledger := kassa.New(st, kassa.Options{})

	creds, _, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "Tiles & Co"})
	if err != nil {
		panic(err)
	}
	call := kassa.Call{MerchantID: creds.MerchantID}

	// The buyer's approval, as a checkout front end would store it.
	if err := ledger.PutAuthorization(ctx, &token.Authorization{
		Token: "at_example", MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Buyer:         order.Customer{CompanyID: "5560000001", CompanyName: "Approved Byggvaror AB"},
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice},
		CreatedAt:     time.Now(), ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		panic(err)
	}
	created, err := ledger.CreateOrderFromAuthorization(ctx, call, "at_example", &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{
			{Description: ptr("Tiles"), Quantity: ptr(int64(2)), UnitPrice: ptr(int64(125000)), Vat: ptr(int64(2500))},
			{Description: ptr("Delivery"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(50000)), Vat: ptr(int64(2500))},
		},
	})
	if err != nil {
		panic(err)
	}
	orderID := created.Order.ID
	tiles := created.Order.Uncaptured.Lines[0].ID

	call.IdempotencyKey = "capture-1"
	if _, err := ledger.PartialCapture(ctx, call, orderID, &capture.PartialRequest{
		OrderLines: []order.LineInput{{ID: &tiles}}, TotalCaptureAmount: ptr(int64(250000)),
	}); err != nil {
		panic(err)
	}
	o, _, err := ledger.GetOrder(ctx, creds.MerchantID, orderID)
	if err != nil {
		panic(err)
	}
	call.IdempotencyKey = "refund-1"
	if _, err := ledger.PartialRefund(ctx, call, orderID, o.Captured[0].ID, &refund.PartialRequest{
		OrderLines:        []order.LineInput{{Description: ptr("Broken tile"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))}},
		TotalRefundAmount: ptr(int64(12500)),
	}); err != nil {
		panic(err)
	}

	o, now, err := ledger.GetOrder(ctx, creds.MerchantID, orderID)
	if err != nil {
		panic(err)
	}
	r := ledger.Render(o, now)
	fmt.Println("order:", r.OrderAmount.FormattedWithCurrency)
	fmt.Println("captured:", r.CapturedAmount.FormattedWithCurrency, r.Captured[0].DocumentReference)
	fmt.Println("refunded:", r.RefundedAmount.FormattedWithCurrency, r.Refunded[0].DocumentReference)
	fmt.Println("uncaptured:", r.UncapturedAmount.FormattedWithCurrency)
	fmt.Println("status:", r.Status)
	// Output:
	// order: SEK 3,000.00
	// captured: SEK 2,500.00 INV-00000001
	// refunded: SEK 125.00 CN-00000001
	// uncaptured: SEK 500.00
	// status: [uncaptured partiallyCaptured partiallyRefunded readyForCapture]
}

// ptr is the address of v, for the request fields that are optional.
func ptr[T any](v T) *T { return &v }
