package postgres

import (
	"strings"
	"testing"
)

// TestUserTimeoutFromTheURL: the URL's tcp_user_timeout is a whole number
// of milliseconds, as libpq's; anything else is refused before connecting
// (CheckURL, as Open), not sent to the server.
func TestUserTimeoutFromTheURL(t *testing.T) {
	const base = "postgres://kassa@127.0.0.1:5432/kassa?sslmode=disable"
	for _, c := range []struct {
		param string
		ok    bool
	}{
		{"", true},
		{"&tcp_user_timeout=0", true},
		{"&tcp_user_timeout=30000", true},
		{"&tcp_user_timeout=2147483647", true},
		{"&tcp_user_timeout=-1", false},
		{"&tcp_user_timeout=30s", false},
		{"&tcp_user_timeout=", false},
		{"&tcp_user_timeout=2147483648", false},
	} {
		err := CheckURL(base + c.param)
		if c.ok && err != nil {
			t.Errorf("%q: %v", c.param, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "tcp_user_timeout")) {
			t.Errorf("%q: %v, want an error naming tcp_user_timeout", c.param, err)
		}
	}
}
