package money

import (
	"github.com/shopspring/decimal"
)

// VATMode says whether line amounts include VAT (the default) or exclude it.
type VATMode string

const (
	InclVAT VATMode = "inclVat"
	ExclVAT VATMode = "exclVat"
)

// Valid reports whether m is a known mode.
func (m VATMode) Valid() bool { return m == InclVAT || m == ExclVAT }

// RateDenominator is the rate scale: a rate of 2500 means 25 %.
const RateDenominator = 10000

// MaxRate is the highest accepted VAT rate (100 %).
const MaxRate = RateDenominator

// DivRound divides a by b (b > 0), rounding half away from zero.
func DivRound(a, b int64) int64 {
	if b <= 0 {
		panic("money: DivRound needs a positive divisor")
	}
	q, r := a/b, a%b
	if r < 0 {
		r = -r
	}
	if 2*r >= b {
		if a < 0 {
			q--
		} else {
			q++
		}
	}
	return q
}

// LineVAT is the VAT part of a line total at rate (2500 = 25 %).
//
// In InclVAT mode total includes VAT and the VAT part is
// total − round(total × 10000 / (10000 + rate)); in ExclVAT mode it is
// round(total × rate / 10000). Rounding is half away from zero. Callers keep
// |total| ≤ 10^9 and 0 ≤ rate ≤ 10000, so no product can overflow int64.
func LineVAT(total, rate int64, mode VATMode) int64 {
	if rate == 0 {
		return 0
	}
	if mode == ExclVAT {
		return DivRound(total*rate, RateDenominator)
	}
	return total - DivRound(total*RateDenominator, RateDenominator+rate)
}

// Split returns the parts of a line total: gross (incl. VAT), net (excl. VAT)
// and the VAT amount, given the line's total and VAT amount in mode.
func Split(total, vat int64, mode VATMode) (gross, net int64) {
	if mode == ExclVAT {
		return total + vat, total
	}
	return total, total - vat
}

// UnitPriceNetDecimal is the unit price excluding VAT in major units, with
// four fraction digits, e.g. unit price 12500 at 25 % incl. VAT → "100.0000".
// The spec carries it as a string so that the exact ratio is not lost to
// minor-unit rounding; it is for display, never for arithmetic.
func UnitPriceNetDecimal(unitPrice, rate int64, mode VATMode) string {
	d := decimal.New(unitPrice, -2)
	if mode == InclVAT && rate != 0 {
		d = d.Mul(decimal.NewFromInt(RateDenominator)).DivRound(decimal.NewFromInt(RateDenominator+rate), 4)
	}
	return d.StringFixed(4)
}
