package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// rawRequest writes head (a request line and headers, without the blank
// line that ends them) and then body on a new connection to addr, and
// returns the connection and a reader of its answers.
func rawRequest(t *testing.T, addr, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// readAnswer reads one answer within d and decodes its JSON body.
func readAnswer(t *testing.T, conn net.Conn, rd *bufio.Reader, d time.Duration) (int, http.Header, map[string]any) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", d, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if resp.StatusCode >= 200 {
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%d: %v: %s", resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// TestDeclaredBodyPastLimitRefusedAtOnce: a Content-Length past the body
// limit (1 MiB) is answered 413 before the body is read: a client that
// expects 100-continue is not asked for it, and one that sends only the
// headers is not waited for. The token endpoint answers in its OAuth shape.
// A body of the limit's size is still asked for.
func TestDeclaredBodyPastLimitRefusedAtOnce(t *testing.T) {
	e := newEnv(t, false) // the OpenAPI check reads every body before the server does
	addr := e.ts.Listener.Addr().String()
	const limit = 1 << 20
	for _, c := range []struct {
		name, path, auth, expect string
		length                   int
		status                   int
		code                     string // the problem's code, or the OAuth error
	}{
		{"100-continue", "/v1/orders/x/partialcapture", e.auth, "100-continue", limit + 1, 413, "body_too_large"},
		{"no 100-continue", "/v1/orders/x/partialcapture", e.auth, "", limit + 1, 413, "body_too_large"},
		{"before authentication", "/v1/orders/x/partialcapture", "", "100-continue", 1 << 40, 413, "body_too_large"},
		{"token endpoint", "/oauth/token", e.auth, "100-continue", limit + 1, 413, "invalid_request"},
		{"at the limit", "/v1/orders/x/partialcapture", e.auth, "100-continue", limit, 100, ""},
	} {
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: kassa\r\nContent-Type: application/json\r\nContent-Length: %d", c.path, c.length)
		if c.auth != "" {
			head += "\r\nAuthorization: " + c.auth
		}
		if c.expect != "" {
			head += "\r\nExpect: " + c.expect
		}
		conn, rd := rawRequest(t, addr, head, "") // the body is never sent
		code, _, out := readAnswer(t, conn, rd, 5*time.Second)
		got := out["code"]
		if c.path == tokenPath {
			got = out["error"]
		} else if code == 413 && out["status"] != float64(413) {
			t.Errorf("%s: not a problem document: %v", c.name, out)
		}
		if code != c.status || (c.code != "" && got != c.code) {
			t.Errorf("%s: %d %v, want %d %s", c.name, code, out, c.status, c.code)
		}
		conn.Close()
	}
}

// TestBodyPastReadTimeoutIs408: a body still coming when the server's
// ReadTimeout passes is answered 408, not 400 as if it were malformed (the
// token endpoint in its OAuth shape); the client may send it again.
func TestBodyPastReadTimeoutIs408(t *testing.T) {
	e := newEnv(t, false)
	ts := httptest.NewUnstartedServer(e.ts.Config.Handler)
	ts.Config.ReadTimeout = 500 * time.Millisecond
	ts.Start()
	defer ts.Close()
	for _, c := range []struct{ name, path, contentType, body, code string }{
		{"JSON body", "/v1/orders/x/partialcapture", "application/json", `{"orderLines":[`, "request_timeout"},
		{"token endpoint", tokenPath, "application/x-www-form-urlencoded", "grant_type=client", "invalid_request"},
	} {
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: kassa\r\nAuthorization: %s\r\nContent-Type: %s\r\nContent-Length: 100",
			c.path, e.auth, c.contentType)
		conn, rd := rawRequest(t, ts.Listener.Addr().String(), head, "")
		for i := range len(c.body) { // a byte at a time, never all 100
			io.WriteString(conn, c.body[i:i+1])
			time.Sleep(20 * time.Millisecond)
		}
		code, h, out := readAnswer(t, conn, rd, 5*time.Second)
		got := out["code"]
		if c.path == tokenPath {
			got = out["error"]
		} else if out["status"] != float64(code) || h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: not a problem document: %v %v", c.name, h, out)
		}
		if code != 408 || got != c.code {
			t.Errorf("%s: %d %v, want 408 %s", c.name, code, out, c.code)
		}
		conn.Close()
	}
}
