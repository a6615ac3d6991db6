package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

// TestSettlementQueueOrderMigration: migration 7 gives the rows queued
// before it their occurrence key, computed from the body exactly as
// storage.AppendTimeKey computes it (nanoseconds, zone offsets, times
// before 1970), so the queue then reads oldest first; and a row inserted by
// an older build, which does not write the column, gets it too.
func TestSettlementQueueOrderMigration(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	s := open(t, u)
	// Back to the schema before migration 7 (and the later ones that use
	// its kassa_time_key: the authorization tokens' expiry index).
	if _, err := s.Pool().Exec(ctx, `
		DROP INDEX auth_tokens_expires;
		DROP FUNCTION kassa_expires_at(bytea);
		DELETE FROM schema_migrations WHERE version IN (11, 12);
		DROP TRIGGER settlement_queue_occurred ON settlement_queue;
		DROP FUNCTION kassa_settlement_queue_occurred();
		DROP FUNCTION kassa_time_key(text);
		DROP FUNCTION kassa_occurred_at(bytea);
		ALTER TABLE settlement_queue DROP COLUMN occurred_key;
		DELETE FROM schema_migrations WHERE version = 7`); err != nil {
		t.Fatal(err)
	}
	east, west := time.FixedZone("", 2*60*60), time.FixedZone("", -(5*60*60+30*60))
	base := time.Date(2026, 2, 2, 1, 0, 0, 0, time.UTC)
	times := map[string]time.Time{ // keys sort opposite to time
		"z": {},
		"y": time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		"x": base,
		"w": base.Add(time.Nanosecond),
		"v": base.Add(500 * time.Millisecond).In(east),
		"u": base.Add(time.Second + 123_456_789).In(west),
		"t": base.Add(time.Hour + 999_999_999),
	}
	insert := func(key string) {
		t.Helper()
		// A reference an older build let through (a NUL, which jsonb
		// refuses) and one that mimics the time's key inside a string.
		body, err := json.Marshal(settlement.Item{Key: key, MerchantID: "m1", Currency: "SEK", LedgerID: key,
			Kind: settlement.KindCapture, Amount: 100, OccurredAt: times[key],
			MerchantReference: "PO\x00 \"occurredAt\":\"1999-01-01T00:00:00Z\"", StoreID: "s\x00"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, `INSERT INTO settlement_queue (key, body) VALUES ($1, $2)`, key, body); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"z", "y", "x", "w", "v", "u"} {
		insert(k)
	}
	s.Close()
	s = open(t, u)
	insert("t") // as a replica of the older build would, after the migration

	rows, err := s.Pool().Query(ctx, `SELECT key, occurred_key FROM settlement_queue`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var key string
		var got []byte
		if err := rows.Scan(&key, &got); err != nil {
			t.Fatal(err)
		}
		if want := storage.AppendTimeKey(nil, times[key]); !bytes.Equal(got, want) {
			t.Errorf("item %s at %v: occurred_key %x, want %x", key, times[key], got, want)
		}
		n++
	}
	if rows.Err() != nil || n != len(times) {
		t.Fatalf("%d rows, %v", n, rows.Err())
	}
	var keys []string
	err = s.View(ctx, func(tx storage.Tx) error {
		items, err := tx.PendingSettlementItems(100)
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		return err
	})
	if err != nil || !slices.Equal(keys, []string{"z", "y", "x", "w", "v", "u", "t"}) {
		t.Fatalf("pending %v, %v", keys, err)
	}
}
