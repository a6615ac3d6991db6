package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassahq/kassa/storage"
)

// TestLoadRollsBackAndSaysWhyOnce: a record the store cannot take fails the
// whole load, leaving every table empty (records put before it included),
// and the error names the record and its cause once: the operator of
// kassa store copy reads it, and a cause printed twice reads as two errors.
func TestLoadRollsBackAndSaysWhyOnce(t *testing.T) {
	s := open(t, freshSchema(t))
	ctx := context.Background()
	_, err := s.Load(ctx, func(put func(storage.Record) error) error {
		if err := put(storage.Record{Kind: storage.KindSequence, MerchantID: "m1", ID: "invoice", Number: 7}); err != nil {
			return err
		}
		return put(storage.Record{Kind: storage.KindIdempotency, MerchantID: "m1", ID: "k1", Body: []byte("{not json")})
	})
	if err == nil {
		t.Fatal("a load with an undecodable record succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "m1/k1") || strings.Count(msg, "invalid character") != 1 {
		t.Errorf("error %q: want the record named and its cause once", msg)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM sequences`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("sequences after a failed load: %d (%v), want 0", n, err)
	}
}
