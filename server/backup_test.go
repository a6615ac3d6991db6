package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBackupRoute: GET /backup is served on the operations handler only,
// and only when a BackupToken is configured and sent as a bearer token (the
// archive holds every merchant's data and the signing key, and the
// operations listener is often open to a whole internal network); HEAD does
// not make a backup; without a Config.Backup (PostgreSQL) it is refused,
// naming pg_dump; a
// backup that fails before its first byte is a 500 problem, one that fails
// after it is a cut connection, never a body that ends as if whole; and one
// backup runs at a time.
func TestBackupRoute(t *testing.T) {
	problem := func(t *testing.T, resp *http.Response, status int, code string) string {
		t.Helper()
		defer resp.Body.Close()
		var p struct{ Code, Detail string }
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || json.Unmarshal(b, &p) != nil || p.Code != code {
			t.Errorf("answered %d %s, want %d %s", resp.StatusCode, b, status, code)
		}
		return p.Detail
	}
	const token = "backup-secret-0123456789"
	send := func(t *testing.T, method, url, bearer string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	get := func(t *testing.T, url string) *http.Response { return send(t, http.MethodGet, url, token) }

	t.Run("no token configured", func(t *testing.T) {
		s := memoryServer(Config{SeparateOps: true, Backup: func(w io.Writer) error { t.Error("backup made"); return nil }})
		ops := httptest.NewServer(s.OpsHandler())
		defer ops.Close()
		problem(t, get(t, ops.URL+"/backup"), http.StatusNotFound, "route_not_found")
	})

	t.Run("postgres", func(t *testing.T) {
		s := memoryServer(Config{SeparateOps: true, BackupToken: token})
		ops := httptest.NewServer(s.OpsHandler())
		defer ops.Close()
		if d := problem(t, get(t, ops.URL+"/backup"), http.StatusConflict, "backup_unsupported"); !strings.Contains(d, "pg_dump") {
			t.Errorf("the refusal does not name pg_dump: %q", d)
		}
	})

	var fail error
	var cut bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	s := memoryServer(Config{SeparateOps: true, BackupToken: token, Backup: func(w io.Writer) error {
		switch {
		case fail != nil && !cut:
			return fail
		case cut:
			w.Write([]byte(strings.Repeat("x", 100<<10))) // past net/http's buffer: the headers are out
			return fail
		}
		entered <- struct{}{}
		<-release
		_, err := io.WriteString(w, "archive")
		return err
	}})
	api, ops := httptest.NewServer(s.Handler()), httptest.NewServer(s.OpsHandler())
	defer api.Close()
	defer ops.Close()
	problem(t, get(t, api.URL+"/backup"), http.StatusNotFound, "route_not_found")
	for _, bearer := range []string{"", "wrong", token + "x", token[:len(token)-1]} {
		if resp := send(t, http.MethodGet, ops.URL+"/backup", bearer); resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate")
			resp.Body.Close()
		} else {
			problem(t, resp, http.StatusUnauthorized, "unauthorized")
		}
	}
	if resp := send(t, http.MethodHead, ops.URL+"/backup", token); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
		t.Errorf("HEAD /backup: %d, Allow %q; want 405, GET", resp.StatusCode, resp.Header.Get("Allow"))
	}
	// Nor do OPTIONS and a 405 to another method offer HEAD there.
	for _, m := range []string{http.MethodOptions, http.MethodPost} {
		resp := send(t, m, ops.URL+"/backup", token)
		resp.Body.Close()
		if allow := resp.Header.Get("Allow"); strings.Contains(allow, "HEAD") || !strings.Contains(allow, "GET") {
			t.Errorf("%s /backup: %d, Allow %q; want GET without HEAD", m, resp.StatusCode, allow)
		}
	}

	first := make(chan *http.Response)
	go func() { first <- get(t, ops.URL+"/backup") }()
	<-entered
	problem(t, get(t, ops.URL+"/backup"), http.StatusConflict, "backup_in_progress")
	close(release)
	resp := <-first
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || string(b) != "archive" || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("backup: %d %q %v %q", resp.StatusCode, resp.Header.Get("Content-Type"), err, b)
	}

	fail = errors.New("disk full")
	problem(t, get(t, ops.URL+"/backup"), http.StatusInternalServerError, "internal")

	cut = true
	// Cut before or after the headers went out, depending on buffering:
	// either way the client sees an error, not an end.
	req, _ := http.NewRequest(http.MethodGet, ops.URL+"/backup", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err == nil {
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatalf("a backup that failed half-way read as whole: %d, %d bytes", resp.StatusCode, len(b))
	}
}
