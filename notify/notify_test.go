package notify

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"pgregory.net/rapid"
)

func TestSignVerify(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"evt_1","type":"order.acknowledgementRequired"}`)
	sig := Sign("whsec_k", at, body)
	// Fixed vector: a receiver in any language can check its implementation against it.
	// The value is HMAC-SHA256 of "1795428000." + body, as openssl computes it:
	//   printf '%s' '1795428000.{"id":…}' | openssl dgst -sha256 -hmac whsec_k
	if sig != "t=1795428000,v1=b8bef232a265b341fe80fd58d9879159ebc93230bad441650558d2f3db5b0b50" {
		t.Fatalf("signature %q", sig)
	}
	cases := []struct {
		name   string
		secret string
		header string
		body   []byte
		now    time.Time
		ok     bool
	}{
		{"valid", "whsec_k", sig, body, at, true},
		{"valid within tolerance", "whsec_k", sig, body, at.Add(4 * time.Minute), true},
		{"exactly the tolerance old", "whsec_k", sig, body, at.Add(5 * time.Minute), true},
		{"exactly the tolerance ahead", "whsec_k", sig, body, at.Add(-5 * time.Minute), true},
		{"second signature of a rotation", "whsec_k", "t=1795428000,v1=00," + sig[len("t=1795428000,"):], body, at, true},
		{"wrong secret", "whsec_x", sig, body, at, false},
		{"tampered body", "whsec_k", sig, append([]byte{' '}, body...), at, false},
		{"too old", "whsec_k", sig, body, at.Add(6 * time.Minute), false},
		{"from the future", "whsec_k", sig, body, at.Add(-6 * time.Minute), false},
		{"timestamp changed", "whsec_k", strings.Replace(sig, "t=1795428000", "t=1795428001", 1), body, at, false},
		{"no v1", "whsec_k", "t=1795428000", body, at, false},
		{"garbage", "whsec_k", "nonsense", body, at, false},
		{"empty", "whsec_k", "", body, at, false},
	}
	for _, c := range cases {
		err := Verify(c.secret, c.header, c.body, c.now, 5*time.Minute)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestSignDuringRotation: a delivery signed with the new and the previous
// secret verifies with either, so a receiver keeps working while it still
// holds the old secret.
func TestSignDuringRotation(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"evt_1","type":"order.acknowledgementRequired"}`)
	sig := Sign("whsec_new", at, body, "whsec_old")
	newOnly, oldOnly := Sign("whsec_new", at, body), Sign("whsec_old", at, body)
	if want := newOnly + "," + oldOnly[len("t=1795428000,"):]; sig != want {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	for _, secret := range []string{"whsec_new", "whsec_old"} {
		if err := Verify(secret, sig, body, at, 5*time.Minute); err != nil {
			t.Errorf("%s: %v", secret, err)
		}
	}
	if Verify("whsec_x", sig, body, at, 5*time.Minute) == nil {
		t.Error("a third secret verified")
	}
}

func TestSignatureRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := rapid.StringN(1, 64, -1).Draw(t, "secret")
		body := rapid.SliceOf(rapid.Byte()).Draw(t, "body")
		at := time.Unix(rapid.Int64Range(0, 1<<40).Draw(t, "at"), 0)
		sig := Sign(secret, at, body)
		if err := Verify(secret, sig, body, at, time.Minute); err != nil {
			t.Fatalf("own signature refused: %v", err)
		}
		if len(body) > 0 {
			flipped := append([]byte(nil), body...)
			i := rapid.IntRange(0, len(body)-1).Draw(t, "i")
			flipped[i] ^= 1 << rapid.IntRange(0, 7).Draw(t, "bit")
			if Verify(secret, sig, flipped, at, time.Minute) == nil {
				t.Fatal("a changed body verified")
			}
		}
	})
}

func TestRetrySchedule(t *testing.T) {
	r := Retry{Base: 30 * time.Second, Cap: 10 * time.Minute, MaxAttempts: 8}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, w := range want {
		n := i + 1
		if got := r.Nominal(n); got != w {
			t.Errorf("nominal after attempt %d: %v, want %v", n, got, w)
		}
		lo := r.Delay(n, func(int64) int64 { return 0 })
		hi := r.Delay(n, func(k int64) int64 { return k - 1 })
		if lo != w/2 || hi != w {
			t.Errorf("attempt %d: jitter range [%v, %v], want [%v, %v]", n, lo, hi, w/2, w)
		}
	}
	if r.GivesUp(7) || !r.GivesUp(8) {
		t.Error("gives up after the 8th failed attempt, not before")
	}
	if got := r.Nominal(1000); got != r.Cap {
		t.Errorf("nominal never exceeds the cap: %v", got)
	}
}

func TestSubscriptions(t *testing.T) {
	cases := []struct {
		subs  []string
		topic string
		want  bool
	}{
		{nil, TopicAcknowledgementRequired, true},
		{nil, "order.partialCapture", false},
		{[]string{"order.partialCapture"}, "order.partialCapture", true},
		{[]string{"order.partialCapture"}, "order.fullCapture", false},
		{[]string{AllOrderEvents}, "order.fullCapture", true},
		{[]string{AllOrderEvents}, TopicExpiryReminder, false},
		{[]string{AllOrderEvents}, TopicSessionAuthorized, false},
		{[]string{TopicSessionAuthorized}, TopicSessionAuthorized, true},
	}
	for _, c := range cases {
		if got := Wants(c.subs, c.topic); got != c.want {
			t.Errorf("Wants(%v, %s) = %v", c.subs, c.topic, got)
		}
	}
	if err := ValidateSubscriptions([]string{"order.*", "order.partialCapture", TopicExpiryReminder}); err != nil {
		t.Errorf("valid subscriptions refused: %v", err)
	}
	var fe *fault.Error
	if err := ValidateSubscriptions([]string{"order.bogus", "order.*", "nope"}); !errors.As(err, &fe) || len(fe.Fields) != 2 ||
		fe.Fields[0].Field != "events[0]" || fe.Fields[1].Field != "events[2]" {
		t.Fatalf("two unknown topics: %v, want both named", err)
	}
	if err := ValidateSubscriptions([]string{"order.bogus"}); !fault.Is(err, fault.Invalid) {
		t.Errorf("unknown topic: %v", err)
	}
	if err := ValidateSubscriptions(make([]string, MaxSubscriptions+1)); !fault.Is(err, fault.Invalid) {
		t.Errorf("too many: %v", err)
	}
	full := make([]string, MaxSubscriptions)
	for i := range full {
		full[i] = AllOrderEvents
	}
	if err := ValidateSubscriptions(full); err != nil {
		t.Errorf("%d topics: %v", MaxSubscriptions, err)
	}
	for _, topic := range []string{TopicAcknowledgementReminder, TopicExpiryReminder, TopicSessionAuthorized, TopicDocumentResent} {
		if err := ValidateSubscriptions([]string{topic}); err != nil {
			t.Errorf("%s: %v", topic, err)
		}
	}
	if err := ValidateSubscriptions([]string{TopicAcknowledgementRequired}); err != nil {
		t.Errorf("naming the topic always sent: %v", err)
	}
}

func TestValidateURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://merchant.example/hooks/kassa": true,
		"http://127.0.0.1:9999/hook":           true,
		"":                                     false,
		"ftp://x.example/":                     false,
		"/relative":                            false,
		"https://user:pw@x.example/":           false,
		"https://x.example/#frag":              false,
		"https://" + strings.Repeat("a", MaxURLLength) + ".example/":                       false,
		"https://x.example/" + strings.Repeat("a", MaxURLLength-len("https://x.example/")): true,
	} {
		if err := ValidateURL(raw); (err == nil) != ok {
			t.Errorf("ValidateURL(%.40q) = %v, want ok=%v", raw, err, ok)
		}
	}
}

func TestNewSecretIsFreshAndLong(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+43 {
		t.Fatalf("secrets %q %q", a, b)
	}
}

// A cap past half of time.Duration's range (an embedder's "no cap",
// math.MaxInt64) must not let the doubling wrap: the delay grows to the cap
// and stays there, and the jitter's draw is never asked for a negative range.
func TestRetryScheduleNearDurationRange(t *testing.T) {
	for _, r := range []Retry{
		{Base: time.Hour, Cap: math.MaxInt64, MaxAttempts: 100},
		{Base: 1 << 40, Cap: math.MaxInt64, MaxAttempts: 100},
		{Base: math.MaxInt64 / 3, Cap: math.MaxInt64 - 1, MaxAttempts: 100},
		{Base: math.MaxInt64, Cap: math.MaxInt64, MaxAttempts: 100},
	} {
		prev := time.Duration(0)
		for n := 1; n <= 100; n++ {
			d := r.Nominal(n)
			if d < prev || d > r.Cap || d <= 0 {
				t.Fatalf("%+v: nominal after attempt %d is %v (after %v), want it growing up to the cap", r, n, d, prev)
			}
			prev = d
			hi := r.Delay(n, func(k int64) int64 {
				if k <= 0 {
					t.Fatalf("%+v: attempt %d drew jitter from [0, %d)", r, n, k)
				}
				return k - 1
			})
			if hi != d {
				t.Fatalf("%+v: attempt %d: longest delay %v, want %v", r, n, hi, d)
			}
		}
		if got := r.Nominal(100); got != r.Cap {
			t.Errorf("%+v: nominal after 100 attempts is %v, want the cap", r, got)
		}
	}
}

// The schedule doubles exactly up to the cap, an odd one too: a delay of
// exactly half an odd cap (rounded down) doubles to one short of the cap, and
// only the step after it is the cap.
func TestRetryScheduleDoublesUpToAnOddCap(t *testing.T) {
	for _, c := range []struct {
		r    Retry
		want []time.Duration
	}{
		{Retry{Base: 3, Cap: 7}, []time.Duration{3, 6, 7, 7}},
		{Retry{Base: math.MaxInt64 / 2, Cap: math.MaxInt64}, []time.Duration{math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64}},
	} {
		for i, w := range c.want {
			if got := c.r.Nominal(i + 1); got != w {
				t.Errorf("%+v: nominal after attempt %d is %d, want %d", c.r, i+1, got, w)
			}
		}
	}
}
