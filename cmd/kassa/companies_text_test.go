package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A company's name goes onto the order's billing address at the hosted
// checkout, where text with hidden control characters is refused: a
// directory holding one would leave that buyer a checkout refused on a
// field the page does not have. The import refuses the file instead.
func TestCompaniesImportRefusesNamesOrdersRefuse(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"Fjord\u0085Frakt AS", "Fjord Frakt \u202eSA", "Fjord\x00Frakt AS", "Fjord \xffFrakt AS"} {
		f := filepath.Join(dir, "no.csv")
		os.WriteFile(f, []byte("companyId,companyName\n923609016,Nord AS\n905978799,"+name+"\n"), 0o600)
		var out, errb bytes.Buffer
		if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, f}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "company 905978799: the name must") {
			t.Errorf("import of a name holding %q: %d %s", name, code, errb.String())
		}
		if d, _ := loadCompanies(dir); d.Len("NO") == 2 {
			t.Fatal("a refused import changed the directory")
		}
	}
	// Tab and line breaks, which orders take, and non-Latin text are names.
	f := filepath.Join(dir, "no.csv")
	os.WriteFile(f, []byte("companyId,companyName\n905978799,\"Fjord\tFrakt\nAS\"\n923609016,Øst Ærø AS\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, f}, &out, &errb); code != 0 {
		t.Fatalf("import: %d %s", code, errb.String())
	}
}

// The billing address's companyName holds 100 characters (the spec's
// CompanyAddress); a longer name imported left its buyers a checkout
// refused on that field, which the page does not have. Characters are
// counted as orders count them: 100 letters Ø (200 bytes) are a name.
func TestCompaniesImportRefusesNamesLongerThanAnAddressHolds(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "no.csv")
	os.WriteFile(f, []byte("companyId,companyName\n923609016,Nord AS\n905978799,"+strings.Repeat("Ø", 98)+"AS\n"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, f}, &out, &errb); code != 0 {
		t.Fatalf("import of a 100-character name: %d %s", code, errb.String())
	}
	os.WriteFile(f, []byte("companyId,companyName\n923609016,Nord AS\n905978799,"+strings.Repeat("Ø", 99)+"AS\n"), 0o600)
	out.Reset()
	errb.Reset()
	if code := run([]string{"companies", "import", "--country", "NO", "--data", dir, f}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "company 905978799: the name must be at most 100 characters") {
		t.Fatalf("import of a 101-character name: %d %s", code, errb.String())
	}
	if d, _ := loadCompanies(dir); d.Len("NO") != 2 {
		t.Fatal("a refused import changed the directory")
	}
}
