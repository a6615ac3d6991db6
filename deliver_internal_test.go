package kassa

import (
	"net/netip"
	"testing"
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
