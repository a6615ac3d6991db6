package company

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
)

// FuzzReadCSV reads arbitrary files as `kassa companies import` does: a
// refusal is a validation fault on "file"; what is accepted holds only
// valid, distinct registration numbers (canonical) and names of 1 to 200
// characters without surrounding space, and WriteCSV of it reads back the
// same.
func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{"companyId,companyName\n5560000001,Bygg AB\n", "\ufeffid,name\n556000-0001, X \n", "name,id\nA,5560000001\nB,5560000001\n",
		"companyId\n5560000001\n", "", "companyId,companyName\n\"5560000001\",\"a\"\"b\"\n", "companyId,companyName\n1,\n", "companyId,companyName\r\n5560000001\r\n",
		"companyId,companyName\n\"unterminated\n", "companyId,companyName,extra\n5560000001,A,B,C\n"} {
		f.Add("SE", []byte(s))
	}
	f.Add("NO", []byte("companyId,companyName\n923609016,Firma AS\n"))
	f.Add("FI", []byte("id,name\n0112038-9,Oy\n"))
	f.Fuzz(func(t *testing.T, country string, b []byte) {
		cs, err := ReadCSV(country, bytes.NewReader(b))
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Kind != fault.Invalid || len(fe.Fields) != 1 || fe.Fields[0].Field != "file" {
				t.Fatalf("ReadCSV(%q): %v is not a validation fault on file", b, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if c.Country != country || !ValidNumber(country, c.ID) || CanonicalNumber(country, c.ID) != c.ID || seen[c.ID] {
				t.Fatalf("ReadCSV(%q) accepted %+v", b, c)
			}
			seen[c.ID] = true
			if n := utf8.RuneCountInString(c.Name); n < 1 || n > 200 || strings.TrimSpace(c.Name) != c.Name {
				t.Fatalf("ReadCSV(%q) accepted the name %q", b, c.Name)
			}
		}
		var w bytes.Buffer
		if err := WriteCSV(&w, cs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadCSV(country, &w)
		if err != nil || !slices.Equal(again, cs) {
			t.Fatalf("WriteCSV of %+v reads back %+v, %v", cs, again, err)
		}
	})
}
