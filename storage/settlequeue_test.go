package storage

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kassahq/kassa/settlement"
)

// TestQueuedRecourseIsUnreadableToOlderBuilds: an older build reads a queued
// item with encoding/json into its settlement.Item and, not knowing the
// recourse kind, settled it as nothing. A recourse item must fail that read;
// every other item must still pass it, and all must round-trip.
func TestQueuedRecourseIsUnreadableToOlderBuilds(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 123, time.UTC)
	for _, it := range []settlement.Item{
		{Key: "c1", MerchantID: "m", Currency: "SEK", LedgerID: "c1", Kind: settlement.KindCapture, Amount: 30000, OccurredAt: at},
		{Key: "r1", MerchantID: "m", Currency: "SEK", LedgerID: "r1", Kind: settlement.KindRefund, Amount: 5000, OccurredAt: at},
		{Key: "c1:recourse", MerchantID: "m", Currency: "SEK", LedgerID: "c1", Kind: settlement.KindRecourse, Amount: 20000, OccurredAt: at},
	} {
		b, err := EncodeRecord(QueuedItem(it))
		if err != nil {
			t.Fatal(err)
		}
		var old settlement.Item
		oldErr := json.Unmarshal(b, &old)
		if it.Kind == settlement.KindRecourse && oldErr == nil {
			t.Errorf("%s: an older build reads the queued recourse as %+v", it.Key, old)
		}
		if it.Kind != settlement.KindRecourse && (oldErr != nil || old != it) {
			t.Errorf("%s: an older build reads %+v, %v; want the item", it.Key, old, oldErr)
		}
		var got QueuedItem
		if err := DecodeRecord(b, &got); err != nil || settlement.Item(got) != it {
			t.Errorf("%s: round trip %+v, %v; want %+v", it.Key, got, err, it)
		}
	}
	// Queued by an older build: plain JSON of any kind.
	var got QueuedItem
	if err := DecodeRecord([]byte(`{"key":"c2","kind":"capture","amount":100}`), &got); err != nil || got.Key != "c2" || got.Amount != 100 {
		t.Errorf("an older build's item reads %+v, %v", got, err)
	}
	if err := DecodeRecord([]byte("\x01"+`{"key":"c2","kind":"capture","amount":100}`), &got); err == nil {
		t.Error("a marked item of another kind was read")
	}
}
