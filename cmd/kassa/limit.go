package main

import (
	"net"
	"sync"
)

// limitListener holds at most n accepted connections open at once. Once n
// are open, Accept waits for one to close: connections past the cap wait in
// the kernel's accept backlog, their requests unread until a slot frees,
// instead of being refused or each taking a goroutine, buffers and a file
// descriptor. Without a cap, a flood of idle or slow connections uses up the
// process's file descriptors, and then opening the store's files and
// connecting to the database fail too.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close: Accept stops waiting for a slot
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		// http.Server.Shutdown closes the listener and then waits for
		// Accept to return before it closes idle connections: waiting on
		// for a slot that only they can free would never end.
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn frees its slot when it is first closed (net/http closes a
// connection more than once).
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite keeps TCP's half-close visible through the wrapper: net/http
// uses it to send an error answer before closing a connection whose request
// body it did not read, so that the client reads the answer instead of a
// reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
