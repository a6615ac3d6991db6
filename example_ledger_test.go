package kassa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/storage/memory"
)

// A buyer's approval, minted by the sandbox's rules, becomes an order.
func ExampleLedger_CreateOrderFromAuthorization() {
	ctx := context.Background()
	ledger := kassa.New(memory.New(nil), kassa.Options{})
	creds, _, err := ledger.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "Tiles & Co"})
	if err != nil {
		panic(err)
	}

	// What a checkout front end does once the buyer approved: mint the token
	// (here by the sandbox's fixture rules) and store it.
	auth, err := sandbox.Mint(&sandbox.TokenRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE",
		Customer: &order.CustomerInput{CompanyID: "5560000001"}, // a sandbox buyer approved for everything
	}, creds.MerchantID, "at_"+kassa.RandomSecret(20), time.Now(), ledger.AuthorizationTTL())
	if err != nil {
		panic(err)
	}
	if err := ledger.PutAuthorization(ctx, auth); err != nil {
		panic(err)
	}

	res, err := ledger.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, auth.Token, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{
			{Description: ptr("Tiles"), Quantity: ptr(int64(4)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))},
		},
	})
	if err != nil {
		panic(err)
	}

	o, now, err := ledger.GetOrder(ctx, creds.MerchantID, res.Order.ID)
	if err != nil {
		panic(err)
	}
	r := ledger.Render(o, now) // the spec's response: formatted amounts, statuses
	fmt.Println(r.Customer.CompanyName, r.AuthorizeStatus)
	fmt.Println(r.OrderAmount.FormattedWithCurrency, r.Status)
	fmt.Println(r.Uncaptured.OrderLines[0].Description, r.Uncaptured.OrderLines[0].TotalAmount)
	// Output:
	// Approved Byggvaror AB authorized
	// SEK 500.00 [uncaptured readyForCapture]
	// Tiles 50000
}

// newOrder makes the order of ExampleLedger_CreateOrderFromAuthorization
// (its token minted at now, the store's time), for the examples that go on
// from there: 4 tiles at 125.00 and a delivery at 100.00, 25 % VAT included.
func newOrder(ctx context.Context, ledger *kassa.Ledger, now time.Time, opts kassa.MerchantOptions) (kassa.Call, *order.Order) {
	opts.Name = "Tiles & Co"
	creds, _, err := ledger.EnsureMerchant(ctx, opts)
	if err != nil {
		panic(err)
	}
	auth, err := sandbox.Mint(&sandbox.TokenRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE"},
		creds.MerchantID, "at_"+kassa.RandomSecret(20), now, ledger.AuthorizationTTL())
	if err != nil {
		panic(err)
	}
	if err := ledger.PutAuthorization(ctx, auth); err != nil {
		panic(err)
	}
	call := kassa.Call{MerchantID: creds.MerchantID}
	res, err := ledger.CreateOrderFromAuthorization(ctx, call, auth.Token, &order.CreateRequest{
		Country: "SE", Currency: "SEK", Locale: "sv-SE",
		OrderLines: []order.LineInput{
			{Description: ptr("Tiles"), Quantity: ptr(int64(4)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))},
			{Description: ptr("Delivery"), Quantity: ptr(int64(1)), UnitPrice: ptr(int64(10000)), Vat: ptr(int64(2500))},
		},
	})
	if err != nil {
		panic(err)
	}
	return call, res.Order
}

// Capture what has shipped by its line ids, then credit one broken tile.
func ExampleLedger_PartialCapture() {
	ctx := context.Background()
	ledger := kassa.New(memory.New(nil), kassa.Options{})
	call, o := newOrder(ctx, ledger, time.Now(), kassa.MerchantOptions{}) // as ExampleLedger_CreateOrderFromAuthorization makes it
	tiles := o.Uncaptured.Lines[0]

	call.IdempotencyKey = "ship-1" // one key per operation, kept for retries
	res, err := ledger.PartialCapture(ctx, call, o.ID, &capture.PartialRequest{
		OrderLines:         []order.LineInput{{ID: &tiles.ID}},
		TotalCaptureAmount: ptr(tiles.TotalAmount),
	})
	if err != nil {
		panic(err)
	}
	// The new capture is the last one; its lines are what the invoice shows.
	inv := res.Order.Captured[len(res.Order.Captured)-1]
	fmt.Println("captured:", inv.DocumentReference, inv.Lines[0].Description, inv.Lines[0].TotalAmount)

	// A refund names lines of its own; a captured line sent back with
	// fewer units credits those units.
	broken := inv.Lines[0].Input()
	broken.Quantity, broken.TotalAmount, broken.TotalVatAmount = ptr(int64(1)), nil, nil
	call.IdempotencyKey = "broken-tile-1"
	res, err = ledger.PartialRefund(ctx, call, o.ID, inv.ID, &refund.PartialRequest{
		OrderLines:        []order.LineInput{broken},
		TotalRefundAmount: ptr(int64(12500)),
	})
	if err != nil {
		panic(err)
	}
	cn := res.Order.Refunded[len(res.Order.Refunded)-1]
	fmt.Println("refunded:", cn.DocumentReference, cn.Lines[0].Quantity, cn.Lines[0].Description, cn.Lines[0].TotalAmount, "on", cn.RefundOf == inv.ID)

	a := res.Order.Amounts()
	fmt.Println("captured, refunded, uncaptured:", a.Captured, a.Refunded, a.Uncaptured)
	// Output:
	// captured: INV-00000001 Tiles 50000
	// refunded: CN-00000001 1 Tiles 12500 on true
	// captured, refunded, uncaptured: 50000 12500 10000
}

// A retry with the same idempotency key (a timeout, a crash before the
// answer arrived) gets the first answer again and captures nothing more.
func ExampleCall() {
	ctx := context.Background()
	ledger := kassa.New(memory.New(nil), kassa.Options{})
	call, o := newOrder(ctx, ledger, time.Now(), kassa.MerchantOptions{}) // as ExampleLedger_CreateOrderFromAuthorization makes it

	call.IdempotencyKey = "capture-" + o.ID
	first, err := ledger.Capture(ctx, call, o.ID, nil)
	if err != nil {
		panic(err)
	}
	again, err := ledger.Capture(ctx, call, o.ID, nil)
	if err != nil {
		panic(err)
	}
	// A replay carries the first answer's body, not the order (Order is nil).
	var r order.Response
	if err := json.Unmarshal(again.Body, &r); err != nil {
		panic(err)
	}
	fmt.Println("first:", first.Replayed, first.Order.Amounts().Captured)
	fmt.Println("again:", again.Replayed, again.Order == nil, r.CapturedAmount.FormattedWithCurrency)

	o, _, err = ledger.GetOrder(ctx, call.MerchantID, o.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("captures:", len(o.Captured))
	// Output:
	// first: false 60000
	// again: true true SEK 600.00
	// captures: 1
}

// Failures are *fault.Error values: the kind says what sort of failure it
// is (and which HTTP status the server answers), the code which one.
func ExampleLedger_PartialCapture_errors() {
	ctx := context.Background()
	ledger := kassa.New(memory.New(nil), kassa.Options{})
	call, o := newOrder(ctx, ledger, time.Now(), kassa.MerchantOptions{}) // as ExampleLedger_CreateOrderFromAuthorization makes it

	// More than the buyer authorized (600.00).
	_, err := ledger.PartialCapture(ctx, call, o.ID, &capture.PartialRequest{
		OrderLines:         []order.LineInput{{Description: ptr("Extra tiles"), Quantity: ptr(int64(8)), UnitPrice: ptr(int64(12500)), Vat: ptr(int64(2500))}},
		TotalCaptureAmount: ptr(int64(100000)),
	})
	var fe *fault.Error
	if errors.As(err, &fe) {
		fmt.Println(fe.Kind, fe.Code) // the server answers 400 with this code
		fmt.Println(fe.Fields[0].Field+":", fe.Fields[0].Message)
	}

	// Nothing is left to capture once all of it is.
	if _, err := ledger.Capture(ctx, call, o.ID, nil); err != nil {
		panic(err)
	}
	_, err = ledger.Capture(ctx, call, o.ID, nil)
	fmt.Println(fault.Is(err, fault.NotAvailable), fault.CodeOf(err))

	_, _, err = ledger.GetOrder(ctx, call.MerchantID, "no-such-order")
	fmt.Println(fault.Is(err, fault.NotFound), fault.CodeOf(err))
	// Output:
	// invalid capture_exceeds_authorization
	// totalCaptureAmount: capturing 100000 would pass the authorized amount; 60000 remains
	// true action_not_available
	// true order_not_found
}

// The jobs an embedder schedules (kassa serve runs them in a loop): due
// tasks, notification delivery and the daily settlement. Here each runs
// once, with the store's clock moved by hand.
func ExampleLedger_RunSettlements() {
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC)
	ledger := kassa.New(memory.New(func() time.Time { return now }), kassa.Options{})
	call, o := newOrder(ctx, ledger, now, kassa.MerchantOptions{FeeBasisPoints: 150, FeeFixedPerCapture: 100}) // fees: 1.5 % + 1.00

	// A receiver of the merchant's notifications checks each signature.
	var secret string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := notify.Verify(secret, r.Header.Get(notify.HeaderSignature), body, time.Now(), 5*time.Minute)
		fmt.Println("received:", r.Header.Get(notify.HeaderTopic), err)
	}))
	defer receiver.Close()
	hook, err := ledger.SetWebhook(ctx, call.MerchantID, kassa.SetWebhookRequest{URL: receiver.URL, Events: []string{"order.fullCapture"}})
	if err != nil {
		panic(err)
	}
	secret = hook.Secret // shown only in this answer: keep it

	if _, err := ledger.Capture(ctx, call, o.ID, nil); err != nil {
		panic(err)
	}
	now = now.Add(2 * time.Hour)

	tasks, err := ledger.RunTasks(ctx, 100)
	if err != nil {
		panic(err)
	}
	fmt.Println("tasks:", tasks.TasksProcessed, "nothing to do:", tasks.NothingToDo) // the used token's expiry
	// AllowPrivateNetworks: the receiver listens on 127.0.0.1.
	sent, err := ledger.DeliverNotifications(ctx, kassa.DeliveryOptions{AllowPrivateNetworks: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("delivered:", sent.Delivered)

	made, err := ledger.RunSettlements(ctx)
	if err != nil {
		panic(err)
	}
	s, err := ledger.GetSettlement(ctx, call.MerchantID, made[0].ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("gross:", s.GrossAmount.FormattedWithCurrency)
	fmt.Println("fees:", s.FeeAmount.FormattedWithCurrency)
	fmt.Println("net:", s.NetAmount.FormattedWithCurrency, "on", s.PayoutDate)
	// Output:
	// tasks: 1 nothing to do: 1
	// received: order.fullCapture <nil>
	// delivered: 1
	// gross: SEK 600.00
	// fees: SEK 10.00
	// net: SEK 590.00 on 2025-03-11
}
