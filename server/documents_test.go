package server

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/kassahq/kassa/order"
)

// A document link changes only on the wall-clock hour, whatever the TTL:
// cached order responses rely on it (kassa.Options.DocumentURL). With a
// 90-minute TTL, rounding now+TTL instead would change the link at half past.
func TestDocumentLinkChangesOnlyOnTheHour(t *testing.T) {
	for _, ttl := range []time.Duration{90 * time.Minute, 7 * 24 * time.Hour, 45 * time.Minute} {
		s := New(Config{Logger: quiet, Key: []byte("0123456789abcdef0123456789abcdef"), BaseURL: "https://kassa.test", DocumentLinkTTL: ttl})
		o := &order.Order{ID: "o1", MerchantID: "m1"}
		sub := &order.Ledger{ID: "c1", DocumentReference: "INV-1"}
		for {
			before := time.Now()
			link := s.DocumentURL(o, sub)
			after := time.Now()
			if !before.Truncate(time.Hour).Equal(after.Truncate(time.Hour)) {
				continue // the hour turned during the call; take it again
			}
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := strconv.ParseInt(u.Query().Get("expires"), 10, 64)
			if err != nil {
				t.Fatalf("no expiry in %s", link)
			}
			want := before.Truncate(time.Hour).Add(time.Hour + ttl)
			if exp != want.Unix() {
				t.Fatalf("TTL %v: link expires %v, want the end of this hour plus the TTL, %v", ttl, time.Unix(exp, 0).UTC(), want.UTC())
			}
			if time.Unix(exp, 0).Before(after.Add(ttl)) {
				t.Fatalf("TTL %v: link valid for less than its TTL", ttl)
			}
			break
		}
	}
}
