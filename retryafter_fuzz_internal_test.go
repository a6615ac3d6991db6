package kassa

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter reads arbitrary Retry-After values, as a receiver
// sends them: never negative; delay seconds are that many seconds up to a
// year; an HTTP date is the time until it (zero when past); anything else
// is zero.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", " 7 ", "-1", "+5", "1.5", "18446744073709551615", "99999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "x", "\x00"} {
		f.Add(s, int64(1_700_000_000))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		now := time.Unix(unix%(1<<36), 0)
		d := parseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v", v, d)
		}
		tv := strings.TrimSpace(v)
		if n, err := strconv.ParseUint(tv, 10, 64); err == nil {
			if want := time.Duration(min(n, maxRetryAfterSeconds)) * time.Second; d != want {
				t.Fatalf("parseRetryAfter(%q) = %v, want %v", v, d, want)
			}
			return
		}
		if at, err := http.ParseTime(tv); err == nil {
			if want := max(at.Sub(now), 0); d != want {
				t.Fatalf("parseRetryAfter(%q) = %v, want %v", v, d, want)
			}
			return
		}
		if d != 0 {
			t.Fatalf("parseRetryAfter(%q), no delay and no date, = %v", v, d)
		}
	})
}
