package main

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestServeWaitsForTheDatabaseToComeUp: started with PostgreSQL not yet
// listening (an orchestrator starting both at once), serve tries again with
// backoff, logging each failed attempt, and starts once it answers; one that
// never answers ends the start after --start-timeout with a clear message.
// Before, serve exited 1 at the first refused connection.
func TestServeWaitsForTheDatabaseToComeUp(t *testing.T) {
	db := pgtest.FreshSchema(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	ln.Close() // refused until the "database" comes up below

	dir := t.TempDir()
	args := func(name, timeout string) []string {
		return []string{"serve", "--store", "postgres", "--database-url", u.String(), "--data", filepath.Join(dir, name),
			"--addr", "127.0.0.1:0", "--start-timeout", timeout}
	}

	var out, errb bytes.Buffer
	start := time.Now()
	code := run(args("never", "2s"), &out, &errb)
	took := time.Since(start)
	if code != 1 || !strings.Contains(errb.String(), "could not be reached within 2s") {
		t.Errorf("database never up: exit %d after %v, %s", code, took, errb.String())
	}
	// The upper bound tells the 2s given from the 1m default, generously:
	// a shared CI machine may stall the retries for seconds, which is no
	// failure of the rule.
	if took < 1500*time.Millisecond || took > 30*time.Second {
		t.Errorf("database never up: gave up after %v, want 2s (well before the 1m default)", took)
	}
	if n := strings.Count(errb.String(), "database not reachable yet"); n < 2 {
		t.Errorf("database never up: %d attempts logged, want several:\n%s", n, errb.String())
	}

	// The database comes up a second after serve starts.
	go func() {
		time.Sleep(time.Second)
		ln, err := net.Listen("tcp", u.Host)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { ln.Close() })
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
	_, done := serveInProcess(t, args("late", "30s")[1:]...)
	stopInProcess(t, done)
}
