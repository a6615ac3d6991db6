package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUndeclaredBodyPastLimitIs413: a body sent without a Content-Length
// (chunked) is cut at the body limit as one that declares its length is,
// answered 413, and in the token endpoint's OAuth shape there. Only the
// declared length was tested, and a mutant that dropped the limit on what
// is read let a chunked body of any size be read into memory.
func TestUndeclaredBodyPastLimitIs413(t *testing.T) {
	e := newEnv(t, false) // the OpenAPI check reads every body before the server does
	const limit = 1 << 20
	for _, c := range []struct{ path, contentType, body, code string }{
		{"/v1/orders/x/partialcapture", "application/json", `{"orderLines":"` + strings.Repeat("x", limit) + `"}`, "body_too_large"},
		{tokenPath, "application/x-www-form-urlencoded", "grant_type=client_credentials&scope=" + strings.Repeat("x", limit), "invalid_request"},
	} {
		// A reader of unknown length: the client sends the body chunked.
		r, _ := http.NewRequest("POST", e.ts.URL+c.path, io.MultiReader(strings.NewReader(c.body)))
		r.Header.Set("Content-Type", c.contentType)
		r.Header.Set("Authorization", e.auth)
		if r.ContentLength > 0 {
			t.Fatalf("%s: the request declares its length", c.path)
		}
		code, _, out := e.send(r)
		got := out["code"]
		if c.path == tokenPath {
			got = out["error"]
		}
		if code != 413 || got != c.code {
			t.Errorf("%s: chunked body past the limit: %d %v, want 413 %s", c.path, code, out, c.code)
		}
	}
}
