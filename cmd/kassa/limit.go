package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener holds at most n accepted connections open at once. Once n
// are open, Accept waits for one to close: connections past the cap wait in
// the kernel's accept backlog, their requests unread until a slot frees,
// instead of being refused or each taking a goroutine, buffers and a file
// descriptor. Without a cap, a flood of idle or slow connections uses up the
// process's file descriptors, and then opening the store's files and
// connecting to the database fail too.
//
// At the cap, a connection sitting idle between requests (kept alive for a
// next request that may never come) is closed to make room: otherwise a
// client holding n idle connections, a request each every IdleTimeout,
// would keep everyone else out. So is one that has sent nothing since it
// was accepted silentGrace ago: n connections opened and left silent (a
// port scan, a balancer's pre-opened ones, a flood) otherwise kept every
// client out until ReadHeaderTimeout closed them, and again as they were
// opened anew. Only connections busy with a request make new ones wait.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close: Accept stops waiting for a slot
	closeOnce sync.Once

	// open holds the connections accepted and not yet closed; it changes
	// once per connection, not per request, so the hook each request runs
	// (ConnState) takes no lock.
	mu       sync.Mutex
	open     map[*limitConn]struct{}
	waiting  atomic.Bool   // an Accept waits for room
	wentIdle chan struct{} // a connection went idle, for an Accept waiting for room
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{}),
		open: map[*limitConn]struct{}{}, wentIdle: make(chan struct{}, 1)}
}

// silentGrace is how long a connection may stay silent after it is
// accepted before, at the cap, it may be closed to make room. A client
// sends its request (or TLS hello) as soon as it has connected; the grace
// keeps a connection just accepted, whose request the server has not read
// yet, from being taken for a silent one.
const silentGrace = time.Second

// limitEpoch anchors monoNow.
var limitEpoch = time.Now()

// monoNow is nanoseconds on the monotonic clock, never zero (zero marks a
// connection that has spoken): a step of the wall clock (NTP) would
// otherwise make connections just accepted look past their grace.
func monoNow() int64 { return int64(time.Since(limitEpoch)) + 1 }

// ConnState is the http.Server hook that tells the listener which of its
// connections are idle.
func (l *limitListener) ConnState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn() // TLS: the connection this listener accepted is under it
	}
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	lc.idle.Store(state == http.StateIdle)
	if state == http.StateIdle && l.waiting.Load() {
		select {
		case l.wentIdle <- struct{}{}:
		default:
		}
	}
}

// acquire takes a slot for the next connection, closing an idle one to
// make room when all are taken, or waiting for one to close or go idle. It
// reports false once the listener is closed.
func (l *limitListener) acquire() bool {
	for {
		select {
		case l.slots <- struct{}{}:
			return true
		default:
		}
		// Waiting is announced before the look for an idle connection, so
		// one that goes idle after the look signals wentIdle.
		l.waiting.Store(true)
		var silentDue <-chan time.Time // nil, never ready, without a silent connection
		if wait := l.closeIdle(); wait > 0 {
			silentDue = time.After(wait)
		}
		select {
		case l.slots <- struct{}{}:
			l.waiting.Store(false)
			return true
		case <-l.wentIdle: // a busy connection finished its request: close it next turn
		case <-silentDue: // a silent connection's grace is over: close it next turn
		case <-l.done:
			l.waiting.Store(false)
			return false
		}
	}
}

// closeIdle closes one idle connection, or else one silent for silentGrace,
// if there is one; its slot frees as it closes. Otherwise it returns how
// long until the first silent connection's grace is over, if there is one.
func (l *limitListener) closeIdle() (wait time.Duration) {
	now := monoNow()
	l.mu.Lock()
	var victim, oldest *limitConn // oldest: the connection silent the longest
	var oldestSince int64
	for c := range l.open {
		// Claimed, so that a connection is closed once; one whose next
		// request starts meanwhile is closed all the same, as before (the
		// client retries; nothing ran).
		if c.idle.CompareAndSwap(true, false) {
			victim = c
			break
		}
		if since := c.silentSince.Load(); since != 0 && (oldest == nil || since < oldestSince) {
			oldest, oldestSince = c, since
		}
	}
	if victim == nil && oldest != nil {
		switch due := oldestSince + int64(silentGrace); {
		case due > now:
			wait = time.Duration(due - now)
		case oldest.silentSince.CompareAndSwap(oldestSince, 0): // claimed, as an idle one is
			victim = oldest
		default:
			wait = time.Millisecond // it spoke meanwhile: look again
		}
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Close()
		return 0
	}
	return wait
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.acquire() {
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
	lc := &limitConn{Conn: c}
	lc.silentSince.Store(monoNow())
	lc.release = sync.OnceFunc(func() {
		l.mu.Lock()
		delete(l.open, lc)
		l.mu.Unlock()
		<-l.slots
	})
	l.mu.Lock()
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
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
	idle    atomic.Bool // between requests, as http.Server reports it (ConnState)
	// silentSince is when the connection was accepted, on monoNow's clock, in
	// nanoseconds, while nothing has been read from it; zero once a byte
	// has. (http.Server reports a connection active only once a request's
	// whole header is read, so its StateNew cannot tell a silent
	// connection from one whose header is on the way.)
	silentSince atomic.Int64
}

// Read notes that the connection is no longer silent once it has sent a byte.
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.silentSince.Load() != 0 {
		c.silentSince.Store(0)
	}
	return n, err
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
