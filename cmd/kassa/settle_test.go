package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/token"
)

// TestSettleUsesTheSandboxClock: `kassa settle` on a sandbox's data dates
// its settlement by the sandbox clock the server kept, as the server's own
// run would, not by real time (which put it before the captures it holds).
func TestSettleUsesTheSandboxClock(t *testing.T) {
	dir := t.TempDir()
	clock := server.NewClock(true)
	if err := clock.PersistTo(filepath.Join(dir, "sandbox-clock.json")); err != nil {
		t.Fatal(err)
	}
	if err := clock.Advance(30 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l := kassa.New(st, kassa.Options{})
	creds, _, err := l.EnsureMerchant(ctx, kassa.MerchantOptions{Name: "m", Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	if err := l.PutAuthorization(ctx, &token.Authorization{Token: "t", MerchantID: creds.MerchantID, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", &order.CreateRequest{Country: "SE", Currency: "SEK",
		Locale: "sv-SE", OrderLines: []order.LineInput{{Description: new("tiles"), Quantity: &one, UnitPrice: new(int64(10000)), Vat: new(int64(2500))}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Capture(ctx, kassa.Call{MerchantID: creds.MerchantID}, res.Order.ID, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var out, errb bytes.Buffer
	if code := run([]string{"settle", "--data", dir}, &out, &errb); code != 0 {
		t.Fatalf("settle: %d %s %s", code, out.String(), errb.String())
	}
	st, err = bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := kassa.New(st, kassa.Options{}).ListSettlements(ctx, creds.MerchantID, settlement.Query{})
	if err != nil || len(page.Settlements) != 1 {
		t.Fatalf("settlements %v %v, want one", page.Settlements, err)
	}
	if at := page.Settlements[0].CreatedAt; at.Before(now) {
		t.Fatalf("settlement dated %s, before the capture it holds (sandbox now %s)", at, now)
	}
}

// TestLoadKeyOnceAmongServersStartingTogether: servers starting at once on
// an empty directory all end up with the one key on disk.
func TestLoadKeyOnceAmongServersStartingTogether(t *testing.T) {
	t.Setenv("KASSA_KEY", "")
	dir := t.TempDir()
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := loadKey(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	onDisk, err := loadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if !bytes.Equal(k, onDisk) {
			t.Fatalf("server %d holds another key than the one on disk", i)
		}
	}
}

// TestBadSandboxEnvIsRefused: KASSA_SANDBOX that is no boolean stops serve,
// as --sandbox=maybe does, instead of turning the sandbox off.
func TestBadSandboxEnvIsRefused(t *testing.T) {
	t.Setenv("KASSA_SANDBOX", "maybe")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "KASSA_SANDBOX") {
		t.Fatalf("serve with KASSA_SANDBOX=maybe: %d %s", code, errb.String())
	}
}

// TestDailySettlementMissedWhileStoppedRunsAtStart: a capture made just
// before the day's settlement time, and no server running at that time (a
// deploy, an outage). The server started after it settles that day at once,
// as the daily run would have; it used to wait for the next day's run, so
// the day's payout was skipped.
func TestDailySettlementMissedWhileStoppedRunsAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kassa")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	base, stop := startServer(t, bin, data)
	c := &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	id := c.orderOf("missed-run", 12500)
	// Half a minute before the next 02:00 (the default --settle-at), so that
	// no tick of this server reaches the settlement time.
	var clock struct{ Now time.Time }
	c.do("GET", "/sandbox/v1/clock", "", "", 200, &clock)
	next := nextAt(clock.Now, time.Date(0, 1, 1, 2, 0, 0, 0, time.UTC))
	c.do("POST", "/sandbox/v1/clock", fmt.Sprintf(`{"set":%q}`, next.Add(-30*time.Second).Format(time.RFC3339Nano)), "", 200, nil)
	c.do("POST", "/v1/orders/"+id+"/capture", "", "capture-missed-run", 200, nil)
	stop()

	// The server is down while the settlement time passes.
	sc := server.NewClock(true)
	if err := sc.PersistTo(filepath.Join(data, "sandbox-clock.json")); err != nil {
		t.Fatal(err)
	}
	if err := sc.Advance(time.Minute); err != nil {
		t.Fatal(err)
	}

	base, stop = startServer(t, bin, data)
	defer stop()
	c = &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.settlements()
		if len(got) == 1 && got[0].GrossAmount.MinorUnits == 12500 {
			return
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("settlements after a start past the missed run: %+v, want one of 125.00", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
