//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not Linux's: a
// statement sent on a connection gone silent waits there for TCP to give up
// retransmitting, as before (docs/postgres.md).
func setUserTimeout(string, syscall.RawConn, time.Duration) error { return nil }
