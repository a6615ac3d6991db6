package money

import "testing"

// FuzzParseAmount: ParseAmount never panics, and whatever it accepts formats
// back (Amount) to a string that parses to the same minor units.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"0", "12.5", "-0.05", "1234.50", "92233720368547758.07",
		"-92233720368547758.08", "1,234.50", "", "-", "1.234", "00.01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseAmount(s)
		if err != nil {
			return
		}
		a := New(v, "SEK").Amount()
		back, err := ParseAmount(a)
		if err != nil || back != v {
			t.Fatalf("ParseAmount(%q) = %d, but its Amount %q parses to %d, %v", s, v, a, back, err)
		}
		if New(back, "SEK").Amount() != a {
			t.Fatalf("Amount is not canonical for %q", s)
		}
	})
}
