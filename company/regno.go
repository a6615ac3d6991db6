package company

import "strings"

// NormalizeNumber strips separators and spaces from a registration number
// and upper-cases it; "556000-0001" and "5560000001" are the same company.
func NormalizeNumber(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// numberLen is the length of a registration number of a country with a
// check-digit rule.
var numberLen = map[string]int{"SE": 10, "NO": 9, "FI": 8, "DK": 8}

// ParseNumber reads s as a registration number of a country with a
// check-digit rule, in every form a buyer types: separators anywhere
// ("556000-0001", "556 000 0001"), for SE the 12 digits with the century
// ("16556000-0001"; 16 for a legal entity, 18, 19 or 20 for a sole
// trader's personal number), and the VAT id ("SE556000000101",
// "NO 910 000 001 MVA", "FI10000011", "DK10000001"). It returns the
// canonical number and whether s is written as a number in full: ok is
// false for a name, for the first digits of a number still being typed and
// in a country without a check-digit rule. A number in full need not be
// valid: its digits may fail the check (ValidNumber says), and one of no
// form ("SE556000000102", 11 digits with a VAT prefix, a century of 55)
// gives n == "".
func ParseNumber(country, s string) (n string, ok bool) {
	size, known := numberLen[country]
	if !known {
		return "", false
	}
	n = NormalizeNumber(s)
	vat := false
	if rest, cut := strings.CutPrefix(n, country); cut && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		n, vat = rest, true
	}
	if country == "NO" {
		if rest, cut := strings.CutSuffix(n, "MVA"); cut && rest != "" {
			n = rest
		}
	}
	if _, isDigits := digits(n); !isDigits {
		return "", false
	}
	full := size // digits of the longest form
	switch {
	case country == "SE" && vat:
		full = size + 2 // SE + number + 01
		if len(n) == full && strings.HasSuffix(n, "01") {
			return n[:size], true
		}
	case country == "SE":
		full = size + 2 // century + number
		if len(n) == full && (n[:2] == "16" || n[:2] == "18" || n[:2] == "19" || n[:2] == "20") {
			return n[2:], true
		}
		if len(n) == size {
			return n, true
		}
	case len(n) == size:
		return n, true
	}
	if len(n) < full {
		return "", false // still being typed, or a name's digits
	}
	return "", true
}

// NumberForms describes the forms ParseNumber reads for country, for a
// message to whoever typed a malformed one.
func NumberForms(country string) string {
	switch country {
	case "SE":
		return "10 digits (556036-0793) with a valid check digit, 12 with the century (16556036-0793) or the VAT number (SE556036079301)"
	case "NO":
		return "9 digits (923 609 016) with a valid check digit, or the VAT number (NO923609016MVA)"
	case "FI":
		return "8 digits (0112038-9) with a valid check digit, or the VAT number (FI01120389)"
	case "DK":
		return "8 digits (10150817) with a valid check digit, or the VAT number (DK10150817)"
	}
	return ""
}

// CanonicalNumber is the form a registration number of country is listed
// and compared in: ParseNumber's number when s is one in full, otherwise s
// without separators (NormalizeNumber).
func CanonicalNumber(country, s string) string {
	if n, ok := ParseNumber(country, s); ok && n != "" {
		return n
	}
	return NormalizeNumber(s)
}

// SameNumber reports whether a and b are one registration number of
// country, in whatever forms they are written ("556000-0001" and
// "SE556000000101"). Text that is no number in full (in a country without
// a check-digit rule, any) is the same only as itself: stripping it of what
// is not a letter or digit could make two ids one.
func SameNumber(country, a, b string) bool {
	if a == b {
		return true
	}
	na, oka := ParseNumber(country, a)
	nb, okb := ParseNumber(country, b)
	return oka && okb && na != "" && na == nb
}

func digits(s string) ([]int, bool) {
	d := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return nil, false
		}
		d[i] = int(s[i] - '0')
	}
	return d, true
}

// ValidNumber reports whether a normalized registration number is valid for
// country: SE organisationsnummer (10 digits, Luhn), NO organisasjonsnummer
// (9 digits, mod 11), FI Y-tunnus (8 digits, mod 11), DK CVR (8 digits, mod 11).
// Other countries accept any 4–20 alphanumerics.
func ValidNumber(country, n string) bool {
	size, checked := numberLen[country]
	if !checked {
		return len(n) >= 4 && len(n) <= 20
	}
	d, ok := digits(n)
	if !ok || len(d) != size {
		return false
	}
	switch country {
	case "SE":
		return luhn(d)
	case "NO":
		c := mod11(d[:8], []int{3, 2, 7, 6, 5, 4, 3, 2})
		return c >= 0 && c == d[8]
	case "FI":
		c := mod11(d[:7], []int{7, 9, 10, 5, 8, 4, 2})
		return c >= 0 && c == d[7]
	default: // DK
		sum := 0
		for i, w := range []int{2, 7, 6, 5, 4, 3, 2, 1} {
			sum += d[i] * w
		}
		return sum%11 == 0
	}
}

// HasCheckDigit reports whether ValidNumber checks country's numbers by a
// check digit (SE, NO, FI, DK), so that a query passing it is a number and
// not a name.
func HasCheckDigit(country string) bool {
	_, ok := numberLen[country]
	return ok
}

func luhn(d []int) bool {
	sum := 0
	for i := range d {
		v := d[len(d)-1-i]
		if i%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// mod11 returns the check digit for the weighted sum, or -1 when the
// remainder makes the number invalid (check digit would be 10).
func mod11(d, w []int) int {
	sum := 0
	for i := range d {
		sum += d[i] * w[i]
	}
	c := 11 - sum%11
	switch c {
	case 11:
		return 0
	case 10:
		return -1
	}
	return c
}

// CheckDigit completes a number body with its check digit for country (used
// by the dataset generator), or reports false when no digit makes it valid.
func CheckDigit(country string, body []int) (int, bool) {
	switch country {
	case "SE":
		for c := 0; c <= 9; c++ {
			if luhn(append(append([]int{}, body...), c)) {
				return c, true
			}
		}
	case "NO":
		c := mod11(body, []int{3, 2, 7, 6, 5, 4, 3, 2})
		return c, c >= 0
	case "FI":
		c := mod11(body, []int{7, 9, 10, 5, 8, 4, 2})
		return c, c >= 0
	case "DK":
		for c := 0; c <= 9; c++ {
			d := append(append([]int{}, body...), c)
			sum := 0
			for i, w := range []int{2, 7, 6, 5, 4, 3, 2, 1} {
				sum += d[i] * w
			}
			if sum%11 == 0 {
				return c, true
			}
		}
	}
	return 0, false
}
