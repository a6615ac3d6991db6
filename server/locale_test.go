package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kassahq/kassa/order"
)

// localeSession opens a session of locale in country and currency with
// one line of 12 345.50 (VAT 25 %, 2 469.10), and returns its link.
func (e *sessionEnv) localeSession(country, currency, locale, ext string) string {
	e.t.Helper()
	body := `{"country":"` + country + `","currency":"` + currency + `","locale":"` + locale + `","externalSessionId":"` + ext + `",
	"merchantReference":"PO-9","orderLines":[{"description":"Kakel","quantity":1,"unitPrice":1234550,"vat":2500}]}`
	code, _, s := e.do("POST", "/v1/sessions", body, e.auth)
	if code != 201 {
		e.t.Fatalf("create session: %d %v", code, s)
	}
	return s["checkoutUrl"].(string)
}

// postCheckout submits form to the page of link and returns the status
// and the page it answered with.
func postCheckout(t *testing.T, e *sessionEnv, link string, form url.Values) (int, string) {
	t.Helper()
	u, _ := url.Parse(link)
	form.Set("sig", u.Query().Get("sig"))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(e.ts.URL+u.Path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wantAll(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, page)
		}
	}
}

// The spec makes a session's locale required; the buyer reads the hosted
// page in its language: its words, its payment methods, its field errors
// and the page a declined checkout ends on, and its amounts written as the
// language writes them (a decimal comma, thousands grouped).
func TestCheckoutSpeaksTheSessionsLanguage(t *testing.T) {
	e := newSessionEnv(t)
	link := e.localeSession("SE", "SEK", "sv-SE", "sv-1")
	_, _, page := fetchPage(t, link)
	wantAll(t, "Swedish page", page, `<html lang="sv">`, "<h1>Kassa</h1>", "Din beställning PO-9", "1. Hitta ditt företag",
		"Företagsnamn eller organisationsnummer", ">Sök</button>", "2. Kontakt och fakturering", "E-post för fakturor",
		"3. Betalningssätt", "Faktura (betala inom 30 dagar)", ">Godkänn köpet</button>", ">Avböj</button>",
		"12\u00a0345,50", "Totalt SEK (varav moms 2\u00a0469,10)", `data-none="Inget företag hittades."`)
	for _, english := range []string{"Checkout", "Approve purchase", "Your order", "12,345.50"} {
		if strings.Contains(page, english) {
			t.Errorf("Swedish page says %q:\n%s", english, page)
		}
	}
	code, page := postCheckout(t, e, link, url.Values{"action": {"approve"}, "email": {"not an address"}})
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("empty approval: %d, want 422", code)
	}
	wantAll(t, "Swedish errors", page, "<h2>Rätta följande</h2>", "Välj ditt företag bland sökresultaten.", "Ange ditt förnamn.",
		"Ange postnumret.", "Välj ett betalningssätt.")
	if code, _ := postCheckout(t, e, link, url.Values{"action": {"decline"}}); code != http.StatusSeeOther {
		t.Fatalf("decline: %d, want 303", code)
	}
	_, _, page = fetchPage(t, link)
	wantAll(t, "Swedish declined page", page, "Köpet avbröts", "Inget köp har gjorts.")

	// A field the order validation refuses says so in the page's language.
	link = e.localeSession("SE", "SEK", "sv-SE", "sv-2")
	_, page = postCheckout(t, e, link, url.Values{"action": {"approve"}, "companyId": {"5560000001"}, "firstName": {"A"}, "lastName": {"B"},
		"email": {"not an address"}, "street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {"invoice"}})
	wantAll(t, "Swedish validation", page, "Ange en giltig e-postadress.")

	// Approved, in Finnish: the thanks names the buyer and the method.
	link = e.localeSession("SE", "SEK", "fi-FI", "fi-1")
	_, _, page = fetchPage(t, link)
	wantAll(t, "Finnish page", page, `<html lang="fi">`, "Hyväksy osto", "12\u00a0345,50", "Lasku (maksuaika 30 päivää)")
	if code := e.approve(link, termsField.FindStringSubmatch(page)[1]); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	_, _, page = fetchPage(t, link)
	wantAll(t, "Finnish approved page", page, "Osto on hyväksytty", "hyväksyi oston. Maksutapa: Lasku (maksuaika 30 päivää).")

	for locale, want := range map[string][]string{
		"nb-NO": {`<html lang="nb">`, "Godkjenn kjøpet", "12\u00a0345,50"},
		"no-NO": {`<html lang="nb">`, "Godkjenn kjøpet"},
		"da-DK": {`<html lang="da">`, "Godkend købet", "12.345,50", "I alt SEK (heraf moms 2.469,10)"},
	} {
		_, _, page := fetchPage(t, e.localeSession("SE", "SEK", locale, "x-"+locale))
		wantAll(t, locale+" page", page, want...)
	}
}

// A language kassa has no words for reads English, and says so in its
// lang attribute rather than claiming the session's.
func TestCheckoutFallsBackToEnglish(t *testing.T) {
	e := newSessionEnv(t)
	for _, locale := range []string{"de-DE", "en-GB"} {
		_, _, page := fetchPage(t, e.localeSession("SE", "SEK", locale, "x-"+locale))
		wantAll(t, locale+" page", page, `<html lang="en">`, "<h1>Checkout</h1>", "Approve purchase", "Invoice (pay within 30 days)",
			"12,345.50", "Total SEK (VAT 2,469.10)", `data-none="No company matched."`, `data-refused=""`)
	}
}

// A link that does not open a checkout has no session to take a language
// from: the page takes the browser's.
func TestCheckoutFailureInTheBrowsersLanguage(t *testing.T) {
	e := newSessionEnv(t)
	for accept, want := range map[string]string{"sv-SE,sv;q=0.9,en;q=0.8": "Länken till kassan är inte giltig.",
		"de-DE,da;q=0.5": "Linket til kassen er ikke gyldigt.", "en-US,sv;q=0.5": "This checkout link is not valid.", "": "This checkout link is not valid.",
		"sv;q=0,fi": "Kassan linkki ei ole voimassa.", "sv; q=0.000": "This checkout link is not valid.",
		// By quality, not by place (RFC 9110 §12.5.4); equal qualities in
		// the order sent.
		"en;q=0.1, sv;q=0.9": "Länken till kassan är inte giltig.", "da;q=0.5,fi;q=0.8": "Kassan linkki ei ole voimassa.",
		"fi;q=0.9, en": "This checkout link is not valid.", "en-GB;q=0.2, da;q=0.3": "Linket til kassen er ikke gyldigt.",
		"sv;q=0.5, fi;q=0.500": "Länken till kassan är inte giltig.", "da, fi;q=1.000": "Linket til kassen er ikke gyldigt.",
		"SV;Q=0.9, en;q=0.5": "Länken till kassan är inte giltig.", "de;q=1, da;q=0.001": "Linket til kassen er ikke gyldigt.",
		"sv-SE;q=0.2, fi;q=0.3, sv;q=0.4": "Länken till kassan är inte giltig.",
		// Tabs are whitespace around ";" as spaces are (OWS, RFC 9110 §5.6.3).
		"fi;\tq=0.2, sv;q=0.1": "Kassan linkki ei ole voimassa.", "sv;q=0.1,\tda\t;\tq=0.5": "Linket til kassen er ikke gyldigt.",
		// A malformed quality says nothing about the reader: that language
		// is passed over.
		"fi;q=abc, sv;q=0.2": "Länken till kassan är inte giltig.", "fi;q=1.5, sv;q=0.2": "Länken till kassan är inte giltig.",
		"fi;q=0.0001, da;q=0.1": "Linket til kassen er ikke gyldigt.", "fi;q=-1, da;q=0.1": "Linket til kassen er ikke gyldigt.",
		"fi;q=, da;q=0.1": "Linket til kassen er ikke gyldigt.", "fi;q=1.001, da;q=0.1": "Linket til kassen er ikke gyldigt.",
		"fi;q=0.1001, da;q=0.1": "Linket til kassen er ikke gyldigt.", // four decimals, of which the last would round away
		// English named in capitals is English asked for, not a language
		// without a table.
		"EN-GB;q=0.9, sv;q=0.5": "This checkout link is not valid.",
		// The wildcard is every language not named, English among them.
		"*": "This checkout link is not valid.", "*;q=0.9, sv;q=0.5": "This checkout link is not valid.",
		"sv;q=0.5, *;q=0.1": "Länken till kassan är inte giltig.", "en;q=0, *, fi;q=0.2": "Kassan linkki ei ole voimassa.",
		// A language named ahead of the wildcard at the same quality is
		// the one wanted; a wildcard sent twice weighs its highest.
		"sv, *": "Länken till kassan är inte giltig.", "*;q=0.9, *;q=0.1, sv;q=0.5": "This checkout link is not valid."} {
		req, _ := http.NewRequest("GET", e.ts.URL+"/checkout/m/s?sig=bad", nil)
		req.Header.Set("Accept-Language", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), want) {
			t.Errorf("Accept-Language %q: %d, want 404 saying %q:\n%s", accept, resp.StatusCode, want, b)
		}
	}
}

// An invoice and its credit note are written in the order's language when
// they are issued, amounts and dates as the language writes them, and the
// language is recorded with them (order.Issue.Language). A document issued
// before kassa recorded one is English, byte for byte as it was, whatever
// the order's locale.
func TestDocumentsInTheOrdersLanguage(t *testing.T) {
	e, st, clock := kakelEnv(t)
	newOrder := func(locale string) (string, string, string) {
		body := `{"country":"SE","currency":"SEK","locale":"` + locale + `","reference":"PO-7",
		"orderLines":[{"description":"Kakel","quantity":1,"unitPrice":1234550,"vat":2500}]}`
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
		if code != 200 {
			t.Fatalf("create order: %d %v", code, b)
		}
		id := b["orderId"].(string)
		if code, _, b := e.req("POST", "/v1/orders/"+id+"/customer", `{"billingAddress":{"streetAddress":"Kakelvägen 1","attentionName":"Ekonomi","city":"Stockholm","postalCode":"11122","country":"SE"}}`, e.auth, nil); code != 200 {
			t.Fatalf("edit customer: %d %v", code, b)
		}
		_, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
		capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
		_, _, o = e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Kakel","quantity":1,"unitPrice":100000,"vat":2500}],"totalRefundAmount":100000}`, e.auth, nil)
		return id, o["captured"].([]any)[0].(map[string]any)["documentUrl"].(string), o["refunded"].([]any)[0].(map[string]any)["documentUrl"].(string)
	}
	day := clock.Now().UTC()
	id, invoice, credit := newOrder("sv-SE")
	_, _, page := fetchPage(t, invoice)
	wantAll(t, "Swedish invoice", page, `<html lang="sv">`, "<h1>Faktura INV-00000001</h1>", ", säljarens referens PO-7. Datum "+day.Format("2006-01-02")+".",
		"<p>Säljare: Kakel AB</p>", "<p>Köpare: ", "<p>Fakturaadress: att. Ekonomi, Kakelvägen 1, 11122 Stockholm, SE</p>",
		"<caption>Rader</caption>", "<th class=\"n\">À-pris (inkl. moms)</th>", "<caption>Momsspecifikation (SEK)</caption>",
		"<td>25,00</td>", "12\u00a0345,50", "2\u00a0469,10", "<th>Totalt</th>")
	_, _, page = fetchPage(t, credit)
	wantAll(t, "Swedish credit note", page, "<h1>Kreditfaktura CN-00000001</h1>", "<p>Krediterar faktura INV-00000001 daterad "+day.Format("2006-01-02")+".</p>",
		"1\u00a0000,00", "200,00")
	for _, english := range []string{"Invoice", "Credit note", "VAT", "Seller", "12,345.50"} {
		if strings.Contains(page, english) {
			t.Errorf("Swedish credit note says %q:\n%s", english, page)
		}
	}
	// Finnish dates are day.month.year.
	_, fiInvoice, _ := newOrder("fi-FI")
	_, _, page = fetchPage(t, fiInvoice)
	wantAll(t, "Finnish invoice", page, `<html lang="fi">`, "<h1>Lasku INV-00000002</h1>", "Päiväys "+day.Format("2.1.2006")+".", "ALV-erittely (SEK)")

	// The same documents, as kassa stored them before it recorded a
	// language: English, and byte for byte as an English one.
	merchant := e.get(id)["merchantId"].(string)
	setIssued := func(f func(l *order.Ledger)) { rewriteSubOrders(t, st, merchant, id, f) }
	var english []string
	setIssued(func(l *order.Ledger) { l.Issued.Language = "en" })
	for i, l := range []string{invoice, credit} {
		_, _, page := fetchPage(t, l)
		wantAll(t, "English document", page, `<html lang="en">`, []string{"12,345.50", "Credits invoice INV-00000001 of "}[i],
			"merchant reference PO-7. Date "+day.Format("2006-01-02")+".", "attn. Ekonomi")
		english = append(english, page)
	}
	setIssued(func(l *order.Ledger) { l.Issued.Language = "" })
	for i, l := range []string{invoice, credit} {
		if _, _, page := fetchPage(t, l); page != english[i] {
			t.Fatalf("a document stored without a language renders other than English:\nEnglish:\n%s\nnow:\n%s", english[i], page)
		}
	}
	setIssued(func(l *order.Ledger) { l.Issued = nil })
	for i, l := range []string{invoice, credit} {
		_, _, page := fetchPage(t, l)
		wantAll(t, "document stored without an issue record", page, `<html lang="en">`, "merchant reference PO-7.", []string{"12,345.50", "1,000.00"}[i])
	}
}

// The full refund after partial refunds writes its own lines, one per VAT
// rate ("Remaining balance at 25.00 % VAT"): words of kassa's, not the
// merchant's, on a credit note the buyer reads. They are in the credit
// note's language, the rate written as its VAT column writes it, and
// English, as before, for an English one.
func TestRemainingBalanceLinesInTheCreditNotesLanguage(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []struct{ locale, want12, want25 string }{
		{"sv-SE", "Återstående belopp med 12,00 % moms", "Återstående belopp med 25,00 % moms"},
		{"fi-FI", "Jäljellä oleva summa, ALV 12,00 %", "Jäljellä oleva summa, ALV 25,00 %"},
		{"en-SE", "Remaining balance at 12.00 % VAT", "Remaining balance at 25.00 % VAT"},
	} {
		body := `{"country":"SE","currency":"SEK","locale":"` + c.locale + `","reference":"PO-8",
		"orderLines":[{"description":"Kakel","quantity":2,"unitPrice":12500,"vat":2500},{"description":"Bok","quantity":1,"unitPrice":11200,"vat":1200}]}`
		code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
		if code != 200 {
			t.Fatalf("create order: %d %v", code, b)
		}
		id := b["orderId"].(string)
		_, _, o := e.req("POST", "/v1/orders/"+id+"/capture", "", e.auth, nil)
		capID := o["captured"].([]any)[0].(map[string]any)["ledgerId"].(string)
		if code, _, b := e.req("POST", "/v1/orders/"+id+"/partialrefund/"+capID, `{"orderLines":[{"description":"Kakel","quantity":1,"unitPrice":12500,"vat":2500}],"totalRefundAmount":12500}`, e.auth, nil); code != 200 {
			t.Fatalf("partial refund: %d %v", code, b)
		}
		if code, _, o = e.req("POST", "/v1/orders/"+id+"/refund/"+capID, "", e.auth, nil); code != 200 {
			t.Fatalf("refund: %d %v", code, o)
		}
		sub := o["refunded"].([]any)[1].(map[string]any)
		var got []string
		for _, l := range lines(sub) {
			got = append(got, l.(map[string]any)["description"].(string))
		}
		if len(got) != 2 || got[0] != c.want12 || got[1] != c.want25 {
			t.Errorf("%s: the full refund's lines read %q, want %q and %q", c.locale, got, c.want12, c.want25)
		}
		_, _, page := fetchPage(t, sub["documentUrl"].(string))
		wantAll(t, c.locale+" credit note", page, "<td>"+c.want12+"</td>", "<td>"+c.want25+"</td>")
	}
}
