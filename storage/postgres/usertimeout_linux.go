package postgres

import (
	"strings"
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT of <netinet/tcp.h> (option 18 at
// IPPROTO_TCP), which the syscall package does not name.
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT to d on a TCP socket before it
// connects: the kernel then fails the connection when data sent on it stays
// unacknowledged for d, or a keepalive probe goes unanswered past it
// (tcp(7)). A Unix socket is left alone.
func setUserTimeout(network string, c syscall.RawConn, d time.Duration) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
