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
	switch country {
	case "SE":
		d, ok := digits(n)
		return ok && len(d) == 10 && luhn(d)
	case "NO":
		d, ok := digits(n)
		if !ok || len(d) != 9 {
			return false
		}
		c := mod11(d[:8], []int{3, 2, 7, 6, 5, 4, 3, 2})
		return c >= 0 && c == d[8]
	case "FI":
		d, ok := digits(n)
		if !ok || len(d) != 8 {
			return false
		}
		c := mod11(d[:7], []int{7, 9, 10, 5, 8, 4, 2})
		return c >= 0 && c == d[7]
	case "DK":
		d, ok := digits(n)
		if !ok || len(d) != 8 {
			return false
		}
		sum := 0
		for i, w := range []int{2, 7, 6, 5, 4, 3, 2, 1} {
			sum += d[i] * w
		}
		return sum%11 == 0
	default:
		return len(n) >= 4 && len(n) <= 20
	}
}

// HasCheckDigit reports whether ValidNumber checks country's numbers by a
// check digit (SE, NO, FI, DK), so that a query passing it is a number and
// not a name.
func HasCheckDigit(country string) bool {
	switch country {
	case "SE", "NO", "FI", "DK":
		return true
	}
	return false
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
