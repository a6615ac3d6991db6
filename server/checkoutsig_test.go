package server

import (
	"net/http"
	"net/url"
	"testing"
)

// TestCheckoutSubmitNeedsTheLinksSignature: the checkout form's approve and
// decline are refused (the plain "link invalid" page, 404) without the
// link's signature, with a wrong one and with another session's, and the
// session stays as it was. Only the page's GET was tested with a bad
// signature: a mutant that dropped the check from the submit let anyone who
// knew a session's id approve or decline it for the buyer.
func TestCheckoutSubmitNeedsTheLinksSignature(t *testing.T) {
	e := newSessionEnv(t)
	_, _, s := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "sig1"), e.auth)
	_, _, other := e.do("POST", "/v1/sessions", fill(sessionBody, "a", "b", "sig2"), e.auth)
	id, link := s["id"].(string), s["checkoutUrl"].(string)
	terms := e.checkoutTerms(link)
	u, _ := url.Parse(link)
	ou, _ := url.Parse(other["checkoutUrl"].(string))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for name, sig := range map[string]string{"no signature": "", "a wrong one": "AAAA", "another session's": ou.Query().Get("sig")} {
		for _, action := range []string{"approve", "decline"} {
			form := url.Values{"companyId": {"5560000001"}, "firstName": {"A"}, "lastName": {"B"}, "email": {"a@b.se"},
				"street": {"Gatan 1"}, "postalCode": {"11122"}, "city": {"Stockholm"}, "paymentMethod": {"invoice"},
				"action": {action}, "terms": {terms}}
			if sig != "" {
				form.Set("sig", sig)
			}
			resp, err := client.PostForm(e.ts.URL+u.Path, form)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s with %s: %d, want 404", action, name, resp.StatusCode)
			}
		}
	}
	if _, _, got := e.do("GET", "/v1/sessions/"+id, "", e.auth); got["state"] != "created" {
		t.Fatalf("session after unsigned submits: %v, want created", got["state"])
	}
	if code := e.approve(link, terms); code != http.StatusSeeOther {
		t.Fatalf("approve with the link's signature: %d, want 303", code)
	}
}
