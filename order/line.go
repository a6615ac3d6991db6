package order

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
)

// Bounds from the spec's Limits table, and kassa's own where the spec is silent.
const (
	MaxLineAmount   = 1_000_000_000 // |unitPrice|, |totalAmount|, … per line
	MaxTotal        = 1_000_000_000 // order, capture and refund totals
	MaxQuantity     = 99_999_999
	MaxLines        = 1000 // kassa's limit on lines per request (the spec states none)
	MaxTextLen      = 200  // description, reference, names, note
	MaxReferenceLen = 50   // order reference, settlement reference
)

// LineInput is an order line as sent by a merchant: the spec's OrderLine, or
// OrderLineWithId when ID is set. Optional numbers are pointers so that an
// omitted field can be told apart from zero.
type LineInput struct {
	ID                 *string `json:"id,omitempty"`
	Description        *string `json:"description"`
	Quantity           *int64  `json:"quantity"`
	Reference          string  `json:"reference,omitempty"`
	TotalAmount        *int64  `json:"totalAmount,omitempty"`
	TotalVatAmount     *int64  `json:"totalVatAmount,omitempty"`
	Type               string  `json:"type,omitempty"`
	UnitDiscountAmount *int64  `json:"unitDiscountAmount,omitempty"`
	UnitPrice          *int64  `json:"unitPrice,omitempty"`
	Vat                *int64  `json:"vat,omitempty"`
}

// Line is a stored order line with all amounts resolved.
type Line struct {
	ID                 string   `json:"id"`
	Description        string   `json:"description"`
	Quantity           int64    `json:"quantity"`
	Reference          string   `json:"reference,omitempty"`
	TotalAmount        int64    `json:"totalAmount"`
	TotalVatAmount     int64    `json:"totalVatAmount"`
	Type               LineType `json:"type,omitempty"`
	UnitDiscountAmount int64    `json:"unitDiscountAmount"`
	UnitPrice          int64    `json:"unitPrice"`
	Vat                int64    `json:"vat"`
}

// Input is the line stated as shown, every amount included and no id: a
// request that repeats it makes the same line under a new id.
func (l Line) Input() LineInput {
	return LineInput{Description: &l.Description, Quantity: &l.Quantity, Reference: l.Reference,
		TotalAmount: &l.TotalAmount, TotalVatAmount: &l.TotalVatAmount, Type: string(l.Type),
		UnitDiscountAmount: &l.UnitDiscountAmount, UnitPrice: &l.UnitPrice, Vat: &l.Vat}
}

// Gross is the line's amount including VAT in mode.
func (l Line) Gross(mode money.VATMode) int64 {
	g, _ := money.Split(l.TotalAmount, l.TotalVatAmount, mode)
	return g
}

// Net is the line's amount excluding VAT in mode.
func (l Line) Net(mode money.VATMode) int64 {
	_, n := money.Split(l.TotalAmount, l.TotalVatAmount, mode)
	return n
}

// Totals are the three sums of a set of lines.
type Totals struct {
	Gross int64 `json:"gross"` // including VAT
	Net   int64 `json:"net"`   // excluding VAT
	VAT   int64 `json:"vat"`
	Sum   int64 `json:"sum"` // sum of totalAmount as sent (equals Gross in inclVat mode)
}

// VATWithin reports whether the VAT of the sums lies within the bounds an
// order's own totals are held to (CheckTotals): 0 or more, and no more than
// the amount including VAT (the amount excluding VAT is 0 or more). A
// capture is an invoice and is held to them too, whatever lines it took:
// a discount at 25 % captured apart from its goods, or beside goods at 0 %,
// would invoice negative VAT, or VAT above its own gross.
func (t Totals) VATWithin() bool { return t.VAT >= 0 && t.Net >= 0 }

// SumLines adds up lines in mode.
func SumLines(lines []Line, mode money.VATMode) Totals {
	var t Totals
	for _, l := range lines {
		g, n := money.Split(l.TotalAmount, l.TotalVatAmount, mode)
		t.Gross += g
		t.Net += n
		t.VAT += l.TotalVatAmount
		t.Sum += l.TotalAmount
	}
	return t
}

// CheckText bounds a free-text field. NUL characters and invalid UTF-8 are
// refused too: every store must be able to keep the text as it was sent
// (PostgreSQL text holds neither), and no document format wants them.
// Control characters other than tab and line breaks, and the Unicode line
// and paragraph separators and bidirectional embeddings, overrides and
// isolates, are refused as well: each can make an invoice, a CSV export or
// a terminal show something other than what is stored (a reference reading
// "INV-1" that is not "INV-1", text drawn right to left).
func CheckText(f *fault.Fields, path, s string, max int) { checkTextOf(f, path, s, max, false) }

func checkText(f *fault.Fields, path, s string, max int) { CheckText(f, path, s, max) }

// checkTextOf is CheckText, except that text which must repeat a stored
// field (stored: a line picked by id) may hold hidden control characters:
// it may predate their rule, and the comparison with the stored field
// refuses any other text.
func checkTextOf(f *fault.Fields, path, s string, max int, stored bool) {
	switch {
	case !Storable(s):
		f.Add(path, "must be valid UTF-8 without NUL characters")
	case !stored && hasHiddenControl(s):
		f.Add(path, "must not hold control characters (other than tab, line feed and carriage return) or bidirectional overrides")
	case utf8.RuneCountInString(s) > max:
		f.Add(path, "must be at most %d characters", max)
	}
}

// Storable reports whether every store can keep s as it is: valid UTF-8
// without NUL characters.
func Storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// hasHiddenControl reports whether s holds a character CheckText refuses
// beyond NUL (see there). Tab, line feed and carriage return are kept: an
// address, a line description or a note may span lines.
func hasHiddenControl(s string) bool {
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20, r >= 0x7F && r <= 0x9F: // C0, DEL, C1
			return true
		case r == 0x2028 || r == 0x2029: // line and paragraph separators
			return true
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069: // bidi embeddings, overrides, isolates
			return true
		}
	}
	return false
}

func checkAmount(f *fault.Fields, path string, v *int64, lo, hi int64) bool {
	if v != nil && (*v < lo || *v > hi) {
		f.Add(path, "must be between %d and %d", lo, hi)
		return false
	}
	return true
}

// ValidateLineFields checks a line's own bounds (not its arithmetic) and reports
// every failure under path, e.g. "orderLines[2]". withID says whether the
// request picks lines by id (captures); an identified line may omit
// description and quantity because they are taken from the uncaptured line it
// names. Elsewhere (the spec's OrderLine) an id is not a field and is ignored,
// like any unknown key (design.md §4), so lines copied from Get order can be
// sent back as they are.
func ValidateLineFields(f *fault.Fields, path string, in LineInput, withID bool) bool {
	before := f.Len()
	// An identified line's text must be the named line's (the capture
	// compares them), which may have been stored before hidden control
	// characters were refused; Get order shows it so, and it is sent back so.
	identified := withID && in.ID != nil
	if identified && *in.ID == "" {
		f.Add(path+".id", "must not be empty")
	}
	switch {
	case in.Description == nil && !identified:
		f.Add(path+".description", "is required")
	case in.Description != nil && *in.Description == "" && !identified:
		f.Add(path+".description", "must not be empty")
	case in.Description != nil:
		checkTextOf(f, path+".description", *in.Description, MaxTextLen, identified)
	}
	switch {
	case in.Quantity == nil && !identified:
		f.Add(path+".quantity", "is required")
	case in.Quantity != nil && (*in.Quantity < 1 || *in.Quantity > MaxQuantity):
		f.Add(path+".quantity", "must be between 1 and %d", MaxQuantity)
	}
	checkTextOf(f, path+".reference", in.Reference, MaxTextLen, identified)
	if in.Type != "" && !validLineType(LineType(in.Type)) {
		f.Add(path+".type", "must be one of %v", lineTypes)
	}
	checkAmount(f, path+".totalAmount", in.TotalAmount, -MaxLineAmount, MaxLineAmount)
	checkAmount(f, path+".totalVatAmount", in.TotalVatAmount, -MaxLineAmount, MaxLineAmount)
	checkAmount(f, path+".unitDiscountAmount", in.UnitDiscountAmount, -MaxLineAmount, MaxLineAmount)
	checkAmount(f, path+".unitPrice", in.UnitPrice, -MaxLineAmount, MaxLineAmount)
	checkAmount(f, path+".vat", in.Vat, 0, money.MaxRate)
	if !identified && in.UnitPrice == nil && in.TotalAmount == nil {
		f.Add(path+".unitPrice", "is required when totalAmount is omitted")
	}
	return f.Len() == before
}

// LineFindingStandsAlone reports whether a finding of ValidateLineFields on
// a line's field comes from that field alone, so that it holds whatever a
// wrong-typed sibling (wrongTyped, a field of the same line) was meant to
// be. The amounts and vat are checked against one another; id decides what
// the line must state, so a wrong-typed id leaves nothing standing alone.
func LineFindingStandsAlone(field, wrongTyped string) bool {
	if wrongTyped == "id" {
		return false
	}
	switch field {
	case "description", "quantity", "reference", "type":
		return true
	}
	return false
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ResolveLine applies the line arithmetic of design.md §3 to a line whose fields
// passed ValidateLineFields: totalAmount = quantity × (unitPrice − unitDiscountAmount)
// and the VAT part at its rate, computed when omitted and checked (±1 minor unit)
// when sent. Failures are recorded under path; ok is false if any were.
func ResolveLine(f *fault.Fields, path string, in LineInput, mode money.VATMode) (Line, bool) {
	before := f.Len()
	q := *in.Quantity
	disc := deref(in.UnitDiscountAmount)
	rate := deref(in.Vat)
	var unit, total int64
	if in.UnitPrice != nil {
		unit = *in.UnitPrice
		total = q * (unit - disc) // |q| ≤ 1e8 and |unit−disc| ≤ 2e9: no overflow
		if total < -MaxLineAmount || total > MaxLineAmount {
			f.Add(path+".totalAmount", "quantity × (unitPrice − unitDiscountAmount) = %d is outside ±%d", total, MaxLineAmount)
		} else if in.TotalAmount != nil && *in.TotalAmount != total {
			f.Add(path+".totalAmount", "must equal quantity × (unitPrice − unitDiscountAmount) = %d, got %d", total, *in.TotalAmount)
		}
	} else {
		total = *in.TotalAmount
		if (total+q*disc)%q != 0 {
			f.Add(path+".unitPrice", "is required: totalAmount %d is not a whole unit price × quantity %d", total, q)
		} else {
			unit = (total + q*disc) / q
			if unit < -MaxLineAmount || unit > MaxLineAmount {
				f.Add(path+".unitPrice", "derived unit price %d is outside ±%d", unit, MaxLineAmount)
			}
		}
	}
	if f.Len() > before {
		return Line{}, false
	}
	vat := money.LineVAT(total, rate, mode)
	if in.TotalVatAmount != nil {
		given := *in.TotalVatAmount
		diff := given - vat
		switch {
		case rate == 0 && given != 0:
			f.Add(path+".totalVatAmount", "must be 0 when vat is 0 or omitted, got %d", given)
		case total == 0 && given != 0:
			f.Add(path+".totalVatAmount", "must be 0 when totalAmount is 0, got %d", given)
		case diff < -1 || diff > 1:
			f.Add(path+".totalVatAmount", "must be %d (±1) for totalAmount %d at vat %d, got %d", vat, total, rate, given)
		case (given < 0) != (total < 0) && given != 0:
			f.Add(path+".totalVatAmount", "must have the sign of totalAmount")
		case mode == money.InclVAT && abs(given) > abs(total):
			f.Add(path+".totalVatAmount", "must not exceed totalAmount")
		default:
			vat = given
		}
	}
	if f.Len() > before {
		return Line{}, false
	}
	desc := ""
	if in.Description != nil {
		desc = *in.Description
	}
	return Line{
		Description: desc, Quantity: q, Reference: in.Reference,
		TotalAmount: total, TotalVatAmount: vat, Type: LineType(in.Type),
		UnitDiscountAmount: disc, UnitPrice: unit, Vat: rate,
	}, true
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// CheckLines runs ValidateLineFields on each line of ins, recording failures
// under field (e.g. "orderLines"), and hands each line that passed to then
// before going on to the next, so that what then finds (with the order or
// session the request is for) keeps line order among the lines' own
// findings. A request checked on its own passes then nil.
func CheckLines(f *fault.Fields, field string, ins []LineInput, withID bool, then func(path string, in LineInput)) {
	if len(ins) > MaxLines {
		f.Add(field, "must have at most %d lines", MaxLines)
		return
	}
	for i, in := range ins {
		path := fmt.Sprintf("%s[%d]", field, i)
		if ValidateLineFields(f, path, in, withID) && then != nil {
			then(path, in)
		}
	}
}

// BuildLines validates and resolves a list of new lines (no ids), assigning
// fresh line ids. Every failure is recorded under field (e.g. "orderLines").
func BuildLines(f *fault.Fields, field string, ins []LineInput, mode money.VATMode, ids IDSource) []Line {
	out := make([]Line, 0, min(len(ins), MaxLines))
	CheckLines(f, field, ins, false, func(path string, in LineInput) {
		if l, ok := ResolveLine(f, path, in, mode); ok {
			l.ID = ids.NewID(KindLine)
			out = append(out, l)
		}
	})
	return out
}

// TotalsInput carries the optional order totals a merchant may send.
type TotalsInput struct {
	TotalOrderAmount        *int64 `json:"totalOrderAmount,omitempty"`
	TotalOrderAmountExclVat *int64 `json:"totalOrderAmountExclVat,omitempty"`
	TotalOrderVatAmount     *int64 `json:"totalOrderVatAmount,omitempty"`
}

// CheckTotals verifies sent totals against line sums and bounds. Each mismatch
// names its field. The computed totals must themselves lie within 0..MaxTotal,
// sent or not: the spec bounds every order total, and a response must not show
// one outside them (lines at 0 % with a discount at 25 % can sum to a negative
// VAT).
func CheckTotals(f *fault.Fields, in TotalsInput, t Totals, required bool) {
	check := func(name string, v *int64, want int64) {
		switch {
		case want < 0 || want > MaxTotal:
			f.Add(name, "the order lines sum to %d, outside 0..%d", want, MaxTotal)
		case v == nil:
			if required {
				f.Add(name, "is required")
			}
		case *v < 0 || *v > MaxTotal:
			f.Add(name, "must be between 0 and %d", MaxTotal)
		case *v != want:
			f.Add(name, "must equal the sum of the order lines, %d, got %d", want, *v)
		}
	}
	check("totalOrderAmount", in.TotalOrderAmount, t.Gross)
	check("totalOrderAmountExclVat", in.TotalOrderAmountExclVat, t.Net)
	check("totalOrderVatAmount", in.TotalOrderVatAmount, t.VAT)
}

// RoundingHint explains a refusal by excess minor units when per-line VAT
// rounding can account for it: in exclVat a line's VAT is rounded on its own,
// so the units of a split line can sum to more than the line did, one minor
// unit per line at most, and the ±1 VAT tolerance is the way back.
func RoundingHint(lines []Line, mode money.VATMode, excess int64) string {
	if mode != money.ExclVAT || excess < 1 {
		return ""
	}
	var taxed int64
	for _, l := range lines {
		if l.Vat != 0 {
			taxed++
		}
	}
	if excess > taxed {
		return ""
	}
	return fmt.Sprintf(" (if the %d is VAT rounding of a split line, each line's VAT being rounded on its own, a line's totalVatAmount may be sent 1 lower than computed)", excess)
}

// CheckTotalsBounds names each total that is out of bounds, or missing when
// required: what can be said of the totals without the lines' sums, when the
// lines are invalid or there is no VAT mode yet to sum them in.
func CheckTotalsBounds(f *fault.Fields, in TotalsInput, required bool) {
	for _, t := range []struct {
		name string
		v    *int64
	}{{"totalOrderAmount", in.TotalOrderAmount}, {"totalOrderAmountExclVat", in.TotalOrderAmountExclVat},
		{"totalOrderVatAmount", in.TotalOrderVatAmount}} {
		switch {
		case t.v == nil:
			if required {
				f.Add(t.name, "is required")
			}
		case *t.v < 0 || *t.v > MaxTotal:
			f.Add(t.name, "must be between 0 and %d", MaxTotal)
		}
	}
}
