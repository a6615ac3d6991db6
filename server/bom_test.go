package server

import (
	"testing"
)

// TestBodyWithByteOrderMark: a UTF-8 byte order mark before a JSON body is
// ignored (RFC 8259 §8.1 lets a parser do so), as ASP.NET Core, Jackson and
// Python's json do: Java's Files.readString keeps the one an editor saved
// the file with, and the body was refused as "not valid JSON (at byte 1)",
// pointing at a character the merchant's engineer cannot see. A body of the
// mark alone is not a body left out, and a UTF-16 mark is still refused.
func TestBodyWithByteOrderMark(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	const bom = "\xef\xbb\xbf"
	code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", bom+`{"reference":"R-BOM"}`, e.auth, nil)
	if code != 200 || b["merchantReference"] != "R-BOM" {
		t.Fatalf("body with a UTF-8 BOM: %d %v", code, b)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture", bom+` {"orderLines":[{"id":"x"}],"totalCaptureAmount":1.5}`, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if f := problemFields(b); f != "totalCaptureAmount" {
		t.Fatalf("fields after a BOM: %s", f)
	}
	for _, body := range []string{bom, bom + " ", "\xfe\xff{}", bom + bom + "{}"} {
		code, _, b = e.req("POST", "/v1/orders/"+id+"/capture", body, e.auth, nil)
		wantProblem(t, code, b, 400, "malformed_json")
	}
	if got := minor(e.get(id)["capturedAmount"]); got != 0 {
		t.Fatalf("a body of a mark alone captured %v", got)
	}
	code, _, b = e.req("POST", "/v1/orders/"+id+"/reference", bom+`{"reference":"R-2"}`, e.auth, map[string]string{"Content-Type": "application/json; charset=utf-16"})
	wantProblem(t, code, b, 415, "unsupported_media_type")
}

// TestBodyWithByteOrderMarkMalformedAt: the byte a malformed body after a
// byte order mark is refused at counts the mark, as the sender's bytes do:
// it was counted from after the mark, three bytes before the fault.
func TestBodyWithByteOrderMarkMalformedAt(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	const body = `{"reference":}`
	_, _, plain := e.req("POST", "/v1/orders/"+id+"/reference", body, e.auth, nil)
	code, _, b := e.req("POST", "/v1/orders/"+id+"/reference", "\xef\xbb\xbf"+body, e.auth, nil)
	wantProblem(t, code, b, 400, "malformed_json")
	if plain["detail"] != "the body is not valid JSON (at byte 14)" || b["detail"] != "the body is not valid JSON (at byte 17)" {
		t.Fatalf("without the mark %q, with it %q; want at byte 14, and 17", plain["detail"], b["detail"])
	}
}
