package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
