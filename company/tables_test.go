package company_test

import (
	"slices"
	"testing"

	"github.com/kassahq/kassa/company"
)

// The bundled countries decide what directory every kassa instance in a
// process ships with: what an importer does with the slice it is handed must
// not change it.
func TestCountriesCannotBeChangedByACaller(t *testing.T) {
	want := company.Countries()
	got := company.Countries()
	got[0] = "XX"
	_ = append(got[:1], "YY")
	if now := company.Countries(); !slices.Equal(now, want) {
		t.Fatalf("Countries() = %v after a caller changed its copy, want %v", now, want)
	}
	if known := company.Bundled(nil).Countries(); !slices.Equal(known, want) {
		t.Fatalf("the bundled directory knows %v after a caller changed its copy, want %v", known, want)
	}
}
