package server

import (
	"net/url"
	"testing"
)

// checkQuery refuses exactly what url.ParseQuery refuses, without building
// the map; the fuzz target keeps it so on inputs no table lists.
func FuzzCheckQueryAgreesWithParseQuery(f *testing.F) {
	for _, s := range []string{"", "a=1", "id=%zz", "%zz=1", "a=1;b=2", "a=%4", "a=%41&b", "&&", "=", "a=+%20", "q=%E2%82%AC", "k;=v", "x=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := url.ParseQuery(raw)
		if cerr := checkQuery(raw); (perr == nil) != (cerr == nil) {
			t.Fatalf("%q: ParseQuery %v, checkQuery %v", raw, perr, cerr)
		}
	})
}
