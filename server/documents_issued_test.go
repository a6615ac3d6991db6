package server

import (
	"context"
	"strings"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// An issued invoice or credit note is an accounting record: what a later
// edit of the order changes (the merchant reference, the buyer's addresses
// and contact) must not rewrite it, or a resend sends the buyer a document
// that differs from the one in its books under the same number.
func TestIssuedDocumentsDoNotChangeWithLaterEdits(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	code, _, o := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
	if code != 200 {
		t.Fatalf("partial refund: %d %v", code, o)
	}
	links := []string{o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string), o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)}
	var before []string
	for _, l := range links {
		code, _, page := fetchPage(t, l)
		if code != 200 || !strings.Contains(page, "merchant reference PO-1") {
			t.Fatalf("document %s: %d, want it to name merchant reference PO-1:\n%s", l, code, page)
		}
		before = append(before, page)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"PO-2"}`, e.auth, nil); code != 200 {
		t.Fatalf("set reference: %d %v", code, b)
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"billingAddress":{"companyName":"Renamed AB","streetAddress":"Ny gatan 2","city":"Malmö","postalCode":"21111","country":"SE"},"email":"new@example.com"}`, e.auth, nil); code != 200 {
		t.Fatalf("edit customer: %d %v", code, b)
	}
	for i, l := range links {
		if _, _, page := fetchPage(t, l); page != before[i] {
			t.Fatalf("document changed after the order was edited:\nissued:\n%s\nnow:\n%s", before[i], page)
		}
	}
	// What is issued after the edit shows the order as it is then.
	_, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
	if _, _, page := fetchPage(t, o["refunded"].([]any)[1].(map[string]any)["documentUrl"].(string)); !strings.Contains(page, "merchant reference PO-2") {
		t.Fatalf("credit note issued after the edit does not name the reference then set:\n%s", page)
	}
}

// An order stored before documents recorded what they were issued with
// renders as it always did: from the order.
func TestDocumentStoredWithoutIssueRecordRendersAsBefore(t *testing.T) {
	clock := NewClock(true)
	st := openStore(t, clock.Now)
	e := newEnvOn(t, true, clock, st, nil)
	id, capID, _ := e.capturedInvoice()
	_, _, o := e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil)
	links := []string{o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string), o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)}
	var issued []string
	for _, l := range links {
		_, _, page := fetchPage(t, l)
		issued = append(issued, page)
	}
	merchant := o["merchantId"].(string)
	err := st.Update(context.Background(), func(tx storage.Tx) error {
		so, err := tx.GetOrder(merchant, id)
		if err != nil {
			return err
		}
		strip := func(ls []order.Ledger) {
			for i := range ls {
				if ls[i].Issued == nil {
					t.Errorf("sub-order %s was stored without what its document was issued with", ls[i].ID)
				}
				ls[i].Issued = nil
			}
		}
		strip(so.Captured)
		strip(so.Refunded)
		return tx.UpdateOrder(so)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range links {
		if _, _, page := fetchPage(t, l); page != issued[i] {
			t.Fatalf("an order stored without issue records renders differently:\nbefore:\n%s\nnow:\n%s", issued[i], page)
		}
	}
}

// A document with no payment status and no recourse ends as documents did
// before those were shown, byte for byte: a page kept by a buyer or an
// archive compares equal to the same page fetched after an upgrade.
func TestDocumentWithoutStandingEndsAsBefore(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	_, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	_, _, page := fetchPage(t, o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string))
	if !strings.HasSuffix(page, "</tfoot></table>\n</body></html>") {
		t.Fatalf("document ends %q, want the VAT table then </body>", page[max(0, len(page)-80):])
	}
}
