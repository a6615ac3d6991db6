package storage

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa/settlement"
)

// FuzzQueuedItemDecoding reads arbitrary bytes as a queued settlement item,
// as a store reads its queue back (or `kassa store copy` reads another
// store's): what decodes encodes to bytes that decode to an item encoding to
// the same bytes again; the encoding of a recourse is marked (older builds
// fail to read it) and of any other kind is plain JSON.
func FuzzQueuedItemDecoding(f *testing.F) {
	for _, s := range []string{`{"key":"c1","merchantId":"m","currency":"SEK","ledgerId":"c1","kind":"capture","amount":30000,"occurredAt":"2026-11-24T10:00:00Z"}`,
		"\x01" + `{"key":"c1:recourse","kind":"recourse","amount":1,"occurredAt":"2026-11-24T10:00:00+01:00"}`, "\x01" + `{"kind":"capture"}`,
		`{"kind":"recourse"}`, "\x01", "", `null`, `{"currency":"XXX"}`, `{"occurredAt":"0000-01-01T00:00:00Z"}`, `{"amount":1e3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var q QueuedItem
		if q.UnmarshalBinary(b) != nil {
			return
		}
		enc, err := q.MarshalBinary()
		if err != nil {
			return // a time json cannot write (a year past 9999) is refused, not written damaged
		}
		var again QueuedItem
		if err := again.UnmarshalBinary(enc); err != nil {
			t.Fatalf("%q decoded, its encoding %q does not: %v", b, enc, err)
		}
		enc2, err := again.MarshalBinary()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("%q: encodings differ after a round trip: %q, %q (%v)", b, enc, enc2, err)
		}
		var old settlement.Item
		oldErr := json.Unmarshal(enc, &old)
		if recourse := q.Kind == settlement.KindRecourse; recourse != (oldErr != nil) || recourse != (enc[0] == queuedMarked) {
			t.Fatalf("%q (kind %q) encodes to %q, which plain JSON reads with %v", b, q.Kind, enc, oldErr)
		}
	})
}
