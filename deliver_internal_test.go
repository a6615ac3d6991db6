package kassa

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/kassahq/kassa/notify"
)

// Outside the sandbox a merchant must not aim deliveries at the operator's
// internal services. The check knew loopback, private and link-local ranges
// only: shared address space (tailnets, a cloud's metadata service at
// 100.100.100.200), 192.0.0.0/24 (another cloud's at 192.0.0.192) and IPv6
// forms a NAT64 or 6to4 gateway turns into a private IPv4 address all passed.
func TestDeliveryRefusesNonPublicAddresses(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "::1", "fd00:ec2::254",
		"fe80::1", "::ffff:10.0.0.1", "100.100.100.200", "100.64.0.1", "192.0.0.192", "198.18.0.1", "0.1.2.3", "240.0.0.1",
		"255.255.255.255", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "2002:a00:1::1", "2002:a9fe:a9fe::1",
		"64:ff9b:1::a00:1", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1::5db8:d70e"} {
		if publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as public", a)
		}
		if err := refusePrivate("tcp", netip.AddrPortFrom(netip.MustParseAddr(a), 443).String(), nil); err == nil {
			t.Errorf("delivery to %s not refused", a)
		}
	}
	for _, a := range []string{"93.184.215.14", "1.1.1.1", "100.128.0.1", "2606:4700::1111", "64:ff9b::5db8:d70e", "2002:5db8:d70e::1"} {
		if !publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as non-public", a)
		}
	}
}

// IPv6 has public hosts only in global unicast (2000::/3). The check looked
// for the IPv6 blocks it knew to be private and counted the rest public, so
// the IPv4-compatible (::a.b.c.d) and SIIT (::ffff:0:a.b.c.d) forms that a
// translator or tunnel in the operator's network turns into an internal
// IPv4 address passed, as did site-local, discard-only and Teredo
// addresses, and the documentation blocks of either family. A zone (a URL
// may carry one) hid a NAT64 or 6to4 address from the prefixes' Contains.
func TestDeliveryRefusesNonGlobalIPv6(t *testing.T) {
	for _, a := range []string{"::7f00:1", "::a9fe:a9fe", "::a00:1", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "fec0::1",
		"100::1", "5f00::1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "2001:2::1", "2001:db8::1", "3fff::1",
		"192.0.2.1", "198.51.100.1", "203.0.113.1", "64:ff9b::a00:1%eth0", "2002:a00:1::1%eth0"} {
		if publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as public", a)
		}
	}
	for _, a := range []string{"2001:4860:4860::8888", "2a00:1450:4001::1", "2600::1", "3ffe:ffff::1", "2001:200::1", "192.0.3.1", "203.0.114.1"} {
		if !publicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as non-public", a)
		}
	}
}

// A webhook POST is attacker-written bytes sent to a port of the merchant's
// choosing: to a mail server's port it is a cross-protocol attack from the
// operator's address (spam under its name), and to a SIP port it can make a
// NAT open a way in. Outside the sandbox the ports browsers refuse (the Fetch
// standard's bad ports) are refused; the usual web ports stay open.
func TestDeliveryRefusesBadPorts(t *testing.T) {
	for _, p := range []uint16{0, 21, 22, 25, 110, 143, 465, 587, 993, 5060, 6000, 6667, 10080} {
		if err := refusePrivate("tcp", netip.AddrPortFrom(netip.MustParseAddr("93.184.215.14"), p).String(), nil); err == nil {
			t.Errorf("delivery to port %d not refused", p)
		}
	}
	for _, p := range []uint16{80, 443, 3000, 8000, 8080, 8443, 8843, 9000, 44300} {
		if err := refusePrivate("tcp", netip.AddrPortFrom(netip.MustParseAddr("2606:4700::1111"), p).String(), nil); err != nil {
			t.Errorf("delivery to port %d refused: %v", p, err)
		}
	}
}

// A failed lookup's text named the resolver that answered it (the
// operator's internal DNS server) in the merchant's delivery log.
func TestDeliveryErrorNamesNoResolver(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "http://db.internal/", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "db.internal", Server: "10.255.255.53:53", IsNotFound: true}}}
	got := deliveryErrorText(err)
	if want := `Post "http://db.internal/": dial tcp: lookup db.internal: no such host`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// A receiver's Retry-After defers a retry, never past the schedule's longest
// step and never sooner than the schedule retries; either form is read, and
// anything else is ignored.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"120": 2 * time.Minute, " 7 ": 7 * time.Second, "0": 0, "-5": 0, "1.5": 0, "soon": 0, "": 0,
		"99999999999999999999":                            0, // past uint64: malformed
		"18446744073709551615":                            maxRetryAfterSeconds * time.Second,
		now.Add(time.Hour).Format(http.TimeFormat):        time.Hour,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
		now.Add(30 * time.Second).Format(http.TimeFormat): 30 * time.Second,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
	opts := DeliveryOptions{Retry: notify.DefaultRetry(), RandN: func(n int64) int64 { return n - 1 }} // the nominal delay
	for _, c := range []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 30 * time.Second},
		{1, time.Second, 30 * time.Second}, // never sooner than the schedule
		{1, time.Hour, time.Hour},          // later, as asked
		{1, 48 * time.Hour, 6 * time.Hour}, // capped at the longest step
		{11, time.Hour, 6 * time.Hour},     // the schedule's own wait is longer
	} {
		if got := retryDelay(opts, c.n, c.retryAfter); got != c.want {
			t.Errorf("after attempt %d with Retry-After %v: %v, want %v", c.n, c.retryAfter, got, c.want)
		}
	}
}
