package notify

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
)

// FuzzSignVerify: a signature made at t verifies at t for its body with its
// secret and with every previous secret, and no other body verifies; a
// header of any shape is refused without a panic unless it carries the MAC.
func FuzzSignVerify(f *testing.F) {
	f.Add("whsec_a", "whsec_old", []byte(`{"eventId":"e"}`), []byte(`{"eventId":"f"}`), int64(1_700_000_000), "t=1700000000,v1=00")
	f.Add("", "", []byte{}, []byte{0}, int64(-1), "t=,v1=")
	f.Add("s", "s", []byte("x"), []byte("x"), int64(1<<62), "t=9223372036854775807,v1=zz, t=1")
	f.Fuzz(func(t *testing.T, secret, previous string, body, other []byte, unix int64, header string) {
		unix %= 1 << 40 // within time.Time's comfortable range, both signs
		at := time.Unix(unix, 0)
		h := Sign(secret, at, body, previous)
		if err := Verify(secret, h, body, at, time.Minute); err != nil {
			t.Fatalf("Verify(Sign) with the secret: %v (%s)", err, h)
		}
		if err := Verify(previous, h, body, at, time.Minute); err != nil {
			t.Fatalf("Verify(Sign) with the previous secret: %v (%s)", err, h)
		}
		if err := Verify(secret, h, body, at.Add(2*time.Minute), time.Minute); err == nil {
			t.Fatalf("a signature two minutes old verified with a minute's tolerance")
		}
		if !bytes.Equal(body, other) && Verify(secret, h, other, at, time.Minute) == nil {
			t.Fatalf("the signature of %q verified %q", body, other)
		}
		_ = Verify(secret, header, body, at, time.Hour)
	})
}

// FuzzValidateWebhook: an accepted URL is an absolute http(s) URL with a
// host, no credentials and no fragment, of bounded length; an accepted
// subscription list names only known topics. Refusals are validation
// faults naming a field.
func FuzzValidateWebhook(f *testing.F) {
	for _, s := range []string{"https://example.com/hook", "http://127.0.0.1:8080/h?x=1", "https://u:p@h/", "https://h/#f", "ftp://h/",
		"https:///path", "//h/x", "http://[::1]:80/", "http://h/%zz", "HTTP://H/", "https://h\x00/"} {
		f.Add(s, "order.create,order.*")
	}
	f.Add("https://h/", strings.Join(Subscribable(), ","))
	f.Fuzz(func(t *testing.T, raw, topics string) {
		if err := ValidateURL(raw); err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("ValidateURL(%q): %v is not a validation fault", raw, err)
			}
		} else {
			u, perr := url.Parse(raw)
			if perr != nil || len(raw) > MaxURLLength || u.Host == "" || u.User != nil || u.Fragment != "" ||
				(u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("ValidateURL accepted %q", raw)
			}
		}
		list := strings.Split(topics, ",")
		if err := ValidateSubscriptions(list); err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("ValidateSubscriptions(%q): %v", list, err)
			}
			return
		}
		known := Subscribable()
		for _, s := range list {
			if s != TopicAcknowledgementRequired && !slices.Contains(known, s) {
				t.Fatalf("ValidateSubscriptions accepted %q", s)
			}
		}
	})
}
