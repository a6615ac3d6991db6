// Package notify is the merchant-notification vocabulary of kassa: which
// topics exist and which a merchant receives, how a delivery is signed and
// verified, and when a failed delivery is tried again.
//
// Deliveries are at least once: a message is sent again after a crash between
// the POST and the record of its answer, so every delivery carries the same
// event id and receivers deduplicate on it. The signature covers a timestamp
// and the exact body, so a receiver can reject replays and tampering with one
// HMAC and one clock comparison.
package notify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassahq/kassa/fault"
)

// Topics. Order events are "order." + the spec's event type.
const (
	// TopicAcknowledgementRequired is sent whenever an order awaits the
	// merchant's acknowledgement, subscribed or not.
	TopicAcknowledgementRequired = "order.acknowledgementRequired"
	TopicAcknowledgementReminder = "order.acknowledgementReminder"
	TopicExpiryReminder          = "order.expiryReminder"
	TopicSessionAuthorized       = "session.authorized"
	TopicDocumentResent          = "document.resent"
	// AllOrderEvents subscribes to every "order.<event type>" topic.
	AllOrderEvents = "order.*"
)

var orderEventTopics = []string{"order.acknowledge", "order.authorize", "order.cancel", "order.create", "order.edit",
	"order.editCustomer", "order.editPaymentMethod", "order.extendExpiry", "order.fullCapture", "order.fullRefund",
	"order.paid", "order.partialCapture", "order.partialRefund", "order.readyForCapture", "order.setReference"}

// OrderEventTopics are the spec's order event types as topics. Each call
// returns a new slice, so a caller changing it does not change which topics
// the package knows.
func OrderEventTopics() []string { return slices.Clone(orderEventTopics) }

// Subscribable lists every topic a merchant may name in its subscriptions.
func Subscribable() []string {
	return append([]string{AllOrderEvents, TopicAcknowledgementReminder, TopicExpiryReminder,
		TopicSessionAuthorized, TopicDocumentResent}, orderEventTopics...)
}

// MaxSubscriptions bounds the list a merchant sends.
const MaxSubscriptions = 64

// Wants reports whether a merchant with these subscriptions receives topic.
func Wants(subscribed []string, topic string) bool {
	if topic == TopicAcknowledgementRequired {
		return true
	}
	if slices.Contains(subscribed, topic) {
		return true
	}
	return strings.HasPrefix(topic, "order.") && slices.Contains(orderEventTopics, topic) &&
		slices.Contains(subscribed, AllOrderEvents)
}

// ValidateSubscriptions refuses unknown topics and over-long lists.
func ValidateSubscriptions(topics []string) error {
	if len(topics) > MaxSubscriptions {
		return fault.Invalidf("events", "at most %d topics", MaxSubscriptions)
	}
	known := Subscribable()
	var f fault.Fields
	for i, t := range topics {
		if t == TopicAcknowledgementRequired {
			continue // always sent; naming it is allowed and changes nothing
		}
		if !slices.Contains(known, t) {
			f.Add(fmt.Sprintf("events[%d]", i), "unknown topic %q; known: %s", t, strings.Join(known, ", "))
		}
	}
	return f.Err()
}

// MaxURLLength bounds a webhook URL.
const MaxURLLength = 2048

// ValidateURL accepts an absolute http or https URL without credentials.
// Plain http is allowed because sandboxes and CI receive on loopback;
// production merchants should use https.
func ValidateURL(raw string) error {
	if raw == "" || len(raw) > MaxURLLength {
		return fault.Invalidf("url", "an http(s) URL of 1 to %d characters is required", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fault.Invalidf("url", "must be an absolute http or https URL")
	}
	if u.User != nil {
		return fault.Invalidf("url", "must not carry credentials; deliveries are authenticated by their signature")
	}
	if u.Fragment != "" {
		return fault.Invalidf("url", "must not have a fragment")
	}
	return nil
}

// NewSecret makes a signing secret: "whsec_" and 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b)
}

// Delivery headers.
const (
	HeaderSignature = "Kassa-Signature"
	HeaderEventID   = "Kassa-Event-Id"
	HeaderTopic     = "Kassa-Event-Type"
	HeaderAttempt   = "Kassa-Delivery-Attempt"
)

// Sign returns the Kassa-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<unix seconds>." + body)>",
// followed by one more v1 per previous secret. A rotation signs with the old
// secret too for a while, because a receiver learns the new one only when
// its owner deploys it.
func Sign(secret string, t time.Time, body []byte, previous ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range append([]string{secret}, previous...) {
		b.WriteString(",v1=" + hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a Kassa-Signature header against body, refusing signatures
// older or newer than tolerance at now. It is what a Go receiver calls.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("notify: malformed %s header", HeaderSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("notify: signature time %s is outside the tolerance", time.Unix(sec, 0).UTC().Format(time.RFC3339))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("notify: signature does not match")
}

// Retry is the delivery schedule: attempt n (1-based) that fails is tried
// again after a delay drawn from [d/2, d], d = Base·2^(n-1) capped at Cap
// ("equal jitter": spread out, yet never sooner than half the nominal delay),
// until MaxAttempts attempts have failed.
type Retry struct {
	Base        time.Duration
	Cap         time.Duration
	MaxAttempts int
}

// DefaultRetry spans 7 to 14.5 hours over 12 attempts (11 delays: 30 s
// doubling to 256 min, then the 6 h cap; jitter halves each at most). It is
// a function, not a variable, so that no importer can change the default of
// every instance in the process.
func DefaultRetry() Retry { return Retry{Base: 30 * time.Second, Cap: 6 * time.Hour, MaxAttempts: 12} }

// Nominal is the delay before retrying after failed attempt n, before jitter.
func (r Retry) Nominal(n int) time.Duration {
	d := r.Base
	for i := 1; i < n && d < r.Cap; i++ {
		// Past half the cap the next step is the cap: doubled, a delay
		// past half of time.Duration's range (a cap of math.MaxInt64,
		// "none") wrapped negative, and the jitter's draw panicked.
		if d > r.Cap/2 {
			return r.Cap
		}
		d *= 2
	}
	return min(d, r.Cap)
}

// Delay is Nominal(n) with jitter; randN(k) must return a uniform integer
// in [0, k), e.g. math/rand/v2.Int64N.
func (r Retry) Delay(n int, randN func(int64) int64) time.Duration {
	d := r.Nominal(n)
	half := d / 2
	return half + time.Duration(randN(int64(d-half)+1))
}

// GivesUp reports whether failed attempt n is the last one.
func (r Retry) GivesUp(n int) bool { return n >= r.MaxAttempts }
