package main

import (
	"bufio"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalCutsTheGraceShort: SIGTERM waits up to 30 s for the
// requests in flight; a second SIGTERM closes them at once and the server
// exits, cleanly, instead of the second signal being ignored while a stuck
// client holds the shutdown.
func TestSecondSignalCutsTheGraceShort(t *testing.T) {
	dir, bin := buildKassa(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--client-id", "demo", "--client-secret", "demo-secret-123")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	defer func() {
		cmd.Process.Kill()
	}()
	var addr string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on http://"); ok {
			addr, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if addr == "" {
		t.Fatalf("server did not start: %s", stderr.String())
	}
	go func() {
		for lines.Scan() {
		}
		done <- cmd.Wait()
	}()

	// A request whose body never finishes: the server waits for it (up to
	// its read timeout) before a graceful shutdown can end. Its "100
	// Continue" says the server has taken the connection and is reading the
	// body, so the shutdown below must wait for it.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /oauth/token HTTP/1.1\r\nHost: kassa\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
		"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 100 ") {
		t.Fatalf("waiting for 100 Continue: %q %v", status, err)
	}
	if _, err := conn.Write([]byte("grant_type")); err != nil {
		t.Fatal(err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, func() bool { return strings.Contains(stderr.String(), `"msg":"shutting down"`) }, "the first signal to be taken")
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after the second signal: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the server did not stop after two signals:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "second signal") {
		t.Fatalf("the second signal did not cut the grace short (the server waited it out):\n%s", stderr.String())
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
