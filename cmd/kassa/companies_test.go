package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
)

func TestCompaniesImport(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "no.csv")
	os.WriteFile(good, []byte("companyId,companyName\n923609016,Fjord Frakt AS\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, good}, &out, &errb); code != 0 {
		t.Fatalf("import: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "imported 1 NO companies") {
		t.Fatalf("output %q", out.String())
	}
	d, err := loadCompanies(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Search("NO", "fjord frakt", 5); len(got) != 1 || got[0].CompanyID != "923609016" || d.Len("NO") != 1 {
		t.Fatalf("imported directory: %+v (%d)", got, d.Len("NO"))
	}
	if d.Len("SE") < 5000 {
		t.Fatalf("other countries keep the bundled list: %d", d.Len("SE"))
	}
	// A bad file changes nothing.
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("companyId,companyName\n923609017,Bad Check AS\n"), 0o600)
	errb.Reset()
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "line 2") {
		t.Fatalf("bad file: %d %s", code, errb.String())
	}
	if d, _ := loadCompanies(dir); d.Len("NO") != 1 {
		t.Fatal("a refused import changed the directory")
	}
	if code := run([]string{"companies", "import", "--country", "XX", good}, &out, &errb); code != 2 {
		t.Fatalf("bad country: %d", code)
	}
}

func TestNextSettlementTime(t *testing.T) {
	at, _ := time.Parse("15:04", "02:00")
	for _, c := range []struct{ now, next, cutoff string }{
		{"2026-01-05T01:59:00Z", "2026-01-05T02:00:00Z", "2026-01-04T02:00:00Z"},
		{"2026-01-05T02:00:00Z", "2026-01-06T02:00:00Z", "2026-01-05T02:00:00Z"},
		{"2026-01-05T02:00:40Z", "2026-01-06T02:00:00Z", "2026-01-05T02:00:00Z"},
		{"2026-01-05T23:00:00Z", "2026-01-06T02:00:00Z", "2026-01-05T02:00:00Z"},
	} {
		now, _ := time.Parse(time.RFC3339, c.now)
		if got := nextAt(now, at).Format(time.RFC3339); got != c.next {
			t.Errorf("nextAt(%s) = %s, want %s", c.now, got, c.next)
		}
		if got := settleCutoff(now, at).Format(time.RFC3339); got != c.cutoff {
			t.Errorf("settleCutoff(%s) = %s, want %s", c.now, got, c.cutoff)
		}
	}
}

func TestSettleCommand(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"settle", "--data", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "0 settlements") {
		t.Fatalf("settle on an empty store: %d %s %s", code, out.String(), errb.String())
	}
	// A directory with no store is a mistake, not a run with nothing to do;
	// and it is left as it was.
	other := t.TempDir()
	out.Reset()
	errb.Reset()
	if code := run([]string{"settle", "--data", other}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no store at") {
		t.Fatalf("settle on a directory without a store: %d %s %s", code, out.String(), errb.String())
	}
	if fileExists(filepath.Join(other, "kassa.db")) {
		t.Fatal("settle made a store in a directory that had none")
	}
}

// TestCompaniesImportRemovesLeftovers: an import killed while it wrote
// (Ctrl-C, a deploy's SIGTERM, the OOM killer on a large file) left its
// temporary copy of the whole list beside the country's file, and a cron
// job that imports daily added one at each kill, until the next start of
// serve removed them. The next import removes those old enough not to be
// another import's write under way, and leaves a young one alone.
func TestCompaniesImportRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "no.csv")
	os.WriteFile(good, []byte("companyId,companyName\n923609016,Fjord Frakt AS\n"), 0o600)
	cdir := companiesDir(dir)
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(cdir, ".NO.csv.1234567")
	young := filepath.Join(cdir, ".NO.csv.7654321")
	other := filepath.Join(cdir, ".SE.csv.1111111")
	for _, p := range []string{old, young, other} {
		if err := os.WriteFile(p, []byte("companyId,companyName\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hourAgo := time.Now().Add(-time.Hour)
	for _, p := range []string{old, other} {
		if err := os.Chtimes(p, hourAgo, hourAgo); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, good}, &out, &errb); code != 0 {
		t.Fatalf("import: %d %s", code, errb.String())
	}
	if fileExists(old) {
		t.Error("the leftover of an import killed an hour ago is still there")
	}
	if !fileExists(young) {
		t.Error("a temporary file written a moment ago (another import under way) was removed")
	}
	if !fileExists(other) {
		t.Error("an import of NO removed a leftover of SE's file")
	}
	if d, err := loadCompanies(dir); err != nil || d.Len("NO") != 1 {
		t.Fatalf("imported directory: %v, %d companies of NO, want 1", err, d.Len("NO"))
	}
}

// TestCompaniesImportSaysWhereItWrote: an import before the first start
// makes the data directory, which is right, but a mistyped --data made a new
// one just as quietly, and the server, started on the real one, kept the
// old list. The import names the file it wrote and says when it made the
// directory.
func TestCompaniesImportSaysWhereItWrote(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "no.csv")
	os.WriteFile(good, []byte("companyId,companyName\n923609016,Fjord Frakt AS\n"), 0o600)
	fresh := filepath.Join(dir, "kasa-data")
	for i, want := range []struct{ made bool }{{true}, {false}} {
		var out, errb bytes.Buffer
		if code := run([]string{"companies", "import", "--country", "NO", "--data", fresh, good}, &out, &errb); code != 0 {
			t.Fatalf("import %d: %d %s", i, code, errb.String())
		}
		file := filepath.Join(fresh, "companies", "NO.csv")
		if !strings.Contains(out.String(), "imported 1 NO companies into "+file) {
			t.Errorf("import %d: stdout %q does not name %s", i, out.String(), file)
		}
		if made := strings.Contains(errb.String(), "made the data directory "+fresh); made != want.made {
			t.Errorf("import %d: stderr %q; want the directory's making said: %v", i, errb.String(), want.made)
		}
	}
}
