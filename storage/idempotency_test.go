package storage_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage"
)

func TestIdempotencyRecordEncoding(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 123, time.UTC)
	answer := []byte(`{"orderId":"o-1","lines":["` + string(bytes.Repeat([]byte("x"), 5000)) + `"]}`)
	for _, r := range []storage.IdempotencyRecord{
		{MerchantID: "m", Key: "k", Fingerprint: "f", Status: 200, Header: map[string]string{"Location": "/v1/orders/o-1"},
			Body: answer, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)},
		{MerchantID: "m", Key: "k2", Status: 204, CreatedAt: at, ExpiresAt: at},
		{MerchantID: "m", Key: "\x01{", Status: 200, Body: []byte{0x01, '{', 0}, CreatedAt: at, ExpiresAt: at},
	} {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		// The answer is kept as it is, not as base64.
		if len(r.Body) > 0 && !bytes.HasSuffix(b, r.Body) {
			t.Fatalf("%s: the answer is not stored as is", r.Key)
		}
		var got storage.IdempotencyRecord
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: decoded %+v, want %+v", r.Key, got, r)
		}
		// Records written before the framed encoding are JSON objects.
		old, _ := json.Marshal(&r)
		got = storage.IdempotencyRecord{Key: "stale"}
		if err := got.UnmarshalBinary(old); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: decoded the JSON encoding as %+v, want %+v", r.Key, got, r)
		}
	}
	for _, bad := range [][]byte{{0x01}, {0x01, 0xff}, {0x01, 5, '{'}, {0x01, 2, 'x', 'y'}, nil} {
		var r storage.IdempotencyRecord
		if err := r.UnmarshalBinary(bad); err == nil {
			t.Fatalf("%q decoded as %+v", bad, r)
		}
	}
}

func FuzzIdempotencyRecordDecoding(f *testing.F) {
	r := storage.IdempotencyRecord{MerchantID: "m", Key: "k", Status: 200, Body: []byte(`{"a":1}`)}
	b, _ := r.MarshalBinary()
	f.Add(b)
	f.Add([]byte(`{"key":"k","body":"e30="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r storage.IdempotencyRecord
		if r.UnmarshalBinary(b) != nil {
			return
		}
		again, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var r2 storage.IdempotencyRecord
		if err := r2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %v, %+v != %+v", err, r2, r)
		}
	})
}

// The answer of a capture or refund is the whole order, kept a day per key:
// an order captured and refunded line by line under keys stored the square
// of its size (4 GB for 1 000 lines in bbolt). Large answers are kept
// deflated, and read back byte for byte.
func TestIdempotencyRecordLargeAnswerIsCompressed(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var answer bytes.Buffer
	answer.WriteString(`{"id":"o-1","events":[`)
	for i := 0; answer.Len() <= storage.CompressAnswerAbove*4; i++ {
		if i > 0 {
			answer.WriteByte(',')
		}
		fmt.Fprintf(&answer, `{"id":"ev-%06d","orderId":"o-1","amount":{"amount":"%d.00","currency":"SEK","minorUnits":%d00},"type":"partialCapture"}`, i, 1000+i, 1000+i)
	}
	answer.WriteString(`]}`)
	small := []byte(strings.Repeat("x", storage.CompressAnswerAbove))
	for _, r := range []storage.IdempotencyRecord{
		{MerchantID: "m", Key: "big", Status: 200, Body: answer.Bytes(), CreatedAt: at, ExpiresAt: at},
		{MerchantID: "m", Key: "at-the-bound", Status: 200, Body: small, CreatedAt: at, ExpiresAt: at},
	} {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		compressed := len(r.Body) > storage.CompressAnswerAbove
		if compressed && len(b) > len(r.Body)/3 {
			t.Fatalf("%s: a %d-byte answer is kept in %d bytes", r.Key, len(r.Body), len(b))
		}
		if !compressed && !bytes.HasSuffix(b, r.Body) {
			t.Fatalf("%s: an answer of %d bytes is not stored as is", r.Key, len(r.Body))
		}
		var got storage.IdempotencyRecord
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s: the answer did not come back byte for byte", r.Key)
		}
		if compressed {
			// A damaged compressed answer is an error, never another answer.
			if err := got.UnmarshalBinary(b[:len(b)-len(b)/3]); err == nil {
				t.Fatalf("%s: a truncated record decoded", r.Key)
			}
		}
	}
}

// BenchmarkMarshalLargeAnswer encodes a record whose answer is deflated (a
// 100-line order's capture answer is about this size).
func BenchmarkMarshalLargeAnswer(b *testing.B) {
	answer := bytes.Repeat([]byte(`{"id":"line-0001","description":"Tiles, 20 × 20 cm","quantity":12,"unitPrice":12500},`), 1500)
	r := &storage.IdempotencyRecord{MerchantID: "m", Key: "k", Status: 200, Body: answer}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// A deflated answer encoded after garbage collections, as an occasional big
// order's capture is amid traffic of small ones, reuses a deflater: making
// one allocates about a megabyte, several times what the record itself
// takes, and a sync.Pool drops its contents at every second collection.
func TestLargeAnswerAfterCollectionsReusesADeflater(t *testing.T) {
	answer := bytes.Repeat([]byte(`{"id":"line-0001","description":"Tiles, 20 × 20 cm","quantity":12,"unitPrice":12500},`), 1500)
	r := &storage.IdempotencyRecord{MerchantID: "m", Key: "k", Status: 200, Body: answer}
	if _, err := r.MarshalBinary(); err != nil { // the first makes a deflater
		t.Fatal(err)
	}
	var most uint64
	for range 5 {
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := r.MarshalBinary()
		runtime.ReadMemStats(&after)
		if err != nil || len(b) > len(answer)/4 {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
		most = max(most, after.TotalAlloc-before.TotalAlloc)
	}
	if most > 256<<10 {
		t.Fatalf("encoding a %d-byte answer after two collections allocated %d bytes", len(answer), most)
	}
}
