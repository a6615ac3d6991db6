package server

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
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
// renders as it always did: from the order. One stored before they
// recorded the billing address renders without it, as it was issued, and
// one stored before they recorded the due date states none.
func TestDocumentStoredWithoutIssueRecordRendersAsBefore(t *testing.T) {
	e, st, _ := kakelEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"billingAddress":{"streetAddress":"Kakelvägen 1","city":"Stockholm","postalCode":"11122","country":"SE"}}`, e.auth, nil); code != 200 {
		t.Fatalf("edit customer: %d %v", code, b)
	}
	_, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	_, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil)
	links := []string{o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string), o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)}
	// What those pages were: the same, less what kassa did not state then,
	// newest first: the invoice's due date, then the seller and the address.
	const seller, address = "<p>Seller: Kakel AB</p>\n", "<p>Billing address: Kakelvägen 1, 11122 Stockholm, SE</p>\n"
	due := regexp.MustCompile(` Due date \d{4}-\d\d-\d\d\.</p>`)
	var pages []string
	for i, l := range links {
		_, _, page := fetchPage(t, l)
		if !strings.Contains(page, seller) || !strings.Contains(page, address) || due.MatchString(page) != (i == 0) {
			t.Fatalf("document does not name the seller %q, state the billing address %q, and (the invoice alone) its due date:\n%s", seller, address, page)
		}
		pages = append(pages, page)
	}
	merchant := o["merchantId"].(string)
	strip := func(what string, f func(l *order.Ledger), less func(page string) string) {
		rewriteSubOrders(t, st, merchant, id, func(l *order.Ledger) {
			if l.Issued == nil {
				t.Errorf("sub-order %s was stored without what its document was issued with", l.ID)
				return
			}
			f(l)
		})
		for i, l := range links {
			pages[i] = less(pages[i])
			if _, _, page := fetchPage(t, l); page != pages[i] {
				t.Fatalf("an order stored %s renders differently:\nbefore:\n%s\nnow:\n%s", what, pages[i], page)
			}
		}
	}
	strip("before issue records kept the due date", func(l *order.Ledger) { l.Issued.Due = time.Time{} },
		func(page string) string { return due.ReplaceAllString(page, "</p>") })
	strip("before issue records kept the seller and the billing address", func(l *order.Ledger) { l.Issued.Supplier, l.Issued.BuyerAddress = "", nil },
		func(page string) string { return strings.Replace(strings.Replace(page, address, "", 1), seller, "", 1) })
	strip("without issue records", func(l *order.Ledger) { l.Issued = nil }, func(page string) string { return page })
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

// An invoice must state the customer's address (VAT directive art. 226),
// and a credit note too, as the one it was issued to: an address edited in
// later does not rewrite either, and what is issued after the edit states
// the new one.
func TestDocumentsStateTheBuyersBillingAddressAtIssue(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"billingAddress":{"companyName":"Acme Bygg AB Ekonomi","attentionName":"Accounts payable","streetAddress":"Kakelvägen 1","city":"Stockholm","postalCode":"11122","country":"SE"}}`, e.auth, nil); code != 200 {
		t.Fatalf("edit customer: %d %v", code, b)
	}
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 {
		t.Fatalf("capture: %d %v", code, o)
	}
	capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	_, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
	const want = "<p>Billing address: Acme Bygg AB Ekonomi, attn. Accounts payable, Kakelvägen 1, 11122 Stockholm, SE</p>\n"
	links := []string{o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string), o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)}
	for _, l := range links {
		if _, _, page := fetchPage(t, l); !strings.Contains(page, want) {
			t.Fatalf("document does not state the billing address, want %q:\n%s", want, page)
		}
	}
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"billingAddress":{"streetAddress":"Ny gatan 2","city":"Malmö","postalCode":"21111","country":"SE"}}`, e.auth, nil); code != 200 {
		t.Fatalf("edit customer: %d %v", code, b)
	}
	for _, l := range links {
		if _, _, page := fetchPage(t, l); !strings.Contains(page, want) {
			t.Fatalf("an issued document's billing address changed with the order, want %q:\n%s", want, page)
		}
	}
	_, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
	if _, _, page := fetchPage(t, o["refunded"].([]any)[1].(map[string]any)["documentUrl"].(string)); !strings.Contains(page, "<p>Billing address: Ny gatan 2, 21111 Malmö, SE</p>\n") {
		t.Fatalf("credit note issued after the edit does not state the address then on record:\n%s", page)
	}
}

// An invoice must name its supplier (VAT directive art. 226): the merchant
// whose name it was issued under, on the invoice whether the merchant or
// the auto-capture job captured, and on the credit note.
func TestDocumentsNameTheMerchantAsSeller(t *testing.T) {
	e := newSessionEnv(t)
	if _, _, err := e.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "Kakel & Co AB", ClientID: "m3", ClientSecret: "s3"}); err != nil {
		t.Fatal(err)
	}
	e.auth = basic("m3", "s3")
	const want = "<p>Seller: Kakel &amp; Co AB</p>\n<p>Buyer: "
	id, capID, link := e.capturedInvoice()
	_, _, o := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Goodwill","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`, e.auth, nil)
	for _, l := range []string{link, o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)} {
		if _, _, page := fetchPage(t, l); !strings.Contains(page, want) {
			t.Fatalf("document does not name the seller, want %q:\n%s", want, page)
		}
	}
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order",
		strings.Replace(orderBody, `"storeId":"s1",`, `"storeId":"s1","autoCapture":{"enabled":true,"delayMinutes":0},`, 1), e.auth, nil)
	if code != 200 {
		t.Fatalf("create order: %d %v", code, b)
	}
	if code, _, r := e.req("POST", "/sandbox/v1/jobs/autocapture", "", e.auth, nil); code != 200 {
		t.Fatalf("auto-capture: %d %v", code, r)
	}
	c := e.get(b["orderId"].(string))["captured"].([]any)
	if len(c) != 1 {
		t.Fatalf("auto-capture captured %d sub-orders, want 1", len(c))
	}
	if _, _, page := fetchPage(t, c[0].(map[string]any)["documentUrl"].(string)); !strings.Contains(page, want) {
		t.Fatalf("auto-captured invoice does not name the seller, want %q:\n%s", want, page)
	}
}

// kakelEnv is a server on a store the test can write to directly, with the
// merchant "Kakel AB" as e.auth, so that its documents name their seller.
func kakelEnv(t *testing.T) (*sessionEnv, storage.Store, *Clock) {
	t.Helper()
	clock := NewClock(true)
	st := openStore(t, clock.Now)
	e := newEnvOn(t, true, clock, st, nil)
	if _, _, err := e.ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "Kakel AB", ClientID: "m3", ClientSecret: "s3"}); err != nil {
		t.Fatal(err)
	}
	e.auth = basic("m3", "s3")
	return e, st, clock
}

// rewriteSubOrders changes every capture and refund of order id in the
// store as f says: what an older build stored, for the renderings of today.
func rewriteSubOrders(t *testing.T, st storage.Store, merchant, id string, f func(l *order.Ledger)) {
	t.Helper()
	err := st.Update(context.Background(), func(tx storage.Tx) error {
		so, err := tx.GetOrder(merchant, id)
		if err != nil {
			return err
		}
		for _, ls := range [][]order.Ledger{so.Captured, so.Refunded} {
			for i := range ls {
				f(&ls[i])
			}
		}
		return tx.UpdateOrder(so)
	})
	if err != nil {
		t.Fatal(err)
	}
}
