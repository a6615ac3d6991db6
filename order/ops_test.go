package order_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

func editTo(lines ...order.LineInput) *order.EditRequest {
	return &order.EditRequest{OrderLines: lines}
}

func withTotals(r *order.EditRequest, gross, net, vat int64) *order.EditRequest {
	r.TotalOrderAmount, r.TotalOrderAmountExclVat, r.TotalOrderVatAmount = ptr(gross), ptr(net), ptr(vat)
	return r
}

func TestEdit(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t) // 28780, approved 57560

	// Lower: 1 × 125.00 at 25 %.
	at := f.Clock.Advance(time.Hour)
	if err := o.Edit(withTotals(editTo(ordertest.Line("Less", 1, 12500, 2500)), 12500, 10000, 2500), f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "authorized", o.AuthorizedAmount, int64(12500))
	equal(t, "amounts", o.Amounts(), order.Amounts{Order: 12500, Uncaptured: 12500})
	equal(t, "events", eventTypes(o)[2:], []order.EventType{order.EventEdit})
	equal(t, "edit amount", o.Events[2].Amount, int64(12500))
	equal(t, "updatedAt", o.UpdatedAt, at)

	// Raise up to the approved amount: edit then authorize.
	if err := o.Edit(withTotals(editTo(ordertest.Line("More", 4, 14390, 2500)), 57560, 46048, 11512), f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "authorized", o.AuthorizedAmount, int64(57560))
	equal(t, "events", eventTypes(o)[3:], []order.EventType{order.EventEdit, order.EventAuthorize})
	equal(t, "authorize amount", o.Events[4].Amount, int64(57560))

	// Above the approved amount: refused, nothing changes.
	before := snapshot(t, o)
	err := o.Edit(withTotals(editTo(ordertest.Line("Too much", 1, 57561, 0)), 57561, 57561, 0), f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
	equal(t, "order after refused edit", snapshot(t, o), before)

	// Totals are required, and must match.
	err = o.Edit(editTo(ordertest.Line("x", 1, 100, 0)), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmount", "totalOrderAmountExclVat", "totalOrderVatAmount")
	err = o.Edit(withTotals(editTo(ordertest.Line("x", 1, 100, 0)), 100, 99, 0), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmountExclVat")
	err = o.Edit(withTotals(editTo(ordertest.Line("x", 1, 100, 0), order.LineInput{Quantity: ptr(1), UnitPrice: ptr(1)}, ordertest.Line("x", 0, 1, 0)), 100, 100, 0), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "orderLines[1].description", "orderLines[2].quantity")
	err = o.Edit(&order.EditRequest{}, f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "orderLines", "totalOrderAmount", "totalOrderAmountExclVat", "totalOrderVatAmount")
	err = o.Edit(withTotals(&order.EditRequest{OrderLines: []order.LineInput{}}, 0, 0, 0), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "orderLines")
	equal(t, "order after refused edits", snapshot(t, o), before)

	// Not offered once cancelled.
	if err := o.Cancel(f.Env()); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, o)
	err = o.Edit(withTotals(editTo(ordertest.Line("x", 1, 100, 0)), 100, 100, 0), f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	equal(t, "cancelled order after refused edit", snapshot(t, o), before)
}

func TestCancel(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	at := f.Clock.Advance(time.Minute)
	if err := o.Cancel(f.Env()); err != nil {
		t.Fatal(err)
	}
	now := f.Clock.Now()
	equal(t, "events", eventTypes(o)[2:], []order.EventType{order.EventCancel})
	equal(t, "cancel amount", o.Events[2].Amount, int64(28780))
	equal(t, "updatedAt", o.UpdatedAt, at)
	equal(t, "amounts", o.Amounts(), order.Amounts{})
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusCancelled})
	equal(t, "actions", len(actions(o, &o.Uncaptured, f)), 0)
	for name, op := range map[string]func() error{
		"cancel":        func() error { return o.Cancel(f.Env()) },
		"cancel ledger": func() error { return o.CancelLedger(o.Uncaptured.ID, f.Env()) },
		"extend expiry": func() error { return o.ExtendExpiry(f.Env()) },
		"edit customer": func() error {
			return o.EditCustomer(&order.EditCustomerRequest{Email: ordertest.Ptr("a@b.se")}, f.Env())
		},
		"payment method": func() error { return o.EditPaymentMethod(advanceInvoice(), f.Env()) },
	} {
		before := snapshot(t, o)
		wantFault(t, op(), fault.NotAvailable, "action_not_available")
		if snapshot(t, o) != before {
			t.Errorf("%s after cancel changed the order", name)
		}
	}
	_, err := o.Require("ledger-99", order.ActionVoid, f.Env())
	wantFault(t, err, fault.NotFound, "ledger_not_found")
}

func advanceInvoice() *order.EditPaymentMethodRequest {
	return &order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{Provider: order.ProviderService, Type: order.PayAdvanceInvoice}}
}

func TestExtendExpiry(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	created := o.CreatedAt

	// Same moment and later the same day: the same date, one event.
	if err := o.ExtendExpiry(f.Env()); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2025, 4, 7, 23, 59, 59, 0, time.UTC)
	equal(t, "expiresAt", o.ExpiresAt, want)
	f.Clock.Advance(10 * time.Hour) // 19:30 the same day
	if err := o.ExtendExpiry(f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "expiresAt after second call", o.ExpiresAt, want)
	equal(t, "events", eventTypes(o)[2:], []order.EventType{order.EventExtendExpiry})
	equal(t, "extend amount", o.Events[2].Amount, int64(0))

	// The next day it moves by a day.
	at := f.Clock.Advance(5 * time.Hour)
	if err := o.ExtendExpiry(f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "expiresAt next day", o.ExpiresAt, want.Add(24*time.Hour))
	equal(t, "updatedAt", o.UpdatedAt, at)

	// Extending every 27 days reaches the 180-day cap and stops there.
	for i := 0; i < 10 && o.ExpiresAt.Before(o.ExpiryCap(f.Policy)); i++ {
		f.Clock.Advance(27 * 24 * time.Hour)
		if err := o.ExtendExpiry(f.Env()); err != nil {
			t.Fatalf("extension %d: %v", i, err)
		}
	}
	equal(t, "expiresAt capped", o.ExpiresAt, created.Add(180*24*time.Hour))
	if o.HasStatus(order.StatusExpired, f.Clock.Now()) {
		t.Fatal("expired while extending")
	}
	before := snapshot(t, o)
	wantFault(t, o.ExtendExpiry(f.Env()), fault.NotAvailable, "action_not_available")
	equal(t, "order after refused extension", snapshot(t, o), before)

	// Past expiry: expired, no capture, no extension, no customer edit (the
	// order is closed); the remainder can still be released.
	f.Clock.T = o.ExpiresAt
	now := f.Clock.Now()
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusExpired})
	equal(t, "actions", actions(o, &o.Uncaptured, f), []order.Action{order.ActionCancel})
	wantFault(t, o.ExtendExpiry(f.Env()), fault.NotAvailable, "action_not_available")
	equal(t, "expired order after refused extension", snapshot(t, o), before)
}

func TestExtendExpiryShortCap(t *testing.T) {
	f := ordertest.New()
	f.Policy.MaxExpiry = 30 * 24 * time.Hour
	o := f.Order(t)
	f.Clock.Advance(48 * time.Hour)
	if err := o.ExtendExpiry(f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "expiresAt", o.ExpiresAt, ordertest.Start().Add(30*24*time.Hour))
	wantFault(t, o.ExtendExpiry(f.Env()), fault.NotAvailable, "action_not_available")
}

func TestMarkExpired(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	if o.MarkExpired(f.Env()) {
		t.Fatal("marked before expiry")
	}
	f.Clock.T = o.ExpiresAt
	if !o.MarkExpired(f.Env()) || o.MarkExpired(f.Env()) {
		t.Fatal("MarkExpired should change the order once")
	}
	f.Clock.T = ordertest.Start() // even if the clock is set back, the mark holds
	if !o.Expired(f.Clock.Now()) {
		t.Fatal("marked order not expired")
	}
}

func TestEditCustomer(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	statuses := o.Statuses(f.Clock.Now())
	// A channel is set up with its type; an empty channel object changes nothing.
	before := snapshot(t, o)
	wantFault(t, o.EditCustomer(&order.EditCustomerRequest{InvoiceChannel: &order.InvoiceChannelInput{Details: "x"}}, f.Env()),
		fault.Invalid, "validation_failed", "invoiceChannel.type")
	wantFault(t, o.EditCustomer(&order.EditCustomerRequest{InvoiceChannel: &order.InvoiceChannelInput{}}, f.Env()),
		fault.Invalid, "validation_failed", "invoiceChannel")
	equal(t, "order after refused channel edits", snapshot(t, o), before)
	at := f.Clock.Advance(time.Minute)
	r := &order.EditCustomerRequest{Email: ordertest.Ptr("new@buyer.example"), Reference1: ordertest.Ptr("PO-7"),
		BillingAddress: &order.Address{City: "Malmö", PostalCode: "21120"},
		InvoiceChannel: &order.InvoiceChannelInput{Type: "edi"}}
	if err := o.EditCustomer(r, f.Env()); err != nil {
		t.Fatal(err)
	}
	last := o.Events[len(o.Events)-1]
	equal(t, "event", [2]any{last.Type, last.Amount}, [2]any{order.EventEditCustomer, int64(0)})
	equal(t, "updatedAt", o.UpdatedAt, at)
	equal(t, "statuses unchanged", o.Statuses(at), statuses)
	equal(t, "email", o.Customer.Email, "new@buyer.example")
	equal(t, "reference1", o.Customer.Reference1, "PO-7")
	equal(t, "companyId kept", o.Customer.CompanyID, "5560000001")
	equal(t, "city", o.Customer.BillingAddress.City, "Malmö")
	equal(t, "channel", *o.Customer.InvoiceChannel, order.InvoiceChannel{Type: "edi", Destination: "default", State: "enabled"})
	// Once the channel has a type, its details change alone.
	if err := o.EditCustomer(&order.EditCustomerRequest{InvoiceChannel: &order.InvoiceChannelInput{Details: "GLN 7300009000001"}}, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "channel details", *o.Customer.InvoiceChannel, order.InvoiceChannel{Type: "edi", Destination: "default", State: "enabled", Details: "GLN 7300009000001"})

	before = snapshot(t, o)
	bad := &order.EditCustomerRequest{Email: ordertest.Ptr("nope"), Phone: ordertest.Ptr("0123456789012345678901234567890"),
		ShippingAddress: &order.Address{PostalCode: "12345678901", Contact: &order.Contact{Email: "x@"}},
		InvoiceChannel:  &order.InvoiceChannelInput{Type: "fax", Destination: "somewhere"}}
	wantFault(t, o.EditCustomer(bad, f.Env()), fault.Invalid, "validation_failed",
		"shippingAddress.postalCode", "shippingAddress.contact.email", "email", "phone",
		"invoiceChannel.type", "invoiceChannel.destination")
	equal(t, "order after refused edit", snapshot(t, o), before)
	wantFault(t, o.EditCustomer(&order.EditCustomerRequest{}, f.Env()), fault.Invalid, "validation_failed", "body")
	equal(t, "order after an edit naming no field", snapshot(t, o), before)
}

func TestEditPaymentMethod(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	bad := &order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{Provider: order.ProviderExternal, Type: order.PayCard}}
	wantFault(t, o.EditPaymentMethod(bad, f.Env()), fault.Invalid, "validation_failed", "paymentMethod.provider", "paymentMethod.type")
	wantFault(t, o.EditPaymentMethod(&order.EditPaymentMethodRequest{}, f.Env()), fault.Invalid, "validation_failed", "paymentMethod")

	if err := o.EditPaymentMethod(advanceInvoice(), f.Env()); err != nil {
		t.Fatal(err)
	}
	now := f.Clock.Now()
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusUnacknowledged})
	equal(t, "last event", o.Events[len(o.Events)-1].Type, order.EventEditPaymentMethod)
	equal(t, "category", o.PaymentMethod.Category(), order.CategoryAdvanceInvoice)
	equal(t, "customer payment method", *o.Customer.PaymentMethod, o.PaymentMethod)
	_, err := o.Require(o.Uncaptured.ID, order.ActionPartialCapture, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	wantFault(t, o.EditPaymentMethod(advanceInvoice(), f.Env()), fault.NotAvailable, "action_not_available")
	if err := o.Acknowledge(f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "events", eventTypes(o)[2:], []order.EventType{order.EventEditPaymentMethod, order.EventAcknowledge, order.EventReadyForCapture})
	if _, err := o.Require(o.Uncaptured.ID, order.ActionPartialCapture, f.Env()); err != nil {
		t.Fatalf("capture after acknowledgement: %v", err)
	}
}

func TestSetReference(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	wantFault(t, o.SetReference(&order.ReferenceRequest{}, f.Env()), fault.Invalid, "validation_failed", "reference")
	long := ordertest.Ptr("012345678901234567890123456789012345678901234567890")
	wantFault(t, o.SetReference(&order.ReferenceRequest{Reference: long, SettlementReference: long}, f.Env()),
		fault.Invalid, "validation_failed", "reference", "settlementReference")
	if err := o.SetReference(&order.ReferenceRequest{Reference: ordertest.Ptr("PO-1"), SettlementReference: ordertest.Ptr("S-1")}, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "references", [2]string{o.MerchantReference, o.SettlementReference}, [2]string{"PO-1", "S-1"})
	last := o.Events[len(o.Events)-1]
	equal(t, "event", [2]any{last.Type, last.Amount}, [2]any{order.EventSetReference, int64(0)})
}

func TestRiskHold(t *testing.T) {
	f := ordertest.New()
	auth := ordertest.Authorization(0)
	auth.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	o := f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), auth)
	now := f.Clock.Now()
	equal(t, "events", eventTypes(o), []order.EventType{order.EventCreate})
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusOnHold})
	equal(t, "authorizeStatus", o.AuthorizeStatus(), "pending")
	_, err := o.Require(o.Uncaptured.ID, order.ActionCapture, f.Env())
	wantFault(t, err, fault.NotAvailable, "action_not_available")
	if err := o.ResolveHold(true, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "events", eventTypes(o), []order.EventType{order.EventCreate, order.EventAuthorize, order.EventReadyForCapture})
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusReadyForCapture})
	wantFault(t, o.ResolveHold(true, f.Env()), fault.NotAvailable, "action_not_available")

	auth.RiskTags = []order.RiskTag{order.RiskBlacklisted}
	o = f.Create(t, ordertest.CreateRequest(ordertest.DefaultLines()...), auth)
	equal(t, "statuses", o.Statuses(now), []order.Status{order.StatusUncaptured, order.StatusFraudDeny})
	equal(t, "actions", actions(o, &o.Uncaptured, f), []order.Action{order.ActionCancel})
	wantFault(t, o.SetReference(&order.ReferenceRequest{Reference: ordertest.Ptr("x")}, f.Env()), fault.NotAvailable, "action_not_available")
}

func TestEventTimeNeverGoesBack(t *testing.T) {
	f := ordertest.New()
	o := f.Order(t)
	f.Clock.T = ordertest.Start().Add(-time.Hour) // the sandbox clock can be set back
	if err := o.SetReference(&order.ReferenceRequest{Reference: ordertest.Ptr("x")}, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "event time", o.Events[len(o.Events)-1].CreatedAt, ordertest.Start())
	equal(t, "updatedAt", o.UpdatedAt, ordertest.Start())
}

// A cancelled order, or one that expired with nothing captured, no longer
// awaits the merchant: acknowledging it is refused rather than appending an
// event to it. It keeps the unacknowledged status, a fact about its past.
func TestClosedOrderAwaitsNoAcknowledgement(t *testing.T) {
	for _, close := range []struct {
		name string
		do   func(*ordertest.Fixture, *order.Order) error
		want []order.Status
	}{
		{"cancelled", func(f *ordertest.Fixture, o *order.Order) error { return o.Cancel(f.Env()) }, []order.Status{order.StatusCancelled, order.StatusUnacknowledged}},
		{"expired", func(f *ordertest.Fixture, o *order.Order) error {
			f.Clock.Advance(29 * 24 * time.Hour)
			return nil
		}, []order.Status{order.StatusUncaptured, order.StatusExpired, order.StatusUnacknowledged}},
	} {
		t.Run(close.name, func(t *testing.T) {
			f := ordertest.New()
			o := f.Order(t)
			if err := o.EditPaymentMethod(advanceInvoice(), f.Env()); err != nil {
				t.Fatal(err)
			}
			if err := close.do(f, o); err != nil {
				t.Fatal(err)
			}
			equal(t, "statuses", o.Statuses(f.Clock.Now()), close.want)
			before := snapshot(t, o)
			wantFault(t, o.Acknowledge(f.Env()), fault.NotAvailable, "action_not_available")
			equal(t, "order after refused acknowledgement", snapshot(t, o), before)
		})
	}
}

// TestEditCustomerAfterExpiry: an expired order with nothing captured is
// closed, and closed to customer edits as to every other; one with a live
// capture keeps them, for the documents still to come of it.
func TestEditCustomerAfterExpiry(t *testing.T) {
	f := ordertest.New()
	empty := f.Order(t)
	captured := f.Order(t, ordertest.Line("a", 1, 10000, 2500), ordertest.Line("b", 1, 20000, 2500))
	if _, err := capture.Partial(captured, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.ByID(captured.Uncaptured.Lines[0].ID)},
		TotalCaptureAmount: ptr(10000)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	f.Clock.T = empty.ExpiresAt.Add(time.Second)
	edit := &order.EditCustomerRequest{Email: ordertest.Ptr("late@buyer.example")}

	if slices.Contains(actions(empty, &empty.Uncaptured, f), order.ActionEditCustomer) {
		t.Fatalf("editCustomer offered on an expired order with nothing captured: %v", actions(empty, &empty.Uncaptured, f))
	}
	before := snapshot(t, empty)
	wantFault(t, empty.EditCustomer(edit, f.Env()), fault.NotAvailable, "action_not_available")
	equal(t, "expired order after refused edit", snapshot(t, empty), before)

	if !slices.Contains(actions(captured, &captured.Uncaptured, f), order.ActionEditCustomer) {
		t.Fatalf("editCustomer not offered on an expired order with a capture: %v", actions(captured, &captured.Uncaptured, f))
	}
	if err := captured.EditCustomer(edit, f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "email", captured.Customer.Email, "late@buyer.example")
}

// An invoice is due PaymentTermDays after the UTC date of its issue, an
// advance invoice on that date, a receipt never; and a credit note states
// none, whatever its order's method.
func TestDueDateOfWhatIsIssued(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, c := range []struct {
		pm     order.PaymentType
		issued string
		want   string // "" for none
	}{
		{order.PayInvoice, "2026-01-31T23:59:59Z", "2026-03-02"},
		{order.PayInvoice, "2028-02-01T00:00:00+02:00", "2028-03-01"}, // 31 January in UTC, a leap year
		{order.PayPartPayment, "2026-12-15T10:00:00Z", "2027-01-14"},
		{order.PayBankTransfer, "2026-06-01T00:00:00Z", "2026-07-01"},
		{order.PayAdvanceInvoice, "2026-01-31T23:59:59Z", "2026-01-31"},
		{order.PayCard, "2026-01-31T12:00:00Z", ""},
		{order.PayPaypal, "2026-01-31T12:00:00Z", ""},
	} {
		got := order.PaymentMethod{Provider: order.ProviderService, Type: c.pm}.DueDate(at(c.issued))
		if c.want == "" {
			if !got.IsZero() {
				t.Errorf("%s issued %s: due %v, want none", c.pm, c.issued, got)
			}
			continue
		}
		if want := at(c.want + "T00:00:00Z"); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s issued %s: due %v, want %v", c.pm, c.issued, got, want)
		}
	}
	f := ordertest.New()
	o := f.Order(t) // an invoice order
	env := f.Env()
	day := env.Now.UTC()
	want := time.Date(day.Year(), day.Month(), day.Day()+order.PaymentTermDays, 0, 0, 0, 0, time.UTC)
	for _, kind := range []order.LedgerKind{order.LedgerCapture, order.LedgerRefund} {
		l := o.NewLedger(kind, nil, env)
		o.Issue(&l, env)
		if kind == order.LedgerRefund {
			want = time.Time{}
		}
		if !l.Issued.Due.Equal(want) {
			t.Errorf("%s of an invoice order issued with due %v, want %v", kind, l.Issued.Due, want)
		}
	}
}

// An order's amount (captured plus what is left) stays within order.MaxTotal
// however much its authorization approved: an order made from a token put
// before the tokens' approved amount was bounded may approve more, and
// edits after partial captures took its amount to the approval.
func TestEditKeepsTheOrderWithinItsBound(t *testing.T) {
	f := ordertest.New()
	o := f.Create(t, ordertest.CreateRequest(ordertest.Line("Big", 1, order.MaxTotal, 0)), ordertest.Authorization(3*order.MaxTotal))
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("Part", 1, order.MaxTotal/2, 0)},
		TotalCaptureAmount: ptr(int64(order.MaxTotal / 2))}, f.Env()); err != nil {
		t.Fatal(err)
	}
	// Up to the bound: captured half plus a remainder of half.
	half := int64(order.MaxTotal / 2)
	if err := o.Edit(withTotals(editTo(ordertest.Line("Rest", 1, half, 0)), half, half, 0), f.Env()); err != nil {
		t.Fatal(err)
	}
	equal(t, "amounts at the bound", o.Amounts(), order.Amounts{Order: order.MaxTotal, Captured: half, Uncaptured: half, Consumed: half})
	before := snapshot(t, o)
	err := o.Edit(withTotals(editTo(ordertest.Line("More", 1, half+1, 0)), half+1, half+1, 0), f.Env())
	wantFault(t, err, fault.Invalid, "validation_failed", "totalOrderAmount")
	equal(t, "order after refused edit", snapshot(t, o), before)
}

// An edit past both the buyer's approval and order.MaxTotal is refused as
// what the merchant can act on: authorization_exceeded, as before the bound
// was checked, with its rounding hint. The bound alone (validation_failed)
// is for an approval above it, which only a token put before approvals were
// bounded carries.
func TestEditPastApprovalAndBoundIsAuthorizationExceeded(t *testing.T) {
	f := ordertest.New()
	o := f.Create(t, ordertest.CreateRequest(ordertest.Line("Big", 1, order.MaxTotal, 0)), ordertest.Authorization(order.MaxTotal))
	half := int64(order.MaxTotal / 2)
	if _, err := capture.Partial(o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("Part", 1, half, 0)},
		TotalCaptureAmount: ptr(half)}, f.Env()); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, o)
	err := o.Edit(withTotals(editTo(ordertest.Line("More", 1, half+1, 0)), half+1, half+1, 0), f.Env())
	wantFault(t, err, fault.Invalid, "authorization_exceeded", "totalOrderAmount")
	equal(t, "order after refused edit", snapshot(t, o), before)
}
