package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
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
	clock := sandboxClockIn(t, dir)
	if err := clock.Advance(30 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := clock.Now()
	_, st, creds := sandboxCapture(t, dir, clock)
	st.Close()

	var out, errb bytes.Buffer
	if code := run([]string{"settle", "--data", dir}, &out, &errb); code != 0 {
		t.Fatalf("settle: %d %s %s", code, out.String(), errb.String())
	}
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{Clock: clock.Now})
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
	if code, _, errb := runBounded(t, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"); code != 2 || !strings.Contains(errb, "KASSA_SANDBOX") {
		t.Fatalf("serve with KASSA_SANDBOX=maybe: %d %s", code, errb)
	}
}

// TestDailyRunMissedWhileDownRunsAtStart: a server that was down at the
// settlement time (a restart or deploy across it) runs the day's settlement
// when it starts, instead of leaving the day unsettled until the next one.
// A server that finds the day settled already makes nothing more.
func TestDailyRunMissedWhileDownRunsAtStart(t *testing.T) {
	dir := t.TempDir()
	clock := sandboxClockIn(t, dir)
	ctx := context.Background()
	now := clock.Now()
	l, st, creds := sandboxCapture(t, dir, clock)
	defer st.Close()
	// The server was down over the next settlement time: it starts a
	// minute after it.
	settleAt := now.Add(time.Hour).UTC()
	if err := clock.Advance(time.Hour + time.Minute); err != nil {
		t.Fatal(err)
	}
	settlements := func() int {
		page, err := l.ListSettlements(ctx, creds.MerchantID, settlement.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Settlements)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for start := range 2 {
		jobs, stop := context.WithTimeout(ctx, 2*time.Second)
		runJobs(jobs, l, log, clock, settleAt)
		stop()
		if n := settlements(); n != 1 {
			t.Fatalf("start %d: %d settlements, want 1", start+1, n)
		}
	}
}

// sandboxClockIn is a sandbox clock kept in dir, as kassa serve keeps it.
func sandboxClockIn(t *testing.T, dir string) *server.Clock {
	t.Helper()
	clock := server.NewClock(true)
	if err := clock.PersistTo(filepath.Join(dir, "sandbox-clock.json")); err != nil {
		t.Fatal(err)
	}
	return clock
}

// sandboxCapture opens the bolt store of dir on clock, makes a sandbox
// merchant and captures one order of 100.00 SEK, queued for settlement.
func sandboxCapture(t *testing.T, dir string, clock *server.Clock) (*kassa.Ledger, *bolt.Store, kassa.Credentials) {
	t.Helper()
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
	captureOneLine(t, l, creds.MerchantID, "t", clock.Now(), "tiles", 10000)
	return l, st, creds
}

// captureOneLine authorizes (token tok, at now), orders one line of price
// (25 % VAT) by invoice and captures it: one capture queued for settlement.
func captureOneLine(t *testing.T, l *kassa.Ledger, merchantID, tok string, now time.Time, description string, price int64) {
	t.Helper()
	ctx := context.Background()
	if err := l.PutAuthorization(ctx, &token.Authorization{Token: tok, MerchantID: merchantID, Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	res, err := l.CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: merchantID}, tok, &order.CreateRequest{Country: "SE", Currency: "SEK",
		Locale: "sv-SE", OrderLines: []order.LineInput{{Description: &description, Quantity: &one, UnitPrice: &price, Vat: new(int64(2500))}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Capture(ctx, kassa.Call{MerchantID: merchantID}, res.Order.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedCommandLeavesTheSandboxClockAlone: a settle or a second serve
// on a data directory a running server holds is refused, and writes nothing
// there. Both wrote the sandbox clock's file before they found the store in
// use: the offset they had read put back, which, were the running server's
// clock moved meanwhile, undid the move on disk, so the next start would
// date new records before those it holds.
func TestRefusedCommandLeavesTheSandboxClockAlone(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, done := serveInProcess(t, "--data", data, "--addr", "127.0.0.1:0")
	defer stopInProcess(t, done)
	path := filepath.Join(data, "sandbox-clock.json")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"settle", "--data", data},
		{"serve", "--data", data, "--addr", "127.0.0.1:0"},
	} {
		code, _, stderr := runBounded(t, args...)
		if code != 1 || !strings.Contains(stderr, "in use by another process") {
			t.Fatalf("%q: exit %d, %s; want 1, the store in use", args, code, stderr)
		}
		after, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("%q, refused, wrote the running server's %s", args, path)
		}
	}
}

// TestSettleSaysWhatMayHoldTheStore: a bolt store that a kassa store check
// or store copy is reading is refused as one a server holds is, and the
// message names those commands too, not only serve and settle, which an
// operator would look for in vain; and a database that cannot be reached
// is not answered with the bolt hint "is the server running?" (on
// PostgreSQL, settle runs beside the replicas).
func TestSettleSaysWhatMayHoldTheStore(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// As kassa store check and kassa store copy hold it.
	ro, err := bolt.OpenReadOnly(filepath.Join(dir, "kassa.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBounded(t, "settle", "--data", dir)
	ro.Close()
	const hint = "(a running server settles daily by itself)"
	if code != 1 || !strings.Contains(stderr, "in use by another process") || !strings.Contains(stderr, "store check") ||
		!strings.HasSuffix(strings.TrimSpace(stderr), hint) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("settle on a store a store check holds: exit %d, %q; want 1 and one line naming store check, ending %q", code, stderr, hint)
	}
	code, _, stderr = runBounded(t, "settle", "--data", dir, "--store", "postgres", "--database-url", "postgres://kassa@127.0.0.1:1/none")
	if code != 1 || !strings.Contains(stderr, "open store") || strings.Contains(stderr, "settles daily") {
		t.Fatalf("settle on a database not reachable: exit %d, %q; want 1, without the hint of a bolt store in use", code, stderr)
	}
}
