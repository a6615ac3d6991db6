package server

import (
	"slices"
	"strings"
	"testing"
)

// A recourse hands the claim back to the merchant; it does not undo the
// invoice. The goods may still come back, and the only correction of an
// issued invoice is a credit note in the same series, so refunds stay
// offered on a recoursed invoice and are carried out (docs/decisions.md);
// void and a second recourse are not. What is offered is what is accepted.
func TestRefundAfterRecourseIsOfferedAndAccepted(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	_, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	c := o["captured"].([]any)[0].(map[string]any)
	capID := c["ledgerId"].(string)
	code, _, o := e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("recourse: %d %v", code, o)
	}
	got := actions(o["captured"].([]any)[0])
	if want := []string{"refund", "partialRefund", "resendOrderInvoice"}; !slices.Equal(got, want) {
		t.Fatalf("a recoursed invoice offers %v, want %v", got, want)
	}
	if code, _, b := e.req("DELETE", "/v1/orders/"+id+"/"+capID, "", e.auth, nil); code != 409 {
		t.Fatalf("void of a recoursed invoice: %d %v, want 409", code, b)
	}
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Returned grout","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, nil); code != 200 {
		t.Fatalf("partial refund after recourse: %d %v", code, o)
	}
	if code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil); code != 200 {
		t.Fatalf("refund after recourse: %d %v", code, o)
	}
	cap := o["captured"].([]any)[0].(map[string]any)
	if st := cap["status"].([]any); !slices.Contains(st, any("recourse")) {
		t.Fatalf("the refund lost the recourse status: %v", st)
	}
	if got := actions(cap); !slices.Equal(got, []string{"resendOrderInvoice"}) {
		t.Fatalf("a recoursed invoice refunded in full offers %v", got)
	}
	_, _, page := fetchPage(t, o["refunded"].([]any)[1].(map[string]any)["documentUrl"].(string))
	if !strings.Contains(page, "Credits invoice "+c["documentReference"].(string)) {
		t.Fatalf("the credit note after recourse does not name the invoice:\n%s", page)
	}
}

// After a recourse the claim is the merchant's: the provider no longer
// collects it, so its reminders and debt collection are refused on the
// invoice, as they are on one paid at capture. A delivery failure is a fact
// of the invoice and is still recorded.
func TestNoRemindersOnARecoursedInvoice(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`, e.auth, nil); code != 200 {
		t.Fatalf("recourse: %d %v", code, b)
	}
	for _, s := range []string{"reminder1", "reminder2", "debtCollection"} {
		code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/status", `{"status":"`+s+`"}`, e.auth, nil)
		if code != 409 || b["code"] != "action_not_available" {
			t.Fatalf("%s on a recoursed invoice: %d %v, want 409 action_not_available", s, code, b)
		}
	}
	if code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/status", `{"status":"invoiceDeliveryFailure"}`, e.auth, nil); code != 200 {
		t.Fatalf("delivery failure on a recoursed invoice: %d %v", code, b)
	}
}

// A recourse moves money: the merchant was paid the capture at settlement
// and now owns the buyer's debt, so the next settlement takes the claim
// (captured − refunded − paid) back as a recourse transaction. A refund
// afterwards is taken from the merchant only beyond the claim it still
// holds, and the provider takes no more payments on the invoice.
func TestRecourseIsSettled(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice() // 300.00 incl. VAT
	if code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":10000}`, e.auth, nil); code != 200 {
		t.Fatalf("payment: %d %v", code, b)
	}
	settle := func() map[string]any {
		t.Helper()
		code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
		if code != 200 || len(run["settlements"].([]any)) != 1 {
			t.Fatalf("run: %d %v", code, run)
		}
		return run["settlements"].([]any)[0].(map[string]any)
	}
	if s := settle(); minor(s["netAmount"]) != 30000 {
		t.Fatalf("the capture's settlement %v", s)
	}
	// 300.00 captured, 100.00 paid: the merchant takes over a 200.00 claim.
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`, e.auth, nil); code != 200 {
		t.Fatalf("recourse: %d %v", code, b)
	}
	code, _, b := e.req("POST", "/sandbox/v1/orders/"+id+"/ledgers/"+capID+"/payments", `{"amount":100}`, e.auth, nil)
	wantProblem(t, code, b, 409, "action_not_available")
	s := settle()
	if minor(s["recourseAmount"]) != 20000 || minor(s["netAmount"]) != -20000 || s["transactionCount"] != 1.0 {
		t.Fatalf("the recourse's settlement %v", s)
	}
	_, _, page := e.req("GET", "/v1/settlements/"+s["id"].(string)+"/tx", "", e.auth, nil)
	tx := page["transactions"].([]any)[0].(map[string]any)
	if tx["type"] != "recourse" || tx["ledgerId"] != capID || minor(tx["amount"]) != -20000 {
		t.Fatalf("recourse transaction %v", tx)
	}
	// The goods come back: a 50.00 credit lowers the buyer's debt to the
	// merchant (the claim left is 150.00) and is nothing to settle; a 250.00
	// credit is 150.00 of the debt and 100.00 the buyer paid the provider.
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Return","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, nil); code != 200 {
		t.Fatalf("refund within the claim: %d %v", code, b)
	}
	if code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); code != 200 || len(run["settlements"].([]any)) != 0 {
		t.Fatalf("a refund within the claim settled: %d %v", code, run)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil); code != 200 {
		t.Fatalf("refund beyond the claim: %d %v", code, b)
	}
	if s := settle(); minor(s["refundAmount"]) != 10000 || minor(s["netAmount"]) != -10000 {
		t.Fatalf("the refund's settlement %v", s)
	}
	// All told: 300.00 − 200.00 − 100.00 = 0, the 100.00 the buyer paid
	// having gone back to the buyer.
}
