package capture_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// rendered marshals the order's response at now and decodes it generically,
// so that assertions are on the JSON a merchant receives.
func rendered(t *testing.T, o *order.Order, f *ordertest.Fixture) map[string]any {
	t.Helper()
	b, err := json.Marshal(o.Response(f.Clock.Now(), f.Policy, func(o *order.Order, l *order.Ledger) string {
		return "https://docs.example/" + l.DocumentReference
	}))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// at walks a dotted path ("captured.0.orderLines.1.id") through decoded JSON.
func at(t *testing.T, v any, path string) any {
	t.Helper()
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				t.Fatalf("%s: no key %q", path, k)
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				t.Fatalf("%s: no element %q in %d", path, k, len(x))
			}
			v = x[i]
		default:
			t.Fatalf("%s: %q of a %T", path, k, v)
		}
	}
	return v
}

// money is the JSON Money record of minor SEK.
func money(minor int64, amount, formatted string) map[string]any {
	return map[string]any{"amount": amount, "currency": "SEK", "formatted": formatted,
		"formattedWithCurrency": "SEK " + formatted, "minorUnits": float64(minor)}
}

func check(t *testing.T, m map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		got := at(t, m, path)
		if ws, ok := w.([]string); ok {
			var conv []any
			for _, s := range ws {
				conv = append(conv, s)
			}
			w = conv
			if len(ws) == 0 {
				w = []any{}
			}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", path, got, w)
		}
	}
}

func length(t *testing.T, m map[string]any, path string) int {
	t.Helper()
	return len(at(t, m, path).([]any))
}

// The spec's Transitions table, both partial-capture rows, then the edit that
// reduces the uncaptured line's quantity, checked on the rendered response.
func TestSpecPartialCaptureTransitions(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t) // line-1 Widget 2×100.00 @25 %, line-2 Food 56.00 @12 %, line-3 Book 3×10.60 @6 %
	start := rendered(t, o, f)
	check(t, start, map[string]any{
		"id": "order-1", "merchantId": "merchant-1", "merchantReference": "merchant-ref-1", "orderReference": "orderref-1",
		"status":      []string{"uncaptured", "readyForCapture"},
		"orderAmount": money(28780, "287.80", "287.80"), "capturedAmount": money(0, "0.00", "0.00"),
		"uncapturedAmount": money(28780, "287.80", "287.80"), "refundedAmount": money(0, "0.00", "0.00"),
		"updatedAt": "2025-03-10T09:30:00Z", "createdAt": "2025-03-10T09:30:00Z", "expiresAt": "2025-04-07T09:30:00Z",
		"authorizeStatus": "authorized", "vatMode": "inclVat", "token.tokenId": "tok-1",
		"paymentMethod.type": "invoice", "customer.companyId": "5560000001",
	})

	// Row 1: partial capture with line id.
	f.Clock.Advance(time.Hour)
	l, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID("line-1")},
		TotalCaptureAmount: ordertest.Ptr[int64](20000)}, f.Env())
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "ledger-2" || l.DocumentReference != "INV-00000001" {
		t.Fatalf("capture ledger = %s %s", l.ID, l.DocumentReference)
	}
	r1 := rendered(t, o, f)
	check(t, r1, map[string]any{
		"status":           []string{"uncaptured", "partiallyCaptured", "readyForCapture"},
		"orderAmount":      money(28780, "287.80", "287.80"),
		"capturedAmount":   money(20000, "200.00", "200.00"),
		"uncapturedAmount": money(8780, "87.80", "87.80"),
		"refundedAmount":   money(0, "0.00", "0.00"),
		"updatedAt":        "2025-03-10T10:30:00Z",
		"events.2.type":    "partialCapture", "events.2.amount": money(20000, "200.00", "200.00"),
		"events.2.ledgerId": "ledger-2", "events.2.createdAt": "2025-03-10T10:30:00Z", "events.2.orderId": "order-1",
		"captured.0.ledgerId": "ledger-2", "captured.0.createdAt": "2025-03-10T10:30:00Z",
		"captured.0.documentReference": "INV-00000001", "captured.0.documentUrl": "https://docs.example/INV-00000001",
		"captured.0.note": "", "captured.0.status": []string{},
		"captured.0.totalOrderAmount":        money(20000, "200.00", "200.00"),
		"captured.0.totalOrderAmountExclVat": money(16000, "160.00", "160.00"),
		"captured.0.totalOrderVatAmount":     money(4000, "40.00", "40.00"),
		"captured.0.orderLines.0.id":         "line-1", "captured.0.orderLines.0.quantity": float64(2),
		"captured.0.orderLines.0.totalAmount": float64(20000), "captured.0.orderLines.0.totalVatAmount": float64(4000),
		"captured.0.orderLines.0.unitPriceNetDecimal": "80.0000",
		"uncaptured.ledgerId":                         "ledger-1",
		"uncaptured.orderLines.0.id":                  "line-2", "uncaptured.orderLines.1.id": "line-3",
		"uncaptured.totalOrderAmount":        money(8780, "87.80", "87.80"),
		"uncaptured.totalOrderAmountExclVat": money(8000, "80.00", "80.00"),
		"uncaptured.totalOrderVatAmount":     money(780, "7.80", "7.80"),
	})
	if n := length(t, r1, "events"); n != 3 {
		t.Fatalf("%d events", n)
	}
	if n := length(t, r1, "uncaptured.orderLines"); n != 2 {
		t.Fatalf("%d uncaptured lines", n)
	}
	check(t, r1, map[string]any{
		"captured.0.availableActions": []any{
			map[string]any{"type": "refund"}, map[string]any{"type": "partialRefund"},
			map[string]any{"type": "resendOrderInvoice"}, map[string]any{"type": "void"},
			map[string]any{"type": "recourseOrderInvoice"}},
		"uncaptured.availableActions": []any{
			map[string]any{"type": "capture"}, map[string]any{"type": "partialCapture"},
			map[string]any{"type": "cancel"}, map[string]any{"type": "editOrder"},
			map[string]any{"type": "editCustomer"}, map[string]any{"type": "extendOrderExpiry"}},
	})

	// Row 2: partial capture of a line without id (one of the three books):
	// the uncaptured sub-order stays as it was.
	f.Clock.Advance(time.Hour)
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("Book", 1, 1060, 600)},
		TotalCaptureAmount: ordertest.Ptr[int64](1060)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	r2 := rendered(t, o, f)
	if !reflect.DeepEqual(at(t, r2, "uncaptured.orderLines"), at(t, r1, "uncaptured.orderLines")) {
		t.Fatalf("uncaptured lines changed:\n%v\n%v", at(t, r2, "uncaptured.orderLines"), at(t, r1, "uncaptured.orderLines"))
	}
	check(t, r2, map[string]any{
		"status":           []string{"uncaptured", "partiallyCaptured", "readyForCapture"},
		"orderAmount":      money(29840, "298.40", "298.40"),
		"capturedAmount":   money(21060, "210.60", "210.60"),
		"uncapturedAmount": money(8780, "87.80", "87.80"),
		"updatedAt":        "2025-03-10T11:30:00Z",
		"events.3.type":    "partialCapture", "events.3.amount": money(1060, "10.60", "10.60"), "events.3.ledgerId": "ledger-3",
		"captured.1.documentReference": "INV-00000002", "captured.1.orderLines.0.id": "line-4",
		"captured.1.orderLines.0.quantity": float64(1), "captured.1.totalOrderVatAmount": money(60, "0.60", "0.60"),
		"captured.1.orderLines.0.unitPriceNetDecimal": "10.0000",
		// 87.80 uncaptured but only 77.20 of the authorization left: no full capture until edited.
		"uncaptured.availableActions": []any{map[string]any{"type": "partialCapture"},
			map[string]any{"type": "cancel"}, map[string]any{"type": "editOrder"},
			map[string]any{"type": "editCustomer"}, map[string]any{"type": "extendOrderExpiry"}},
	})

	// The edit that reduces the remaining Book line from 3 to 2 and recalculates it.
	f.Clock.Advance(time.Hour)
	edit := &order.EditRequest{OrderLines: []order.LineInput{ordertest.Line("Food", 1, 5600, 1200), ordertest.Line("Book", 2, 1060, 600)},
		TotalsInput: order.TotalsInput{TotalOrderAmount: ordertest.Ptr[int64](7720), TotalOrderAmountExclVat: ordertest.Ptr[int64](7000),
			TotalOrderVatAmount: ordertest.Ptr[int64](720)}}
	if err := o.Edit(edit, f.Env()); err != nil {
		t.Fatal(err)
	}
	r3 := rendered(t, o, f)
	check(t, r3, map[string]any{
		"status":           []string{"uncaptured", "partiallyCaptured", "readyForCapture"},
		"orderAmount":      money(28780, "287.80", "287.80"),
		"capturedAmount":   money(21060, "210.60", "210.60"),
		"uncapturedAmount": money(7720, "77.20", "77.20"),
		"updatedAt":        "2025-03-10T12:30:00Z",
		"events.4.type":    "edit", "events.4.amount": money(7720, "77.20", "77.20"), "events.4.ledgerId": "ledger-1",
		"uncaptured.orderLines.1.quantity": float64(2), "uncaptured.orderLines.1.totalAmount": float64(2120),
		"uncaptured.orderLines.1.totalVatAmount": float64(120),
		"uncaptured.totalOrderAmountExclVat":     money(7000, "70.00", "70.00"),
		"uncaptured.availableActions.0.type":     "capture",
	})
	if n := length(t, r3, "events"); n != 5 {
		t.Fatalf("%d events; the edit kept the authorization and must not re-authorize", n)
	}
	if o.AuthorizedAmount != 28780 {
		t.Fatalf("authorized = %d", o.AuthorizedAmount)
	}

	// Finally the rest: fully captured, everything adds up.
	f.Clock.Advance(time.Hour)
	if _, err := capture.Full(o, nil, f.Env()); err != nil {
		t.Fatal(err)
	}
	r4 := rendered(t, o, f)
	check(t, r4, map[string]any{
		"status":           []string{"fullyCaptured"},
		"orderAmount":      money(28780, "287.80", "287.80"),
		"capturedAmount":   money(28780, "287.80", "287.80"),
		"uncapturedAmount": money(0, "0.00", "0.00"),
		"events.5.type":    "fullCapture", "events.5.amount": money(7720, "77.20", "77.20"),
		"uncaptured.orderLines":        []string{},
		"uncaptured.availableActions":  []any{map[string]any{"type": "editCustomer"}},
		"captured.2.documentReference": fmt.Sprintf("INV-%08d", 3),
	})
}
