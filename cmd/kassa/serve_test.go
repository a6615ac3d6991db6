package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestHelpFlagSucceeds: -h and --help print the flags and exit 0, as
// "kassa help" does, instead of the usage error code 2.
func TestHelpFlagSucceeds(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"}, {"serve", "-h"}, {"settle", "--help"}, {"companies", "import", "-h"},
	} {
		if code, _, errb := runBounded(t, args...); code != 0 || !strings.Contains(errb, "-data") {
			t.Errorf("%v: exit %d, output %q", args, code, errb)
		}
	}
	if code, _, _ := runBounded(t, "serve", "--no-such-flag"); code != 2 {
		t.Errorf("serve with an unknown flag: exit %d, want 2", code)
	}
}

// TestUsageShowsNoSecret: the flags' usage, printed by -h, "kassa help" and
// every mistyped flag (to a stderr that goes to the logs), shows no secret
// taken from the environment as a flag's default, only that one is set.
func TestUsageShowsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"KASSA_CLIENT_SECRET":  "EnvClientSecret-1234",
		"KASSA_BACKUP_TOKEN":   "EnvBackupToken-0123456789abcdef",
		"KASSA_WEBHOOK_SECRET": "EnvWebhookSecret-0123456789ab",
		"KASSA_DATABASE_URL":   "postgres://kassa:EnvDatabasePassword@127.0.0.1/kassa",
		// Refused at start, with the password shown as xxxxx; the usage must
		// not show it whole either.
		"KASSA_BASE_URL":    "https://u:EnvBaseURLPassword@pay.example.com",
		"KASSA_WEBHOOK_URL": "https://u:EnvWebhookURLPassword@merchant.example/hooks",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	for _, args := range [][]string{
		{"serve", "--help"}, {"serve", "--no-such-flag"}, {"help"}, {"settle", "-h"}, {"settle", "--no-such-flag"},
	} {
		_, out, errb := runBounded(t, args...)
		all := out + errb
		for _, v := range []string{"EnvClientSecret", "EnvBackupToken", "EnvWebhookSecret", "EnvDatabasePassword", "EnvBaseURLPassword", "EnvWebhookURLPassword"} {
			if strings.Contains(all, v) {
				t.Errorf("%v shows %s: %s", args, v, all)
			}
		}
		if !strings.Contains(all, `(default "xxxxx")`) {
			t.Errorf("%v does not say the secrets are set: %s", args, all)
		}
	}
}

// TestBadTLSPairFailsBeforeListening: an unreadable certificate stops the
// start before the store opens and before "listening" is announced.
func TestBadTLSPairFailsBeforeListening(t *testing.T) {
	dir := t.TempDir()
	code, out, errb := runBounded(t, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "missing.crt"), "--tls-key", filepath.Join(dir, "missing.key"))
	if code != 1 || strings.Contains(out, "listening") || !strings.Contains(errb, "--tls-cert") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("data directory made before the TLS pair was checked: %v", err)
	}
}

// TestServesHTTPS: a good pair serves HTTPS with that certificate (and a
// start clears what an earlier crash left of its file writes).
func TestServesHTTPS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	// A key write that a crash cut short left its temporary file: the start removes it.
	leftover := filepath.Join(dir, "data", ".server.key.12345")
	if err := os.MkdirAll(filepath.Dir(leftover), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(leftover, old, old)
	base, done := serveInProcess(t, "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover temporary file still there: %v", err)
	}
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base %q", base)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "kassa-test" {
		t.Fatalf("status %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	stopInProcess(t, done)
}

// serveInProcess runs serve with args in this process until stopInProcess,
// and returns its base URL once it listens.
func serveInProcess(t *testing.T, args ...string) (string, chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(append([]string{"serve", "--log-level", "error"}, args...), pw, &errb)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	base := ""
	for base == "" && lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		t.Fatalf("serve %v did not start: exit %d, %s", args, <-done, errb.String())
	}
	return base, done
}

// stopInProcess sends SIGTERM, which every serve running in this process
// receives (each listens for it before it announces its address, so the
// signal never reaches the test process's default handler), and waits for
// the servers of dones to exit cleanly.
func stopInProcess(t *testing.T, dones ...chan int) {
	t.Helper()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	for _, done := range dones {
		waitStopped(t, done, "SIGTERM")
	}
}

// waitStopped waits up to 30 s for a serve of serveInProcess to exit, and
// fails the test unless it exits 0.
func waitStopped(t *testing.T, done chan int, after string) {
	t.Helper()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after %s", code, after)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop after %s", after)
	}
}

// TestReplicasShareTheSigningKey: two replicas on one PostgreSQL database,
// neither given KASSA_KEY, accept each other's access tokens (they sign with
// the key the first one recorded); a third with another KASSA_KEY is refused.
func TestReplicasShareTheSigningKey(t *testing.T) {
	t.Setenv("KASSA_KEY", "")
	db := pgtest.FreshSchema(t)
	dir := t.TempDir()
	replica := func(name string) []string {
		return []string{"--store", "postgres", "--database-url", db, "--data", filepath.Join(dir, name), "--addr", "127.0.0.1:0",
			"--client-id", "shared", "--client-secret", "shared-secret-123"}
	}
	baseA, doneA := serveInProcess(t, replica("a")...)
	baseB, doneB := serveInProcess(t, replica("b")...)
	a := &client{t: t, base: baseA}
	a.token("shared", "shared-secret-123")
	b := &client{t: t, base: baseB, bearer: a.bearer}
	b.do("GET", "/v1/orders?size=1", "", "", 200, nil)

	t.Setenv("KASSA_KEY", strings.Repeat("ab", 32))
	if code, _, errb := runBounded(t, append([]string{"serve"}, replica("c")...)...); code != 1 || !strings.Contains(errb, "KASSA_KEY") {
		t.Errorf("replica with another KASSA_KEY: exit %d, %s", code, errb)
	}
	stopInProcess(t, doneA, doneB)
}

func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kassa-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestHeaderBlockBounded: a request's headers are bounded at 64 KiB (431
// past it), so an unfinished request cannot hold Go's default megabyte.
func TestHeaderBlockBounded(t *testing.T) {
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0")
	defer stopInProcess(t, done)
	for _, c := range []struct{ size, want int }{{8 << 10, 200}, {100 << 10, 431}} {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", c.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("header of %d bytes: %d, want %d", c.size, resp.StatusCode, c.want)
		}
	}
}

// TestConnectionsCapped: past --max-connections, a new connection waits to
// be accepted (it is not refused) while every open one is busy with a
// request; a connection idle between requests is closed to make room, at
// once or as soon as one goes idle; and the server still stops at once
// while it is at the cap.
func TestConnectionsCapped(t *testing.T) {
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--max-connections", "2")
	stopped := false
	defer func() {
		if !stopped {
			stopInProcess(t, done)
		}
	}()
	addr := strings.TrimPrefix(base, "http://")
	send := func(text string) net.Conn { return dialWriting(t, addr, text) }
	// get sends a request on a new connection and returns the answer's
	// status within d, or 0 if none came.
	get := func(d time.Duration) (net.Conn, *bufio.Reader, int) {
		conn := send("GET /healthz HTTP/1.1\r\nHost: kassa\r\n\r\n")
		rd := bufio.NewReader(conn)
		return conn, rd, status(conn, rd, d)
	}
	// busy opens a connection that has sent part of a request: it holds
	// its slot until the request is finished or the connection closed.
	busy := func() net.Conn { return send("GET /healthz HTTP/1.1\r\n") }
	closedByServer := func(conn net.Conn, rd *bufio.Reader) bool {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := rd.ReadByte()
		return errors.Is(err, io.EOF)
	}
	first, second := busy(), busy()
	third, rd3, code := get(500 * time.Millisecond)
	if code != 0 {
		t.Fatalf("a third connection past the cap of two busy ones was served: %d", code)
	}
	// The second finishes its request and goes idle: it gives way to the
	// third, which was waiting.
	if _, err := io.WriteString(second, "Host: kassa\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rd2 := bufio.NewReader(second)
	if code := status(second, rd2, 5*time.Second); code != 200 {
		t.Fatalf("the second connection's request: %d", code)
	}
	if code := status(third, rd3, 5*time.Second); code != 200 {
		t.Fatalf("the third connection once the second went idle: %d", code)
	}
	if !closedByServer(second, rd2) {
		t.Fatal("the idle second connection was not closed to make room")
	}
	// The third is idle now, the first still busy: a fourth is served at
	// once, in the idle one's place.
	if _, _, code := get(5 * time.Second); code != 200 {
		t.Fatalf("a fourth connection with an idle one at the cap: %d", code)
	}
	if !closedByServer(third, rd3) {
		t.Fatal("the idle third connection was not closed to make room")
	}
	first.Close()
	// Connections are open, one idle: the server must not wait for a slot to
	// stop accepting.
	stopped = true
	stopInProcess(t, done)
}

// TestSilentConnectionsMakeRoom: at the cap, a connection that has sent
// nothing since it was accepted a while ago (a port scan, a balancer's
// pre-opened connections, a flood of them) is closed to make room, as an
// idle one is. Before, it held its slot until ReadHeaderTimeout (10 s), so
// that --max-connections silent connections, opened anew each time, kept
// every client out. A connection busy with a request keeps its slot.
func TestSilentConnectionsMakeRoom(t *testing.T) {
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--max-connections", "2")
	defer stopInProcess(t, done)
	addr := strings.TrimPrefix(base, "http://")
	dial := func(text string) net.Conn { return dialWriting(t, addr, text) }
	busy := dial("GET /healthz HTTP/1.1\r\n")
	silent := dial("")
	// Well within ReadHeaderTimeout, which alone closed the silent one before.
	third := dial("GET /healthz HTTP/1.1\r\nHost: kassa\r\n\r\n")
	if code := status(third, bufio.NewReader(third), 5*time.Second); code != 200 {
		t.Fatalf("a connection past the cap of a busy and a silent one: %d, want 200 at once", code)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the silent connection was not closed to make room: %v", err)
	}
	if _, err := io.WriteString(busy, "Host: kassa\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if code := status(busy, bufio.NewReader(busy), 5*time.Second); code != 200 {
		t.Fatalf("the busy connection's request: %d", code)
	}
}

// dialWriting opens a connection to addr, which stays open until the test
// ends, and writes text on it.
func dialWriting(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, text); err != nil {
		t.Fatal(err)
	}
	return conn
}

// status reads one answer on conn within d: its status, or 0 if none came.
func status(conn net.Conn, rd *bufio.Reader, d time.Duration) int {
	conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMaxConnectionsChecked: a cap below one, or a KASSA_MAX_CONNECTIONS
// that is no number, stops the start with a usage error.
func TestMaxConnectionsChecked(t *testing.T) {
	for _, c := range []struct{ env, flag string }{{"", "0"}, {"", "-1"}, {"many", ""}} {
		t.Setenv("KASSA_MAX_CONNECTIONS", c.env)
		args := []string{"serve", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0"}
		if c.flag != "" {
			args = append(args, "--max-connections", c.flag)
		}
		if code, _, errb := runBounded(t, args...); code != 2 || !strings.Contains(errb, "--max-connections (KASSA_MAX_CONNECTIONS)") {
			t.Errorf("env %q, flag %q: exit %d, %s", c.env, c.flag, code, errb)
		}
	}
}

// TestStrayArgumentsRefused: "--sandbox false" leaves "false" as an argument,
// and the flag parser stops there; serve and settle refuse it instead of
// running with the sandbox on and the flags after it ignored (here the
// --store postgres that would have been meant).
func TestStrayArgumentsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--sandbox", "false", "--store", "postgres"},
		{"serve", "--addr", "127.0.0.1:0", "extra"},
		{"settle", "extra"},
	} {
		dir := t.TempDir()
		args = append(args[:1:1], append([]string{"--data", filepath.Join(dir, "data")}, args[1:]...)...)
		code, out, errb := runBounded(t, args...)
		if code != 2 || strings.Contains(out, "listening") || !strings.Contains(errb, "unexpected argument") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errb)
		}
		if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
			t.Errorf("%v: data directory made for a command line that was refused: %v", args, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer a running server may write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBadBaseURLRefused: links are the base URL with a path appended, so a
// base they cannot be made from stops the start instead of serving broken
// checkout and document links; a base with a path prefix is fine.
func TestBadBaseURLRefused(t *testing.T) {
	for _, bad := range []string{"pay.example.com", "not a url", "ftp://pay.example.com", "https://",
		"https://pay.example.com/?a=1", "https://pay.example.com/#top", "https://u:p@pay.example.com", "https:pay.example.com"} {
		serveRefused(t, 2, "--base-url", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--base-url", bad)
	}
	// The start line names where the process listens, and the base URL
	// (taken without its trailing slash) beside it.
	var out lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--log-level", "error", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
			"--base-url", "https://pay.example.com/kassa/"}, &out, io.Discard)
	}()
	var line string
	waitFor(t, func() bool { line = out.String(); return strings.Contains(line, "listening on") }, "the start line")
	stopInProcess(t, done)
	if !strings.Contains(line, "listening on http://127.0.0.1:") || !strings.Contains(line, "(base URL https://pay.example.com/kassa, data ") {
		t.Fatalf("start line %q", line)
	}
}

// TestBadBaseURLRefusalHidesItsPassword: the refusal of a base URL that
// carries credentials names the flag and the URL without its password, as
// stderr goes to a log, whether the URL parses or not.
func TestBadBaseURLRefusalHidesItsPassword(t *testing.T) {
	for _, bad := range []string{"https://u:hunter2pw@pay.example.com", "https://u:hunter2pw%zz@pay.example.com", "https://u:hunter2pw@pay.example.com/?a=1",
		// Without "//" the user info parses as an opaque part, which
		// url.URL.Redacted leaves as it is.
		"u:hunter2pw@pay.example.com", "http:u:hunter2pw@pay.example.com", "https//u:hunter2pw@pay.example.com"} {
		code, out, errb := runBounded(t, "serve", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--base-url", bad)
		if code != 2 || !strings.Contains(errb, "--base-url") || strings.Contains(errb+out, "hunter2pw") {
			t.Errorf("--base-url %s: exit %d, %s", bad, code, errb)
		}
	}
}

// TestEmptyAddrRefused: KASSA_ADDR set but empty (a template that expanded to
// nothing) is refused, instead of listening on every interface at a random
// port where the default listens on the loopback only.
func TestEmptyAddrRefused(t *testing.T) {
	t.Setenv("KASSA_ADDR", "")
	serveRefused(t, 2, "--addr", "--data", filepath.Join(t.TempDir(), "data"))
}

// TestBadAddrRefusedFirst: an --addr that is no host:port with a numeric
// port is a usage error, refused (exit 2) before the data directory, its
// key and an empty store are made, as --ops-addr's is. It failed only at
// the listen, exit 1, with the directory made; and net.Listen took a
// service name, so "localhost:http" served on port 80.
func TestBadAddrRefusedFirst(t *testing.T) {
	for _, bad := range []string{"8080", "localhost", "127.0.0.1:99999", "localhost:http", " 127.0.0.1:8080", "127.0.0.1:-1"} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, "--addr", "--data", data, "--addr", bad)
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--addr %q: the data directory was made before the refusal", bad)
		}
	}
	t.Setenv("KASSA_ADDR", "localhost")
	serveRefused(t, 2, "KASSA_ADDR", "--data", filepath.Join(t.TempDir(), "data"))
}

// TestSecondServerOnOneDataDirectory: a second serve on a data directory a
// running one holds says so and exits, rather than answering a bare
// "timeout" (or waiting for the file lock for ever).
func TestSecondServerOnOneDataDirectory(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, first := serveInProcess(t, "--data", data, "--addr", "127.0.0.1:0")
	defer stopInProcess(t, first)
	serveRefused(t, 1, "in use by another process", "--data", data, "--addr", "127.0.0.1:0")
}

// TestIdempotencyTTLFlag: the retention of Idempotency-Keys is configurable
// (design.md) within bounds: under an hour a retried capture could run twice.
func TestIdempotencyTTLFlag(t *testing.T) {
	for _, bad := range []string{"10m", "721h", "-24h", "a day", ""} {
		serveRefused(t, 2, "--idempotency-ttl", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--idempotency-ttl", bad)
	}
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--idempotency-ttl", "72h")
	stopInProcess(t, done)
}

// TestNotificationRetentionFlag: the delivery log's retention is
// configurable within bounds (docs/notifications.md).
func TestNotificationRetentionFlag(t *testing.T) {
	for _, bad := range []string{"1h", "87601h", "-720h", "a month", ""} {
		serveRefused(t, 2, "--notification-retention", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--notification-retention", bad)
	}
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--notification-retention", "2160h")
	stopInProcess(t, done)
}

// TestAuthorizationRetentionFlag: how long an authorization token is kept
// past its expiry is configurable within bounds, never below the
// Idempotency-Key's retention (docs/decisions.md), and the periodic sweep
// keeps to it: a token 50 h past its expiry is removed under a retention of
// 48 h (the default keeps it 720 h, answering authorization_token_expired).
func TestAuthorizationRetentionFlag(t *testing.T) {
	for _, bad := range [][]string{{"30m"}, {"87601h"}, {"-720h"}, {"a month"}, {""},
		{"23h"}, {"48h", "--idempotency-ttl", "72h"}} {
		serveRefused(t, 2, "--authorization-retention", append([]string{"--data", filepath.Join(t.TempDir(), "data"),
			"--addr", "127.0.0.1:0", "--authorization-retention"}, bad...)...)
	}
	// As long as the key's retention is the shortest taken.
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
		"--authorization-retention", "72h", "--idempotency-ttl", "72h")
	stopInProcess(t, done)
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--data", data, "--addr", "127.0.0.1:0", "--client-id", "demo", "--client-secret", "demo-secret-123"}
	base, done := serveInProcess(t, args...)
	c := &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	var mint struct{ AuthorizationToken string }
	c.do("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"}}`, "", 201, &mint)
	c.do("POST", "/sandbox/v1/clock", `{"advance":"51h"}`, "", 200, nil) // the token's hour, and 50 h past it
	order := "/v1/authorization-tokens/" + mint.AuthorizationToken + "/order"
	body := `{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":100}`
	c.do("POST", order, body, "", 409, nil)
	stopInProcess(t, done)

	// A restart runs the periodic pass at once, on the clock moved above.
	base, done = serveInProcess(t, append(args, "--authorization-retention", "48h")...)
	defer stopInProcess(t, done)
	c = &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp := c.raw("POST", order, body, "")
		resp.Body.Close()
		if resp.StatusCode == 404 {
			break
		}
		if resp.StatusCode != 409 || time.Now().After(deadline) {
			t.Fatalf("a token 50 h past its expiry under a retention of 48 h: %d; want it removed (404)", resp.StatusCode)
		}
	}
}

// TestStoreTimeoutFlag: how long a request may wait for the store is
// configurable within bounds: under a second ordinary contention would fail
// requests, over 30 s an answer could miss the write timeout.
func TestStoreTimeoutFlag(t *testing.T) {
	for _, bad := range []string{"500ms", "31s", "0", "-5s", "ten", ""} {
		serveRefused(t, 2, "--store-timeout", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--store-timeout", bad)
	}
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--store-timeout", "3s")
	stopInProcess(t, done)
}

// TestMaxBodyFlag: the body cap (1 MiB by default) can be raised, since 1000
// order lines of long non-ASCII text can pass it while every field is within
// its bounds; values outside 1–64 MiB are refused.
func TestMaxBodyFlag(t *testing.T) {
	for _, bad := range []string{"0", "65", "-1", "big"} {
		serveRefused(t, 2, "max-body-mb", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--max-body-mb", bad)
	}
	body := bytes.Repeat([]byte(" "), 3<<19) // 1.5 MiB
	post := func(base string) int {
		t.Helper()
		resp, err := http.Post(base+"/v1/orders/x/capture", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0")
	code := post(base)
	stopInProcess(t, done)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("1.5 MiB body at the default cap: %d, want 413", code)
	}
	base, done = serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--max-body-mb", "2")
	code = post(base)
	stopInProcess(t, done)
	if code == http.StatusRequestEntityTooLarge {
		t.Errorf("1.5 MiB body with --max-body-mb 2: 413")
	}
}

// TestBodyMemoryFlag: the budget of request bodies held at once is 1 MiB
// to 1048576 MiB; a body larger than it is served alone, so it may be below
// --max-body-mb.
func TestBodyMemoryFlag(t *testing.T) {
	for _, bad := range []string{"0", "-1", "1048577", "lots"} {
		serveRefused(t, 2, "body-memory-mb", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--body-memory-mb", bad)
	}
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--body-memory-mb", "1", "--max-body-mb", "2")
	stopInProcess(t, done)
}

// serveRefused runs serve with args and wants it to exit at once with code,
// saying want on stderr, instead of serving (then it is stopped).
func serveRefused(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, _, stderr := runBounded(t, append([]string{"serve"}, args...)...)
	if got != code || !strings.Contains(stderr, want) {
		t.Errorf("serve %q: exit %d, %s; want %d naming %s", args, got, stderr, code, want)
	}
}

// runBounded runs the command line args in this process and returns its exit
// code and output. A command meant to stop at once (a refused flag, --help)
// that starts serving instead would run until go test's own timeout, minutes
// later and naming no test; here it is stopped and the test fails at once.
// The bound is only there to turn such a hang into a failure, and is
// generous: a loaded machine takes seconds, not a minute, to refuse.
func runBounded(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(args, &out, &errb) }()
	select {
	case code = <-done:
		return code, out.String(), errb.String()
	case <-time.After(time.Minute):
	}
	// SIGTERM is safe to send only once serve listens for it, which it
	// does before it says "listening"; until then it would end the test
	// binary.
	if strings.Contains(out.String(), "listening") {
		stopInProcess(t, done)
		t.Fatalf("%q started serving instead of exiting: %s", args, out.String())
	}
	t.Fatalf("%q still running after a minute, not serving: %s%s", args, out.String(), errb.String())
	return 0, "", ""
}

// TestShortClientSecretRefused: --client-secret guards the merchant it
// names (with --sandbox=false, a real one), so a secret a few guesses find
// is refused at start; README's example passes.
func TestShortClientSecretRefused(t *testing.T) {
	for _, bad := range []string{"b", "secret", "elevenchars"} {
		serveRefused(t, 2, "--client-secret", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
			"--client-id", "demo", "--client-secret", bad)
	}
	t.Setenv("KASSA_CLIENT_SECRET", "s1")
	serveRefused(t, 2, "KASSA_CLIENT_SECRET", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--client-id", "demo")
	_, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
		"--client-id", "demo", "--client-secret", "demo-secret-123")
	stopInProcess(t, done)
}

// TestBadStoreRefusedFirst: an unknown --store, or postgres without a URL,
// is a usage error (exit 2) found before anything is written, not a failure
// to open the store after the data directory and its key were made.
func TestBadStoreRefusedFirst(t *testing.T) {
	t.Setenv("KASSA_DATABASE_URL", "")
	for _, args := range [][]string{{"--store", "bogus"}, {"--store", "postgres"}} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, "--store", append([]string{"--data", data, "--addr", "127.0.0.1:0"}, args...)...)
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve %q left %s behind: %v", args, data, err)
		}
		var out, errb bytes.Buffer
		if code := run(append([]string{"settle", "--data", data}, args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), "--store") {
			t.Errorf("settle %q: exit %d, %s", args, code, errb.String())
		}
	}
}

// TestBadDatabaseURLRefusedFirst: a --database-url that cannot be read (no
// URL or keyword/value string, a password's "@" not written %40) is a usage
// error, refused with exit 2 before anything is written, as a missing one
// is, by serve, settle and store copy alike. It failed only at the open,
// exit 1, after serve had made the data directory and its key. The
// refusal does not show the password.
func TestBadDatabaseURLRefusedFirst(t *testing.T) {
	t.Setenv("KASSA_DATABASE_URL", "")
	src := filepath.Join(t.TempDir(), "src")
	_, done := serveInProcess(t, "--data", src, "--addr", "127.0.0.1:0")
	stopInProcess(t, done)
	for _, bad := range []string{" postgres://kassa@127.0.0.1/db", "postgres://kassa:S3cr@t@127.0.0.1/db", "not a url"} {
		data := filepath.Join(t.TempDir(), "data")
		for _, args := range [][]string{
			{"serve", "--data", data, "--addr", "127.0.0.1:0", "--store", "postgres", "--database-url", bad},
			{"settle", "--data", data, "--store", "postgres", "--database-url", bad},
			{"store", "copy", "--data", src, "--database-url", bad},
		} {
			code, _, stderr := runBounded(t, args...)
			if code != 2 || !strings.Contains(stderr, "--database-url") || strings.Contains(stderr, "S3cr") {
				t.Errorf("%q: exit %d, %s; want 2 naming --database-url, without the password", args, code, stderr)
			}
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--database-url %q: %s made before the refusal", bad, data)
		}
	}
}

// TestWebhookWithoutTopicsRefused: --webhook-url with --webhook-events
// empty (KASSA_WEBHOOK_EVENTS set to nothing by a template) subscribes to no
// topic, so no notification would ever go to the URL while the start looked
// fine; it is refused instead, as an empty KASSA_ADDR is.
func TestWebhookWithoutTopicsRefused(t *testing.T) {
	for _, events := range []string{"", " , "} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, "--webhook-events", "--data", data, "--addr", "127.0.0.1:0",
			"--webhook-url", "http://127.0.0.1:9/hook", "--webhook-events", events)
	}
}

// TestBadWebhookFlagsRefusedFirst: a --webhook-url, topic or secret that
// SetWebhook would refuse is a usage error found before anything is
// written. Refused after the store was made, an empty store kept the
// sandbox merchant whose generated secret that failed start had printed,
// and the next start printed no credentials at all.
func TestBadWebhookFlagsRefusedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"--webhook-url", "ftp://127.0.0.1:9/hook"},
		{"--webhook-url", "http://127.0.0.1:9/hook", "--webhook-events", "order.nope"},
		{"--webhook-url", "http://127.0.0.1:9/hook", "--webhook-secret", "too-short"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, "--webhook-url", append([]string{"--data", data, "--addr", "127.0.0.1:0"}, args...)...)
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("serve %q left %s behind: %v", args, data, err)
		}
	}
}

// TestBadKassaKeyNamesTheRule: KASSA_KEY is refused with README's rule (an
// even number of hex digits, at least 64), not "at least 64" alone, which a
// key of 65 digits or of 64 non-hex characters already has.
func TestBadKassaKeyNamesTheRule(t *testing.T) {
	for _, key := range []string{strings.Repeat("a", 62), strings.Repeat("a", 65), strings.Repeat("g", 64)} {
		t.Setenv("KASSA_KEY", key)
		data := filepath.Join(t.TempDir(), "data")
		code, _, errb := runBounded(t, "serve", "--data", data, "--addr", "127.0.0.1:0")
		if code != 2 || !strings.Contains(errb, "even number of hex digits, at least 64") {
			t.Errorf("KASSA_KEY of %d characters: exit %d, %s", len(key), code, errb)
		}
		// A usage error, found before anything is written.
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("KASSA_KEY of %d characters: the data directory was made (%v)", len(key), err)
		}
	}
}

// TestTrustedProxiesFlag: --trusted-proxies takes networks and addresses,
// and refuses anything else before touching the data directory, naming the
// entry, rather than trusting nothing (or everything) silently.
func TestTrustedProxiesFlag(t *testing.T) {
	got, err := parseTrustedProxies(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,::ffff:198.51.100.1,10.1.2.3/16")
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "fd00::/8", "198.51.100.1/32", "10.1.0.0/16"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parsed %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"10.0.0.0/33", "lb.internal", "10.0.0.0/8;", "*"} {
		data := filepath.Join(t.TempDir(), "data")
		serveRefused(t, 2, bad, "--data", data, "--addr", "127.0.0.1:0", "--trusted-proxies", bad)
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("--trusted-proxies %q: the data directory was made before the refusal", bad)
		}
	}
}

// TestBackupTokenChecked: a --backup-token that is too short, given without
// --ops-addr, or that no request can send stops the start with a usage
// error. HTTP takes the whitespace around a header's value off, and a
// header cannot hold a line break, so a token read from a file with its
// trailing newline (a Kubernetes secret made from "echo token > file")
// made every backup 401 with nothing saying why.
func TestBackupTokenChecked(t *testing.T) {
	const good = "backup-token-0123456789abcdef"
	for _, c := range []struct{ token, ops, want string }{
		{"short-token", "127.0.0.1:0", "at least 24"},
		{"backup-token-0123456789", "127.0.0.1:0", "at least 24"}, // 23
		{good, "", "--ops-addr"},
		{good + "\n", "127.0.0.1:0", "whitespace"},
		{" " + good, "127.0.0.1:0", "whitespace"},
		{"backup-token\x01-0123456789abcdef", "127.0.0.1:0", "control"},
	} {
		t.Setenv("KASSA_BACKUP_TOKEN", c.token)
		// A bad --store, checked after the token, so that a token let
		// through stops the start too, for another reason.
		args := []string{"serve", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--store", "bogus"}
		if c.ops != "" {
			args = append(args, "--ops-addr", c.ops)
		}
		code, out, errb := runBounded(t, args...)
		if code != 2 || !strings.Contains(errb, "--backup-token (KASSA_BACKUP_TOKEN)") || !strings.Contains(errb, c.want) {
			t.Errorf("token %q, ops %q: exit %d, %s", c.token, c.ops, code, errb)
		}
		if strings.Contains(errb+out, "0123456789abcdef") {
			t.Errorf("token %q: the token is shown: %s", c.token, errb+out)
		}
	}
}

// TestEncryptedTLSKeyNamed: a key encrypted with a password (openssl's
// default when asked for one, in either PEM form) cannot be loaded, as
// kassa asks for no password; the refusal says so, where Go's own error
// only said that the key did not parse.
func TestEncryptedTLSKeyNamed(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := writeSelfSigned(t, dir)
	for name, block := range map[string]*pem.Block{
		"pkcs8":  {Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x00}},
		"legacy": {Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: []byte{1, 2, 3, 4}},
	} {
		keyFile := filepath.Join(dir, name+".key")
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errb := runBounded(t, "serve", "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
			"--tls-cert", certFile, "--tls-key", keyFile)
		if code != 1 || strings.Contains(out, "listening") || !strings.Contains(errb, keyFile+" is encrypted with a password") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errb)
		}
	}
}

// TestEmptyDataRefused: KASSA_DATA set but empty (a template that expanded
// to nothing), or --data "", is a usage error for every command that takes
// it, naming the flag and its variable. serve failed with exit 1 and
// "mkdir : no such file or directory"; settle, store check and store copy
// took the working directory's kassa.db, and companies import wrote into
// the working directory's companies/.
func TestEmptyDataRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("KASSA_DATA", "")
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0"},
		{"settle"},
		{"store", "check"},
		{"store", "copy", "--database-url", "postgres://kassa@127.0.0.1:1/none"},
		{"companies", "import", "--country", "SE", "companies.csv"},
	} {
		if err := os.WriteFile("companies.csv", []byte("companyId,companyName\n5560000001,Foo AB\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runBounded(t, args...)
		if code != 2 || !strings.Contains(stderr, "--data (KASSA_DATA) is empty") {
			t.Errorf("%q: exit %d, %s; want 2 naming --data (KASSA_DATA)", args, code, stderr)
		}
		if _, err := os.Stat("companies"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q wrote into the working directory", args)
			os.RemoveAll("companies")
		}
	}
	code, _, stderr := runBounded(t, "settle", "--data", "")
	if code != 2 || !strings.Contains(stderr, "--data (KASSA_DATA) is empty") {
		t.Errorf("settle --data \"\": exit %d, %s; want 2", code, stderr)
	}
}
