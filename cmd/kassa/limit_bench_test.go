package main

import (
	"net"
	"net/http"
	"testing"
)

// BenchmarkConnStatePerRequest is the connection cap's cost on every
// request: http.Server reports each connection active at a request's start
// and idle at its end, from as many goroutines as there are connections.
func BenchmarkConnStatePerRequest(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	l := newLimitListener(ln, 4096)
	defer l.Close()
	b.RunParallel(func(pb *testing.PB) {
		c := &limitConn{release: func() {}}
		l.mu.Lock()
		l.open[c] = struct{}{}
		l.mu.Unlock()
		for pb.Next() {
			l.ConnState(c, http.StateActive)
			l.ConnState(c, http.StateIdle)
		}
	})
}
