package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestServeWaitsForTheDatabaseToComeUp: started with PostgreSQL not yet
// listening (an orchestrator starting both at once), serve tries again with
// backoff, logging each failed attempt, and starts once it answers; one that
// never answers ends the start after --start-timeout with a clear message.
// Before, serve exited 1 at the first refused connection.
//
// The database's port is held, bound and refusing, until the test listens
// on it (refusingAddr): one closed to be listened on again a few seconds
// later could be taken meanwhile by any process on the machine. It comes up
// once serve has logged a refused attempt, however long a loaded machine
// takes to make one, not after a second that serve may not have used.
func TestServeWaitsForTheDatabaseToComeUp(t *testing.T) {
	db := pgtest.FreshSchema(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	addr, listen := refusingAddr(t) // refused until the "database" comes up below
	u.Host = addr

	dir := t.TempDir()
	args := func(name, timeout string) []string {
		return []string{"serve", "--store", "postgres", "--database-url", u.String(), "--data", filepath.Join(dir, name),
			"--addr", "127.0.0.1:0", "--start-timeout", timeout}
	}

	var out, errb bytes.Buffer
	start := time.Now()
	code := run(args("never", "2s"), &out, &errb)
	took := time.Since(start)
	if code != 1 || !strings.Contains(errb.String(), "could not be reached within 2s") || !strings.Contains(errb.String(), "connection refused") {
		t.Errorf("database never up: exit %d after %v, %s", code, took, errb.String())
	}
	// The upper bound tells the 2s given from the 1m default, generously:
	// a shared CI machine may stall the retries for seconds, which is no
	// failure of the rule.
	if took < 1500*time.Millisecond || took > 30*time.Second {
		t.Errorf("database never up: gave up after %v, want 2s (well before the 1m default)", took)
	}
	// Every failed attempt is logged but the last, or it too when the pause
	// after it ran past the deadline. How many fit in 2 s is the machine's:
	// a stall may leave one.
	var attempts int
	if _, after, ok := strings.Cut(errb.String(), "(--start-timeout), "); ok {
		fmt.Sscanf(after, "%d attempts", &attempts)
	}
	if n := strings.Count(errb.String(), "database not reachable yet"); attempts < 1 || n < attempts-1 || n > attempts {
		t.Errorf("database never up: %d attempts logged of %d made:\n%s", n, attempts, errb.String())
	}

	var sout, serr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(args("late", "30s"), &sout, &serr) }()
	seen := func(b *lockedBuffer, s string) func() bool {
		return func() bool {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d before %q:\n%s", code, s, serr.String())
			default:
			}
			return strings.Contains(b.String(), s)
		}
	}
	waitFor(t, seen(&serr, "database not reachable yet"), "serve's first attempt, refused")
	ln, err := listen() // the database comes up
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(d, c); d.Close() }()
			go func() { io.Copy(c, d); c.Close() }()
		}
	}()
	waitFor(t, seen(&sout, "listening on"), "serve to start once the database answers")
	stopInProcess(t, done)
}

// TestStartGivesUpWithTheDatabasesAnswerAfterAStall: the last attempt
// goes a moment before the start's deadline, so that the error reported is
// the database's; a pause that overran the deadline (a stalled machine)
// then made an attempt fail on the deadline alone, before dialing, and the
// start ended "did not complete within 2s: postgres: context deadline
// exceeded", the message of a wait for another replica's migration, without
// the database's refusal or the attempts made. The pause here oversleeps as
// a loaded machine does.
func TestStartGivesUpWithTheDatabasesAnswerAfterAStall(t *testing.T) {
	defer func(p func(time.Duration)) { startPause = p }(startPause)
	startPause = func(d time.Duration) { time.Sleep(d + 300*time.Millisecond) }
	addr, _ := refusingAddr(t)
	var logb lockedBuffer
	_, err := openStore(context.Background(), "postgres", t.TempDir(), "postgres://kassa@"+addr+"/kassa", time.Now, 0, 0,
		slog.New(slog.NewJSONHandler(&logb, nil)), time.Second)
	logged := strings.Count(logb.String(), "database not reachable yet")
	// Every attempt is logged but the last, unless a slow machine left no
	// time for another after it (the start gives up on its own clock, then
	// logging it too): either count, never a migration's timeout.
	var attempts int
	if err != nil {
		if _, after, ok := strings.Cut(err.Error(), "(--start-timeout), "); ok {
			fmt.Sscanf(after, "%d attempts", &attempts)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "could not be reached within 1s (--start-timeout), ") ||
		attempts != logged && attempts != logged+1 || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("after %d attempts logged: %v; want the database's refusal, and the attempts", logged, err)
	}
}

// refusingAddr holds a port of 127.0.0.1 bound and not listening: the
// kernel refuses connections to it, as to a database not started yet, and
// no other process can take it meanwhile, as it can a port closed to be
// listened on again later. listen starts listening on it.
func refusingAddr(t *testing.T) (addr string, listen func() (net.Listener, error)) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "refusing")
	t.Cleanup(func() { f.Close() })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	listen = func() (net.Listener, error) {
		if err := syscall.Listen(fd, 128); err != nil {
			return nil, err
		}
		return net.FileListener(f) // a copy of fd, closed apart
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), listen
}
