package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// boltServe is serve's command line on the bolt store in data, with a
// merchant of known credentials.
func boltServe(data string) []string {
	return []string{"--data", data, "--addr", "127.0.0.1:0", "--client-id", "demo", "--client-secret", "demo-secret-123"}
}

// checkoutLink creates a checkout session on the server at base and returns
// the signed link its answer holds, the one a buyer is sent.
func checkoutLink(t *testing.T, base string) string {
	t.Helper()
	c := &client{t: t, base: base}
	c.token("demo", "demo-secret-123")
	var s struct{ CheckoutURL string }
	c.do("POST", "/v1/sessions", `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"a","quantity":1,"unitPrice":100,"vat":2500}]}`, "", 201, &s)
	if !strings.Contains(s.CheckoutURL, "sig=") {
		t.Fatalf("checkoutUrl %q is not signed", s.CheckoutURL)
	}
	return s.CheckoutURL
}

// follow is the status a buyer's GET of link gets, from the server at base
// (a restarted server listens on another port).
func follow(t *testing.T, base, link string) int {
	t.Helper()
	_, rest, _ := strings.Cut(strings.TrimPrefix(link, "http://"), "/")
	resp, err := http.Get(base + "/" + rest)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBoltRefusesAnotherSigningKey: on bolt, the store records a check value
// of the key its server signs with, as a PostgreSQL database does, so a
// start with another key (KASSA_KEY changed, set where server.key was used,
// unset where it was given, or server.key lost and made anew) is refused,
// exit 1, instead of serving with every link and token signed before dead.
// The same key, from KASSA_KEY or server.key, starts and its links work;
// kassa store rekey is the way to change keys on purpose.
func TestBoltRefusesAnotherSigningKey(t *testing.T) {
	t.Setenv("KASSA_KEY", "")
	data := filepath.Join(t.TempDir(), "data")
	base, done := serveInProcess(t, boltServe(data)...)
	link := checkoutLink(t, base)
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("checkout link: %d", got)
	}
	stopInProcess(t, done)
	fileKey, err := os.ReadFile(filepath.Join(data, "server.key"))
	if err != nil {
		t.Fatal(err)
	}

	// KASSA_KEY where server.key signed.
	t.Setenv("KASSA_KEY", strings.Repeat("ab", 32))
	if code, _, errb := runBounded(t, append([]string{"serve"}, boltServe(data)...)...); code != 1 || !strings.Contains(errb, "KASSA_KEY differs") || !strings.Contains(errb, "server.key") {
		t.Fatalf("serve with another KASSA_KEY: exit %d, %s", code, errb)
	}
	// The same key given through KASSA_KEY is the same key.
	t.Setenv("KASSA_KEY", strings.TrimSpace(string(fileKey)))
	base, done = serveInProcess(t, boltServe(data)...)
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("checkout link, server.key's key in KASSA_KEY: %d", got)
	}
	stopInProcess(t, done)

	// server.key lost: a new one would be made and sign.
	if err := os.Remove(filepath.Join(data, "server.key")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KASSA_KEY", "")
	if code, _, errb := runBounded(t, append([]string{"serve"}, boltServe(data)...)...); code != 1 || !strings.Contains(errb, "server.key") || !strings.Contains(errb, "rekey") ||
		!strings.Contains(errb, "removed it again") {
		t.Fatalf("serve with a new server.key: exit %d, %s", code, errb)
	}
	// The refused start leaves the directory as it found it: a key file it
	// made, which nothing was ever signed with, would read as the server's
	// key to an operator looking for the lost one.
	if _, err := os.Stat(filepath.Join(data, "server.key")); !os.IsNotExist(err) {
		t.Fatalf("a refused start left the server.key it made: %v", err)
	}
	// Still refused the next time.
	if code, _, errb := runBounded(t, append([]string{"serve"}, boltServe(data)...)...); code != 1 || !strings.Contains(errb, "removed it again") {
		t.Fatalf("serve again with no server.key: exit %d, %s", code, errb)
	}
	// The old key back in its place: served as before.
	if err := os.WriteFile(filepath.Join(data, "server.key"), fileKey, 0o600); err != nil {
		t.Fatal(err)
	}
	base, done = serveInProcess(t, boltServe(data)...)
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("checkout link, server.key restored: %d", got)
	}
	stopInProcess(t, done)

	// Changed on purpose: rekey, then a start with the new key records it.
	var out, errb lockedBuffer
	if code := run([]string{"store", "rekey", "--data", data}, &out, &errb); code != 0 || !strings.Contains(out.String(), "refused") {
		t.Fatalf("store rekey: exit %d, %s%s", code, out.String(), errb.String())
	}
	// server.key is still there: a start without KASSA_KEY would record the
	// old key again, which the rekey says rather than promising the old
	// links dead.
	if keyFile := filepath.Join(data, "server.key"); !strings.Contains(out.String(), keyFile+", which still holds the key used so far") {
		t.Fatalf("store rekey beside %s does not say it still holds the old key: %s", keyFile, out.String())
	}
	newKey := strings.Repeat("cd", 32)
	t.Setenv("KASSA_KEY", newKey)
	base, done = serveInProcess(t, boltServe(data)...)
	if got := follow(t, base, link); got != 404 {
		t.Fatalf("checkout link signed with the old key, after rekey: %d, want 404", got)
	}
	stopInProcess(t, done)
	// …and from then on the old one is refused, KASSA_KEY unset.
	t.Setenv("KASSA_KEY", "")
	if code, _, errb := runBounded(t, append([]string{"serve"}, boltServe(data)...)...); code != 1 || !strings.Contains(errb, "set the same KASSA_KEY") {
		t.Fatalf("serve without KASSA_KEY after it was recorded: exit %d, %s", code, errb)
	}
	t.Setenv("KASSA_KEY", newKey)
	base, done = serveInProcess(t, boltServe(data)...)
	if got := follow(t, base, checkoutLink(t, base)); got != 200 {
		t.Fatalf("checkout link signed with the recorded new key: %d", got)
	}
	stopInProcess(t, done)
}

// TestBoltKeyRecordedOnAnOlderFile: a store file from before the key's
// check value was recorded starts with whatever key it is given, and that
// key is recorded then; another one is refused from the next start.
func TestBoltKeyRecordedOnAnOlderFile(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(data, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Setenv("KASSA_KEY", strings.Repeat("ab", 32))
	base, done := serveInProcess(t, boltServe(data)...)
	link := checkoutLink(t, base)
	stopInProcess(t, done)
	t.Setenv("KASSA_KEY", strings.Repeat("ef", 32))
	if code, _, errb := runBounded(t, append([]string{"serve"}, boltServe(data)...)...); code != 1 || !strings.Contains(errb, "KASSA_KEY differs") {
		t.Fatalf("serve with another KASSA_KEY: exit %d, %s", code, errb)
	}
	t.Setenv("KASSA_KEY", strings.Repeat("ab", 32))
	base, done = serveInProcess(t, boltServe(data)...)
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("checkout link: %d", got)
	}
	stopInProcess(t, done)
}

// TestStoreCopyChecksTheSigningKey: kassa store copy carries the key the
// bolt server signed with, and refuses, exit 2 with nothing copied, a key
// that is not it (another KASSA_KEY, a server.key left beside a store whose
// server was given KASSA_KEY, or none at all), which the replicas would
// sign with and refuse every link and token given out before. With the
// server's key, a replica on the copy follows the buyer's link.
func TestStoreCopyChecksTheSigningKey(t *testing.T) {
	url := pgtest.FreshSchema(t)
	data := filepath.Join(t.TempDir(), "data")
	serverKey := strings.Repeat("ab", 32)
	t.Setenv("KASSA_KEY", serverKey)
	base, done := serveInProcess(t, boltServe(data)...)
	link := checkoutLink(t, base)
	stopInProcess(t, done)

	copyWith := func(env string) (int, string, string) {
		t.Setenv("KASSA_KEY", env)
		var out, errb lockedBuffer
		code := run([]string{"store", "copy", "--data", data, "--database-url", url}, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errb := copyWith(""); code != 2 || !strings.Contains(errb, "no KASSA_KEY") || !strings.Contains(errb, "nothing was copied") {
		t.Fatalf("copy without a key: exit %d, %s", code, errb)
	}
	if code, _, errb := copyWith(strings.Repeat("cd", 32)); code != 2 || !strings.Contains(errb, "KASSA_KEY: not the key") {
		t.Fatalf("copy with another KASSA_KEY: exit %d, %s", code, errb)
	}
	if err := os.WriteFile(filepath.Join(data, "server.key"), []byte(strings.Repeat("ef", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := copyWith(""); code != 2 || !strings.Contains(errb, "server.key (KASSA_KEY is not set)") {
		t.Fatalf("copy with a stray server.key: exit %d, %s", code, errb)
	}
	// Nothing was copied: the database takes the copy still.
	if code, out, errb := copyWith(serverKey); code != 0 || !strings.Contains(out, "signing key: KASSA_KEY") {
		t.Fatalf("copy with the server's KASSA_KEY: exit %d, %s%s", code, out, errb)
	}
	base, done = serveInProcess(t, "--store", "postgres", "--database-url", url, "--data", filepath.Join(t.TempDir(), "replica"),
		"--addr", "127.0.0.1:0", "--client-id", "demo", "--client-secret", "demo-secret-123")
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("the bolt server's checkout link on a replica of the copy: %d", got)
	}
	stopInProcess(t, done)
}

// TestPostgresRekey: kassa store rekey on PostgreSQL, as on bolt. A replica
// started with KASSA_KEY A records it; with A's replica stopped, one with B
// is refused. Rekey beside a serving replica is refused, exit 2, naming its
// session, and leaves A recorded; with every replica stopped it forgets A,
// the next replica records B, A's checkout link is refused and B's works.
func TestPostgresRekey(t *testing.T) {
	db := pgtest.FreshDatabase(t, "") // its own: no other test's sessions are on it
	dir := t.TempDir()
	replica := func(name string) []string {
		return []string{"--store", "postgres", "--database-url", db, "--data", filepath.Join(dir, name), "--addr", "127.0.0.1:0",
			"--client-id", "demo", "--client-secret", "demo-secret-123"}
	}
	rekey := func() (int, string, string) {
		var out, errb lockedBuffer
		code := run([]string{"store", "rekey", "--store", "postgres", "--database-url", db}, &out, &errb)
		return code, out.String(), errb.String()
	}
	keyA, keyB := strings.Repeat("ab", 32), strings.Repeat("cd", 32)

	t.Setenv("KASSA_KEY", keyA)
	base, done := serveInProcess(t, replica("a")...)
	link := checkoutLink(t, base)
	if code, out, errb := rekey(); code != 2 || !strings.Contains(errb, "application 'kassa'") || !strings.Contains(errb, "stop") {
		t.Fatalf("rekey beside a serving replica: exit %d, %s%s; want 2 naming its session", code, out, errb)
	}
	if got := follow(t, base, link); got != 200 {
		t.Fatalf("checkout link after the refused rekey: %d", got)
	}
	stopInProcess(t, done)

	t.Setenv("KASSA_KEY", keyB)
	if code, _, errb := runBounded(t, append([]string{"serve"}, replica("b")...)...); code != 1 || !strings.Contains(errb, "KASSA_KEY differs") {
		t.Fatalf("serve with another KASSA_KEY: exit %d, %s", code, errb)
	}
	code, out, errb := rekey()
	if code != 0 || !strings.Contains(out, "no longer records the signing key") || !strings.Contains(out, "refused") {
		t.Fatalf("store rekey: exit %d, %s%s", code, out, errb)
	}
	if code, out, _ := rekey(); code != 0 || !strings.Contains(out, "records no signing key") {
		t.Fatalf("store rekey again: exit %d, %s; want nothing to forget", code, out)
	}
	base, done = serveInProcess(t, replica("b")...)
	if got := follow(t, base, link); got != 404 {
		t.Fatalf("checkout link signed with the old key, after rekey: %d, want 404", got)
	}
	if got := follow(t, base, checkoutLink(t, base)); got != 200 {
		t.Fatalf("checkout link signed with the new key: %d", got)
	}
	stopInProcess(t, done)
	// The old key is refused from then on.
	t.Setenv("KASSA_KEY", keyA)
	if code, _, errb := runBounded(t, append([]string{"serve"}, replica("a")...)...); code != 1 || !strings.Contains(errb, "KASSA_KEY differs") {
		t.Fatalf("serve with the old KASSA_KEY after rekey: exit %d, %s", code, errb)
	}
}
