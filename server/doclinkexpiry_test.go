package server

import (
	"net/url"
	"strconv"
	"testing"
	"time"
)

// TestExpiredDocumentLinkIsRefused: a document link signed by the server
// but past its expiry is refused (403 document_link_invalid), as one with
// a wrong signature is. Only tampered links were tested, and a mutant that
// dropped the expiry check served an expired link.
func TestExpiredDocumentLinkIsRefused(t *testing.T) {
	e := newSessionEnv(t)
	_, _, link := e.capturedInvoice()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	signer := &Server{cfg: Config{Key: []byte("0123456789abcdef0123456789abcdef")}}
	at := func(exp time.Time) string {
		x := strconv.FormatInt(exp.Unix(), 10)
		return u.Path + "?expires=" + x + "&signature=" + signer.sign("document", u.EscapedPath()+"?"+x)
	}
	// A document holds the buyer's data: no shared cache may keep it.
	if code, h, b := e.req("GET", at(time.Now().Add(time.Hour)), "", "", nil); code != 200 || h.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("link signed with the server's key: %d %v %v, want 200 and not cacheable", code, h, b)
	}
	for _, exp := range []time.Time{time.Now().Add(-time.Second), time.Now().Add(-8 * 24 * time.Hour)} {
		code, _, b := e.req("GET", at(exp), "", "", nil)
		wantProblem(t, code, b, 403, "document_link_invalid")
	}
}
