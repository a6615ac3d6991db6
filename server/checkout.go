package server

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
)

// CheckoutURL is the signed link of a session's hosted checkout page. The
// signature, not a login, is what lets the buyer in, so the link must only
// be handed to the buyer.
func (s *Server) CheckoutURL(merchantID, sessionID string) string {
	path := "/checkout/" + url.PathEscape(merchantID) + "/" + url.PathEscape(sessionID)
	return s.cfg.BaseURL + path + "?sig=" + s.checkoutSig(merchantID, sessionID)
}

// checkoutSig is the signature of a session's checkout link: what the link
// carries, the page's form sends back, and the page's redirects keep.
func (s *Server) checkoutSig(merchantID, sessionID string) string {
	return s.sign("checkout", merchantID+"/"+sessionID)
}

func (s *Server) checkoutSigned(r *http.Request, p httprouter.Params) bool {
	sig := r.URL.Query().Get("sig")
	if sig == "" {
		sig = r.PostFormValue("sig")
	}
	return s.signedBy(sig, "checkout", p.ByName("merchantId")+"/"+p.ByName("sessionId"))
}

type checkoutForm struct {
	Q, CompanyID, FirstName, LastName, Email, Phone, Street, PostalCode, City, PaymentMethod string
}

// shown is f as the page shows it again: each value's bytes that are no
// UTF-8 (a form or link of another encoding) read as U+FFFD, since the page
// declares UTF-8. Such a value is refused (order.CheckText), not changed.
func (f checkoutForm) shown() checkoutForm {
	for _, v := range []*string{&f.Q, &f.CompanyID, &f.FirstName, &f.LastName, &f.Email, &f.Phone, &f.Street, &f.PostalCode, &f.City, &f.PaymentMethod} {
		*v = strings.ToValidUTF8(*v, "\uFFFD")
	}
	return f
}

type fieldError struct{ ID, Message string }

type checkoutView struct {
	S        session.Record
	Sig      string
	Terms    string // what the page shows, sent back on approval (session.Session.Terms)
	Action   string
	Form     checkoutForm
	Results  []company.Match
	Searched bool
	Errors   []fieldError
	Notice   string
	Script   template.JS
	Amount   func(int64) string
	// T is the page's language, the session's locale's (i18n.Language).
	T *i18n.Texts
	// Thanks is the approved page's sentence, in T's words.
	Thanks string
}

func (v checkoutView) ErrorFor(id string) string {
	for _, e := range v.Errors {
		if e.ID == id {
			return e.Message
		}
	}
	return ""
}

// checkoutTemplate shows each line's amount including VAT, whatever the
// session's VAT mode: the lines then add up to the total below them, which
// includes VAT and says how much of it is VAT. An exclVat line's own
// totalAmount, under the same heading "Total", did not.
//
// A completed session's page is the approved one (the thanks, the link back
// to the merchant's confirmation page), with the order placed when it was an
// order: a merchant making its order the moment it is told of the approval
// completes the session before the buyer's browser follows the approval's
// redirect, and the buyer must not lose the way back to the shop for it.
var checkoutTemplate = template.Must(template.New("checkout").Funcs(template.FuncMap{
	"checked": func(a, b string) bool { return a == b },
	"method":  func(t *i18n.Texts, m order.PaymentType) string { return t.PaymentMethods[string(m)] },
	"dict3": func(id, label, value, auto, typ string, v checkoutView) fieldView {
		return fieldView{ID: id, Label: label, Value: value, Auto: auto, Type: typ, Err: v.ErrorFor(id)}
	},
}).Parse(`<!doctype html>
<html lang="{{.T.Tag}}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.T.Checkout}} {{.S.MerchantReference}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:42rem;padding:1rem;line-height:1.4;overflow-wrap:anywhere}
fieldset{border:1px solid #bbb;margin:1rem 0;padding:.5rem 1rem 1rem}legend{font-weight:600}
label{display:block;margin-top:.6rem}input[type=text],input[type=email],input[type=tel],input[type=search]{width:100%;padding:.4rem;box-sizing:border-box}
.choice label{display:inline;margin:0}.choice{margin:.3rem 0}
.error{color:#a00}.summary{border:2px solid #a00;padding:.5rem 1rem}
table{width:100%;border-collapse:collapse}td,th{padding:.3rem;border-bottom:1px solid #ddd;text-align:left}td.n,th.n{text-align:right}th{overflow-wrap:normal}td.n{white-space:nowrap}
button{padding:.6rem 1.2rem;margin:.5rem .5rem 0 0;font-size:1rem}
:focus-visible{outline:3px solid #1a5fb4;outline-offset:2px}
</style></head>
<body><main>
<h1>{{.T.Checkout}}</h1>
{{if .Notice}}<p role="status">{{.Notice}}</p>{{end}}
<table><caption>{{.T.YourOrder}}{{with .S.MerchantReference}} {{.}}{{end}}</caption>
<thead><tr><th>{{.T.Item}}</th><th class="n">{{.T.Qty}}</th><th class="n">{{.T.Total}}</th></tr></thead><tbody>
{{range .S.OrderLines}}<tr><td>{{.Description}}</td><td class="n">{{.Quantity}}</td><td class="n">{{call $.Amount (.Gross $.S.VATMode)}}</td></tr>{{end}}
</tbody><tfoot><tr><th colspan="2">{{.T.Total}} {{.S.Currency}} ({{.T.VATOf}} {{call .Amount .S.Totals.VAT}})</th><th class="n" id="total">{{call .Amount .S.Totals.Gross}}</th></tr></tfoot></table>

{{if eq (print .S.State) "created"}}
{{if .Errors}}<div class="summary" role="alert" tabindex="-1" id="errors"><h2>{{.T.CorrectFollowing}}</h2><ul>
{{range .Errors}}<li><a href="#{{.ID}}">{{.Message}}</a></li>{{end}}</ul></div>{{end}}
<form method="get" action="{{.Action}}" role="search" aria-label="{{.T.FindCompany}}">
<input type="hidden" name="sig" value="{{.Sig}}">
<fieldset><legend>1. {{.T.FindCompany}}</legend>
<label for="q">{{.T.CompanyQuery}}</label>
<input type="search" id="q" name="q" value="{{.Form.Q}}" autocomplete="organization" data-country="{{.S.Country}}" data-none="{{.T.NoMatchShort}}" data-refused="{{.T.SearchRefused}}">
<button type="submit" id="search">{{.T.Search}}</button>
</fieldset></form>

<form method="post" action="{{.Action}}" novalidate>
<input type="hidden" name="sig" value="{{.Sig}}"><input type="hidden" name="q" value="{{.Form.Q}}"><input type="hidden" name="terms" value="{{.Terms}}">
<fieldset id="companyId" aria-describedby="companyId-error"><legend>{{.T.YourCompany}}</legend>
<div id="results" aria-live="polite">
{{range $i, $c := .Results}}<div class="choice"><input type="radio" name="companyId" id="company-{{$i}}" value="{{$c.CompanyID}}"{{if checked $.Form.CompanyID $c.CompanyID}} checked{{end}}>
<label for="company-{{$i}}">{{$c.CompanyName}} ({{$c.CompanyID}})</label></div>
{{else}}{{if .Searched}}<p>{{.T.NoMatch}}</p>{{else}}<p>{{.T.SearchAbove}}</p>{{end}}{{end}}
</div>
{{with .ErrorFor "companyId"}}<p class="error" id="companyId-error">{{.}}</p>{{end}}
</fieldset>
<fieldset><legend>2. {{.T.ContactBilling}}</legend>
{{template "field" (dict3 "firstName" .T.FirstName .Form.FirstName "given-name" "text" .)}}
{{template "field" (dict3 "lastName" .T.LastName .Form.LastName "family-name" "text" .)}}
{{template "field" (dict3 "email" .T.Email .Form.Email "email" "email" .)}}
{{template "field" (dict3 "phone" .T.Phone .Form.Phone "tel" "tel" .)}}
{{template "field" (dict3 "street" .T.Street .Form.Street "street-address" "text" .)}}
{{template "field" (dict3 "postalCode" .T.PostalCode .Form.PostalCode "postal-code" "text" .)}}
{{template "field" (dict3 "city" .T.City .Form.City "address-level2" "text" .)}}
</fieldset>
<fieldset id="paymentMethod" aria-describedby="paymentMethod-error"><legend>3. {{.T.PaymentMethod}}</legend>
{{range $i, $m := .S.PaymentMethods}}<div class="choice"><input type="radio" name="paymentMethod" id="pm-{{$i}}" value="{{$m}}"{{if checked $.Form.PaymentMethod (print $m)}} checked{{end}}>
<label for="pm-{{$i}}">{{method $.T $m}}</label></div>{{end}}
{{with .ErrorFor "paymentMethod"}}<p class="error" id="paymentMethod-error">{{.}}</p>{{end}}
</fieldset>
<button type="submit" name="action" value="approve" id="approve">{{.T.Approve}}</button>
<button type="submit" name="action" value="decline" id="decline" formnovalidate>{{.T.Decline}}</button>
</form>
<script>{{.Script}}</script>
{{else if or (eq (print .S.State) "authorized") (eq (print .S.State) "completed")}}<h2 id="result">{{.T.Approved}}</h2>
<p>{{.Thanks}}</p>{{if .S.OrderID}}<p>{{.T.Placed}}</p>{{end}}
{{with .S.MerchantURLs.Confirmation}}<p><a href="{{.}}">{{$.T.BackToShop}}</a></p>{{end}}
{{else}}<h2 id="result">{{index .T.SessionStateTitle (print .S.State)}}</h2><p>{{.T.NoPurchase}}</p>
{{with .S.MerchantURLs.Cancel}}<p><a href="{{.}}">{{$.T.BackToShop}}</a></p>{{end}}{{end}}
</main></body></html>
{{define "field"}}<label for="{{.ID}}">{{.Label}}</label>
<input type="{{.Type}}" id="{{.ID}}" name="{{.ID}}" value="{{.Value}}" autocomplete="{{.Auto}}"{{with .Err}} aria-invalid="true" aria-describedby="{{$.ID}}-error"{{end}}>
{{with .Err}}<p class="error" id="{{$.ID}}-error">{{.}}</p>{{end}}{{end}}`))

// The page's addresses (its forms, its redirect after a submit, the
// script's search) are relative to the page, /checkout/{merchantId}/{sessionId}:
// behind a proxy that serves kassa under a path prefix (--base-url with a
// path) kassa sees the path without the prefix, so an absolute path would
// leave kassa, while a relative one keeps the prefix the browser has.

// checkoutScript is the page's one script. The policy lets it run by its
// hash rather than by 'unsafe-inline', so that markup slipped into the page
// (were escaping ever to miss a field) could not run a script of its own;
// it takes what varies, the country and the words it writes in the page's
// language, from the page rather than from the template, to keep one hash
// for every page.
const checkoutScript = `
// Progressive enhancement: search as you type. Without JavaScript the Search button does the same.
// Only the answer to the last search typed is shown: on a slow network an earlier one can arrive after it.
(function(){var q=document.getElementById('q'),box=document.getElementById('results'),t,n=0;
if(!q||!window.fetch)return;
q.addEventListener('input',function(){clearTimeout(t);var my=++n;t=setTimeout(function(){
if(q.value.trim().length<2)return;
fetch('../../v1/headless/search/companies?country='+encodeURIComponent(q.dataset.country)+'&q='+encodeURIComponent(q.value)).then(function(r){return r.ok||r.status===400?r.json().then(function(d){d.refused=!r.ok;return d}):null}).then(function(d){
if(!d||my!==n)return;box.textContent='';
if(d.refused){var e=document.createElement('p');e.className='error';e.textContent=q.dataset.refused||(d.errors&&d.errors.length?'This '+d.errors[0].message+'.':d.detail);box.appendChild(e);return}
if(!d.companies.length){var p=document.createElement('p');p.textContent=q.dataset.none;box.appendChild(p);return}
d.companies.forEach(function(c,i){var div=document.createElement('div');div.className='choice';
var r=document.createElement('input');r.type='radio';r.name='companyId';r.id='company-'+i;r.value=c.companyId;
var l=document.createElement('label');l.htmlFor=r.id;l.textContent=c.companyName+' ('+c.companyId+')';
div.appendChild(r);div.appendChild(document.createTextNode(' '));div.appendChild(l);box.appendChild(div)});
document.querySelector('input[name=q][type=hidden]').value=q.value;});},250)});})();
`

// checkoutPolicy lets the checkout load only from kassa, run only its own
// script, post its forms only to kassa, and not be framed by another site
// that could trick the buyer into clicking Approve.
var checkoutPolicy = func() string {
	sum := sha256.Sum256([]byte(checkoutScript))
	return "default-src 'self'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
}()

// pageHeaders are the headers of a page kassa serves to browsers: its
// address holds a signature, so no Referer carries it to another site.
func pageHeaders(w http.ResponseWriter, policy string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", policy)
}

type fieldView struct{ ID, Label, Value, Auto, Type, Err string }

func (s *Server) renderCheckout(w http.ResponseWriter, r *http.Request, p httprouter.Params, status int, form checkoutForm, errs []fieldError, notice string) {
	sess, _, err := s.ledger.BuyerSession(r.Context(), p.ByName("merchantId"), p.ByName("sessionId"))
	if err != nil {
		s.checkoutFailure(w, r, err)
		return
	}
	if form == (checkoutForm{Q: form.Q}) && errs == nil && notice == "" {
		form = s.prefill(sess, form)
	}
	t := i18n.For(i18n.Language(sess.Locale))
	v := checkoutView{S: sess, Sig: s.checkoutSig(p.ByName("merchantId"), p.ByName("sessionId")), Terms: sess.Terms(),
		Action: url.PathEscape(p.ByName("sessionId")), Script: checkoutScript, Form: form, Errors: errs, Notice: notice, T: t,
		Amount: func(m int64) string { return t.FormatAmount(m, sess.Currency) }, Thanks: t.ThanksPlain}
	if sess.Buyer != nil && sess.PaymentMethod != nil {
		v.Thanks = fmt.Sprintf(t.ThanksFmt, sess.Buyer.CompanyName, t.PaymentMethods[string(sess.PaymentMethod.Type)])
	}
	wait := 0
	if form.Q != "" {
		wait = s.limiter.take(s.clientAddr(r), time.Now())
	}
	switch {
	case form.Q == "":
	case wait > 0:
		// The page's search is the company search endpoint's in another
		// form: one checkout link must not search without its limit. A page
		// shown again with a notice (the order changed, credit was refused)
		// keeps it and its status: that is what the buyer must read, and
		// the results missing says enough of the search.
		if status == http.StatusOK && v.Notice == "" {
			v.Notice = t.TooManySearches
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			status = http.StatusTooManyRequests
		}
	default:
		v.Searched = true
		v.Results = s.cfg.Companies.Search(sess.Country, form.Q, companySearchLimit)
	}
	if form.CompanyID != "" && !containsCompany(v.Results, form.CompanyID) {
		if c, ok := s.cfg.Companies.Lookup(sess.Country, form.CompanyID); ok {
			v.Results = append(v.Results, company.Match{CompanyID: c.ID, CompanyName: c.Name})
		}
	}
	v.Form = form.shown()
	pageHeaders(w, checkoutPolicy)
	w.Header().Set("X-Frame-Options", "DENY") // for browsers without frame-ancestors
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := checkoutTemplate.Execute(w, v); err != nil {
		s.log.ErrorContext(r.Context(), "render checkout", "err", err)
	}
}

// prefill opens the page with what the merchant told the session of its
// buyer (the session's customer), so the buyer confirms it rather than
// types it again; the company is chosen in the directory's form of its
// number, as the page lists it.
func (s *Server) prefill(sess session.Record, f checkoutForm) checkoutForm {
	c := sess.Customer
	if c == nil || sess.State != session.StateCreated {
		return f
	}
	if co, ok := s.cfg.Companies.Lookup(sess.Country, c.CompanyID); ok && c.CompanyID != "" {
		f.CompanyID = co.ID
	}
	f.FirstName, f.LastName, f.Email, f.Phone = c.FirstName, c.LastName, c.Email, c.Phone
	if a := c.BillingAddress; a != nil {
		f.Street, f.PostalCode, f.City = a.StreetAddress, a.PostalCode, a.City
	}
	return f
}

func containsCompany(ms []company.Match, id string) bool {
	for _, m := range ms {
		if m.CompanyID == id {
			return true
		}
	}
	return false
}

// checkoutFailure answers the buyer with a plain page, never a JSON problem.
// It has no session to take a language from (the link may not name one), so
// it takes the browser's.
func (s *Server) checkoutFailure(w http.ResponseWriter, r *http.Request, err error) {
	t := i18n.For(browserLanguage(r))
	status, msg := http.StatusInternalServerError, t.TryLater
	// As writeError's: a hang-up and a store outage are recorded as such,
	// not as the server errors an operator is paged for.
	switch kind := fault.KindOf(err); {
	case kind == fault.NotFound || kind == fault.Forbidden:
		status, msg = http.StatusNotFound, t.LinkInvalid
	case clientGone(r, err):
		s.log.DebugContext(r.Context(), "client closed the request", slog.Any("err", err))
		status = statusClientClosed
	case kind == fault.Unavailable:
		s.unavailable(w, r, err)
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, t.Unavailable
	default:
		s.log.ErrorContext(r.Context(), "checkout", "err", err)
	}
	pageHeaders(w, documentPolicy)
	w.WriteHeader(status)
	failureTemplate.Execute(w, struct {
		T   *i18n.Texts
		Msg string
	}{t, msg})
}

var failureTemplate = template.Must(template.New("e").Parse(`<!doctype html><html lang="{{.T.Tag}}"><head><meta charset="utf-8"><title>{{.T.Checkout}}</title></head><body><main><h1>{{.T.Checkout}}</h1><p role="alert">{{.Msg}}</p></main></body></html>`))

// browserLanguage is the language of the request's Accept-Language that
// kassa has a table for and the browser's reader wants most (RFC 9110
// §12.5.4: by quality, equal ones in the order sent), English when none is.
// A quality of 0 is "not this one"; a malformed one says nothing, and its
// language is passed over. The wildcard stands for every language not
// named, of which English is the one kassa falls back to.
func browserLanguage(r *http.Request) string {
	best, bestQ := i18n.English, 0
	wildcard, namedEnglish := 0, false
	for _, part := range strings.Split(r.Header.Get("Accept-Language"), ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		tag = strings.TrimSpace(tag)
		q, ok := acceptQuality(params)
		if !ok || tag == "" {
			continue
		}
		if tag == "*" {
			wildcard = max(wildcard, q)
			continue
		}
		primary, _, _ := strings.Cut(strings.ToLower(tag), "-")
		l := i18n.Language(tag)
		if primary == "en" {
			namedEnglish = true
		} else if l == i18n.English {
			continue // no table: not English because it is asked for
		}
		if q > bestQ {
			best, bestQ = l, q
		}
	}
	if !namedEnglish && wildcard > bestQ {
		return i18n.English
	}
	return best
}

// acceptQuality is the weight of one Accept-Language element's parameters
// in thousandths (RFC 9110 §12.4.2: "0" to "1", up to three decimals; 1000
// without one), and false when it is malformed. Whitespace around ";" is
// spaces and tabs (OWS, RFC 9110 §5.6.3).
func acceptQuality(params string) (int, bool) {
	params = owsRemover.Replace(params)
	if params == "" {
		return 1000, true
	}
	name, v, _ := strings.Cut(params, "=")
	if !strings.EqualFold(name, "q") || v == "" || (v[0] != '0' && v[0] != '1') {
		return 0, false
	}
	whole, frac, dot := strings.Cut(v, ".")
	if len(whole) != 1 || (!dot && frac != "") || len(frac) > 3 {
		return 0, false
	}
	q := int(whole[0]-'0') * 1000
	for i, scale := 0, 100; i < len(frac); i, scale = i+1, scale/10 {
		if frac[i] < '0' || frac[i] > '9' {
			return 0, false
		}
		q += int(frac[i]-'0') * scale
	}
	return q, q <= 1000
}

var owsRemover = strings.NewReplacer(" ", "", "\t", "")

func (s *Server) checkoutPage(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if !s.checkoutSigned(r, p) {
		s.checkoutFailure(w, r, fault.New(fault.Forbidden, "checkout_link_invalid", "bad signature"))
		return
	}
	s.renderCheckout(w, r, p, http.StatusOK, checkoutForm{Q: pageQuery(r.URL.Query().Get("q"))}, nil, "")
}

// pageQuery cuts a search the page was sent, in its address or its form, to
// what the search endpoint accepts: the directory's search costs in the
// number of words, and a form of 0.8 MB of one-letter words took seconds.
func pageQuery(q string) string {
	q = strings.TrimSpace(q)
	if utf8.RuneCountInString(q) > maxCompanyQuery {
		q = string([]rune(q)[:maxCompanyQuery])
	}
	return q
}

func (s *Server) checkoutSubmit(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if err := r.ParseForm(); err != nil || !s.checkoutSigned(r, p) {
		s.checkoutFailure(w, r, fault.New(fault.Forbidden, "checkout_link_invalid", "bad form or signature"))
		return
	}
	get := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	f := checkoutForm{Q: pageQuery(r.PostFormValue("q")), CompanyID: get("companyId"), FirstName: get("firstName"), LastName: get("lastName"),
		Email: get("email"), Phone: get("phone"), Street: get("street"), PostalCode: get("postalCode"), City: get("city"),
		PaymentMethod: get("paymentMethod")}
	redirect := func() {
		// The link's own signature, wherever the submit carried it (the
		// page's form sends it in the body, other clients in the address).
		sig := s.checkoutSig(p.ByName("merchantId"), p.ByName("sessionId"))
		// Relative, as the page's form and its search are: behind a
		// proxy serving kassa under a path (--base-url with a path),
		// the path kassa sees lacks that prefix, and an absolute one
		// would send the buyer out of kassa.
		w.Header().Set("Location", url.PathEscape(p.ByName("sessionId"))+"?sig="+url.QueryEscape(sig))
		w.WriteHeader(http.StatusSeeOther)
	}
	if get("action") == "decline" {
		if _, err := s.ledger.DeclineSession(r.Context(), p.ByName("merchantId"), p.ByName("sessionId")); err != nil && !fault.Is(err, fault.NotAvailable) {
			s.checkoutFailure(w, r, err)
			return
		}
		redirect()
		return
	}
	sess, _, err := s.ledger.BuyerSession(r.Context(), p.ByName("merchantId"), p.ByName("sessionId"))
	if err != nil {
		s.checkoutFailure(w, r, err)
		return
	}
	if sess.State != session.StateCreated {
		redirect() // already approved, declined or expired: the page says which
		return
	}
	t := i18n.For(i18n.Language(sess.Locale))
	var errs []fieldError
	c, known := s.cfg.Companies.Lookup(sess.Country, f.CompanyID)
	if !known {
		errs = append(errs, fieldError{"companyId", t.ChooseCompany})
	}
	for _, req := range []struct{ id, v, msg string }{
		{"firstName", f.FirstName, t.EnterFirstName}, {"lastName", f.LastName, t.EnterLastName},
		{"email", f.Email, t.EnterEmail},
		{"street", f.Street, t.EnterStreet}, {"postalCode", f.PostalCode, t.EnterPostalCode},
		{"city", f.City, t.EnterCity},
	} {
		if req.v == "" {
			errs = append(errs, fieldError{req.id, req.msg})
		}
	}
	if f.PaymentMethod == "" {
		errs = append(errs, fieldError{"paymentMethod", t.ChoosePayment})
	}
	in := order.CustomerInput{CompanyID: c.ID, Country: sess.Country, Email: f.Email, FirstName: f.FirstName,
		LastName: f.LastName, Phone: f.Phone,
		BillingAddress: &order.Address{CompanyName: c.Name, StreetAddress: f.Street, PostalCode: f.PostalCode, City: f.City, Country: sess.Country}}
	if len(errs) == 0 {
		var vf fault.Fields
		in.Validate(&vf, "")
		for _, fe := range vf.List() {
			id := fe.Field[strings.LastIndex(fe.Field, ".")+1:]
			if id == "streetAddress" {
				id = "street"
			}
			msg := "Check this field: " + fe.Message + "."
			switch {
			case id == "email" && t.BadEmail != "":
				msg = t.BadEmail
			case id != "email" && t.BadField != "":
				// The validation says the text is too long or not
				// text; its words are English.
				msg = t.BadField
			}
			errs = append(errs, fieldError{id, msg})
		}
	}
	if len(errs) > 0 {
		s.renderCheckout(w, r, p, http.StatusUnprocessableEntity, f, errs, "")
		return
	}
	_, err = s.ledger.ApproveSession(r.Context(), p.ByName("merchantId"), p.ByName("sessionId"),
		kassa.Approval{Customer: in, CompanyName: c.Name, PaymentMethod: order.PaymentType(f.PaymentMethod), Terms: get("terms")})
	var fe *fault.Error
	switch {
	case fault.CodeOf(err) == "session_changed":
		s.renderCheckout(w, r, p, http.StatusConflict, f, nil,
			t.OrderChanged)
	case err == nil || fault.Is(err, fault.NotAvailable):
		redirect() // approved, or the session moved on meanwhile: the page shows its state
	case errors.As(err, &fe) && fe.Kind == fault.Declined:
		s.renderCheckout(w, r, p, http.StatusUnprocessableEntity, f, nil,
			t.CreditRefused)
	case errors.As(err, &fe) && fe.Kind == fault.Invalid:
		s.renderCheckout(w, r, p, http.StatusUnprocessableEntity, f, []fieldError{{"paymentMethod", t.ChooseOffered}}, "")
	default:
		s.checkoutFailure(w, r, err)
	}
}
