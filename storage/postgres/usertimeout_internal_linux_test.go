package postgres

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestConnectionsFailWhenSentDataGoesUnacknowledged: every connection the
// store makes, the pool's and its own (holdLock's, the commit-outcome
// check's), has TCP_USER_TIMEOUT set, so that a statement already sent on a
// connection gone silent (a failover that moved the database's address, a
// NAT or balancer that dropped the flow: no answer and no reset) fails
// within defaultUserTimeout, not after the kernel's retransmissions (about
// 15 minutes): notification delivery and the background jobs, whose
// contexts never end, waited that long. The URL's tcp_user_timeout
// (milliseconds, as libpq's) overrides it and 0 leaves the system's default;
// it is not sent to the server as a startup parameter, which a pooler would
// refuse. The keepalive of pgx's own dialer (Go's default: 15 s idle) is kept.
func TestConnectionsFailWhenSentDataGoesUnacknowledged(t *testing.T) {
	base := pgtest.FreshSchema(t)
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		want int // milliseconds
	}{
		{base, int(defaultUserTimeout.Milliseconds())},
		{base + "&tcp_user_timeout=5000", 5000},
		{base + "&tcp_user_timeout=0", 0},
	} {
		s, err := Open(ctx, c.url, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := s.pool.Config().ConnConfig.RuntimeParams["tcp_user_timeout"]; ok {
			t.Errorf("%s: tcp_user_timeout=%s sent as a startup parameter", c.url, v)
		}
		pooled, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkSocket(t, c.url+", a pooled connection", pooled.Conn().PgConn(), c.want)
		pooled.Release()
		own, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
		if err != nil {
			t.Fatal(err)
		}
		checkSocket(t, c.url+", a connection of the store's own", own.PgConn(), c.want)
		own.Close(ctx)
		s.Close()
	}
}

// checkSocket reads the TCP options of pc's socket.
func checkSocket(t *testing.T, what string, pc *pgconn.PgConn, wantUserTimeout int) {
	t.Helper()
	tc, ok := pc.Conn().(*net.TCPConn)
	if !ok {
		t.Fatalf("%s: a %T, not a TCP connection", what, pc.Conn())
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var userTimeout, keepAlive, keepIdle int
	var uerr, aerr, ierr error
	if err := raw.Control(func(fd uintptr) {
		userTimeout, uerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
		keepAlive, aerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		keepIdle, ierr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	}); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{uerr, aerr, ierr} {
		if err != nil {
			t.Fatalf("%s: getsockopt: %v", what, err)
		}
	}
	if userTimeout != wantUserTimeout {
		t.Errorf("%s: TCP_USER_TIMEOUT %d ms, want %d", what, userTimeout, wantUserTimeout)
	}
	if keepAlive != 1 || keepIdle != 15 {
		t.Errorf("%s: SO_KEEPALIVE %d, TCP_KEEPIDLE %d s; want 1 and 15 (Go's default, as pgx's own dialer)", what, keepAlive, keepIdle)
	}
}

// TestStatementOnAConnectionGoneSilentFails: a statement sent on a pooled
// connection whose packets then vanish (a firewall rule drops what it sends
// to the database: no answer, no reset, as a dropped NAT flow) fails once
// it has gone unacknowledged for the URL's tcp_user_timeout (1 s: here in
// 1.4 s, 2 s in 2.4 s, 5 s in 5.6 s); with 0 (the
// system's default, what every connection had before) it still waits
// seconds later, and would for about 15 minutes. Needs iptables and
// CAP_NET_ADMIN, skipped otherwise; the rule matches only the test
// connection's packets to the database.
func TestStatementOnAConnectionGoneSilentFails(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables not found: cannot make a connection go silent")
	}
	base := pgtest.FreshSchema(t)
	for _, c := range []struct {
		param string
		fails bool
	}{
		{"&tcp_user_timeout=1000", true},
		{"&tcp_user_timeout=0", false},
	} {
		s, err := Open(context.Background(), base+c.param, Options{})
		if err != nil {
			t.Fatal(err)
		}
		conn, err := s.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tc, ok := conn.Conn().PgConn().Conn().(*net.TCPConn)
		if !ok {
			t.Skipf("the test database's connection is a %T, not TCP", conn.Conn().PgConn().Conn())
		}
		// Dropped as they arrive (INPUT), not as they leave: a send
		// refused on the way out fails locally, which the kernel takes for
		// congestion and retries on another schedule than a packet lost.
		local, remote := tc.LocalAddr().(*net.TCPAddr), tc.RemoteAddr().(*net.TCPAddr)
		rule := []string{"INPUT", "-p", "tcp", "-s", local.IP.String(), "--sport", strconv.Itoa(local.Port),
			"-d", remote.IP.String(), "--dport", strconv.Itoa(remote.Port), "-j", "DROP"}
		if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput(); err != nil {
			conn.Release()
			s.Close()
			t.Skipf("iptables (CAP_NET_ADMIN needed): %v: %s", err, out)
		}
		// Removed before the store closes, and by a cleanup too should the
		// test die first: a rule left behind would stall any later
		// connection that reuses the port.
		var removed sync.Once
		unblock := func() {
			removed.Do(func() {
				if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
					t.Errorf("removing the rule %v: %v: %s", rule, err, out)
				}
			})
		}
		t.Cleanup(unblock)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		start := time.Now()
		_, err = conn.Exec(ctx, `SELECT 1`)
		took, expired := time.Since(start), ctx.Err() != nil
		cancel()
		unblock()
		conn.Release()
		s.Close()
		switch {
		case c.fails && (err == nil || took > 3*time.Second || expired):
			t.Errorf("%s: a statement on a connection gone silent: %v after %v, want it failed by the kernel in about 1 s", c.param, err, took)
		case !c.fails && (err == nil || !expired):
			t.Errorf("%s: a statement on a connection gone silent: %v after %v, want it still waiting at the 4 s deadline", c.param, err, took)
		}
		t.Logf("%s: %v after %v", c.param, err, took.Round(time.Millisecond))
	}
}
