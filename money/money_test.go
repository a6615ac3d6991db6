package money

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func TestFormatting(t *testing.T) {
	tests := []struct {
		minor                       int64
		amount, formatted, withCurr string
	}{
		{0, "0.00", "0.00", "SEK 0.00"},
		{5, "0.05", "0.05", "SEK 0.05"},
		{-5, "-0.05", "-0.05", "SEK -0.05"},
		{50, "0.50", "0.50", "SEK 0.50"},
		{100, "1.00", "1.00", "SEK 1.00"},
		{99999, "999.99", "999.99", "SEK 999.99"},
		{100000, "1000.00", "1,000.00", "SEK 1,000.00"},
		{123450, "1234.50", "1,234.50", "SEK 1,234.50"},
		{-123450, "-1234.50", "-1,234.50", "SEK -1,234.50"},
		{100000000, "1000000.00", "1,000,000.00", "SEK 1,000,000.00"},
		{1234567891, "12345678.91", "12,345,678.91", "SEK 12,345,678.91"},
		{-100000000000, "-1000000000.00", "-1,000,000,000.00", "SEK -1,000,000,000.00"},
		{math.MaxInt64, "92233720368547758.07", "92,233,720,368,547,758.07", "SEK 92,233,720,368,547,758.07"},
		{math.MinInt64, "-92233720368547758.08", "-92,233,720,368,547,758.08", "SEK -92,233,720,368,547,758.08"},
	}
	for _, tt := range tests {
		m := New(tt.minor, "SEK")
		if got := m.Amount(); got != tt.amount {
			t.Errorf("Amount(%d) = %q, want %q", tt.minor, got, tt.amount)
		}
		if got := m.Formatted(); got != tt.formatted {
			t.Errorf("Formatted(%d) = %q, want %q", tt.minor, got, tt.formatted)
		}
		if got := m.FormattedWithCurrency(); got != tt.withCurr {
			t.Errorf("FormattedWithCurrency(%d) = %q, want %q", tt.minor, got, tt.withCurr)
		}
		if got := m.String(); got != tt.withCurr {
			t.Errorf("String(%d) = %q, want %q", tt.minor, got, tt.withCurr)
		}
	}
}

func TestRecordJSON(t *testing.T) {
	b, err := json.Marshal(New(123450, "SEK"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"amount":"1234.50","currency":"SEK","formatted":"1,234.50","formattedWithCurrency":"SEK 1,234.50","minorUnits":123450}`
	if string(b) != want {
		t.Fatalf("json = %s\nwant   %s", b, want)
	}
	var m Money
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m != New(123450, "SEK") {
		t.Fatalf("round trip = %+v", m)
	}
	for _, bad := range []string{
		`{"amount":"1234.51","currency":"SEK","minorUnits":123450}`,
		`{"amount":"1234.50","currency":"sek","minorUnits":123450}`,
		`{"amount":"12,34.50","currency":"SEK","minorUnits":123450}`,
		`{"amount":"1","currency":"XYZ","minorUnits":100}`,
	} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
	if err := json.Unmarshal([]byte(`{"currency":"EUR","minorUnits":-7}`), &m); err != nil || m != New(-7, "EUR") {
		t.Errorf("Unmarshal without amount = %+v, %v", m, err)
	}
}

func TestParseAmount(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"0.00", 0}, {"-0", 0}, {"12", 1200}, {"12.5", 1250}, {"12.50", 1250}, {"12.05", 1205},
		{"-0.05", -5}, {"-12.5", -1250}, {"0001.01", 101}, {"1234.50", 123450},
		{"92233720368547758.07", math.MaxInt64}, {"-92233720368547758.08", math.MinInt64},
		{"-92233720368547758.07", -math.MaxInt64},
	}
	for _, tt := range good {
		got, err := ParseAmount(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	bad := []string{"", "-", ".", ".5", "5.", "1.234", "1,234.50", "+5", "5 ", " 5", "1e3", "--5", "1.-5",
		"0x10", "92233720368547758.08", "-92233720368547758.09", "100000000000000000000", "١٢", "5.5.5"}
	for _, in := range bad {
		if got, err := ParseAmount(in); err == nil {
			t.Errorf("ParseAmount(%q) = %d, want an error", in, got)
		}
	}
}

func TestCurrency(t *testing.T) {
	for _, c := range []string{"SEK", "NOK", "DKK", "EUR", "USD", "GBP", "CHF", "JPY", "ZWG"} {
		if got, ok := ParseCurrency(c); !ok || string(got) != c || !Currency(c).Valid() {
			t.Errorf("ParseCurrency(%q) = %q, %v", c, got, ok)
		}
	}
	for _, c := range []string{"", "sek", "Sek", "SE", "SEKK", "XXX", "ABC", " SE", "SE ", "K S", "EUR USD", "E",
		// Neighbours in the list of codes: membership alone would take them.
		"SEK SGD", "AED AFN", "ZMW ZWG"} {
		if _, ok := ParseCurrency(c); ok || Currency(c).Valid() {
			t.Errorf("ParseCurrency(%q) accepted", c)
		}
	}
}

func TestDivRound(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{0, 3, 0}, {1, 2, 1}, {-1, 2, -1}, {3, 2, 2}, {-3, 2, -2}, {5, 2, 3}, {-5, 2, -3},
		{4, 3, 1}, {-4, 3, -1}, {5, 3, 2}, {-5, 3, -2}, {7, 10, 1}, {-7, 10, -1}, {4, 10, 0}, {-4, 10, 0},
		{15, 10, 2}, {-15, 10, -2}, {14, 10, 1}, {-14, 10, -1}, {25, 10, 3}, {-25, 10, -3},
		{1000000000 * 10000, 12500, 800000000}, {-1000000000 * 10000, 12500, -800000000},
		{12345, 1, 12345}, {-12345, 1, -12345},
	}
	for _, tt := range tests {
		if got := DivRound(tt.a, tt.b); got != tt.want {
			t.Errorf("DivRound(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("DivRound by 0 did not panic")
		}
	}()
	DivRound(1, 0)
}

func TestLineVAT(t *testing.T) {
	tests := []struct {
		total, rate int64
		mode        VATMode
		want        int64
	}{
		{12500, 2500, InclVAT, 2500},
		{-12500, 2500, InclVAT, -2500},
		{10000, 2500, ExclVAT, 2500},
		{-10000, 2500, ExclVAT, -2500},
		{5600, 1200, InclVAT, 600},
		{3180, 600, InclVAT, 180},
		{1, 2500, InclVAT, 0},      // 1 − round(0.8) = 0
		{3, 2500, InclVAT, 1},      // 3 − round(2.4) = 1
		{-3, 2500, InclVAT, -1},    // −3 − round(−2.4) = −1
		{2, 2500, ExclVAT, 1},      // round(0.5) = 1, half away from zero
		{-2, 2500, ExclVAT, -1},    // round(−0.5) = −1
		{999, 0, InclVAT, 0},       // no rate, no VAT
		{999, 10000, InclVAT, 499}, // 999 − round(499.5) = 499
		{1000000000, 2500, InclVAT, 200000000},
		{-1000000000, 10000, ExclVAT, -1000000000},
	}
	for _, tt := range tests {
		if got := LineVAT(tt.total, tt.rate, tt.mode); got != tt.want {
			t.Errorf("LineVAT(%d, %d, %s) = %d, want %d", tt.total, tt.rate, tt.mode, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	if g, n := Split(12500, 2500, InclVAT); g != 12500 || n != 10000 {
		t.Errorf("Split inclVat = %d, %d", g, n)
	}
	if g, n := Split(10000, 2500, ExclVAT); g != 12500 || n != 10000 {
		t.Errorf("Split exclVat = %d, %d", g, n)
	}
}

func TestUnitPriceNetDecimal(t *testing.T) {
	tests := []struct {
		unit, rate int64
		mode       VATMode
		want       string
	}{
		{12500, 2500, InclVAT, "100.0000"},
		{10000, 2500, InclVAT, "80.0000"},
		{100, 2500, InclVAT, "0.8000"},
		{1, 2500, InclVAT, "0.0080"},
		{999, 1200, InclVAT, "8.9196"},   // 9.99 / 1.12 = 8.919642…
		{-999, 1200, InclVAT, "-8.9196"}, // symmetric
		{1000, 600, InclVAT, "9.4340"},   // 10 / 1.06 = 9.433962…
		{12500, 2500, ExclVAT, "125.0000"},
		{12500, 0, InclVAT, "125.0000"},
		{0, 2500, InclVAT, "0.0000"},
		{-5, 0, ExclVAT, "-0.0500"},
	}
	for _, tt := range tests {
		if got := UnitPriceNetDecimal(tt.unit, tt.rate, tt.mode); got != tt.want {
			t.Errorf("UnitPriceNetDecimal(%d, %d, %s) = %q, want %q", tt.unit, tt.rate, tt.mode, got, tt.want)
		}
	}
}

func TestVATModeValid(t *testing.T) {
	if !InclVAT.Valid() || !ExclVAT.Valid() || VATMode("").Valid() || VATMode("incl").Valid() {
		t.Fatal("VATMode.Valid wrong")
	}
}

// Every amount survives minor units → Amount() → ParseAmount, and Formatted
// differs from Amount only by thousands separators.
func TestPropertyAmountRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.OneOf(rapid.Int64Range(-1_000_000_000_000, 1_000_000_000_000), rapid.Int64()).Draw(t, "minor")
		v := New(m, "EUR")
		got, err := ParseAmount(v.Amount())
		if err != nil || got != m {
			t.Fatalf("ParseAmount(%q) = %d, %v; want %d", v.Amount(), got, err, m)
		}
		stripped := []byte{}
		for _, c := range []byte(v.Formatted()) {
			if c != ',' {
				stripped = append(stripped, c)
			}
		}
		if string(stripped) != v.Amount() {
			t.Fatalf("Formatted %q and Amount %q disagree", v.Formatted(), v.Amount())
		}
		var back Money
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Fatalf("JSON round trip of %d = %+v, %v", m, back, err)
		}
	})
}

// For every line total and rate within the spec's bounds, the VAT part has the
// total's sign (or is zero), never exceeds the total in inclVat mode, is exact
// to half a minor unit, and gross = net + vat.
func TestPropertyVATSplit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		total := rapid.Int64Range(-1_000_000_000, 1_000_000_000).Draw(t, "total")
		rate := rapid.Int64Range(0, MaxRate).Draw(t, "rate")
		mode := rapid.SampledFrom([]VATMode{InclVAT, ExclVAT}).Draw(t, "mode")
		vat := LineVAT(total, rate, mode)
		gross, net := Split(total, vat, mode)
		if gross != net+vat {
			t.Fatalf("gross %d != net %d + vat %d", gross, net, vat)
		}
		if vat != 0 && (vat < 0) != (total < 0) {
			t.Fatalf("vat %d has not the sign of total %d", vat, total)
		}
		abs := func(v int64) int64 {
			if v < 0 {
				return -v
			}
			return v
		}
		if mode == InclVAT && abs(vat) > abs(total) {
			t.Fatalf("vat %d exceeds total %d", vat, total)
		}
		// Exactness: |net × (10000 + rate) − gross × 10000| ≤ (10000 + rate) / 2 in inclVat,
		// |total × rate − vat × 10000| ≤ 5000 in exclVat (half a minor unit).
		if mode == InclVAT {
			if d := abs(net*(RateDenominator+rate) - gross*RateDenominator); 2*d > RateDenominator+rate {
				t.Fatalf("inclVat net %d of %d at %d is off by %d/%d", net, gross, rate, d, RateDenominator+rate)
			}
		} else if d := abs(total*rate - vat*RateDenominator); 2*d > RateDenominator {
			t.Fatalf("exclVat vat %d of %d at %d is off by %d/10000", vat, total, rate, d)
		}
	})
}

// DivRound agrees with exact rational rounding half away from zero.
func TestPropertyDivRound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(-1<<50, 1<<50).Draw(t, "a")
		b := rapid.Int64Range(1, 1<<20).Draw(t, "b")
		q := DivRound(a, b)
		// q is the rounding iff |2a − 2qb| ≤ b, with ties (= b) resolved away from zero.
		d := 2*a - 2*q*b
		if d < -b || d > b {
			t.Fatalf("DivRound(%d, %d) = %d is not nearest", a, b, q)
		}
		if (d == b && a > 0) || (d == -b && a < 0) {
			t.Fatalf("DivRound(%d, %d) = %d rounds a tie towards zero", a, b, q)
		}
	})
}

// LineVAT never overflows within the spec's bounds: it equals the exact
// rational result rounded half away from zero, computed with math/big.
func TestPropertyLineVATExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		total := rapid.OneOf(rapid.Int64Range(-1_000_000_000, 1_000_000_000),
			rapid.SampledFrom([]int64{-1_000_000_000, 1_000_000_000, -1, 0, 1})).Draw(t, "total")
		rate := rapid.OneOf(rapid.Int64Range(0, MaxRate), rapid.SampledFrom([]int64{0, 1, MaxRate})).Draw(t, "rate")
		mode := rapid.SampledFrom([]VATMode{InclVAT, ExclVAT}).Draw(t, "mode")
		var want *big.Int
		if mode == ExclVAT {
			want = roundHalfAway(new(big.Int).Mul(big.NewInt(total), big.NewInt(rate)), big.NewInt(RateDenominator))
		} else {
			net := roundHalfAway(new(big.Int).Mul(big.NewInt(total), big.NewInt(RateDenominator)), big.NewInt(RateDenominator+rate))
			want = new(big.Int).Sub(big.NewInt(total), net)
		}
		if got := LineVAT(total, rate, mode); !want.IsInt64() || got != want.Int64() {
			t.Fatalf("LineVAT(%d, %d, %s) = %d, want %s", total, rate, mode, got, want)
		}
	})
}

func roundHalfAway(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(r), big.NewInt(2)).Cmp(b) >= 0 {
		if a.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}
