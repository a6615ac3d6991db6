package postgres

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
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
