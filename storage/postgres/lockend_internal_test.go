package postgres

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// silentRelay relays TCP connections to addr until silence is set; from
// then on it forwards nothing either way and answers nothing, a new
// connection included, as a peer or NAT that dropped the connections
// without a reset. close ends every connection it holds.
type silentRelay struct {
	ln      net.Listener
	silence atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newSilentRelay(t *testing.T, addr string) *silentRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &silentRelay{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.hold(c)
			if r.silence.Load() {
				go io.Copy(io.Discard, c)
				continue
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			r.hold(s)
			go r.pipe(s, c)
			go r.pipe(c, s)
		}
	}()
	t.Cleanup(r.close)
	return r
}

func (r *silentRelay) hold(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, c)
}

// pipe copies from to to until silence, then swallows what from sends.
func (r *silentRelay) pipe(to, from net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		if !r.silence.Load() {
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

func (r *silentRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// TestLockEndIsBoundedOnASilentConnection: releasing a migration or reindex
// lock on a connection gone silent returns after lockEndWait, not when TCP
// keepalive gives up (a quarter of an hour, in which Open, its work done,
// did not return): heldLock.end's ROLLBACK and close are bounded.
func TestLockEndIsBoundedOnASilentConnection(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(pgtest.FreshSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	relay := newSilentRelay(t, u.Host)
	u.Host = relay.ln.Addr().String()
	s, err := Open(ctx, u.String(), Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := holdLock(ctx, s.pool, "test", func(conn *pgx.Conn) (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(7, 7)`).Scan(&ok)
		return ok, err
	})
	if err != nil {
		t.Fatal(err)
	}
	relay.silence.Store(true)
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		l.end()
		done <- time.Since(start)
	}()
	select {
	case took := <-done:
		if took < lockEndWait-time.Second || took > lockEndWait+2*time.Second {
			t.Errorf("the lock was released in %v on a silent connection, want about %v", took, lockEndWait)
		}
	case <-time.After(lockEndWait + 10*time.Second):
		relay.close() // the connections closed, end returns
		<-done
		t.Errorf("the lock was not released in %v on a silent connection (only once its connection was closed), want about %v",
			lockEndWait+10*time.Second, lockEndWait)
	}
}
