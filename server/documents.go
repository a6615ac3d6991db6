package server

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
)

// DocumentURL returns the signed, time-limited link of a sub-order's
// document (invoice for a capture, credit note for a refund). The link
// expires DocumentLinkTTL after the end of the wall-clock hour it is made in,
// so it changes only on the hour, whatever the TTL: the same order read twice
// within an hour yields the same link, and a cached response holding it is
// served until the hour ends (kassa.Options.DocumentURL).
func (s *Server) DocumentURL(o *order.Order, l *order.Ledger) string {
	exp := time.Now().Truncate(time.Hour).Add(time.Hour + s.cfg.DocumentLinkTTL).Unix()
	path := "/documents/" + url.PathEscape(o.MerchantID) + "/" + url.PathEscape(o.ID) + "/" + url.PathEscape(l.ID)
	e := strconv.FormatInt(exp, 10)
	return s.cfg.BaseURL + path + "?expires=" + e + "&signature=" + s.sign("document", path+"?"+e)
}

// documentPolicy: a document is markup and inline style alone, so nothing
// else may load or run in it.
const documentPolicy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

var errBadLink = fault.New(fault.Forbidden, "document_link_invalid", "the document link is invalid or has expired")

type vatRow struct {
	Rate            string
	Net, VAT, Gross string
}

type documentView struct {
	// T is the language the document was issued in (order.Issue.Language).
	T *i18n.Texts
	// No refund note: the spec makes it internal, and the document goes
	// to the buyer.
	Title, Reference, OrderID, OrderReference, MerchantReference, Date string
	BuyerName, BuyerID                                                 string
	// Due is the invoice's due date recorded at issue (order.Issue.Due);
	// "" on a receipt, a credit note and an invoice issued before kassa
	// recorded one, which leaves it out, the page as it was issued.
	Due string
	// Supplier is the merchant's name recorded at issue; "" leaves its
	// line out.
	Supplier string
	// BuyerAddress is the billing address recorded at issue, on one line;
	// "" leaves its line out.
	BuyerAddress    string
	Lines           []order.Line
	VATRows         []vatRow
	Net, VAT, Gross string
	Currency        string
	// Basis says whether the lines' unit prices and totals include VAT
	// ("incl. VAT") or not ("excl. VAT"): they are stored as the order's VAT
	// mode has them, and a bare "Total" of 10.00 on a line whose VAT is 2.50
	// reads as either.
	Basis  string
	Amount func(int64) string
	// Discounted adds the unit discount column only where a line has one, so
	// that every line reads quantity × (unit price − unit discount) = total
	// without widening the many documents that have no discount.
	Discounted bool
	// Credits names the document a credit note corrects ("Credits invoice
	// INV-00000001 of 2026-01-02."): a credit note must point unambiguously
	// at the invoice it amends, or the buyer's books cannot match the two.
	Credits string
	// Void marks an invoice voided after it was issued: its link still
	// works, and without the mark it read as an invoice to pay.
	Void bool
	// Standing is where a live invoice stands after its issue, shown
	// apart from the issued record once the buyer has paid part of it or
	// it was handed back: an invoice that reads as its whole total to pay
	// after a part payment invites a second one. Nil otherwise.
	Standing *standing
	// Recourse says the claim was handed back to the merchant, whom the
	// buyer now owes. The merchant's reason stays off: it is theirs.
	Recourse bool
}

// standing is an invoice's payment status: Invoiced − Credited − Paid =
// Outstanding. Credited is "" when nothing was credited; Due heads the
// last row, which says who owes the difference.
type standing struct {
	Invoiced, Credited, Paid, Due, Outstanding string
}

// A block left out adds no line, so a page without one is byte for byte the
// page builds before it rendered (TestDocumentWithoutStandingEndsAsBefore).
var documentTemplate = template.Must(template.New("doc").Parse(`<!doctype html>
<html lang="{{.T.Tag}}"><head><meta charset="utf-8"><title>{{.Title}} {{.Reference}}{{if .Void}} {{.T.VoidMark}}{{end}}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem;overflow-wrap:anywhere}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ccc;padding:.3rem;text-align:left}td.n,th.n{text-align:right}th{overflow-wrap:normal}td.n{white-space:nowrap}</style></head>
<body><h1>{{.Title}} {{.Reference}}{{if .Void}} {{.T.VoidMark}}{{end}}</h1>
{{if .Void}}<p><strong>{{.T.VoidInvoice}}</strong></p>{{end}}
<p>{{.T.Order}} {{.OrderReference}} ({{.OrderID}}){{if .MerchantReference}}, {{.T.MerchantReference}} {{.MerchantReference}}{{end}}. {{.T.Date}} {{.Date}}.{{if .Due}} {{.T.DueDate}} {{.Due}}.{{end}}</p>
{{if .Supplier}}<p>{{.T.Seller}}: {{.Supplier}}</p>
{{end}}<p>{{.T.Buyer}}: {{.BuyerName}} {{.BuyerID}}</p>
{{if .BuyerAddress}}<p>{{.T.BillingAddress}}: {{.BuyerAddress}}</p>
{{end}}{{if .Credits}}<p>{{.Credits}}</p>{{end}}
<table><caption>{{.T.Lines}}</caption><thead><tr><th>{{.T.Description}}</th><th class="n">{{.T.Quantity}}</th><th class="n">{{.T.UnitPrice}} ({{.Basis}})</th>{{if .Discounted}}<th class="n">{{.T.UnitDiscount}}</th>{{end}}<th class="n">{{.T.VATRate}}</th><th class="n">{{.T.VAT}}</th><th class="n">{{.T.LineTotal}} ({{.Basis}})</th></tr></thead><tbody>
{{range .Lines}}<tr><td>{{.Description}}</td><td class="n">{{.Quantity}}</td><td class="n">{{call $.Amount .UnitPrice}}</td>{{if $.Discounted}}<td class="n">{{call $.Amount .UnitDiscountAmount}}</td>{{end}}<td class="n">{{$.T.FormatRate .Vat}}</td><td class="n">{{call $.Amount .TotalVatAmount}}</td><td class="n">{{call $.Amount .TotalAmount}}</td></tr>
{{end}}</tbody></table>
<table><caption>{{.T.VATBreakdown}} ({{.Currency}})</caption><thead><tr><th>{{.T.Rate}}</th><th class="n">{{.T.NetHead}}</th><th class="n">{{.T.VAT}}</th><th class="n">{{.T.GrossHead}}</th></tr></thead><tbody>
{{range .VATRows}}<tr><td>{{.Rate}}</td><td class="n">{{.Net}}</td><td class="n">{{.VAT}}</td><td class="n">{{.Gross}}</td></tr>
{{end}}</tbody><tfoot><tr><th>{{.T.DocTotal}}</th><th class="n">{{.Net}}</th><th class="n">{{.VAT}}</th><th class="n">{{.Gross}}</th></tr></tfoot></table>
{{with .Standing}}<table><caption>{{$.T.PaymentStatus}} ({{$.Currency}})</caption><tbody>
<tr><th>{{$.T.Invoiced}}</th><td class="n">{{.Invoiced}}</td></tr>
{{if .Credited}}<tr><th>{{$.T.Credited}}</th><td class="n">{{.Credited}}</td></tr>
{{end}}<tr><th>{{$.T.Paid}}</th><td class="n">{{.Paid}}</td></tr>
<tr><th>{{.Due}}</th><td class="n">{{.Outstanding}}</td></tr>
</tbody></table>
{{end}}{{if .Recourse}}<p><strong>{{.T.RecourseInvoice}}</strong></p>
{{end}}</body></html>`))

func (s *Server) handleDocument(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	path := "/documents/" + url.PathEscape(p.ByName("merchantId")) + "/" + url.PathEscape(p.ByName("orderId")) + "/" + url.PathEscape(p.ByName("ledgerId"))
	e, sig := r.URL.Query().Get("expires"), r.URL.Query().Get("signature")
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || !s.signedBy(sig, "document", path+"?"+e) || time.Now().Unix() >= exp {
		s.writeError(w, r, errBadLink)
		return
	}
	o, _, err := s.ledger.GetOrder(r.Context(), p.ByName("merchantId"), p.ByName("orderId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l := o.Ledger(p.ByName("ledgerId"))
	if l == nil || l.DocumentReference == "" {
		s.writeError(w, r, fault.NotFoundf("document_not_found", "no document for sub-order %s", p.ByName("ledgerId")))
		return
	}
	// What the document was issued with, not what the order says now: an
	// issued document is an accounting record. One issued before kassa kept
	// that renders from the order, as it did then; one issued before it
	// kept its language is English, as it was then.
	var is order.Issue
	if l.Issued != nil {
		is = *l.Issued
	} else {
		is = o.CurrentIssue()
		// Those showed no address: the page stays as it was issued.
		is.BuyerAddress = nil
	}
	t := i18n.For(is.Language)
	amount := func(v int64) string { return t.FormatAmount(v, o.Currency) }
	tot := order.SumLines(l.Lines, o.VATMode)
	v := documentView{T: t, Title: t.Invoice, Reference: l.DocumentReference, OrderID: o.ID, OrderReference: o.OrderReference,
		MerchantReference: is.MerchantReference, Date: t.FormatDate(l.CreatedAt),
		Supplier: is.Supplier, BuyerName: is.BuyerName, BuyerID: is.BuyerID, BuyerAddress: addressLine(t, is.BuyerAddress, is.BuyerName), Lines: l.Lines, Currency: string(o.Currency), Amount: amount, Void: l.Void(), Basis: t.InclVAT}
	if o.VATMode == money.ExclVAT {
		v.Basis = t.ExclVAT
	}
	if !is.Due.IsZero() {
		v.Due = t.FormatDate(is.Due)
	}
	switch {
	case l.Kind == order.LedgerRefund:
		v.Title = t.CreditNote
		if c := o.Ledger(l.RefundOf); c != nil {
			credits := t.CreditsInvoiceFmt
			if o.PaymentMethod.PaidAtCapture() {
				credits = t.CreditsReceiptFmt
			}
			v.Credits = fmt.Sprintf(credits, c.DocumentReference, t.FormatDate(c.CreatedAt))
		}
	case o.PaymentMethod.PaidAtCapture():
		// A card (or PayPal) capture is paid when it is made: the spec
		// sends a card receipt, not an invoice to pay.
		v.Title = t.Receipt
	case !l.Void() && (l.Paid > 0 || l.Recourse != ""):
		v.Recourse = l.Recourse != ""
		out := o.Outstanding(l)
		st := standing{Invoiced: amount(tot.Gross), Paid: amount(l.Paid), Due: t.Outstanding, Outstanding: amount(out)}
		if out < 0 {
			// Paid in full, then credited: the buyer is owed the credit.
			st.Due, st.Outstanding = t.DueToBuyer, amount(-out)
		}
		if c := o.RefundedOf(l.ID); c != 0 {
			st.Credited = amount(c)
		}
		v.Standing = &st
	}
	byRate := map[int64]*[3]int64{}
	var rates []int64
	for _, ln := range l.Lines {
		v.Discounted = v.Discounted || ln.UnitDiscountAmount != 0
		t := byRate[ln.Vat]
		if t == nil {
			t = &[3]int64{}
			byRate[ln.Vat] = t
			rates = append(rates, ln.Vat)
		}
		t[0] += ln.Net(o.VATMode)
		t[1] += ln.TotalVatAmount
		t[2] += ln.Gross(o.VATMode)
	}
	for _, rate := range rates {
		sum := byRate[rate]
		v.VATRows = append(v.VATRows, vatRow{Rate: v.T.FormatRate(rate), Net: amount(sum[0]), VAT: amount(sum[1]), Gross: amount(sum[2])})
	}
	v.Net, v.VAT, v.Gross = amount(tot.Net), amount(tot.VAT), amount(tot.Gross)
	pageHeaders(w, documentPolicy)
	w.Header().Set("Cache-Control", "private, no-store")
	if err := documentTemplate.Execute(w, v); err != nil {
		s.log.ErrorContext(r.Context(), "render document", "err", err)
	}
}

// addressLine writes a billing address on one line, leaving out what it
// does not have; its company name only where it is not the buyer's name
// already shown above it.
func addressLine(t *i18n.Texts, a *order.Address, buyer string) string {
	if a == nil {
		return ""
	}
	var parts []string
	add := func(prefix, v string) {
		if v = strings.TrimSpace(v); v != "" {
			parts = append(parts, prefix+v)
		}
	}
	if a.CompanyName != buyer {
		add("", a.CompanyName)
	}
	add(t.Attention, a.AttentionName)
	add("c/o ", a.CareOf)
	add("", a.StreetAddress)
	add("", a.PostalCode+" "+a.City)
	add("", a.Country)
	return strings.Join(parts, ", ")
}
