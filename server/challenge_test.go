package server

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestUnauthorizedOffersBasic: a 401 of a route that takes client
// credentials as Basic says so in a challenge of its own, first, as well as
// Bearer's. HTTP clients that send Basic credentials only when challenged
// for them (Java's HttpClient with an Authenticator, which reads the first
// scheme of a WWW-Authenticate line only, and of the first line only in
// early releases; .NET's HttpClientHandler.Credentials; curl --anyauth) were
// answered 401 for ever by a Bearer challenge alone. The backup route,
// which takes its bearer token only, offers Bearer alone.
func TestUnauthorizedOffersBasic(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	want := []string{`Basic realm="kassa"`, `Bearer realm="kassa"`}
	for _, auth := range []string{"", basic("m1", "nope"), "Bearer kat_forged.x", "Digest x"} {
		for _, path := range []string{"/v1/orders/" + id, "/v1/orders", "/sandbox/v1/clock"} {
			code, h, b := e.req("GET", path, "", auth, nil)
			wantProblem(t, code, b, 401, "unauthorized")
			if got := h.Values("WWW-Authenticate"); !slices.Equal(got, want) {
				t.Errorf("GET %s with %q: WWW-Authenticate %q, want %q", path, auth, got, want)
			}
		}
	}
	// The client answers the Basic challenge and is served.
	if code, _, b := e.req("GET", "/v1/orders/"+id, "", basic("m1", "s1"), nil); code != 200 || b["id"] != id {
		t.Fatalf("Basic after the challenge: %d %v", code, b)
	}

	s := memoryServer(Config{SeparateOps: true, BackupToken: "backup-secret-0123456789"})
	ops := httptest.NewServer(s.OpsHandler())
	defer ops.Close()
	req, _ := http.NewRequest(http.MethodGet, ops.URL+"/backup", nil)
	req.SetBasicAuth("m1", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != 401 || !slices.Equal(got, []string{`Bearer realm="kassa"`}) {
		t.Errorf("GET /backup with Basic: %d, WWW-Authenticate %q, want 401 and Bearer alone", resp.StatusCode, got)
	}
}

// TestBasicAfterSeveralSpaces: RFC 9110 §11.4 lets one or more spaces
// separate the scheme from the credentials. Bearer took several, while
// Basic (net/http's Request.BasicAuth, exactly one) was 401, and on the
// token endpoint "client id and secret are required" though both were sent.
func TestBasicAfterSeveralSpaces(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	auth := "Basic  " + strings.TrimPrefix(basic("m1", "s1"), "Basic ")
	if code, _, b := e.req("GET", "/v1/orders/"+id, "", auth, nil); code != 200 || b["id"] != id {
		t.Fatalf("GET with %q: %d %v", auth, code, b)
	}
	r, _ := http.NewRequest("POST", e.ts.URL+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", auth)
	if code, _, out := e.send(r); code != 200 || !strings.HasPrefix(fmt.Sprint(out["access_token"]), "kat_") {
		t.Fatalf("token with %q: %d %v", auth, code, out)
	}
	// Still refused: no space, a wrong secret, credentials without a colon.
	for _, bad := range []string{"Basic" + strings.TrimPrefix(basic("m1", "s1"), "Basic "), basic("m1", "nope"), "Basic  " + base64.StdEncoding.EncodeToString([]byte("m1s1"))} {
		code, _, b := e.req("GET", "/v1/orders/"+id, "", bad, nil)
		wantProblem(t, code, b, 401, "unauthorized")
	}
}
