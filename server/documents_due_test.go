package server

import (
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
)

// An invoice states when it is due: the checkout offered "Invoice (pay
// within 30 days)", and an invoice without a due date leaves its buyer
// guessing what the reminder that follows will say was late. The due date
// is the issue date plus order.PaymentTermDays, for the invoices the
// provider collects afterwards (invoice, part payment, bank transfer); an
// advance invoice, which the spec has paid before the order is ready for
// capture, is due on its issue date. A receipt and a credit note state
// none. It is written in the document's language, as its date is.
func TestInvoicesStateTheirDueDate(t *testing.T) {
	e, _, clock := kakelEnv(t)
	// The last day of a month, late: the term runs over a month end, and
	// the dates are UTC dates.
	now := clock.Now().UTC()
	if err := clock.Set(time.Date(now.Year()+1, time.January, 31, 22, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	capture := func(locale, pm string) (map[string]any, string) {
		body := strings.Replace(orderBody, `"locale":"en-SE"`, `"locale":"`+locale+`"`, 1)
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", pm)+"/order", body, e.auth, nil)
		if code != 200 {
			t.Fatalf("create order: %d %v", code, b)
		}
		id := b["orderId"].(string)
		if pm == "advanceInvoice" {
			if code, _, b := e.req("POST", "/v1/orders/"+id+"/acknowledge", "", e.auth, nil); code != 200 {
				t.Fatalf("acknowledge: %d %v", code, b)
			}
		}
		code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
		if code != 200 {
			t.Fatalf("capture: %d %v", code, o)
		}
		return o["captured"].([]any)[0].(map[string]any), id
	}
	issuedOn := func(sub map[string]any) time.Time {
		at, err := time.Parse(time.RFC3339Nano, sub["createdAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return at.UTC()
	}
	for _, c := range []struct{ locale, pm, label, layout string }{
		{"en-GB", "invoice", "Due date", "2006-01-02"},
		{"sv-SE", "invoice", "Förfallodatum", "2006-01-02"},
		{"nb-NO", "partPayment", "Forfallsdato", "02.01.2006"},
		{"da-DK", "bankTransfer", "Forfaldsdato", "02.01.2006"},
		{"fi-FI", "invoice", "Eräpäivä", "2.1.2006"},
	} {
		sub, id := capture(c.locale, c.pm)
		day := issuedOn(sub)
		due := time.Date(day.Year(), day.Month(), day.Day()+order.PaymentTermDays, 0, 0, 0, 0, time.UTC)
		_, _, page := fetchPage(t, sub["documentUrl"].(string))
		// After the date of issue, in the paragraph that states it.
		want := " " + day.Format(c.layout) + ". " + c.label + " " + due.Format(c.layout) + ".</p>"
		if !strings.Contains(page, want) {
			t.Errorf("%s %s invoice does not state its due date, want %q:\n%s", c.locale, c.pm, want, page)
		}
		// A credit note corrects the invoice; it is not itself due.
		code, _, o := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+sub["ledgerId"].(string), `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
		if code != 200 {
			t.Fatalf("partial refund: %d %v", code, o)
		}
		if _, _, page := fetchPage(t, o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)); strings.Contains(page, c.label) {
			t.Errorf("%s credit note states a due date:\n%s", c.locale, page)
		}
	}
	// An advance invoice is due when it is issued.
	sub, _ := capture("sv-SE", "advanceInvoice")
	day := issuedOn(sub).Format("2006-01-02")
	if _, _, page := fetchPage(t, sub["documentUrl"].(string)); !strings.Contains(page, "Datum "+day+". Förfallodatum "+day+".</p>") {
		t.Errorf("advance invoice is not due on its issue date %s:\n%s", day, page)
	}
	// A receipt was paid when it was issued.
	sub, _ = capture("en-GB", "card")
	if _, _, page := fetchPage(t, sub["documentUrl"].(string)); strings.Contains(page, "Due date") {
		t.Errorf("receipt states a due date:\n%s", page)
	}
}

// The due date is recorded with the invoice when it is issued: a later
// change of the term (order.PaymentTermDays) does not move the due date of
// an invoice already issued, and one issued before kassa recorded due dates
// states none, byte for byte as it was issued.
func TestDueDateIsRecordedAtIssue(t *testing.T) {
	e, st, _ := kakelEnv(t)
	id, _, link := e.capturedInvoice()
	merchant := e.get(id)["merchantId"].(string)
	_, _, page := fetchPage(t, link)
	const label = " Due date "
	i := strings.Index(page, label)
	if i < 0 {
		t.Fatalf("invoice states no due date:\n%s", page)
	}
	stated := page[i : i+len(label)+len("2006-01-02.")]
	// As if issued under a term of 10 days: the page says what was issued.
	var issuedDue time.Time
	rewriteSubOrders(t, st, merchant, id, func(l *order.Ledger) {
		issuedDue = l.Issued.Due
		l.Issued.Due = l.Issued.Due.AddDate(0, 0, -20)
	})
	_, _, moved := fetchPage(t, link)
	if want := label + issuedDue.AddDate(0, 0, -20).Format("2006-01-02") + "."; !strings.Contains(moved, want) {
		t.Fatalf("invoice does not state the due date it was issued with, want %q:\n%s", want, moved)
	}
	// Stored before kassa recorded a due date: the page as it was then.
	rewriteSubOrders(t, st, merchant, id, func(l *order.Ledger) { l.Issued.Due = time.Time{} })
	if _, _, old := fetchPage(t, link); old != strings.Replace(page, stated, "", 1) {
		t.Fatalf("an invoice stored without a due date renders other than before:\nbefore:\n%s\nnow:\n%s", strings.Replace(page, stated, "", 1), old)
	}
}
