package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/storage/memory"
)

// subOrders are the order's sub-orders as a merchant reads them: the
// uncaptured one first.
func subOrders(o map[string]any) []map[string]any {
	subs := []map[string]any{o["uncaptured"].(map[string]any)}
	for _, k := range []string{"captured", "refunded"} {
		list, _ := o[k].([]any)
		for _, s := range list {
			subs = append(subs, s.(map[string]any))
		}
	}
	return subs
}

// The availableActions a merchant reads over HTTP are what the next request
// can do: random operations, each sent whether listed or not, must succeed
// (200) exactly when their action was listed, and be refused 409 otherwise.
// The Ledger's TestAvailableActionsTellTheTruth tries every action at every
// step; this is the shorter run through the router, bodies and all.
func TestAvailableActionsOverHTTP(t *testing.T) {
	// One server on the memory store for every run, each with its own
	// order: the stores' parity has its own suite, and this test is about
	// what the router answers.
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, memory.New(clock.Now), nil)
	rapid.Check(t, func(rt *rapid.T) {
		pm := rapid.SampledFrom([]string{"invoice", "advanceInvoice", "card", "partPayment"}).Draw(rt, "paymentMethod")
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", pm)+"/order", `{"country":"SE","currency":"SEK","locale":"sv-SE",
			"orderLines":[{"description":"Tiles","quantity":3,"unitPrice":12500,"vat":2500},{"description":"Grout","quantity":1,"unitPrice":5000,"vat":1200},
			{"description":"Discount","quantity":1,"unitPrice":-3000,"vat":2500,"type":"discount"}]}`, e.auth, nil)
		if code != 200 {
			rt.Fatalf("create: %d %v", code, b)
		}
		id := b["orderId"].(string)
		path := "/v1/orders/" + id
		for step := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			o := e.get(id)
			subs := subOrders(o)
			sub := subs[rapid.IntRange(0, len(subs)-1).Draw(rt, "sub")]
			unc := subs[0]
			ledger := sub["ledgerId"].(string)
			var (
				action, method, url, body string
				on                        = unc
			)
			switch rapid.IntRange(0, 13).Draw(rt, "op") {
			case 0:
				action, method, url = "capture", "POST", path+"/capture"
			case 1:
				action, method, url, body = "partialCapture", "POST", path+"/partialcapture",
					`{"orderLines":[{"description":"Tiles","quantity":1,"unitPrice":100,"vat":0}],"totalCaptureAmount":100}`
				if rapid.Bool().Draw(rt, "byID") && slices.Contains(actions(unc), "capture") {
					// Every line by id: what capture would take fits the authorization.
					var ins []string
					var total float64
					for _, l := range lines(unc) {
						ins = append(ins, fmt.Sprintf(`{"id":%q}`, l.(map[string]any)["id"]))
						total += l.(map[string]any)["totalAmount"].(float64)
					}
					body = fmt.Sprintf(`{"orderLines":[%s],"totalCaptureAmount":%.0f}`, strings.Join(ins, ","), total)
				}
			case 2:
				action, method, url, on = "refund", "POST", path+"/refund/"+ledger, sub
			case 3:
				action, method, url, on = "partialRefund", "POST", path+"/partialrefund/"+ledger, sub
				body = `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1,"vat":0}],"totalRefundAmount":1,"note":"n"}`
				if minor(sub["totalOrderAmount"]) < 2 {
					continue // the last unit closes every rate: the Ledger's test covers it
				}
			case 4:
				action, method, url = "cancel", "DELETE", path
			case 5:
				action, method, url, on = "void", "DELETE", path+"/"+ledger, sub
				if sub["ledgerId"] == unc["ledgerId"] {
					action = "cancel"
				}
			case 6:
				action, method, url, body = "editOrder", "POST", path,
					`{"orderLines":[{"description":"Gift","quantity":1,"unitPrice":0,"vat":0}],"totalOrderAmount":0,"totalOrderAmountExclVat":0,"totalOrderVatAmount":0}`
			case 7:
				action, method, url, body = "editCustomer", "POST", path+"/customer", `{"phone":"+46701234567"}`
			case 8:
				action, method, url, body = "editPaymentMethod", "POST", path+"/paymentmethod", `{"paymentMethod":{"provider":"service","type":"advanceInvoice"}}`
			case 9:
				action, method, url = "extendOrderExpiry", "POST", path+"/extendexpiry"
			case 10:
				action, method, url, on = "resendOrderInvoice", "POST", path+"/document/"+ledger+"/resend", sub
			case 11:
				action, method, url, on, body = "recourseOrderInvoice", "POST", path+"/recourse/"+ledger, sub, `{"reason":"unpaid"}`
			case 12: // no action type
				e.req("POST", path+"/acknowledge", "", e.auth, nil)
				continue
			case 13:
				if code, _, b := e.req("POST", "/sandbox/v1/clock", fmt.Sprintf(`{"advance":"%dh"}`, rapid.IntRange(1, 40*24).Draw(rt, "hours")), e.auth, nil); code != 200 {
					rt.Fatalf("clock: %d %v", code, b)
				}
				continue
			}
			listed := slices.Contains(actions(on), action)
			code, _, b := e.req(method, url, body, e.auth, nil)
			switch {
			case listed && code != 200:
				rt.Fatalf("step %d: %s %s: %s listed on %s but answered %d %v", step, method, url, action, on["ledgerId"], code, b)
			case !listed && code != 409:
				rt.Fatalf("step %d: %s %s: %s not listed on %s (%v) but answered %d %v", step, method, url, action, on["ledgerId"], actions(on), code, b)
			}
		}
	})
}
