package server

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSettlementsOverHTTP(t *testing.T) {
	e := newSessionEnv(t)
	// A merchant with fees: 1.5 % + 1.00 per capture.
	code, _, creds := e.req("POST", "/sandbox/v1/merchants", `{"name":"Fees AB","feeBasisPoints":150,"feeFixedPerCapture":100}`, e.auth, nil)
	if code != 201 {
		t.Fatalf("merchant %d %v", code, creds)
	}
	e.auth = basic(creds["clientId"].(string), creds["clientSecret"].(string))
	o := e.order("5560000001", "invoice") // 300.00 incl. VAT
	id := o["id"].(string)
	_, _, o = e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
	e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Return","quantity":1,"unitPrice":5000,"vat":2500}],"totalRefundAmount":5000}`, e.auth, nil)
	// Captured and voided before any run: it cancels out.
	v := e.order("5560000001", "invoice")
	_, _, v = e.req("POST", "/v1/orders/"+v["id"].(string)+"/capture", "", e.auth, nil)
	e.req("DELETE", "/v1/orders/"+v["id"].(string)+"/"+v["captured"].([]any)[0].(map[string]any)["ledgerId"].(string), "", e.auth, nil)

	code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
	ss := run["settlements"].([]any)
	if code != 200 || len(ss) != 1 {
		t.Fatalf("run: %d %v", code, run)
	}
	s := ss[0].(map[string]any)
	// gross 300.00; refund 50.00; fee 4.50 + 1.00; net 244.50.
	if minor(s["grossAmount"]) != 30000 || minor(s["refundAmount"]) != 5000 || minor(s["feeAmount"]) != 550 ||
		minor(s["netAmount"]) != 24450 || s["transactionCount"] != 3.0 || s["reference"] != "S-000001" || s["storeId"] != "s1" {
		t.Fatalf("settlement %v", s)
	}
	sid := s["id"].(string)
	if _, _, again := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); len(again["settlements"].([]any)) != 0 {
		t.Fatalf("second run settled again: %v", again)
	}
	if code, _, got := e.req("GET", "/v1/settlements/"+sid, "", e.auth, nil); code != 200 || got["netAmount"].(map[string]any)["amount"] != "244.50" {
		t.Fatalf("get %d %v", code, got)
	}
	code, _, b := e.req("GET", "/v1/settlements/"+sid, "", e.other, nil)
	wantProblem(t, code, b, 404, "settlement_not_found")
	if code, _, l := e.req("GET", "/v1/settlements?currency=SEK&storeId=s1&size=10", "", e.auth, nil); code != 200 || len(l["settlements"].([]any)) != 1 {
		t.Fatalf("list %d %v", code, l)
	}
	if _, _, l := e.req("GET", "/v1/settlements?currency=EUR", "", e.auth, nil); len(l["settlements"].([]any)) != 0 {
		t.Fatalf("currency filter %v", l)
	}
	code, _, b = e.req("GET", "/v1/settlements?size=0&createdFrom=x", "", e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	var sum float64
	from := ""
	for pages := 0; pages < 5; pages++ {
		q := "/v1/settlements/" + sid + "/tx?size=2"
		if from != "" {
			q += "&fromId=" + from
		}
		_, _, page := e.req("GET", q, "", e.auth, nil)
		for _, tx := range page["transactions"].([]any) {
			sum += minor(tx.(map[string]any)["amount"])
		}
		next, _ := page["nextFromId"].(string)
		if next == "" {
			break
		}
		from = next
	}
	if sum != 24450 {
		t.Fatalf("transactions sum to %v, want the net 24450", sum)
	}
	resp, body := e.export(t, sid)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || len(rows) != 5 || rows[4][2] != "net" || rows[4][8] != "244.50" {
		t.Fatalf("csv %v %v", rows, err)
	}
}

// TestSettlementRunShowsOnlyTheCallersSettlements: a run settles every
// merchant, but its answer names only the caller's settlements.
func TestSettlementRunShowsOnlyTheCallersSettlements(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil)
	code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.other, nil)
	if code != 200 || len(run["settlements"].([]any)) != 0 {
		t.Fatalf("another merchant's run answered %d %v", code, run)
	}
	if code, _, l := e.req("GET", "/v1/settlements", "", e.auth, nil); code != 200 || len(l["settlements"].([]any)) != 1 {
		t.Fatalf("the owner's settlements after the other's run: %d %v", code, l)
	}
}

// TestSettlementListCurrencyFilter: a currency filter that is no ISO 4217
// code ("sek") is a 400 naming it, not an empty list that reads as "no
// settlements in SEK".
func TestSettlementListCurrencyFilter(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	e.req("POST", "/v1/orders/"+o["id"].(string)+"/capture", "", e.auth, nil)
	if code, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); code != 200 {
		t.Fatalf("run: %d %v", code, run)
	}
	if code, _, l := e.req("GET", "/v1/settlements?currency=SEK", "", e.auth, nil); code != 200 || len(l["settlements"].([]any)) != 1 {
		t.Fatalf("currency=SEK: %d %v, want the settlement", code, l)
	}
	for _, bad := range []string{"sek", "SEK,xyz", "KRONA"} {
		code, _, b := e.req("GET", "/v1/settlements?currency="+bad, "", e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if !strings.Contains(fmt.Sprint(b["errors"]), "currency") {
			t.Errorf("currency=%s: errors %v, want one naming currency", bad, b["errors"])
		}
	}
}

// The order's settlementReference is the merchant's key for matching a
// payout in its books: every settlement transaction of the order carries it
// as it was when the capture or refund was made, in JSON and in the CSV.
func TestSettlementTransactionsCarryTheOrdersSettlementReference(t *testing.T) {
	e := newSessionEnv(t)
	id, capID := e.capturedWithReferences("PO-7", "=ACC,42")
	if code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"PO-7","settlementReference":"ACC-43"}`, e.auth, nil); code != 200 {
		t.Fatalf("set reference: %d %v", code, b)
	}
	e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil)
	_, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
	sid := run["settlements"].([]any)[0].(map[string]any)["id"].(string)
	_, _, page := e.req("GET", "/v1/settlements/"+sid+"/tx", "", e.auth, nil)
	want := map[string]string{"capture": "=ACC,42", "refund": "ACC-43"}
	txs := page["transactions"].([]any)
	for _, tx := range txs {
		tx := tx.(map[string]any)
		if w, ok := want[tx["type"].(string)]; ok && tx["settlementReference"] != w {
			t.Errorf("%s transaction: settlementReference %v, want %q", tx["type"], tx["settlementReference"], w)
		}
	}
	_, body := e.export(t, sid)
	rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || len(rows) != len(txs)+2 {
		t.Fatalf("csv %v %v", rows, err)
	}
	col := slices.Index(rows[0], "orderSettlementReference")
	if col < 0 || rows[1][col] != "'=ACC,42" || rows[2][col] != "ACC-43" || rows[len(rows)-1][col] != "" {
		t.Fatalf("csv column orderSettlementReference (%d) in %v", col, rows)
	}
}

// A void or a recourse reverses a capture: its transaction (adjustment,
// recourse) carries the capture's invoice and so the references the
// capture was settled under, not those the order has at the reversal, or
// the merchant's books would take back from one key what was paid to
// another.
func TestReversalsCarryTheCapturesReferences(t *testing.T) {
	e := newSessionEnv(t)
	for _, reversal := range []string{"void", "recourse"} {
		id, capID := e.capturedWithReferences("PO-1", "ACC-1")
		e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
		if code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", `{"reference":"PO-2","settlementReference":"ACC-2"}`, e.auth, nil); code != 200 {
			t.Fatalf("set reference: %d %v", code, b)
		}
		var code int
		var b map[string]any
		if reversal == "void" {
			code, _, b = e.req("DELETE", "/v1/orders/"+id+"/"+capID, "", e.auth, nil)
		} else {
			code, _, b = e.req("POST", "/v1/orders/"+id+"/recourse/"+capID, `{"reason":"unpaid"}`, e.auth, nil)
		}
		if code != 200 {
			t.Fatalf("%s: %d %v", reversal, code, b)
		}
		_, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
		sid := run["settlements"].([]any)[0].(map[string]any)["id"].(string)
		_, _, page := e.req("GET", "/v1/settlements/"+sid+"/tx", "", e.auth, nil)
		txs := page["transactions"].([]any)
		if len(txs) != 1 {
			t.Fatalf("%s: transactions %v", reversal, txs)
		}
		tx := txs[0].(map[string]any)
		if tx["merchantReference"] != "PO-1" || tx["settlementReference"] != "ACC-1" {
			t.Errorf("%s transaction: references %v/%v, want those of the capture PO-1/ACC-1", tx["type"], tx["merchantReference"], tx["settlementReference"])
		}
	}
}

// capturedWithReferences makes a one-line invoice order of 100.00 with the
// merchant's reference and settlement reference, and captures it in full.
func (e *sessionEnv) capturedWithReferences(reference, settlementReference string) (id, capID string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "reference": reference,
		"settlementReference": settlementReference, "orderLines": []any{map[string]any{"description": "Tiles", "quantity": 1, "unitPrice": 10000, "vat": 2500}}})
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", string(body), e.auth, nil)
	if code != 200 {
		e.t.Fatalf("create order: %d %v", code, b)
	}
	id = b["orderId"].(string)
	code, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
	if code != 200 {
		e.t.Fatalf("capture: %d %v", code, o)
	}
	return id, o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
}

// TestVoidAfterTheCutoffCancelsOutItsCapture: docs/settlements.md, a capture
// voided before any run cancels out, neither paid nor charged a fee. The
// daily run settles what occurred before its cutoff; a capture made before
// it and voided after it, before the run, was settled as a capture with its
// fee, and the void left for the next day's run as an adjustment, so the
// merchant paid the fee of a capture no run had settled when it was voided
// (found by TestSettlementsOracle).
func TestVoidAfterTheCutoffCancelsOutItsCapture(t *testing.T) {
	e := newSessionEnv(t)
	code, _, creds := e.req("POST", "/sandbox/v1/merchants", `{"name":"Fees AB","feeBasisPoints":150,"feeFixedPerCapture":100}`, e.auth, nil)
	if code != 201 {
		t.Fatalf("merchant %d %v", code, creds)
	}
	e.auth = basic(creds["clientId"].(string), creds["clientSecret"].(string))
	id, capID, _ := e.capturedInvoice()
	// A day later, past 02:00 UTC, the capture is voided before the daily
	// run for that 02:00.
	if err := e.clock.Advance(25 * time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, _, o := e.req("DELETE", "/v1/orders/"+id+"/"+capID, "", e.auth, nil); code != 200 {
		t.Fatalf("void: %d %v", code, o)
	}
	now := e.clock.Now()
	cutoff := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, time.UTC)
	if cutoff.After(now) {
		cutoff = cutoff.AddDate(0, 0, -1)
	}
	made, err := e.ledger.RunSettlementsBefore(context.Background(), cutoff)
	if err != nil || len(made) != 0 {
		t.Fatalf("daily run: %+v %v; want nothing settled for a capture voided before it", made, err)
	}
	if _, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil); len(run["settlements"].([]any)) != 0 {
		t.Fatalf("the next run settled %v; want nothing left of the voided capture", run["settlements"])
	}
	if _, _, l := e.req("GET", "/v1/settlements", "", e.auth, nil); len(l["settlements"].([]any)) != 0 {
		t.Fatalf("settlements %v; want none", l["settlements"])
	}
}

// A spreadsheet in a locale whose decimal mark is a comma (Swedish,
// Norwegian, Danish, Finnish, German Excel) opens a .csv with ";" as its
// separator: every ";" in a cell starts a new one there, whatever the
// commas and quotes around it. Merchant text whose part after a ";" starts
// as a formula would run as one, so that part gets the leading apostrophe
// a cell gets.
func TestSettlementExportKeepsTextAfterASemicolonFromBeingAFormula(t *testing.T) {
	e := newSessionEnv(t)
	e.capturedWithReferences(`PO-1;@SUM(1+1)`, `ACC-1;=HYPERLINK(CHAR(104)&CHAR(116))`)
	e.capturedWithReferences(`PO-2; "-2+3`, `ACC-2;;+1`)
	e.capturedWithReferences(`PO-3;ok;=`, `ACC-3; plain;x=1`)
	_, _, run := e.req("POST", "/sandbox/v1/settlements/run", "", e.auth, nil)
	sid := run["settlements"].([]any)[0].(map[string]any)["id"].(string)
	_, body := e.export(t, sid)
	rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("csv %v %v", rows, err)
	}
	want := [][2]string{
		{`PO-1;'@SUM(1+1)`, `ACC-1;'=HYPERLINK(CHAR(104)&CHAR(116))`},
		{`PO-2;' "-2+3`, `ACC-2;;'+1`},
		{`PO-3;ok;'=`, `ACC-3; plain;x=1`},
	}
	got := map[[2]string]bool{}
	for _, row := range rows[1:4] {
		got[[2]string{row[7], row[10]}] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no row with merchantReference %q and orderSettlementReference %q in %q", w[0], w[1], rows)
		}
	}
	// Read as such a spreadsheet does: no cell between semicolons starts
	// as a formula (after the quotes and spaces it would skip).
	for _, line := range strings.Split(string(body), "\n") {
		for _, cell := range strings.Split(line, ";")[1:] {
			if c := strings.TrimLeft(cell, `" `); c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
				t.Errorf("line %q: cell %q after a semicolon starts as a formula", line, cell)
			}
		}
	}
}

// export fetches settlement sid's CSV export with the merchant's
// credentials: the answer, its body read and closed.
func (e *sessionEnv) export(t testing.TB, sid string) (*http.Response, []byte) {
	t.Helper()
	r, _ := http.NewRequest("GET", e.ts.URL+"/v1/settlements/"+sid+"/export.csv", nil)
	r.Header.Set("Authorization", e.auth)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}
