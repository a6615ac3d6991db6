package kassa

import (
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
)

// TestFingerprintsKeepTheirValue: a stored record holds its request's
// fingerprint for the key's whole retention, so a build that computed
// another one for the same request would answer a retry sent across an
// upgrade 422 idempotency_key_reused instead of replaying it.
func TestFingerprintsKeepTheirValue(t *testing.T) {
	p := func(s string) *string { return &s }
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name, got, want string
	}{
		{"partial capture", fingerprint("partialCapture", []string{"o1"}, &capture.PartialRequest{
			OrderLines: []order.LineInput{{ID: p("l1")}}, TotalCaptureAmount: n(250000)}),
			"aa86b3c8b6684cbbfa7f9d32bcd662fcdd910a95ebdaf648fc7fad73f6fb3ca6"},
		{"full capture", fingerprint("capture", []string{"o1"}, &capture.FullRequest{}), "63364db5e3e05885de2e96cd7e055036338d482e72507935f70d7e4f2276a088"},
		{"session update", fingerprint("updateSession", []string{"checkout", "s1"}, &session.UpdateRequest{
			MerchantReference: p("r"), Metadata: map[string]string{"a": "1"}}), "375b3bd8715c7a79b093c935e66a71119ce1d54d72ca4e20e92f4c007517f37a"},
		{"cancel", fingerprint("cancelOrder", []string{"o1"}, nil), "0c366b69429a8b5ff4777f62301683e4e3c2d5fbb3b381b02ee09d77b439f866"},
		// An empty map where empty and left out mean the same (many SDKs
		// send {}): a create order from a customer token told its key was
		// reused would be sent again under a new key, a second order.
		{"create order with metadata {}", fingerprint("createOrderFromCustomerToken", []string{"ct1"}, &order.CreateRequest{
			Country: "SE", Currency: "SEK", Locale: "sv-SE", Metadata: map[string]string{}}),
			"c6a12eced8e6eea6f3536a006e4639e06f7cafae5c6dd842b9fc4be6cf828f7a"},
	} {
		if c.got != c.want {
			t.Errorf("%s: fingerprint %s, was %s", c.name, c.got, c.want)
		}
	}
}
