package order_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/refund"
)

// machine drives one order through random sequences of every operation and
// checks the invariants of design.md §3 after each step.
type machine struct {
	f      *ordertest.Fixture
	o      *order.Order
	events []order.Event               // the log as last seen: it may only grow
	kinds  map[string]order.LedgerKind // every ledger id ever seen, with its kind
	steps  int

	// Counted here from the operations, apart from the order's own
	// figures (checkAuthorization): what the order released of its
	// uncaptured lines (a cancel, or the remainder a final capture
	// leaves), and, since its amount was last set (created or edited),
	// what it released and what captures of lines without id took.
	released, releasedSinceSet, withoutIDSinceSet int64
}

func newMachine(t *rapid.T) *machine {
	f := ordertest.New()
	r, lines, m := ordertest.DrawCreate(t, f.IDs, 5, 50000)
	gross := order.SumLines(lines, m).Gross
	auth := ordertest.Authorization(gross + rapid.Int64Range(0, 100000).Draw(t, "headroom"))
	auth.PaymentMethod.Type = rapid.SampledFrom([]order.PaymentType{order.PayInvoice, order.PayAdvanceInvoice,
		order.PayCard, order.PayPartPayment}).Draw(t, "paymentType")
	auth.RequireAck = rapid.Bool().Draw(t, "requireAck")
	if rapid.IntRange(0, 5).Draw(t, "risk") == 0 {
		auth.RiskTags = []order.RiskTag{order.RiskPossibleFraud}
	}
	o, err := order.Create("merchant-1", r, lines, m, auth, f.Env())
	if err != nil {
		t.Fatalf("generated create failed: %v", err)
	}
	mc := &machine{f: f, o: o, kinds: map[string]order.LedgerKind{}}
	if o.Events[0].Type != order.EventCreate || o.Events[0].Amount != gross {
		t.Fatalf("first event %+v, want create with %d", o.Events[0], gross)
	}
	if auth.RiskTags == nil && !(o.Unacknowledged && auth.PaymentMethod.Type == order.PayAdvanceInvoice) {
		if len(o.Events) != 2 || o.Events[1].Type != order.EventReadyForCapture || o.Events[1].Amount != 0 {
			t.Fatalf("events after create %+v", o.Events)
		}
	}
	mc.check(t)
	return mc
}

func (m *machine) env() order.Env { return m.f.Env() }
func (m *machine) now() time.Time { return m.f.Clock.Now() }

func (m *machine) offered(l *order.Ledger, a order.Action) bool {
	return slices.Contains(m.o.Actions(l, m.now(), m.f.Policy), a)
}

func (m *machine) snap(t *rapid.T) string {
	b, err := json.Marshal(m.o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// expect runs op and checks its outcome: when ok is true it must succeed;
// when false it must fail with kind, and leave the order byte-identical.
// Any failure, expected or not, must leave the order untouched.
func (m *machine) expect(t *rapid.T, name string, ok bool, kind fault.Kind, op func() error) {
	before := m.snap(t)
	err := op()
	m.steps++
	if err == nil {
		applied[name]++
	} else {
		refused[name]++
	}
	switch {
	case ok && err != nil:
		t.Fatalf("%s: offered but refused: %v", name, err)
	case !ok && err == nil:
		t.Fatalf("%s: not offered but applied", name)
	case !ok && fault.KindOf(err) != kind:
		t.Fatalf("%s: refused with %s (%v), want %s", name, fault.KindOf(err), err, kind)
	}
	if err != nil && m.snap(t) != before {
		t.Fatalf("%s: refused (%v) but changed the order", name, err)
	}
}

// gross is the amount including VAT of lines, computed here independently of order.SumLines.
func (m *machine) gross(lines []order.Line) (gross, net, vat int64) {
	for _, l := range lines {
		if m.o.VATMode == money.ExclVAT {
			gross += l.TotalAmount + l.TotalVatAmount
			net += l.TotalAmount
		} else {
			gross += l.TotalAmount
			net += l.TotalAmount - l.TotalVatAmount
		}
		vat += l.TotalVatAmount
	}
	return
}

// vatWithin reports whether the lines a capture request names (by id, or
// new ones at 0 % or 25 %, as newLine draws them) sum to VAT of 0 or more
// and no more than their gross, counted here from the lines.
func (m *machine) vatWithin(ins []order.LineInput) bool {
	byID := map[string]order.Line{}
	for _, l := range m.o.Uncaptured.Lines {
		byID[l.ID] = l
	}
	var lines []order.Line
	for _, in := range ins {
		if in.ID != nil {
			lines = append(lines, byID[*in.ID])
			continue
		}
		var rate int64
		if in.Vat != nil {
			rate = *in.Vat
		}
		lines = append(lines, order.Line{TotalAmount: *in.UnitPrice, TotalVatAmount: money.LineVAT(*in.UnitPrice, rate, m.o.VATMode), Vat: rate})
	}
	_, net, vat := m.gross(lines)
	return vat >= 0 && net >= 0
}

func (m *machine) remaining() int64 {
	var consumed int64
	for i := range m.o.Captured {
		g, _, _ := m.gross(m.o.Captured[i].Lines)
		consumed += g
	}
	return m.o.AuthorizedAmount - consumed
}

// newLine draws a line without id whose amount including VAT lies in [lo, hi].
func (m *machine) newLine(t *rapid.T, lo, hi int64) (order.LineInput, int64, int64) {
	amount := rapid.Int64Range(lo, hi).Draw(t, "amount")
	if rapid.Bool().Draw(t, "withVat") && amount >= 5 {
		// 25 % VAT: in exclVat mode the total excludes it.
		total := amount
		if m.o.VATMode == money.ExclVAT {
			total = amount * 4 / 5
		}
		vat := money.LineVAT(total, 2500, m.o.VATMode)
		g := total
		if m.o.VATMode == money.ExclVAT {
			g += vat
		}
		if g >= lo && g <= hi {
			return ordertest.Line("extra", 1, total, 2500), total, g
		}
	}
	return ordertest.Line("extra", 1, amount, 0), amount, amount
}

// closesEveryRate reports whether one refund line of total at in's rate
// credits exactly what capture c has left at every VAT rate, counted here
// from the lines, apart from the refund package's own sums.
func (m *machine) closesEveryRate(c *order.Ledger, in order.LineInput, total int64) bool {
	type sums struct{ total, vat int64 }
	left := map[int64]sums{}
	add := func(ls []order.Line, sign int64) {
		for _, l := range ls {
			s := left[l.Vat]
			left[l.Vat] = sums{s.total + sign*l.TotalAmount, s.vat + sign*l.TotalVatAmount}
		}
	}
	add(c.Lines, 1)
	for i := range m.o.Refunded {
		if m.o.Refunded[i].RefundOf == c.ID {
			add(m.o.Refunded[i].Lines, -1)
		}
	}
	var rate int64
	if in.Vat != nil {
		rate = *in.Vat
	}
	s := left[rate]
	left[rate] = sums{s.total - total, s.vat - money.LineVAT(total, rate, m.o.VATMode)}
	for _, s := range left {
		if s != (sums{}) {
			return false
		}
	}
	return true
}

func (m *machine) pickLedger(t *rapid.T, kinds ...order.LedgerKind) *order.Ledger {
	var ls []*order.Ledger
	for _, k := range kinds {
		switch k {
		case order.LedgerUncaptured:
			ls = append(ls, &m.o.Uncaptured)
		case order.LedgerCapture:
			for i := range m.o.Captured {
				ls = append(ls, &m.o.Captured[i])
			}
		case order.LedgerRefund:
			for i := range m.o.Refunded {
				ls = append(ls, &m.o.Refunded[i])
			}
		}
	}
	if len(ls) == 0 {
		return nil
	}
	return ls[rapid.IntRange(0, len(ls)-1).Draw(t, "ledger")]
}

func (m *machine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"": func(t *rapid.T) {
			m.check(t)
			m.checkAuthorization(t)
		},
		"partialCaptureWithID": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionPartialCapture)
			rem := m.remaining()
			var ins []order.LineInput
			var total, g int64
			// Mostly lines by id, each taken with a chance of one in three,
			// so that a remainder is usually left for the next capture;
			// otherwise (or when none was taken) a line without id, mostly
			// small against what the authorization has left.
			byID := rapid.IntRange(0, 3).Draw(t, "byID") > 0
			for _, l := range m.o.Uncaptured.Lines {
				if byID && rapid.IntRange(0, 2).Draw(t, "take") == 0 {
					lg, _, _ := m.gross([]order.Line{l})
					if g+lg > rem || g+lg < 0 {
						continue
					}
					g += lg
					total += l.TotalAmount
					if rapid.Bool().Draw(t, "repeatFields") {
						ins = append(ins, ordertest.ByIDFull(l))
					} else {
						ins = append(ins, ordertest.ByID(l.ID))
					}
				}
			}
			if len(ins) == 0 || g < 0 {
				if !ok {
					ins, total = []order.LineInput{ordertest.Line("x", 1, 1, 0)}, 1
				} else {
					hi := rem
					if rapid.IntRange(0, 3).Draw(t, "small") > 0 {
						hi = rem / 8
					}
					l, tot, _ := m.newLine(t, 0, hi)
					ins, total = []order.LineInput{l}, tot
				}
			}
			ids := map[string]bool{}
			for _, in := range ins {
				if in.ID != nil {
					ids[*in.ID] = true
				}
			}
			before := len(m.o.Captured)
			beforeUncap := slices.Clone(m.o.Uncaptured.Lines)
			kind := fault.NotAvailable
			if ok && !m.vatWithin(ins) {
				// Lines by id at several rates (a discount without its goods)
				// can sum to an invoice of VAT outside its gross.
				ok, kind = false, fault.Invalid
			}
			m.expect(t, "partialCapture", ok, kind, func() error {
				_, err := capture.Partial(m.o, &capture.PartialRequest{OrderLines: ins, TotalCaptureAmount: ordertest.Ptr(total)}, m.env())
				if kind == fault.Invalid && fault.CodeOf(err) != "capture_vat_out_of_bounds" {
					t.Fatalf("capture of VAT outside its gross refused as %v", err)
				}
				return err
			})
			if ok {
				c := m.o.Captured[before]
				last := m.o.Events[len(m.o.Events)-1]
				cg, _, _ := m.gross(c.Lines)
				for _, l := range c.Lines {
					if !ids[l.ID] {
						g, _, _ := m.gross([]order.Line{l})
						m.withoutIDSinceSet += g
					}
				}
				if last.Type != order.EventPartialCapture || last.Amount != cg || last.LedgerID != c.ID {
					t.Fatalf("partialCapture event %+v for capture of %d", last, cg)
				}
				var kept []order.Line
				for _, l := range beforeUncap {
					if !ids[l.ID] {
						kept = append(kept, l)
					}
				}
				if len(kept) != len(m.o.Uncaptured.Lines) || (len(kept) > 0 && !slices.Equal(kept, m.o.Uncaptured.Lines)) {
					t.Fatalf("uncaptured lines %v, want %v", m.o.Uncaptured.Lines, kept)
				}
			}
		},
		"partialCaptureMismatch": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionPartialCapture)
			kind := fault.NotAvailable
			if ok {
				kind = fault.Invalid
			}
			l, tot, _ := m.newLine(t, 0, 1000)
			m.expect(t, "partialCaptureMismatch", false, kind, func() error {
				_, err := capture.Partial(m.o, &capture.PartialRequest{OrderLines: []order.LineInput{l}, TotalCaptureAmount: ordertest.Ptr(tot + 1)}, m.env())
				if ok && fault.CodeOf(err) != "capture_amount_mismatch" {
					t.Fatalf("mismatch refused as %v", err)
				}
				return err
			})
		},
		"partialCaptureOver": func(t *rapid.T) {
			// One minor unit more than the captures have left of the
			// authorization, every capture counted, voided or not.
			ok := m.offered(&m.o.Uncaptured, order.ActionPartialCapture)
			kind := fault.NotAvailable
			if ok {
				kind = fault.Invalid
			}
			over := m.remaining() + 1
			m.expect(t, "partialCaptureOver", false, kind, func() error {
				_, err := capture.Partial(m.o, &capture.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("x", 1, over, 0)}, TotalCaptureAmount: ordertest.Ptr(over)}, m.env())
				if ok && fault.CodeOf(err) != "capture_exceeds_authorization" {
					t.Fatalf("capture of %d beyond the authorization refused as %v", over, err)
				}
				return err
			})
		},
		"fullCapture": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionCapture)
			req := &capture.FullRequest{}
			if rapid.Bool().Draw(t, "withTotal") {
				_, net, vat := m.gross(m.o.Uncaptured.Lines)
				total := net
				if m.o.VATMode == money.InclVAT {
					total += vat
				}
				req.TotalCaptureAmount = ordertest.Ptr(total)
				if total < 0 {
					req.TotalCaptureAmount = nil
				}
			}
			uncap, _, _ := m.gross(m.o.Uncaptured.Lines)
			n := len(m.o.Events)
			m.expect(t, "fullCapture", ok, fault.NotAvailable, func() error {
				_, err := capture.Full(m.o, req, m.env())
				return err
			})
			if ok && len(m.o.Uncaptured.Lines) != 0 {
				t.Fatalf("lines left after full capture")
			}
			if ok {
				// Every line is captured: nothing is released.
				m.captured(t, n, order.EventFullCapture, uncap, false, 0)
			}
		},
		"fullCaptureWithLines": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionCapture)
			var ins []order.LineInput
			var g int64
			rem := m.remaining()
			for _, l := range m.o.Uncaptured.Lines {
				lg, _, _ := m.gross([]order.Line{l})
				if rapid.Bool().Draw(t, "take") && g+lg >= 0 && g+lg <= rem {
					ins = append(ins, ordertest.ByID(l.ID))
					g += lg
				}
			}
			if len(ins) == 0 {
				ins = []order.LineInput{ordertest.Line("x", 1, 0, 0)}
			}
			kind := fault.NotAvailable
			if ok && !m.vatWithin(ins) {
				ok, kind = false, fault.Invalid
			}
			uncap, _, _ := m.gross(m.o.Uncaptured.Lines)
			lines, n := len(m.o.Uncaptured.Lines), len(m.o.Events)
			m.expect(t, "fullCaptureWithLines", ok, kind, func() error {
				_, err := capture.Full(m.o, &capture.FullRequest{OrderLines: ins}, m.env())
				if kind == fault.Invalid && fault.CodeOf(err) != "capture_vat_out_of_bounds" {
					t.Fatalf("capture of VAT outside its gross refused as %v", err)
				}
				return err
			})
			if ok {
				// The lines named by id are captured (or the one line of 0
				// without id); the rest of the remainder, gross, is released.
				byID := 0
				for _, in := range ins {
					if in.ID != nil {
						byID++
					}
				}
				m.captured(t, n, order.EventFullCapture, g, byID < lines, uncap-g)
			}
		},
		"edit": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionEditOrder)
			room := m.o.ApprovedAmount - (m.o.AuthorizedAmount - m.remaining())
			over := ok && room < order.MaxTotal && rapid.IntRange(0, 4).Draw(t, "over") == 0
			var ins []order.LineInput
			if over {
				ins = []order.LineInput{ordertest.Line("too much", 1, room+1, 0)}
			} else {
				hi := room
				if hi < 0 {
					hi = 0
				}
				for i, n := 0, rapid.IntRange(1, 3).Draw(t, "editLines"); i < n; i++ {
					l, _, _ := m.newLine(t, 0, hi/int64(n))
					ins = append(ins, l)
				}
			}
			probe, _, err := order.ValidateCreate(&order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv", VatMode: string(m.o.VATMode), OrderLines: ins}, false, &ordertest.IDs{})
			if err != nil {
				t.Fatalf("generated edit lines invalid: %v", err)
			}
			s := order.SumLines(probe, m.o.VATMode)
			req := &order.EditRequest{OrderLines: ins, TotalsInput: order.TotalsInput{TotalOrderAmount: ordertest.Ptr(s.Gross),
				TotalOrderAmountExclVat: ordertest.Ptr(s.Net), TotalOrderVatAmount: ordertest.Ptr(s.VAT)}}
			kind := fault.NotAvailable
			if over {
				kind = fault.Invalid
			}
			m.expect(t, "edit", ok && !over, kind, func() error { return m.o.Edit(req, m.env()) })
			if ok && !over {
				m.releasedSinceSet, m.withoutIDSinceSet = 0, 0
				g, _, _ := m.gross(m.o.Uncaptured.Lines)
				if g != s.Gross || m.remaining() != s.Gross {
					t.Fatalf("after edit uncaptured %d, remaining %d, want %d", g, m.remaining(), s.Gross)
				}
			}
		},
		"cancel": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionCancel)
			uncap, _, _ := m.gross(m.o.Uncaptured.Lines)
			n := len(m.o.Events)
			m.expect(t, "cancel", ok, fault.NotAvailable, func() error { return m.o.Cancel(m.env()) })
			if ok {
				m.cancelled(t, n, m.o.Uncaptured.ID, uncap)
			}
		},
		"void": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerUncaptured, order.LedgerCapture, order.LedgerRefund)
			if l.Kind == order.LedgerUncaptured && rapid.IntRange(0, 3).Draw(t, "reallyCancel") != 0 {
				return
			}
			ok := m.offered(l, order.ActionVoid) || (l.Kind == order.LedgerUncaptured && m.offered(l, order.ActionCancel))
			id := l.ID
			g, _, _ := m.gross(l.Lines)
			n := len(m.o.Events)
			m.expect(t, "cancelLedger", ok, fault.NotAvailable, func() error { return m.o.CancelLedger(id, m.env()) })
			if ok && l.Kind == order.LedgerCapture && !m.o.Ledger(id).Void() {
				t.Fatal("void did not void")
			}
			if ok {
				m.cancelled(t, n, id, g)
			}
		},
		"partialRefund": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture, order.LedgerRefund, order.LedgerUncaptured)
			ok := m.offered(l, order.ActionPartialRefund)
			id := l.ID
			cg, _, _ := m.gross(l.Lines)
			refundable := cg - m.refundedOf(id)
			var in order.LineInput
			var total int64
			kind := fault.NotAvailable
			if ok {
				var g int64
				in, total, g = m.newLine(t, 1, refundable)
				// No more VAT back than the capture has left to credit.
				_, _, capVAT := m.gross(l.Lines)
				for i := range m.o.Refunded {
					if m.o.Refunded[i].RefundOf == id {
						_, _, rv := m.gross(m.o.Refunded[i].Lines)
						capVAT -= rv
					}
				}
				if in.Vat != nil && *in.Vat != 0 {
					_, _, askVAT := m.gross([]order.Line{{TotalAmount: total, TotalVatAmount: money.LineVAT(total, *in.Vat, m.o.VATMode), Vat: *in.Vat}})
					if askVAT < min(0, capVAT) || askVAT > max(0, capVAT) {
						ok, kind = false, fault.Invalid
					}
				}
				// A refund of all that is left is the capture's last: at each
				// VAT rate it must credit exactly what is left there.
				if ok && g == refundable && !m.closesEveryRate(l, in, total) {
					ok, kind = false, fault.Invalid
				}
			} else {
				in, total = ordertest.Line("x", 1, 1, 0), 1
			}
			note := "note"
			m.expect(t, "partialRefund", ok, kind, func() error {
				_, err := refund.Partial(m.o, id, &refund.PartialRequest{OrderLines: []order.LineInput{in}, TotalRefundAmount: ordertest.Ptr(total), Note: &note}, m.env())
				return err
			})
		},
		"overRefund": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture)
			if l == nil {
				return
			}
			ok := m.offered(l, order.ActionPartialRefund)
			id := l.ID
			cg, _, _ := m.gross(l.Lines)
			over := cg - m.refundedOf(id) + 1
			kind := fault.NotAvailable
			if ok {
				kind = fault.Invalid
			}
			m.expect(t, "overRefund", false, kind, func() error {
				_, err := refund.Partial(m.o, id, &refund.PartialRequest{OrderLines: []order.LineInput{ordertest.Line("x", 1, over, 0)}, TotalRefundAmount: ordertest.Ptr(over)}, m.env())
				if ok && fault.CodeOf(err) != "refund_exceeds_captured" {
					t.Fatalf("over-refund refused as %v", err)
				}
				return err
			})
		},
		"fullRefund": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture, order.LedgerRefund, order.LedgerUncaptured)
			ok := m.offered(l, order.ActionRefund)
			id := l.ID
			m.expect(t, "fullRefund", ok, fault.NotAvailable, func() error {
				_, err := refund.Full(m.o, id, nil, m.env())
				return err
			})
			if ok {
				cg, _, _ := m.gross(m.o.Ledger(id).Lines)
				if m.refundedOf(id) != cg {
					t.Fatalf("after full refund %d of %d refunded", m.refundedOf(id), cg)
				}
			}
		},
		"acknowledge": func(t *rapid.T) {
			// A closed order (cancelled, or expired with nothing captured) no
			// longer awaits acknowledgement.
			live := 0
			for i := range m.o.Captured {
				if !m.o.Captured[i].Void() {
					live++
				}
			}
			closed := live == 0 && (len(m.o.Uncaptured.Lines) == 0 || m.o.Expired(m.env().Now))
			m.expect(t, "acknowledge", m.o.Unacknowledged && !closed, fault.NotAvailable, func() error { return m.o.Acknowledge(m.env()) })
		},
		"extendExpiry": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionExtendOrderExpiry)
			was := m.o.ExpiresAt
			m.expect(t, "extendExpiry", ok, fault.NotAvailable, func() error { return m.o.ExtendExpiry(m.env()) })
			if m.o.ExpiresAt.Before(was) || m.o.ExpiresAt.After(m.o.ExpiryCap(m.f.Policy)) {
				t.Fatalf("expiresAt %v (was %v)", m.o.ExpiresAt, was)
			}
		},
		"editCustomer": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionEditCustomer)
			n := len(m.o.Events)
			m.expect(t, "editCustomer", ok, fault.NotAvailable, func() error {
				return m.o.EditCustomer(&order.EditCustomerRequest{Email: ordertest.Ptr(fmt.Sprintf("u%d@buyer.example", m.steps))}, m.env())
			})
			if ok {
				e := m.o.Events[len(m.o.Events)-1]
				if len(m.o.Events) != n+1 || e.Type != order.EventEditCustomer || e.Amount != 0 {
					t.Fatalf("editCustomer event %+v", e)
				}
			}
		},
		"editPaymentMethod": func(t *rapid.T) {
			ok := m.offered(&m.o.Uncaptured, order.ActionEditPaymentMethod)
			m.expect(t, "editPaymentMethod", ok, fault.NotAvailable, func() error {
				return m.o.EditPaymentMethod(&order.EditPaymentMethodRequest{PaymentMethod: &order.PaymentMethod{Provider: order.ProviderService, Type: order.PayAdvanceInvoice}}, m.env())
			})
		},
		"setReference": func(t *rapid.T) {
			m.expect(t, "setReference", m.o.Hold != order.HoldFraudDeny, fault.NotAvailable, func() error {
				return m.o.SetReference(&order.ReferenceRequest{Reference: ordertest.Ptr(fmt.Sprintf("ref-%d", m.steps))}, m.env())
			})
		},
		"resend": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture, order.LedgerRefund, order.LedgerUncaptured)
			ok := m.offered(l, order.ActionResendOrderInvoice)
			id := l.ID
			m.expect(t, "resend", ok, fault.NotAvailable, func() error {
				_, err := m.o.Resend(id, m.env())
				return err
			})
		},
		"recourse": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture, order.LedgerRefund, order.LedgerUncaptured)
			ok := m.offered(l, order.ActionRecourseOrderInvoice)
			id := l.ID
			m.expect(t, "recourse", ok, fault.NotAvailable, func() error {
				return m.o.Recourse(id, &order.RecourseRequest{Reason: ordertest.Ptr("dispute")}, m.env())
			})
		},
		"registerPayment": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture)
			if l == nil {
				return
			}
			id := l.ID
			due := m.o.Outstanding(l)
			// A card or PayPal capture is paid when made: nothing to pay.
			paidWhenMade := m.o.PaymentMethod.Category() == order.CategoryCard
			// A recoursed invoice is the merchant's to collect: the claim
			// the settlement took back from it stays what it was.
			recoursed := l.Recourse != ""
			ok := !l.Void() && !paidWhenMade && !recoursed && due > 0
			amount := int64(1)
			if ok {
				amount = rapid.Int64Range(1, due).Draw(t, "pay")
			}
			kind := fault.Invalid
			if l.Void() || paidWhenMade || recoursed {
				kind = fault.NotAvailable
			}
			m.expect(t, "registerPayment", ok, kind, func() error { return m.o.RegisterPayment(id, amount, m.env()) })
		},
		"reminder": func(t *rapid.T) {
			l := m.pickLedger(t, order.LedgerCapture)
			if l == nil {
				return
			}
			id := l.ID
			s := rapid.SampledFrom([]order.SubStatus{order.SubReminder1, order.SubReminder2, order.SubDebtCollection, order.SubInvoiceDeliveryFailure}).Draw(t, "sub")
			// A recoursed invoice is the merchant's to collect.
			owes := m.o.PaymentMethod.Category() != order.CategoryCard && m.o.Outstanding(l) > 0 && l.Recourse == ""
			ok := !l.Void() && (s == order.SubInvoiceDeliveryFailure || owes)
			m.expect(t, "reminder", ok, fault.NotAvailable, func() error { return m.o.MarkLedger(id, s, m.env()) })
		},
		"resolveHold": func(t *rapid.T) {
			approve := rapid.IntRange(0, 3).Draw(t, "approve") > 0
			ok := m.o.Hold == order.HoldOnHold && !m.o.Cancelled && !m.o.Expired(m.now())
			m.expect(t, "resolveHold", ok, fault.NotAvailable, func() error { return m.o.ResolveHold(approve, m.env()) })
		},
		"advanceClock": func(t *rapid.T) {
			maxMinutes := int64(3 * 24 * 60)
			if rapid.IntRange(0, 7).Draw(t, "longJump") == 0 {
				maxMinutes = 40 * 24 * 60
			}
			d := time.Duration(rapid.Int64Range(0, maxMinutes).Draw(t, "minutes")) * time.Minute
			m.f.Clock.Advance(d)
			if rapid.Bool().Draw(t, "expiryJob") {
				m.o.MarkExpired(m.env())
			}
		},
	}
}

// weights says how often each operation is drawn in the order's current
// state: one the order offers several times as often as one it would
// refuse, and those that close the order (cancel, full capture, a long
// clock jump) rarely, so that sequences reach deep histories (several
// captures, refunds of several of them, edits after captures) while every
// operation still meets its refusals. An operation on a capture is not
// drawn before there is one: it would do nothing.
func (m *machine) weights() map[string]int {
	now := m.now()
	uncap := m.o.Actions(&m.o.Uncaptured, now, m.f.Policy)
	var onCaptures []order.Action
	for i := range m.o.Captured {
		onCaptures = append(onCaptures, m.o.Actions(&m.o.Captured[i], now, m.f.Policy)...)
	}
	w := func(offered bool, yes, no int) int {
		if offered {
			return yes
		}
		return no
	}
	u := func(a order.Action, yes int) int { return w(slices.Contains(uncap, a), yes, 3) }
	c := func(a order.Action, yes int) int { return w(slices.Contains(onCaptures, a), yes, 3) }
	captured, owed := len(m.o.Captured) > 0, false
	for i := range m.o.Captured {
		c := &m.o.Captured[i]
		owed = owed || (!c.Void() && c.Recourse == "" && m.o.Outstanding(c) > 0 && m.o.PaymentMethod.Category() != order.CategoryCard)
	}
	return map[string]int{
		"partialCaptureWithID":   u(order.ActionPartialCapture, 40),
		"partialCaptureMismatch": 2,
		"partialCaptureOver":     u(order.ActionPartialCapture, 4),
		"fullCapture":            u(order.ActionCapture, 5),
		"fullCaptureWithLines":   u(order.ActionCapture, 5),
		"edit":                   u(order.ActionEditOrder, 16),
		"cancel":                 1,
		"void":                   c(order.ActionVoid, 6),
		"partialRefund":          c(order.ActionPartialRefund, 24),
		"overRefund":             w(captured, 2, 0),
		"fullRefund":             c(order.ActionRefund, 6),
		"acknowledge":            w(m.o.Unacknowledged && !m.o.Closed(now), 24, 1),
		"extendExpiry":           u(order.ActionExtendOrderExpiry, 6),
		"editCustomer":           3,
		"editPaymentMethod":      3,
		"setReference":           3,
		"resend":                 3,
		"recourse":               c(order.ActionRecourseOrderInvoice, 6),
		"registerPayment":        w(owed, 10, w(captured, 2, 0)),
		"reminder":               w(captured, 6, 0),
		"resolveHold":            w(m.o.Hold == order.HoldOnHold && !m.o.Cancelled && !m.o.Expired(now), 24, 3),
		"advanceClock":           6,
	}
}

// step draws one operation by weights and runs it. The draw is uniform:
// rapid's integers (and SampledFrom) lean to small values, to the head of
// the list, which would favour the operations named first over the weights.
func (m *machine) step(ops map[string]func(*rapid.T)) func(*rapid.T) {
	return func(t *rapid.T) {
		weights := m.weights()
		if len(weights) != len(ops)-1 { // every operation but the check
			t.Fatalf("weights for %d of %d operations", len(weights), len(ops)-1)
		}
		names := slices.Sorted(maps.Keys(weights))
		total := 0
		for _, name := range names {
			if ops[name] == nil {
				t.Fatalf("weight of unknown operation %s", name)
			}
			total += weights[name]
		}
		op := rapid.Custom(func(t *rapid.T) string {
			var u int
			for range 16 {
				u <<= 1
				if rapid.Bool().Draw(t, "bit") {
					u |= 1
				}
			}
			u %= total
			for _, name := range names {
				if u < weights[name] {
					return name
				}
				u -= weights[name]
			}
			panic("unreachable")
		}).Draw(t, "op")
		ops[op](t)
	}
}

// captured checks the events a capture appended after the first n: its
// own, of type, for gross; then, when it released a remainder (of lines,
// which may sum to 0), a cancel of the uncaptured sub-order for released
// (which the machine counts), and otherwise nothing.
func (m *machine) captured(t *rapid.T, n int, typ order.EventType, gross int64, releases bool, released int64) {
	c := m.o.Captured[len(m.o.Captured)-1]
	evs := m.o.Events[n:]
	if len(evs) == 0 || evs[0].Type != typ || evs[0].LedgerID != c.ID || evs[0].Amount != gross {
		t.Fatalf("capture of %d appended %+v", gross, evs)
	}
	if !releases {
		if len(evs) != 1 {
			t.Fatalf("capture releasing nothing appended %+v", evs)
		}
		return
	}
	m.cancelled(t, n+1, m.o.Uncaptured.ID, released)
}

// cancelled checks that the events appended after the first n are one
// cancel of the sub-order id for amount, and counts a release of the
// uncaptured sub-order.
func (m *machine) cancelled(t *rapid.T, n int, id string, amount int64) {
	if evs := m.o.Events[n:]; len(evs) != 1 || evs[0].Type != order.EventCancel || evs[0].LedgerID != id || evs[0].Amount != amount {
		t.Fatalf("cancel of %s for %d appended %+v", id, amount, evs)
	}
	if id == m.o.Uncaptured.ID {
		m.released += amount
		m.releasedSinceSet += amount
	}
}

// checkAuthorization holds the order's figures to what the operations did.
// An edit authorizes what the captures used plus the new remainder
// (design.md §3, Edit), and creation the order's amount; after that a
// capture by id moves its lines from the remainder to what is used, a
// release (cancel, or a final capture's remainder) takes them out of the
// remainder and a void changes neither (a voided capture stays used,
// decisions.md). Captures without id use the authorization and leave the
// remainder as it was. So at every step
//
//	authorized = used + uncaptured + released − taken without id
//
// the last two since the amount was last set; and what the order records as
// released (cancelledAmount, the sum of its cancels) is what was released.
func (m *machine) checkAuthorization(t *rapid.T) {
	a := m.o.Amounts()
	if want := a.Consumed + a.Uncaptured + m.releasedSinceSet - m.withoutIDSinceSet; m.o.AuthorizedAmount != want {
		t.Fatalf("authorized %d, want used %d + uncaptured %d + released %d − captured without id %d since the amount was set",
			m.o.AuthorizedAmount, a.Consumed, a.Uncaptured, m.releasedSinceSet, m.withoutIDSinceSet)
	}
	if m.o.CancelledAmount != m.released {
		t.Fatalf("cancelledAmount %d, released %d", m.o.CancelledAmount, m.released)
	}
}

func (m *machine) refundedOf(id string) int64 {
	var sum int64
	for i := range m.o.Refunded {
		if m.o.Refunded[i].RefundOf == id {
			g, _, _ := m.gross(m.o.Refunded[i].Lines)
			sum += g
		}
	}
	return sum
}

// fatalT is what check needs of a test: rapid's *T and a fuzz target's
// *testing.T both serve.
type fatalT interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func (m *machine) check(t fatalT) {
	o, now := m.o, m.now()
	// What the store check holds every stored order to: no finding on any
	// state the operations reach, nor on one the fuzz target reaches.
	if found := o.Verify(); len(found) > 0 {
		t.Fatalf("Verify: %q", found)
	}
	r := o.Response(now, m.f.Policy, nil)
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}

	// Amounts, computed independently.
	uncap, _, _ := m.gross(o.Uncaptured.Lines)
	var captured, consumed, refunded int64
	live := 0
	paidAny, settledAll := false, true // the order is paid in full when something was paid and nothing is owed
	for i := range o.Captured {
		g, _, _ := m.gross(o.Captured[i].Lines)
		consumed += g
		if !o.Captured[i].Void() {
			captured += g
			live++
		}
		rf := m.refundedOf(o.Captured[i].ID)
		if rf > g || rf < 0 {
			t.Fatalf("capture %s: refunded %d of %d", o.Captured[i].ID, rf, g)
		}
		// The paid status follows what is paid and what is still owed,
		// whichever of payments and refunds came first.
		if c := &o.Captured[i]; !c.Void() {
			paidUp := c.Paid > 0 && c.Paid >= g-rf
			if c.HasStatus(order.SubFullyPaid) != paidUp || c.HasStatus(order.SubPartiallyPaid) != (c.Paid > 0 && !paidUp) {
				t.Fatalf("capture %s: paid %d of %d (refunded %d), statuses %v", c.ID, c.Paid, g, rf, c.Status)
			}
			paidAny = paidAny || c.Paid > 0
			if !paidUp && (c.Paid > 0 || g-rf > 0) {
				settledAll = false
			}
		}
	}
	for i := range o.Refunded {
		g, _, _ := m.gross(o.Refunded[i].Lines)
		refunded += g
		c := o.Ledger(o.Refunded[i].RefundOf)
		if c == nil || c.Kind != order.LedgerCapture {
			t.Fatalf("refund %s of %q, not a capture", o.Refunded[i].ID, o.Refunded[i].RefundOf)
		}
	}
	if r.OrderAmount.MinorUnits != r.CapturedAmount.MinorUnits+r.UncapturedAmount.MinorUnits {
		t.Fatalf("orderAmount %d != captured %d + uncaptured %d", r.OrderAmount.MinorUnits, r.CapturedAmount.MinorUnits, r.UncapturedAmount.MinorUnits)
	}
	if r.CapturedAmount.MinorUnits != captured || r.UncapturedAmount.MinorUnits != uncap || r.RefundedAmount.MinorUnits != refunded {
		t.Fatalf("amounts %d/%d/%d, want %d/%d/%d", r.CapturedAmount.MinorUnits, r.UncapturedAmount.MinorUnits, r.RefundedAmount.MinorUnits, captured, uncap, refunded)
	}
	if a := o.Amounts(); a.Consumed != consumed {
		t.Fatalf("consumed %d, want %d", a.Consumed, consumed)
	}
	if consumed > o.AuthorizedAmount || o.AuthorizedAmount > o.ApprovedAmount {
		t.Fatalf("consumed %d, authorized %d, approved %d", consumed, o.AuthorizedAmount, o.ApprovedAmount)
	}
	if refunded > captured {
		t.Fatalf("refunded %d > captured %d", refunded, captured)
	}
	if uncap < 0 {
		t.Fatalf("uncaptured %d < 0", uncap)
	}

	// Every sub-order's amount is what its events recorded: a capture's
	// partialCapture or fullCapture, and a cancel when it was voided; a
	// refund's partialRefund or fullRefund; and the cancels of the
	// uncaptured sub-order sum to what the order released.
	recorded := map[string][]order.Event{}
	for _, e := range o.Events {
		switch e.Type {
		case order.EventPartialCapture, order.EventFullCapture, order.EventPartialRefund, order.EventFullRefund, order.EventCancel:
			recorded[e.LedgerID] = append(recorded[e.LedgerID], e)
		}
	}
	for i := range o.Captured {
		c := &o.Captured[i]
		g, _, _ := m.gross(c.Lines)
		evs := recorded[c.ID]
		ok := len(evs) > 0 && (evs[0].Type == order.EventPartialCapture || evs[0].Type == order.EventFullCapture) && evs[0].Amount == g
		if c.Void() {
			ok = ok && len(evs) == 2 && evs[1].Type == order.EventCancel && evs[1].Amount == g
		} else {
			ok = ok && len(evs) == 1
		}
		if !ok {
			t.Fatalf("capture %s of %d (void %v): events %+v", c.ID, g, c.Void(), evs)
		}
	}
	for i := range o.Refunded {
		r := &o.Refunded[i]
		g, _, _ := m.gross(r.Lines)
		if evs := recorded[r.ID]; len(evs) != 1 || (evs[0].Type != order.EventPartialRefund && evs[0].Type != order.EventFullRefund) || evs[0].Amount != g {
			t.Fatalf("refund %s of %d: events %+v", r.ID, g, evs)
		}
	}
	var released int64
	for _, e := range recorded[o.Uncaptured.ID] {
		if e.Type != order.EventCancel {
			t.Fatalf("uncaptured sub-order: event %+v", e)
		}
		released += e.Amount
	}
	if released != o.CancelledAmount {
		t.Fatalf("cancels of the uncaptured sub-order sum to %d, cancelledAmount %d", released, o.CancelledAmount)
	}

	// Every sub-order's totals are the sums of its lines.
	subs := append([]order.SubOrder{r.Uncaptured}, r.Captured...)
	subs = append(subs, r.Refunded...)
	for _, s := range subs {
		l := o.Ledger(s.LedgerID)
		g, n, v := m.gross(l.Lines)
		if s.TotalOrderAmount.MinorUnits != g || s.TotalOrderAmountExclVat.MinorUnits != n || s.TotalOrderVatAmount.MinorUnits != v ||
			s.TotalOrderAmount.MinorUnits != s.TotalOrderAmountExclVat.MinorUnits+s.TotalOrderVatAmount.MinorUnits {
			t.Fatalf("sub-order %s totals %d/%d/%d, lines %d/%d/%d", s.LedgerID, s.TotalOrderAmount.MinorUnits,
				s.TotalOrderAmountExclVat.MinorUnits, s.TotalOrderVatAmount.MinorUnits, g, n, v)
		}
		if len(s.OrderLines) != len(l.Lines) {
			t.Fatalf("sub-order %s renders %d of %d lines", s.LedgerID, len(s.OrderLines), len(l.Lines))
		}
		for _, ln := range l.Lines {
			if ln.TotalAmount < -order.MaxLineAmount || ln.TotalAmount > order.MaxLineAmount {
				t.Fatalf("line %s total %d out of bounds", ln.ID, ln.TotalAmount)
			}
		}
	}

	// Events only grow; updatedAt is the last one's time; times never go back.
	if len(o.Events) < len(m.events) || !slices.Equal(o.Events[:len(m.events)], m.events) {
		t.Fatalf("event log rewritten:\n%v\nwas\n%v", o.Events, m.events)
	}
	for i := 1; i < len(o.Events); i++ {
		if o.Events[i].CreatedAt.Before(o.Events[i-1].CreatedAt) {
			t.Fatalf("event %d older than %d", i, i-1)
		}
	}
	if last := o.Events[len(o.Events)-1]; !o.UpdatedAt.Equal(last.CreatedAt) || !r.UpdatedAt.Equal(last.CreatedAt) {
		t.Fatalf("updatedAt %v, last event %v", o.UpdatedAt, last.CreatedAt)
	}
	m.events = slices.Clone(o.Events)
	eventIDs := map[string]bool{}
	for _, e := range o.Events {
		if eventIDs[e.ID] {
			t.Fatalf("event id %s reused", e.ID)
		}
		eventIDs[e.ID] = true
		if e.OrderID != o.ID || o.Ledger(e.LedgerID) == nil {
			t.Fatalf("event %+v refers elsewhere", e)
		}
	}

	// Ledger ids: unique, never reused, never lost, kind fixed.
	now2 := map[string]bool{}
	all := append([]order.Ledger{o.Uncaptured}, o.Captured...)
	all = append(all, o.Refunded...)
	for _, l := range all {
		if now2[l.ID] {
			t.Fatalf("ledger id %s used twice", l.ID)
		}
		now2[l.ID] = true
		if k, seen := m.kinds[l.ID]; seen && k != l.Kind {
			t.Fatalf("ledger %s changed kind %s → %s", l.ID, k, l.Kind)
		}
		m.kinds[l.ID] = l.Kind
	}
	for id := range m.kinds {
		if !now2[id] {
			t.Fatalf("ledger %s disappeared", id)
		}
	}
	lineIDs := map[string]bool{}
	for _, l := range o.Uncaptured.Lines {
		if lineIDs[l.ID] {
			t.Fatalf("uncaptured line id %s twice", l.ID)
		}
		lineIDs[l.ID] = true
	}
	// Invoice and credit-note numbers are gapless and in order.
	for i := range o.Captured {
		if o.Captured[i].DocumentSeq != int64(i+1) {
			t.Fatalf("capture %d has invoice number %d", i, o.Captured[i].DocumentSeq)
		}
	}
	for i := range o.Refunded {
		if o.Refunded[i].DocumentSeq != int64(i+1) {
			t.Fatalf("refund %d has credit note number %d", i, o.Refunded[i].DocumentSeq)
		}
	}

	// Statuses agree with the amounts and state.
	has := func(s order.Status) bool { return slices.Contains(r.Status, s) }
	hasUncap := len(o.Uncaptured.Lines) > 0
	expired := hasUncap && !o.Cancelled && (o.ExpiredMarked || !now.Before(o.ExpiresAt))
	for _, c := range []struct {
		s    order.Status
		want bool
	}{
		{order.StatusUncaptured, hasUncap},
		{order.StatusFullyCaptured, !hasUncap && live > 0},
		{order.StatusPartiallyCaptured, hasUncap && live > 0},
		{order.StatusCancelled, !hasUncap && live == 0},
		{order.StatusFullyRefunded, refunded > 0 && refunded == captured && !hasUncap},
		{order.StatusPartiallyRefunded, refunded > 0 && (refunded < captured || hasUncap)},
		{order.StatusUnacknowledged, o.Unacknowledged},
		{order.StatusOnHold, o.Hold == order.HoldOnHold},
		{order.StatusFraudDeny, o.Hold == order.HoldFraudDeny},
		{order.StatusExpired, expired},
		{order.StatusFullyPaid, paidAny && settledAll},
		{order.StatusPartiallyPaid, paidAny && !settledAll},
	} {
		if has(c.s) != c.want {
			t.Fatalf("status %s present=%v, want %v (statuses %v)", c.s, has(c.s), c.want, r.Status)
		}
	}
	capOffered := m.offered(&o.Uncaptured, order.ActionCapture) || m.offered(&o.Uncaptured, order.ActionPartialCapture)
	if capOffered && (!has(order.StatusReadyForCapture) || has(order.StatusExpired) || has(order.StatusOnHold) ||
		(o.Unacknowledged && o.PaymentMethod.Type == order.PayAdvanceInvoice)) {
		t.Fatalf("capture offered with statuses %v", r.Status)
	}
	if has(order.StatusReadyForCapture) && !hasUncap {
		t.Fatalf("readyForCapture with nothing uncaptured")
	}
	// readyForCapture says some capture can be taken: not once captures
	// without id have used the authorization up (the size limit aside,
	// which these orders do not reach).
	if has(order.StatusReadyForCapture) != capOffered {
		t.Fatalf("readyForCapture present=%v, capture offered=%v (statuses %v, %d authorization left)",
			has(order.StatusReadyForCapture), capOffered, r.Status, m.remaining())
	}
	// No credit note gives back negative VAT: what it credits is bounded by
	// what its capture invoiced, which is 0 or more.
	for i := range o.Refunded {
		if _, _, vat := m.gross(o.Refunded[i].Lines); vat < 0 {
			t.Fatalf("refund %s credits VAT %d", o.Refunded[i].ID, vat)
		}
	}
	// Every invoice holds VAT between 0 and its gross, as an order's totals do.
	for i := range o.Captured {
		if _, net, vat := m.gross(o.Captured[i].Lines); vat < 0 || net < 0 {
			t.Fatalf("capture %s invoices VAT %d over a net of %d", o.Captured[i].ID, vat, net)
		}
	}
	for _, s := range r.Captured {
		l := o.Ledger(s.LedgerID)
		if l.Void() && len(s.AvailableActions) != 0 {
			t.Fatalf("void ledger offers %v", s.AvailableActions)
		}
	}
	// A response sums the refunds of all captures at once; what it offers is
	// what Actions, which every operation checks through Require, offers.
	for _, s := range append(append([]order.SubOrder{r.Uncaptured}, r.Captured...), r.Refunded...) {
		var got []order.Action
		for _, a := range s.AvailableActions {
			got = append(got, a.Type)
		}
		if want := o.Actions(o.Ledger(s.LedgerID), now, m.f.Policy); !slices.Equal(got, want) {
			t.Fatalf("sub-order %s: the response offers %v, Actions %v", s.LedgerID, got, want)
		}
	}
}

// applied and refused count outcomes per operation, so that a run shows it
// exercised both sides of every rule (see go test -v); depths counts how
// deep the histories went, sequences by the number of captures, of refunds
// and of edits after the first capture in them (the last bucket holding
// that many or more), and the steps taken.
var (
	applied, refused = map[string]int{}, map[string]int{}
	depths           struct {
		sequences, steps              int
		captures, refunds, editsAfter [5]int
	}
)

func TestPropertyOrderInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMachine(t)
		ops := m.actions()
		// Three runs of steps in a row: rapid draws the length of one
		// geometrically around -rapid.steps (30), so a quarter of single
		// runs end within 10 steps, before any history is made.
		for range 3 {
			t.Repeat(map[string]func(*rapid.T){"": ops[""], "step": m.step(ops)})
		}
		m.depth()
	})
	for _, name := range []string{"partialCapture", "fullCapture", "fullCaptureWithLines", "edit", "cancel",
		"cancelLedger", "partialRefund", "fullRefund", "acknowledge", "extendExpiry", "editCustomer",
		"editPaymentMethod", "setReference", "resend", "recourse", "registerPayment", "reminder", "resolveHold"} {
		t.Logf("%-22s applied %4d refused %4d", name, applied[name], refused[name])
	}
	t.Logf("sequences with 0, 1, 2, 3, 4+ captures %v, refunds %v, edits after a capture %v; %d steps in %d sequences",
		depths.captures, depths.refunds, depths.editsAfter, depths.steps, depths.sequences)
}

func (m *machine) depth() {
	edits, captured := 0, false
	for _, e := range m.o.Events {
		captured = captured || e.Type == order.EventPartialCapture || e.Type == order.EventFullCapture
		if captured && e.Type == order.EventEdit {
			edits++
		}
	}
	depths.sequences++
	depths.steps += m.steps
	depths.captures[min(len(m.o.Captured), 4)]++
	depths.refunds[min(len(m.o.Refunded), 4)]++
	depths.editsAfter[min(edits, 4)]++
}
