package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownDelayDrains: with --shutdown-delay, SIGTERM first turns
// /readyz to 503 "draining" while every other request is still answered,
// each with its connection closed after it (so a balancer's pooled
// connections move to other replicas), and the server stops listening only
// once the delay is over.
func TestShutdownDelayDrains(t *testing.T) {
	for _, bad := range []string{"-1s", "5m1s", "ten", ""} {
		serveRefused(t, 2, "--shutdown-delay", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--shutdown-delay", bad)
	}
	const delay = 3 * time.Second
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0",
		"--client-id", "demo", "--client-secret", "demo-secret-123", "--shutdown-delay", delay.String())
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s while draining: %v", path, err)
		}
		defer resp.Body.Close()
		var body map[string]any
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &body)
		return resp, body
	}
	if resp, body := get("/readyz"); resp.StatusCode != 200 || body["status"] != "ready" || resp.Close {
		t.Fatalf("before the signal: /readyz %d %v, connection closed %v", resp.StatusCode, body, resp.Close)
	}

	signalled := time.Now()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitFor(t, func() bool {
		resp, body := get("/readyz")
		return resp.StatusCode == http.StatusServiceUnavailable && body["status"] == "draining"
	}, "/readyz to answer draining")
	// An API request is served in full, and its connection is not kept.
	resp, err := client.PostForm(base+"/oauth/token", map[string][]string{
		"grant_type": {"client_credentials"}, "client_id": {"demo"}, "client_secret": {"demo-secret-123"}})
	if err != nil {
		t.Fatalf("a request while draining: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "access_token") || !resp.Close {
		t.Fatalf("a request while draining: %d %s, connection closed %v", resp.StatusCode, b, resp.Close)
	}
	if resp, _ := get("/healthz"); resp.StatusCode != 200 {
		t.Fatalf("/healthz while draining: %d", resp.StatusCode)
	}
	select {
	case code := <-done:
		t.Fatalf("stopped (exit %d) %v after the signal, within the %v delay", code, time.Since(signalled), delay)
	case <-time.After(time.Until(signalled.Add(delay - 500*time.Millisecond))):
	}
	waitStopped(t, done, "its shutdown delay")
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Fatal("still listening after the stop")
	}
}

// signalAndWaitDraining sends SIGTERM to the serve of serveInProcess at
// base and waits for its /readyz to answer draining.
func signalAndWaitDraining(t *testing.T, base string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitFor(t, func() bool {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "/readyz to answer draining")
}

// TestSecondSignalEndsTheShutdownDelay: an operator who signals again does
// not wait out a long delay; the stop then goes on as without one.
func TestSecondSignalEndsTheShutdownDelay(t *testing.T) {
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--shutdown-delay", "5m")
	signalAndWaitDraining(t, base)
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitStopped(t, done, "a second signal during a 5 min delay")
}

// TestShutdownDelayOverHTTP2: with --tls-cert the API speaks HTTP/2, whose
// connections Go's server does not close when idle (golang/go#26303): one
// open at the signal carries one more request, and is then told to go away,
// so that every later request comes on a connection of its own.
func TestShutdownDelayOverHTTP2(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	base, done := serveInProcess(t, "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile, "--shutdown-delay", "5m")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// get answers /readyz's status and whether the request came on a new
	// connection.
	get := func() (int, bool) {
		t.Helper()
		fresh := false
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { fresh = !i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base+"/readyz", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, fresh
	}
	if code, fresh := get(); code != 200 || !fresh {
		t.Fatalf("before the signal: %d, new connection %v", code, fresh)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	// The connection idle at the signal serves on until its next answer.
	waitFor(t, func() bool { code, _ := get(); return code == http.StatusServiceUnavailable }, "/readyz to answer draining")
	// One more on it: /readyz may have said draining a moment before
	// keep-alive went off.
	get()
	for i := range 3 {
		if code, fresh := get(); code != http.StatusServiceUnavailable || !fresh {
			t.Fatalf("request %d after the drain began: %d, new connection %v", i, code, fresh)
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitStopped(t, done, "a second signal")
}

// failingListener accepts until fail is closed, then fails every Accept, as
// a listener whose socket broke does.
type failingListener struct {
	net.Listener
	fail chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	type accepted struct {
		c   net.Conn
		err error
	}
	got := make(chan accepted, 1)
	go func() { c, err := l.Listener.Accept(); got <- accepted{c, err} }()
	select {
	case a := <-got:
		return a.c, a.err
	case <-l.fail:
		return nil, errors.New("accept: the listener broke")
	}
}

// TestListenerFailingDuringTheDelayEndsIt: a listener that fails while the
// server drains ends the delay (nothing more comes in), and serve exits 1
// after its graceful stop, as it does for such a failure outside the delay.
func TestListenerFailingDuringTheDelayEndsIt(t *testing.T) {
	fail := make(chan struct{})
	listenTCP = func(addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		return &failingListener{Listener: l, fail: fail}, err
	}
	defer func() { listenTCP = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) } }()
	base, done := serveInProcess(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--shutdown-delay", "5m")
	signalAndWaitDraining(t, base)
	close(fail)
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("exit %d after the listener failed while draining, want 1", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a listener failing did not end the 5 min delay")
	}
}
