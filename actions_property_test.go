package kassa_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
	"github.com/kassahq/kassa/token"
)

// allActions are the spec's action types.
var allActions = []order.Action{order.ActionCapture, order.ActionPartialCapture, order.ActionRefund,
	order.ActionPartialRefund, order.ActionCancel, order.ActionEditOrder, order.ActionEditCustomer,
	order.ActionEditPaymentMethod, order.ActionExtendOrderExpiry, order.ActionResendOrderInvoice,
	order.ActionVoid, order.ActionRecourseOrderInvoice}

// actionsMachine drives one order of a Ledger (memory store) through random
// operations and checks, before every step, that the availableActions a
// merchant reads are exactly what the service then accepts.
type actionsMachine struct {
	l     *kassa.Ledger
	call  kassa.Call
	ctx   context.Context
	now   *time.Time
	id    string
	steps int
}

// read returns the order as a merchant reads it (the rendered response,
// through the cache) and as stored.
func (m *actionsMachine) read(t *rapid.T) (*order.Response, *order.Order) {
	body, err := m.l.OrderJSON(m.ctx, m.call.MerchantID, m.id)
	if err != nil {
		t.Fatal(err)
	}
	var r order.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	o, _, err := m.l.GetOrder(m.ctx, m.call.MerchantID, m.id)
	if err != nil {
		t.Fatal(err)
	}
	return &r, o
}

// listed reports whether the response offers a on sub-order ledgerID.
func listed(r *order.Response, ledgerID string, a order.Action) bool {
	subs := append([]order.SubOrder{r.Uncaptured}, r.Captured...)
	subs = append(subs, r.Refunded...)
	for _, s := range subs {
		if s.LedgerID == ledgerID {
			return slices.Contains(s.AvailableActions, order.ActionRef{Type: a})
		}
	}
	return false
}

// gross is what lines amount to including VAT, summed here without order.SumLines.
func gross(mode money.VATMode, lines []order.Line) int64 {
	var g int64
	for _, l := range lines {
		g += l.TotalAmount
		if mode == money.ExclVAT {
			g += l.TotalVatAmount
		}
	}
	return g
}

// consumed is what every capture, voided or not, took of the authorization.
func consumed(o *order.Order) int64 {
	var c int64
	for i := range o.Captured {
		c += gross(o.VATMode, o.Captured[i].Lines)
	}
	return c
}

// refundLeft is what is left to refund on capture c, per VAT rate (total, VAT).
func refundLeft(o *order.Order, c *order.Ledger) map[int64][2]int64 {
	left := map[int64][2]int64{}
	add := func(ls []order.Line, sign int64) {
		for _, l := range ls {
			s := left[l.Vat]
			left[l.Vat] = [2]int64{s[0] + sign*l.TotalAmount, s[1] + sign*l.TotalVatAmount}
		}
	}
	add(c.Lines, 1)
	for i := range o.Refunded {
		if o.Refunded[i].RefundOf == c.ID {
			add(o.Refunded[i].Lines, -1)
		}
	}
	return left
}

func zeroLine(desc string, amount int64) order.LineInput {
	return ordertest.Line(desc, 1, amount, 0)
}

// editBodies are edit requests valid for o: the uncaptured lines with one
// quantity lowered (the spec's flow after a capture without id), and one
// line of at most what the authorization leaves room for.
func editBodies(o *order.Order, approved int64) []*order.EditRequest {
	room := approved - consumed(o)
	var bodies []*order.EditRequest
	for i, u := range o.Uncaptured.Lines {
		if u.Quantity < 2 {
			continue
		}
		var ins []order.LineInput
		for j, l := range o.Uncaptured.Lines {
			q := l.Quantity
			if i == j {
				q--
			}
			ins = append(ins, order.LineInput{Description: ordertest.Ptr(l.Description), Quantity: ordertest.Ptr(q),
				UnitPrice: ordertest.Ptr(l.UnitPrice), UnitDiscountAmount: ordertest.Ptr(l.UnitDiscountAmount),
				Vat: ordertest.Ptr(l.Vat), Type: string(l.Type), Reference: l.Reference})
		}
		bodies = append(bodies, &order.EditRequest{OrderLines: ins})
		break
	}
	bodies = append(bodies, &order.EditRequest{OrderLines: []order.LineInput{zeroLine("edited", max(0, min(room, 100)))}})
	var valid []*order.EditRequest
	for _, b := range bodies {
		probe := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", VatMode: string(o.VATMode), OrderLines: b.OrderLines}
		lines, mode, err := order.ValidateCreate(probe, false, &ordertest.IDs{})
		if err != nil {
			continue
		}
		t := order.SumLines(lines, mode)
		if t.Gross > room {
			continue
		}
		b.TotalOrderAmount, b.TotalOrderAmountExclVat, b.TotalOrderVatAmount = ordertest.Ptr(t.Gross), ordertest.Ptr(t.Net), ordertest.Ptr(t.VAT)
		valid = append(valid, b)
	}
	if len(valid) == 0 {
		valid = bodies[len(bodies)-1:] // refused for the authorization: shows as a mismatch
		valid[0].TotalOrderAmount, valid[0].TotalOrderAmountExclVat, valid[0].TotalOrderVatAmount = ordertest.Ptr(int64(0)), ordertest.Ptr(int64(0)), ordertest.Ptr(int64(0))
	}
	return valid
}

// attempts are the requests a merchant could send for action a on ledger l
// of o, each with a body valid for the order as it is. The action is
// accepted when one of them succeeds.
func attempts(o *order.Order, l *order.Ledger, a order.Action, approved int64) []func(*order.Order, order.Env) error {
	var fs []func(*order.Order, order.Env) error
	id := l.ID
	rem := o.AuthorizedAmount - consumed(o)
	switch a {
	case order.ActionCapture:
		fs = append(fs, func(o *order.Order, env order.Env) error { _, err := capture.Full(o, nil, env); return err })
	case order.ActionPartialCapture:
		for _, u := range o.Uncaptured.Lines {
			if g := gross(o.VATMode, []order.Line{u}); g >= 0 && g <= rem {
				ins := []order.LineInput{ordertest.ByID(u.ID)}
				total := u.TotalAmount
				fs = append(fs, func(o *order.Order, env order.Env) error {
					_, err := capture.Partial(o, &capture.PartialRequest{OrderLines: ins, TotalCaptureAmount: &total}, env)
					return err
				})
				break
			}
		}
		amount := max(1, min(rem, 100))
		fs = append(fs, func(o *order.Order, env order.Env) error {
			_, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{zeroLine("part", amount)}, TotalCaptureAmount: &amount}, env)
			return err
		})
	case order.ActionRefund:
		fs = append(fs, func(o *order.Order, env order.Env) error { _, err := refund.Full(o, id, nil, env); return err })
	case order.ActionPartialRefund:
		left := int64(0)
		var rest []order.LineInput
		var restTotal int64
		if l.Kind == order.LedgerCapture {
			left = gross(o.VATMode, l.Lines)
			for i := range o.Refunded {
				if o.Refunded[i].RefundOf == id {
					left -= gross(o.VATMode, o.Refunded[i].Lines)
				}
			}
			for rate, s := range refundLeft(o, l) {
				if s[0] != 0 || s[1] != 0 {
					rest = append(rest, ordertest.LineWithTotals("rest", 1, s[0], rate, s[0], s[1]))
					restTotal += s[0]
				}
			}
		}
		amount := max(1, min(left-1, 100))
		fs = append(fs, func(o *order.Order, env order.Env) error {
			_, err := refund.Partial(o, id, &refund.PartialRequest{OrderLines: []order.LineInput{zeroLine("back", amount)}, TotalRefundAmount: &amount}, env)
			return err
		})
		if len(rest) > 0 && restTotal >= 0 {
			fs = append(fs, func(o *order.Order, env order.Env) error {
				_, err := refund.Partial(o, id, &refund.PartialRequest{OrderLines: rest, TotalRefundAmount: &restTotal}, env)
				return err
			})
		}
	case order.ActionCancel:
		if l.Kind == order.LedgerUncaptured {
			fs = append(fs, func(o *order.Order, env order.Env) error { return o.Cancel(env) },
				func(o *order.Order, env order.Env) error { return o.CancelLedger(id, env) })
		}
	case order.ActionVoid:
		if l.Kind != order.LedgerUncaptured {
			fs = append(fs, func(o *order.Order, env order.Env) error { return o.CancelLedger(id, env) })
		}
	case order.ActionEditOrder:
		for _, b := range editBodies(o, approved) {
			fs = append(fs, func(o *order.Order, env order.Env) error { return o.Edit(b, env) })
		}
	case order.ActionEditCustomer:
		fs = append(fs, func(o *order.Order, env order.Env) error {
			return o.EditCustomer(&order.EditCustomerRequest{Email: ordertest.Ptr("new@buyer.example")}, env)
		})
	case order.ActionEditPaymentMethod:
		fs = append(fs, func(o *order.Order, env order.Env) error {
			return o.EditPaymentMethod(&order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{
				Provider: order.ProviderService, Type: order.PayAdvanceInvoice}}, env)
		})
	case order.ActionExtendOrderExpiry:
		fs = append(fs, func(o *order.Order, env order.Env) error { return o.ExtendExpiry(env) })
	case order.ActionResendOrderInvoice:
		fs = append(fs, func(o *order.Order, env order.Env) error { _, err := o.Resend(id, env); return err })
	case order.ActionRecourseOrderInvoice:
		fs = append(fs, func(o *order.Order, env order.Env) error {
			return o.Recourse(id, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")}, env)
		})
	}
	return fs
}

// orderLevel are the actions whose request names no sub-order: they are
// offered, if at all, on the uncaptured one.
func orderLevel(a order.Action) bool {
	switch a {
	case order.ActionCapture, order.ActionPartialCapture, order.ActionCancel, order.ActionEditOrder,
		order.ActionEditCustomer, order.ActionEditPaymentMethod, order.ActionExtendOrderExpiry:
		return true
	}
	return false
}

// checkEvery tries every action on every sub-order, each on a copy of the
// order with the operation's own bounds (order.CheckSize, as the Ledger
// adds them), and compares with what the response lists.
func (m *actionsMachine) checkEvery(t *rapid.T, r *order.Response, o *order.Order, approved int64) {
	ledgers := []*order.Ledger{&o.Uncaptured}
	for i := range o.Captured {
		ledgers = append(ledgers, &o.Captured[i])
	}
	for i := range o.Refunded {
		ledgers = append(ledgers, &o.Refunded[i])
	}
	env := order.Env{Now: *m.now, IDs: &ordertest.IDs{}, Docs: &ordertest.Seq{}, Policy: m.l.Policy()}
	for _, l := range ledgers {
		for _, a := range allActions {
			accepted := false
			var errs []error
			if !orderLevel(a) || l.Kind == order.LedgerUncaptured {
				for _, try := range attempts(o, l, a, approved) {
					c := o.Clone()
					err := try(c, env)
					if err == nil && a != order.ActionRefund && a != order.ActionPartialRefund &&
						a != order.ActionCancel && a != order.ActionVoid && a != order.ActionRecourseOrderInvoice &&
						a != order.ActionResendOrderInvoice {
						err = c.CheckSize()
					}
					if err == nil {
						accepted = true
						break
					}
					errs = append(errs, err)
				}
			}
			if got := listed(r, l.ID, a); got != accepted {
				t.Fatalf("step %d, sub-order %s (%v), action %s: listed %v, accepted %v (%v); statuses %v, actions %v",
					m.steps, l.ID, l.Kind, a, got, accepted, errs, r.Status, o.Actions(l, *m.now, m.l.Policy()))
			}
		}
	}
}

func TestAvailableActionsTellTheTruth(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		st := memory.New(func() time.Time { return now })
		l := kassa.New(st, kassa.Options{})
		ctx := context.Background()
		creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", RequireAck: rapid.Bool().Draw(t, "requireAck")})
		if err != nil {
			t.Fatal(err)
		}
		call := kassa.Call{MerchantID: creds.MerchantID}

		req, lines, vm := ordertest.DrawCreate(t, &ordertest.IDs{}, 4, 20000)
		total := order.SumLines(lines, vm).Gross
		approved := total + rapid.SampledFrom([]int64{0, 0, 500, 50000}).Draw(t, "headroom")
		auth := &token.Authorization{Token: "tok", MerchantID: call.MerchantID, Country: "SE", Currency: "SEK", Locale: "sv-SE",
			PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: rapid.SampledFrom([]order.PaymentType{
				order.PayInvoice, order.PayAdvanceInvoice, order.PayCard, order.PayPartPayment}).Draw(t, "paymentType")},
			ApprovedAmount: approved, ApprovedZero: approved == 0, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if rapid.IntRange(0, 5).Draw(t, "risk") == 0 {
			auth.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
		}
		if err := l.PutAuthorization(ctx, auth); err != nil {
			t.Fatal(err)
		}
		res, err := l.CreateOrderFromAuthorization(ctx, call, "tok", req)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		m := &actionsMachine{l: l, call: call, ctx: ctx, now: &now, id: res.Order.ID}

		pick := func(t *rapid.T, o *order.Order, withUncaptured bool) *order.Ledger {
			var ls []*order.Ledger
			if withUncaptured {
				ls = append(ls, &o.Uncaptured)
			}
			for i := range o.Captured {
				ls = append(ls, &o.Captured[i])
			}
			for i := range o.Refunded {
				ls = append(ls, &o.Refunded[i])
			}
			if len(ls) == 0 {
				return nil
			}
			return ls[rapid.IntRange(0, len(ls)-1).Draw(t, "ledger")]
		}
		// expect compares an operation the Ledger ran with what was listed.
		expect := func(t *rapid.T, name string, was bool, err error) {
			switch {
			case was && err != nil:
				t.Fatalf("step %d: %s listed but refused: %v", m.steps, name, err)
			case !was && err == nil:
				t.Fatalf("step %d: %s not listed but accepted", m.steps, name)
			case !was && fault.KindOf(err) != fault.NotAvailable:
				t.Fatalf("step %d: %s not listed, refused as %s, want %s: %v", m.steps, name, fault.KindOf(err), fault.NotAvailable, err)
			}
		}

		steps := rapid.IntRange(1, 25).Draw(t, "steps")
		for m.steps = 0; m.steps < steps; m.steps++ {
			r, o := m.read(t)
			m.checkEvery(t, r, o, approved)
			uncap := o.Uncaptured.ID
			switch rapid.IntRange(0, 18).Draw(t, "op") {
			case 0: // capture through the Ledger, with or without body
				was := listed(r, uncap, order.ActionCapture)
				var body *capture.FullRequest
				if rapid.Bool().Draw(t, "withTotal") {
					var sum int64
					for _, u := range o.Uncaptured.Lines {
						sum += u.TotalAmount
					}
					if sum >= 0 {
						body = &capture.FullRequest{TotalCaptureAmount: &sum}
					}
				}
				_, err := l.Capture(ctx, call, m.id, body)
				expect(t, "capture", was, err)
			case 1, 2: // partial capture, by id or without
				was := listed(r, uncap, order.ActionPartialCapture)
				rem := o.AuthorizedAmount - consumed(o)
				var req *capture.PartialRequest
				if len(o.Uncaptured.Lines) > 0 && rapid.Bool().Draw(t, "byID") {
					u := o.Uncaptured.Lines[rapid.IntRange(0, len(o.Uncaptured.Lines)-1).Draw(t, "line")]
					if g := gross(o.VATMode, []order.Line{u}); g >= 0 && g <= rem {
						req = &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(u.ID)}, TotalCaptureAmount: ordertest.Ptr(u.TotalAmount)}
					}
				}
				if req == nil {
					amount := max(1, rapid.Int64Range(1, max(1, rem)).Draw(t, "amount"))
					req = &capture.PartialRequest{OrderLines: []order.LineInput{zeroLine("part", amount)}, TotalCaptureAmount: &amount}
				}
				_, err := l.PartialCapture(ctx, call, m.id, req)
				expect(t, "partialCapture", was, err)
			case 3: // full refund of any sub-order
				if led := pick(t, o, true); led != nil {
					_, err := l.Refund(ctx, call, m.id, led.ID, nil)
					expect(t, "refund", listed(r, led.ID, order.ActionRefund), err)
				}
			case 4, 5: // partial refund of a sub-order
				if led := pick(t, o, true); led != nil {
					var left int64
					if led.Kind == order.LedgerCapture {
						left = gross(o.VATMode, led.Lines)
						for i := range o.Refunded {
							if o.Refunded[i].RefundOf == led.ID {
								left -= gross(o.VATMode, o.Refunded[i].Lines)
							}
						}
					}
					was := listed(r, led.ID, order.ActionPartialRefund)
					if was && left < 2 {
						break // one öre left: only a refund of it at every rate closes it (checkEvery tries that)
					}
					amount := max(1, rapid.Int64Range(1, max(1, left-1)).Draw(t, "amount"))
					_, err := l.PartialRefund(ctx, call, m.id, led.ID, &refund.PartialRequest{OrderLines: []order.LineInput{zeroLine("back", amount)},
						TotalRefundAmount: &amount, Note: ordertest.Ptr("n")})
					expect(t, "partialRefund", was, err)
				}
			case 6: // cancel the order
				_, err := l.CancelOrder(ctx, call, m.id)
				expect(t, "cancel", listed(r, uncap, order.ActionCancel), err)
			case 7: // cancel a sub-order: the uncaptured one or a void
				if led := pick(t, o, true); led != nil {
					a := order.ActionVoid
					if led.Kind == order.LedgerUncaptured {
						a = order.ActionCancel
					}
					_, err := l.CancelLedger(ctx, call, m.id, led.ID)
					expect(t, "cancelLedger", listed(r, led.ID, a), err)
				}
			case 8: // edit the order
				bodies := editBodies(o, approved)
				b := bodies[rapid.IntRange(0, len(bodies)-1).Draw(t, "edit")]
				_, err := l.EditOrder(ctx, call, m.id, b)
				expect(t, "editOrder", listed(r, uncap, order.ActionEditOrder), err)
			case 9:
				_, err := l.EditCustomer(ctx, call, m.id, &order.EditCustomerRequest{Phone: ordertest.Ptr("+46701234567")})
				expect(t, "editCustomer", listed(r, uncap, order.ActionEditCustomer), err)
			case 10:
				_, err := l.EditPaymentMethod(ctx, call, m.id, &order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{
					Provider: order.ProviderService, Type: order.PayAdvanceInvoice}})
				expect(t, "editPaymentMethod", listed(r, uncap, order.ActionEditPaymentMethod), err)
			case 11:
				_, err := l.ExtendExpiry(ctx, call, m.id)
				expect(t, "extendExpiry", listed(r, uncap, order.ActionExtendOrderExpiry), err)
			case 12:
				if led := pick(t, o, true); led != nil {
					_, err := l.ResendDocument(ctx, call, m.id, led.ID)
					expect(t, "resend", listed(r, led.ID, order.ActionResendOrderInvoice), err)
				}
			case 13:
				if led := pick(t, o, true); led != nil {
					_, err := l.Recourse(ctx, call, m.id, led.ID, &order.RecourseRequest{Reason: ordertest.Ptr("unpaid")})
					expect(t, "recourse", listed(r, led.ID, order.ActionRecourseOrderInvoice), err)
				}
			case 14: // no action type: acknowledge, set reference
				if rapid.Bool().Draw(t, "ack") {
					_, _ = l.Acknowledge(ctx, call, m.id)
				} else {
					_, _ = l.SetReference(ctx, call, m.id, &order.ReferenceRequest{Reference: ordertest.Ptr("ref")})
				}
			case 15: // the buyer pays (sandbox) or is reminded
				if led := pick(t, o, false); led != nil && led.Kind == order.LedgerCapture {
					if due := o.Outstanding(led); due > 0 && rapid.Bool().Draw(t, "pay") {
						_, _ = l.RegisterPayment(ctx, call, m.id, led.ID, rapid.Int64Range(1, due).Draw(t, "paid"))
					} else {
						_, _ = l.MarkLedger(ctx, call, m.id, led.ID, rapid.SampledFrom([]order.SubStatus{order.SubReminder1, order.SubInvoiceDeliveryFailure}).Draw(t, "mark"))
					}
				}
			case 16: // risk review
				_, _ = l.ResolveHold(ctx, call, m.id, rapid.Bool().Draw(t, "approve"))
			case 17: // time passes
				now = now.Add(time.Duration(rapid.IntRange(1, 40*24).Draw(t, "hours")) * time.Hour)
			case 18: // the expiry job
				if _, err := l.ExpireOrders(ctx, 10); err != nil {
					t.Fatal(err)
				}
			}
		}
		r, o := m.read(t)
		m.checkEvery(t, r, o, approved)
	})
}

// fillEvents grows the stored order id to n events, as a client looping on
// a change would (order.MaxEvents).
func fillEvents(t *testing.T, f *fixture, id string, n int) {
	t.Helper()
	err := f.store.Update(f.ctx, func(tx storage.Tx) error {
		o, err := tx.GetOrder(f.merchant, id)
		if err != nil {
			return err
		}
		env := order.Env{Now: f.now(), IDs: &ordertest.IDs{}}
		for len(o.Events) < n {
			o.AppendEvent(order.EventSetReference, o.Uncaptured.ID, 0, env)
		}
		return tx.UpdateOrder(o)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An order at its size limit refuses what would add an event (409
// order_size_limit): availableActions must not offer it, and what it still
// offers (cancel, refunds, voids) must go through.
func TestActionsAtTheOrderSizeLimit(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000, 20000)
	call := kassa.Call{MerchantID: f.merchant}
	c, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(5000))
	if err != nil {
		t.Fatal(err)
	}
	capID := c.Order.Captured[0].ID
	fillEvents(t, f, o.ID, order.MaxEvents)

	body, err := f.ledger.OrderJSON(f.ctx, f.merchant, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var r order.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	ops := map[order.Action]func() error{
		order.ActionCapture: func() error { _, err := f.ledger.Capture(f.ctx, call, o.ID, nil); return err },
		order.ActionPartialCapture: func() error {
			_, err := f.ledger.PartialCapture(f.ctx, call, o.ID, partial(100))
			return err
		},
		order.ActionEditOrder: func() error {
			_, err := f.ledger.EditOrder(f.ctx, call, o.ID, &order.EditRequest{OrderLines: []order.LineInput{zeroLine("e", 100)},
				TotalsInput: order.TotalsInput{TotalOrderAmount: ptr(int64(100)), TotalOrderAmountExclVat: ptr(int64(100)), TotalOrderVatAmount: ptr(int64(0))}})
			return err
		},
		order.ActionEditCustomer: func() error {
			_, err := f.ledger.EditCustomer(f.ctx, call, o.ID, &order.EditCustomerRequest{Phone: ptr("+46701234567")})
			return err
		},
		order.ActionEditPaymentMethod: func() error {
			_, err := f.ledger.EditPaymentMethod(f.ctx, call, o.ID, &order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{
				Provider: order.ProviderService, Type: order.PayAdvanceInvoice}})
			return err
		},
		order.ActionExtendOrderExpiry: func() error { _, err := f.ledger.ExtendExpiry(f.ctx, call, o.ID); return err },
	}
	for _, a := range []order.Action{order.ActionCapture, order.ActionPartialCapture, order.ActionEditOrder,
		order.ActionEditCustomer, order.ActionEditPaymentMethod, order.ActionExtendOrderExpiry} {
		was := listed(&r, r.Uncaptured.LedgerID, a)
		err := ops[a]()
		if was != (err == nil) {
			t.Errorf("%s: listed %v, operation: %v", a, was, err)
		}
		if err != nil && fault.KindOf(err) != fault.NotAvailable {
			t.Errorf("%s refused as %s: %v", a, fault.KindOf(err), err)
		}
	}
	// Money owed back stays recordable, and stays offered.
	if !listed(&r, capID, order.ActionPartialRefund) || !listed(&r, r.Uncaptured.LedgerID, order.ActionCancel) {
		t.Fatalf("size limit hid partialRefund or cancel: %+v", r.Uncaptured.AvailableActions)
	}
	if _, err := f.ledger.PartialRefund(f.ctx, call, o.ID, capID, &refund.PartialRequest{OrderLines: []order.LineInput{zeroLine("b", 1)}, TotalRefundAmount: ptr(int64(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.CancelOrder(f.ctx, call, o.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSizeLimitRefusalNamesTheLimit: an operation refused because the order
// is at its size limit is refused with 409 order_size_limit (docs/errors.md),
// as before availableActions learnt the limit, not with action_not_available
// "its state does not offer it", which blames a state the order is not in.
func TestSizeLimitRefusalNamesTheLimit(t *testing.T) {
	f := newFixture(t)
	o := f.order(t, "t1", 10000, 20000)
	call := kassa.Call{MerchantID: f.merchant}
	fillEvents(t, f, o.ID, order.MaxEvents)
	_, err := f.ledger.Capture(f.ctx, call, o.ID, nil)
	if fault.KindOf(err) != fault.NotAvailable || fault.CodeOf(err) != "order_size_limit" {
		t.Fatalf("capture at the size limit: %v (kind %v, code %q); want order_size_limit", err, fault.KindOf(err), fault.CodeOf(err))
	}
	_, err = f.ledger.ExtendExpiry(f.ctx, call, o.ID)
	if fault.CodeOf(err) != "order_size_limit" {
		t.Fatalf("expiry extension at the size limit: %v; want order_size_limit", err)
	}
}
