package money

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

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

// ratRound rounds the rational r half away from zero, computed with
// math/big so that it shares no code with DivRound.
func ratRound(r *big.Rat) int64 {
	num, den := new(big.Int).Abs(r.Num()), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Lsh(m, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if r.Sign() < 0 {
		q.Neg(q)
	}
	return q.Int64()
}

// FuzzLineVAT: for every line total and rate within the spec's bounds, the
// VAT part is the documented rounding of the exact ratio (half away from
// zero), has the sign of the total and never exceeds it, gross = net + VAT,
// and the net unit price string is the exact ratio to four digits.
func FuzzLineVAT(f *testing.F) {
	for _, s := range []struct {
		total, rate int64
		excl        bool
	}{{12500, 2500, false}, {-12500, 2500, false}, {1, 2500, false}, {-1, 2500, true}, {5, 1000, true},
		{1_000_000_000, 10000, false}, {-1_000_000_000, 10000, true}, {3, 600, false}, {0, 0, false}, {2, 5000, false}} {
		f.Add(s.total, s.rate, s.excl)
	}
	f.Fuzz(func(t *testing.T, total, rate int64, excl bool) {
		total %= 1_000_000_001 // |total| ≤ 10^9, the bound callers keep
		if rate < 0 {
			rate = -(rate + 1)
		}
		rate %= MaxRate + 1
		mode := InclVAT
		if excl {
			mode = ExclVAT
		}
		vat := LineVAT(total, rate, mode)
		var want int64
		if excl {
			want = ratRound(big.NewRat(total*rate, RateDenominator))
		} else {
			want = total - ratRound(big.NewRat(total*RateDenominator, RateDenominator+rate))
		}
		if vat != want {
			t.Fatalf("LineVAT(%d, %d, %s) = %d, want %d", total, rate, mode, vat, want)
		}
		if (vat < 0 && total > 0) || (vat > 0 && total < 0) || (rate == 0 && vat != 0) {
			t.Fatalf("LineVAT(%d, %d, %s) = %d: wrong sign", total, rate, mode, vat)
		}
		if abs(vat) > abs(total) {
			t.Fatalf("LineVAT(%d, %d, %s) = %d exceeds the total", total, rate, mode, vat)
		}
		gross, net := Split(total, vat, mode)
		if gross != net+vat || (mode == InclVAT && gross != total) || (mode == ExclVAT && net != total) {
			t.Fatalf("Split(%d, %d, %s) = %d, %d", total, vat, mode, gross, net)
		}
		netUnit := big.NewRat(total, 100)
		if mode == InclVAT {
			netUnit.Mul(netUnit, big.NewRat(RateDenominator, RateDenominator+rate))
		}
		// Four digits, half away from zero: round(x·10^4)/10^4.
		scaled := ratRound(new(big.Rat).Mul(netUnit, big.NewRat(10000, 1)))
		wantStr := formatScaled(scaled, 4)
		if got := UnitPriceNetDecimal(total, rate, mode); got != wantStr {
			t.Fatalf("UnitPriceNetDecimal(%d, %d, %s) = %q, want %q", total, rate, mode, got, wantStr)
		}
	})
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// formatScaled writes v / 10^digits with exactly digits fraction digits.
func formatScaled(v int64, digits int) string {
	s := strconv.FormatInt(abs(v), 10)
	for len(s) <= digits {
		s = "0" + s
	}
	s = s[:len(s)-digits] + "." + s[len(s)-digits:]
	if v < 0 {
		s = "-" + s
	}
	return s
}

// FuzzMoneyFormats: every representation of an amount in minor units reads
// back to it: Formatted without its thousands separators parses to the same
// value, grouping is by three digits, FormattedWithCurrency is the currency
// and Formatted, and the JSON record round-trips through UnmarshalJSON.
func FuzzMoneyFormats(f *testing.F) {
	for _, v := range []int64{0, 1, -1, 99, 100, 123456789, -100000, math.MaxInt64, math.MinInt64, 1_000_000_000} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		m := New(v, "SEK")
		formatted := m.Formatted()
		plain := strings.ReplaceAll(formatted, ",", "")
		if plain != m.Amount() {
			t.Fatalf("Formatted %q without separators is not Amount %q", formatted, m.Amount())
		}
		whole, _, _ := strings.Cut(strings.TrimPrefix(formatted, "-"), ".")
		groups := strings.Split(whole, ",")
		for i, g := range groups {
			if len(g) > 3 || len(g) == 0 || (i > 0 && len(g) != 3) {
				t.Fatalf("Formatted %q groups digits wrongly", formatted)
			}
		}
		if back, err := ParseAmount(plain); err != nil || back != v {
			t.Fatalf("Formatted %q parses to %d, %v; want %d", formatted, back, err, v)
		}
		if m.FormattedWithCurrency() != "SEK "+formatted {
			t.Fatalf("FormattedWithCurrency %q", m.FormattedWithCurrency())
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Money
		if err := json.Unmarshal(b, &back); err != nil || back != m {
			t.Fatalf("%s reads back as %+v, %v", b, back, err)
		}
	})
}

// FuzzMoneyUnmarshal: a Money record is accepted only when its currency is
// valid and its amount (when given) agrees with minorUnits; what is accepted
// marshals to a record that reads back the same.
func FuzzMoneyUnmarshal(f *testing.F) {
	for _, s := range []string{`{"amount":"1.00","currency":"SEK","minorUnits":100}`, `{"amount":"1.0","currency":"SEK","minorUnits":100}`,
		`{"amount":"1.00","currency":"SEK","minorUnits":101}`, `{"currency":"sek","minorUnits":1}`, `{"currency":"","minorUnits":1}`,
		`{"minorUnits":1e3,"currency":"EUR"}`, `{"amount":"-92233720368547758.08","currency":"NOK","minorUnits":-9223372036854775808}`, `null`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Money
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if m.Currency != "" && !m.Currency.Valid() {
			t.Fatalf("%s accepted with currency %q", b, m.Currency)
		}
		if m.Currency == "" {
			return // a JSON null leaves the zero value
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s accepted as Money but not as a Record: %v", b, err)
		}
		if m.Minor != rec.MinorUnits {
			t.Fatalf("%s accepted as %d minor units", b, m.Minor)
		}
		if rec.Amount != "" {
			if v, err := ParseAmount(rec.Amount); err != nil || v != m.Minor {
				t.Fatalf("%s accepted with an amount that says %d (%v), minorUnits %d", b, v, err, m.Minor)
			}
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Money
		if err := json.Unmarshal(out, &back); err != nil || back != m {
			t.Fatalf("%s → %+v → %s → %+v, %v", b, m, out, back, err)
		}
	})
}
