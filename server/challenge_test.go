package server

import (
	"net/http"
	"net/http/httptest"
	"slices"
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
