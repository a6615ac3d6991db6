package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveWithOps runs serve with args (which give --ops-addr) in this process
// until stopInProcess, and returns its base URL and that of its operations
// listener once it listens.
func serveWithOps(t *testing.T, args ...string) (base, ops string, done chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	var errb lockedBuffer
	done = make(chan int, 1)
	go func() {
		code := run(append([]string{"serve", "--log-level", "error"}, args...), pw, &errb)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	for base == "" && lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), ") on "); ok && strings.HasPrefix(lines.Text(), "operations") {
			ops = rest
		}
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		t.Fatalf("serve %v did not start: exit %d, %s", args, <-done, errb.String())
	}
	return base, ops, done
}

// TestOpsAddrServesMetricsApart: /metrics on the API's port tells anyone
// who can reach it (buyers' browsers do, for checkout) the merchants'
// traffic and the routes' error rates. With --ops-addr it is served on
// that listener only, the API answering it 404 like any unknown route; the
// health routes answer on both (load balancers probe the API's port), and
// the operations listener serves nothing of the API. It closes with the
// server.
func TestOpsAddrServesMetricsApart(t *testing.T) {
	base, ops, done := serveWithOps(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")
	stopped := false
	defer func() {
		if !stopped {
			stopInProcess(t, done)
		}
	}()
	if !strings.HasPrefix(ops, "http://127.0.0.1:") || ops == base {
		t.Fatalf("operations listener %q, API %q", ops, base)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(base + "/metrics"); code != http.StatusNotFound || !strings.Contains(body, "route_not_found") {
		t.Errorf("the API answered /metrics %d %.200s, want 404 route_not_found", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(base + p); code != 200 {
			t.Errorf("the API answered %s %d", p, code)
		}
		if code, _ := get(ops + p); code != 200 {
			t.Errorf("the operations listener answered %s %d", p, code)
		}
	}
	if code, body := get(base + "/openapi.json"); code != 200 || strings.Contains(body, `"/metrics"`) {
		t.Errorf("the API's /openapi.json (%d) lists /metrics, which it answers 404", code)
	}
	for _, p := range []string{"/v1/orders", "/openapi.json", "/sandbox/v1/clock"} {
		if code, _ := get(ops + p); code != http.StatusNotFound {
			t.Errorf("the operations listener answered %s %d, want 404", p, code)
		}
	}
	code, body := get(ops + "/metrics")
	if code != 200 || !strings.Contains(body, `kassa_http_requests_total{method="GET",route="unmatched",status="404"}`) ||
		!strings.Contains(body, `kassa_http_requests_total{method="GET",route="/readyz",status="200"} 2`) {
		t.Errorf("the operations listener answered /metrics %d:\n%s", code, body)
	}

	stopInProcess(t, done)
	stopped = true
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(ops, "http://"), 2*time.Second); err == nil {
		c.Close()
		t.Errorf("the operations listener still takes connections after the server stopped")
	}
}

// TestBadOpsAddrRefusedFirst: an --ops-addr that is no host:port, or is
// --addr itself, is a usage error found before the data directory is made,
// naming the flag and its variable.
func TestBadOpsAddrRefusedFirst(t *testing.T) {
	for _, bad := range []string{"9090", "localhost", "127.0.0.1:99999", "127.0.0.1:metrics", " ", "127.0.0.1:8080"} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, "--ops-addr", "--data", data, "--addr", "127.0.0.1:8080", "--ops-addr", bad)
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--ops-addr %q: the data directory was made before the refusal", bad)
		}
	}
	t.Setenv("KASSA_OPS_ADDR", "9090")
	serveRefused(t, 2, "KASSA_OPS_ADDR", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0")
}

// TestOpsAddrInUseFailsTheStart: an operations listener that cannot bind is
// a failed start that says which address, not a server running without
// the endpoints its monitoring scrapes.
func TestOpsAddrInUseFailsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, out, errb := runBounded(t, "serve", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
		"--ops-addr", taken.Addr().String())
	if code != 1 || strings.Contains(out, "listening") || !strings.Contains(errb, "--ops-addr") ||
		!strings.Contains(errb, "address already in use") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// TestOpsBannerNamesBackupOnlyWhenServed: the start's line about the
// operations listener named /backup whether --backup-token was given or
// not, while without it /backup answers 404.
func TestOpsBannerNamesBackupOnlyWhenServed(t *testing.T) {
	for _, token := range []string{"", "backup-token-0123456789abcdef"} {
		t.Setenv("KASSA_BACKUP_TOKEN", token)
		pr, pw := io.Pipe()
		var errb lockedBuffer
		done := make(chan int, 1)
		go func() {
			code := run([]string{"serve", "--log-level", "error", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"}, pw, &errb)
			pw.Close()
			done <- code
		}()
		var banner string
		lines := bufio.NewScanner(pr)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "operations") {
				banner = lines.Text()
			}
			if strings.Contains(lines.Text(), "listening on ") {
				break
			}
		}
		go io.Copy(io.Discard, pr)
		stopInProcess(t, done)
		if banner == "" {
			t.Fatalf("token %q: no line about the operations listener: %s", token, errb.String())
		}
		if strings.Contains(banner, "/backup") != (token != "") {
			t.Errorf("token %q: %s", token, banner)
		}
	}
}
