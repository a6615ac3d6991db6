package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/memory"
)

// TestWebhookFlagsAppliedOnlyWhenChanged: each start applies the --webhook-*
// flags only when they differ from the ones last applied, so what the
// merchant set through the API since survives a restart with the same flags.
func TestWebhookFlagsAppliedOnlyWhenChanged(t *testing.T) {
	ctx := context.Background()
	ledger := kassa.New(memory.New(time.Now), kassa.Options{})
	c := serveConfig{clientID: "demo", clientSecret: "demo-secret-123", webhookURL: "http://127.0.0.1:9/hooks", webhookEvents: "order.*"}
	if err := ensureMerchant(ctx, ledger, c, io.Discard); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := func(c serveConfig) *storage.Merchant {
		t.Helper()
		out.Reset()
		if err := configureWebhook(ctx, ledger, c, &out); err != nil {
			t.Fatal(err)
		}
		var m *storage.Merchant
		if err := ledger.Store().View(ctx, func(tx storage.Tx) (err error) {
			m, err = tx.GetMerchantByClientID(c.clientID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}

	first := start(c)
	if !slices.Equal(first.WebhookEvents, []string{"order.*"}) || !strings.Contains(out.String(), first.WebhookSecret) {
		t.Fatalf("first start: events %v, output %q", first.WebhookEvents, out.String())
	}
	// The merchant changes its topics and rotates its secret through the API.
	set, err := ledger.SetWebhook(ctx, first.ID, kassa.SetWebhookRequest{URL: c.webhookURL,
		Events: []string{"order.create"}, RotateSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	if again := start(c); !slices.Equal(again.WebhookEvents, []string{"order.create"}) || again.WebhookSecret != set.Secret || out.Len() != 0 {
		t.Fatalf("a restart with the same flags overwrote the API's settings: events %v, secret kept %v, output %q",
			again.WebhookEvents, again.WebhookSecret == set.Secret, out.String())
	}

	c.webhookEvents = "order.expiryReminder, order.*"
	if changed := start(c); !slices.Equal(changed.WebhookEvents, []string{"order.*", "order.expiryReminder"}) || changed.WebhookSecret != set.Secret {
		t.Fatalf("changed events: %v, secret kept %v", changed.WebhookEvents, changed.WebhookSecret == set.Secret)
	}
	c.webhookSecret = "whsec_from_the_flag_0123456789"
	m := start(c)
	if m.WebhookSecret != c.webhookSecret {
		t.Fatal("a changed --webhook-secret was not applied")
	}
	// What records the applied flags does not hold the secret in clear.
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), c.webhookSecret); n != 1 {
		t.Fatalf("the merchant record holds the flag's secret %d times", n)
	}
	if again := start(c); again.WebhookSecret != c.webhookSecret || !slices.Equal(again.WebhookEvents, m.WebhookEvents) {
		t.Fatalf("restart: %+v", again)
	}
}
