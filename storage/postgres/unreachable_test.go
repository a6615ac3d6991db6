package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnreachableOnlyForWhatWaitingCures: kassa serve tries a database that
// Unreachable calls unreachable again for up to --start-timeout (a minute by
// default), saying it "could not be reached". A refused or closed
// connection, or one cut in the startup (a server going down), may pass; a
// server that answers but refuses TLS where the URL requires it will refuse
// it on every try, and waiting a minute on it only hides the
// misconfiguration. No database is needed: fake servers answer.
func TestUnreachableOnlyForWhatWaitingCures(t *testing.T) {
	serve := func(answer func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
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
				go func() { defer c.Close(); answer(c) }()
			}
		}()
		return ln.Addr().String()
	}
	refusesTLS := serve(func(c net.Conn) {
		io.ReadFull(c, make([]byte, 8)) // SSLRequest
		c.Write([]byte("N"))
		io.Copy(io.Discard, c)
	})
	hangsUp := serve(func(c net.Conn) {})
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}()
	for _, c := range []struct {
		name, url string
		want      bool
	}{
		{"refused", "postgres://kassa@" + closed + "/x?sslmode=disable", true},
		{"cut in the startup", "postgres://kassa@" + hangsUp + "/x?sslmode=disable", true},
		{"TLS refused where required", "postgres://kassa@" + refusesTLS + "/x?sslmode=require", false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Open(ctx, c.url, Options{})
		cancel()
		if err == nil {
			t.Fatalf("%s: opened", c.name)
		}
		if got := Unreachable(err); got != c.want {
			t.Errorf("%s: Unreachable = %v, want %v (%v)", c.name, got, c.want, err)
		}
	}
}

// TestOpenErrorIsOneLine: pgx writes a failed connect as a header and one
// tab-indented line per address and TLS mode tried, so kassa settle, store
// copy and serve's start printed three lines for one failure, and a log
// shipper reading stderr by line cut it into three records, two of them
// without the "kassa:" that says whose. Open's error is one line; the
// error it wraps is still pgx's, for Unreachable and errors.As.
func TestOpenErrorIsOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// sslmode=prefer (the default) tries twice: two lines under pgx's header.
	_, err = Open(ctx, "postgres://kassa@"+closed+"/x", Options{})
	if err == nil {
		t.Fatal("opened")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\t") {
		t.Errorf("Open's error spans lines: %q", msg)
	}
	// The same address refused twice (with TLS, then without) is said once.
	if !strings.Contains(msg, "failed to connect") || strings.Count(msg, "connection refused") != 1 || !strings.HasPrefix(msg, "postgres: ") {
		t.Errorf("Open's error lost what pgx said: %q", msg)
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || !Unreachable(err) {
		t.Errorf("Open's error no longer wraps pgx's ConnectError: %#v", err)
	}
}
