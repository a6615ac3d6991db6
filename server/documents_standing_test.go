package server

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

// documentStanding reads the payment status table of a document page, row
// heading → amount; nil when the page has none.
func documentStanding(t *testing.T, link string) (map[string]string, string) {
	t.Helper()
	code, _, page := fetchPage(t, link)
	if code != 200 {
		t.Fatalf("document %s: %d %s", link, code, page)
	}
	_, table, ok := strings.Cut(page, "<caption>Payment status")
	if !ok {
		return nil, page
	}
	table, _, _ = strings.Cut(table, "</table>")
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`<tr><th>([^<]*)</th><td class="n">([^<]*)</td></tr>`).FindAllStringSubmatch(table, -1) {
		rows[m[1]] = m[2]
	}
	return rows, page
}

// The buyer's part payments and a recourse change what the buyer owes on an
// invoice, and to whom. The link the buyer holds must say so, as it says
// void for a voided invoice: an invoice that reads as 300.00 to pay after
// 100.00 was paid invites a second payment, and one handed back to the
// merchant (recourse) must not send the buyer's payment to the provider.
func TestDocumentShowsPaymentsAndRecourse(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, link := e.capturedInvoice()
	if rows, page := documentStanding(t, link); rows != nil || strings.Contains(page, "recourse") {
		t.Fatalf("an invoice nothing happened to shows a payment status:\n%s", page)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, nil); code != 200 {
		t.Fatalf("partial refund: %d %v", code, b)
	}
	if code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":10000}`, e.auth, nil); code != 200 {
		t.Fatalf("payment: %d %v", code, b)
	}
	rows, page := documentStanding(t, link)
	want := map[string]string{"Invoiced": "300.00", "Credited": "50.00", "Paid": "100.00", "Outstanding": "150.00"}
	if !maps.Equal(rows, want) {
		t.Fatalf("after a part payment the invoice reads %v, want %v:\n%s", rows, want, page)
	}
	if strings.Contains(page, "recourse") {
		t.Fatalf("invoice reads as recoursed before it was:\n%s", page)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"buyer disputes delivery"}`, e.auth, nil); code != 200 {
		t.Fatalf("recourse: %d %v", code, b)
	}
	rows, page = documentStanding(t, link)
	if !maps.Equal(rows, want) || !strings.Contains(page, "handed back to the merchant (recourse)") {
		t.Fatalf("after recourse the invoice does not say the claim went back to the merchant (rows %v):\n%s", rows, page)
	}
	if strings.Contains(page, "disputes") {
		t.Fatalf("the merchant's recourse reason is on the buyer's document:\n%s", page)
	}
	// A receipt (paid at capture) has nothing outstanding to report.
	c := e.order("5560000001", "card")
	_, _, c = e.req("POST", "/v1/orders/"+c["id"].(string)+"/capture", "", e.auth, nil)
	if rows, page := documentStanding(t, c["captured"].([]any)[0].(map[string]any)["documentUrl"].(string)); rows != nil {
		t.Fatalf("a receipt shows a payment status:\n%s", page)
	}
}

// An invoice paid in full and then credited leaves the buyer owed the
// credit: the status must not read as a negative amount still to pay.
func TestDocumentOfAnInvoiceCreditedAfterPaymentSaysWhatTheBuyerIsOwed(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, link := e.capturedInvoice()
	if code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":30000}`, e.auth, nil); code != 200 {
		t.Fatalf("payment: %d %v", code, b)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, nil); code != 200 {
		t.Fatalf("partial refund: %d %v", code, b)
	}
	rows, page := documentStanding(t, link)
	want := map[string]string{"Invoiced": "300.00", "Credited": "50.00", "Paid": "300.00", "Due to the buyer": "50.00"}
	if !maps.Equal(rows, want) {
		t.Fatalf("the invoice reads %v, want %v:\n%s", rows, want, page)
	}
}
