// Package money holds amounts as integer minor units with their currency, the
// spec's Money record, and the VAT arithmetic of kassa's order lines.
//
// No floating point is used anywhere: amounts are int64 minor units (öre,
// cents) and every division rounds explicitly, half away from zero. The
// spec's Money record always has two fraction digits, so every supported
// currency is treated as having two minor-unit digits.
package money

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Currency is an ISO 4217 alphabetic code, upper case.
type Currency string

// ParseCurrency validates an ISO 4217 code.
func ParseCurrency(s string) (Currency, bool) {
	if len(s) != 3 || !strings.Contains(iso4217, " "+s+" ") {
		return "", false
	}
	return Currency(s), true
}

// Valid reports whether c is an active ISO 4217 code.
func (c Currency) Valid() bool {
	_, ok := ParseCurrency(string(c))
	return ok
}

// Active ISO 4217 alphabetic codes, space delimited for a cheap membership test.
const iso4217 = " AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD" +
	" CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF" +
	" GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR" +
	" LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK" +
	" PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT" +
	" TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG "

// Money is an amount in minor units of a currency. It is immutable by value.
type Money struct {
	Minor    int64
	Currency Currency
}

// New returns minor units of currency c.
func New(minor int64, c Currency) Money { return Money{Minor: minor, Currency: c} }

// Amount is the decimal amount with exactly two fraction digits, e.g. "-1234.50".
func (m Money) Amount() string { return formatMinor(m.Minor, "", ".") }

// Formatted is the amount with thousands separators, e.g. "1,234.50".
func (m Money) Formatted() string { return formatMinor(m.Minor, ",", ".") }

// FormattedIn is the amount written as a language writes it: group between
// thousands and point before the two fraction digits, e.g. "1 234,50" in
// Swedish (group a no-break space, point a comma).
func (m Money) FormattedIn(group, point string) string { return formatMinor(m.Minor, group, point) }

// FormattedWithCurrency is the currency code, a space and Formatted, e.g. "SEK 1,234.50".
func (m Money) FormattedWithCurrency() string { return string(m.Currency) + " " + m.Formatted() }

func (m Money) String() string { return m.FormattedWithCurrency() }

func formatMinor(minor int64, sep, point string) string {
	neg := minor < 0
	// Work on the unsigned magnitude so that math.MinInt64 cannot overflow.
	u := uint64(minor)
	if neg {
		u = -u
	}
	whole := strconv.FormatUint(u/100, 10)
	frac := u % 100
	if sep != "" && len(whole) > 3 {
		var b strings.Builder
		lead := len(whole) % 3
		if lead > 0 {
			b.WriteString(whole[:lead])
		}
		for i := lead; i < len(whole); i += 3 {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.WriteString(whole[i : i+3])
		}
		whole = b.String()
	}
	s := whole + point + string(rune('0'+frac/10)) + string(rune('0'+frac%10))
	if neg {
		return "-" + s
	}
	return s
}

// ParseAmount parses a decimal amount with at most two fraction digits
// ("12", "12.5", "-0.05") into minor units. Thousands separators, signs other
// than a leading "-" and amounts outside the int64 range of minor units are
// refused, so that every Amount() parses back to the same value.
func ParseAmount(s string) (int64, error) {
	orig := s
	bad := func() (int64, error) { return 0, fmt.Errorf("money: invalid amount %q", orig) }
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 || (hasDot && frac == "") {
		return bad()
	}
	for len(frac) < 2 {
		frac += "0"
	}
	// Accumulate the magnitude in uint64; it may reach 2^63 only when negative.
	const limit = uint64(1) << 63
	var u uint64
	for i := 0; i < len(whole)+2; i++ {
		var c byte
		if i < len(whole) {
			c = whole[i]
		} else {
			c = frac[i-len(whole)]
		}
		if c < '0' || c > '9' {
			return bad()
		}
		d := uint64(c - '0')
		if u > (limit-d)/10 {
			return bad()
		}
		u = u*10 + d
	}
	switch {
	case !neg && u == limit:
		return bad()
	case neg && u == limit:
		return math.MinInt64, nil
	case neg:
		return -int64(u), nil
	}
	return int64(u), nil
}

// Record is the spec's Money object as it appears in responses. Response
// types hold Records rather than Money so that encoding/json writes them as
// plain structs (a MarshalJSON method's output is re-validated and compacted,
// which cost a fifth of a GET).
type Record struct {
	Amount                string `json:"amount"`
	Currency              string `json:"currency"`
	Formatted             string `json:"formatted"`
	FormattedWithCurrency string `json:"formattedWithCurrency"`
	MinorUnits            int64  `json:"minorUnits"`
}

// Record returns the response representation of m.
func (m Money) Record() Record {
	return Record{
		Amount:                m.Amount(),
		Currency:              string(m.Currency),
		Formatted:             m.Formatted(),
		FormattedWithCurrency: m.FormattedWithCurrency(),
		MinorUnits:            m.Minor,
	}
}

// MarshalJSON writes the spec's Money record.
func (m Money) MarshalJSON() ([]byte, error) { return json.Marshal(m.Record()) }

// UnmarshalJSON reads a Money record; minorUnits is authoritative and must agree with amount.
func (m *Money) UnmarshalJSON(b []byte) error {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	c, ok := ParseCurrency(r.Currency)
	if !ok {
		return fmt.Errorf("money: invalid currency %q", r.Currency)
	}
	if r.Amount != "" {
		v, err := ParseAmount(r.Amount)
		if err != nil {
			return err
		}
		if v != r.MinorUnits {
			return fmt.Errorf("money: amount %q disagrees with minorUnits %d", r.Amount, r.MinorUnits)
		}
	}
	*m = Money{Minor: r.MinorUnits, Currency: c}
	return nil
}
