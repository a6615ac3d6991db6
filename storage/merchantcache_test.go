package storage

import (
	"encoding/json"
	"testing"
)

func TestMerchantCacheServesOnlyIdenticalBytes(t *testing.T) {
	var c MerchantCache
	enc := func(m Merchant) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v1 := enc(Merchant{ID: "m1", Name: "One", SecretHash: []byte{1}, WebhookEvents: []string{"a"}})
	v2 := enc(Merchant{ID: "m1", Name: "Renamed", SecretHash: []byte{2}, WebhookEvents: []string{"b"}})

	first, err := c.Decode("m1", v1)
	if err != nil || first.Name != "One" {
		t.Fatalf("first decode: %+v %v", first, err)
	}
	first.SecretHash[0], first.WebhookEvents[0] = 9, "scribbled"
	cached, err := c.Decode("m1", v1)
	if err != nil || cached.Name != "One" || cached.SecretHash[0] != 1 || cached.WebhookEvents[0] != "a" {
		t.Fatalf("cached decode is not a clean copy: %+v %v", cached, err)
	}
	changed, err := c.Decode("m1", v2)
	if err != nil || changed.Name != "Renamed" || changed.SecretHash[0] != 2 || changed.WebhookEvents[0] != "b" {
		t.Fatalf("changed bytes served the old merchant: %+v %v", changed, err)
	}
	if _, err := c.Decode("m1", []byte("{not json")); err == nil {
		t.Fatal("undecodable bytes accepted")
	}
}
