// Package company is kassa's company directory: per-country lists of
// companies searched by name (case- and diacritic-insensitive, tolerant of
// legal-form suffixes, prefix and token matches, ranked) or by registration
// number (normalized and checksum-validated for SE, NO, FI and DK).
//
// A directory is immutable once built, so searches need no locks; replacing a
// country's list builds a new index and swaps it in.
package company

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Company is one entry of the directory.
type Company struct {
	ID      string // registration number, normalized
	Name    string
	Country string
}

// Match is one search result.
type Match struct {
	CompanyID   string `json:"companyId"`
	CompanyName string `json:"companyName"`
	ExactMatch  bool   `json:"exactMatch"`
}

// legalForms are suffixes (and prefixes) that do not distinguish companies.
var legalForms = map[string]bool{"ab": true, "publ": true, "hb": true, "kb": true, "as": true, "asa": true, "ans": true,
	"da": true, "sa": true, "oy": true, "oyj": true, "ky": true, "tmi": true, "aps": true, "a/s": true, "is": true,
	"ivs": true, "k/s": true, "p/s": true, "i/s": true, "ltd": true, "limited": true, "gmbh": true, "ag": true,
	"inc": true, "llc": true, "plc": true, "bv": true, "nv": true, "ek": true, "ekonomisk": true, "förening": true}

// fold lower-cases s and strips diacritics (å → a, ø → o, æ → ae, ß → ss).
func fold(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(s)) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case r == 'ø':
			b.WriteRune('o')
		case r == 'æ':
			b.WriteString("ae")
		case r == 'ß':
			b.WriteString("ss")
		case r == 'đ':
			b.WriteRune('d')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Tokens splits a name into folded words without legal forms.
func Tokens(name string) []string {
	f := fold(name)
	var out []string
	for _, w := range strings.FieldsFunc(f, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '/' || r == '&')
	}) {
		w = strings.Trim(w, "/&")
		if w == "" {
			continue
		}
		if legalForms[w] || legalForms[strings.ReplaceAll(w, "/", "")] {
			continue
		}
		out = append(out, w)
	}
	return out
}

// NormalizeName is the comparable form of a company name.
func NormalizeName(name string) string { return strings.Join(Tokens(name), " ") }

type entry struct {
	token string
	idx   int32
	pos   uint8 // position of the token in the name
}

// index is one country's immutable search structure.
type index struct {
	companies []Company
	norm      []string         // normalized names
	byNumber  map[string]int32 // registration number → company
	tokens    []entry          // sorted by token, for prefix search
}

func build(cs []Company) *index {
	ix := &index{companies: cs, norm: make([]string, len(cs)), byNumber: make(map[string]int32, len(cs))}
	for i, c := range cs {
		toks := Tokens(c.Name)
		ix.norm[i] = strings.Join(toks, " ")
		ix.byNumber[c.ID] = int32(i)
		for p, t := range toks {
			if p > 255 {
				break
			}
			ix.tokens = append(ix.tokens, entry{t, int32(i), uint8(p)})
		}
	}
	sort.Slice(ix.tokens, func(a, b int) bool {
		if ix.tokens[a].token != ix.tokens[b].token {
			return ix.tokens[a].token < ix.tokens[b].token
		}
		return ix.tokens[a].idx < ix.tokens[b].idx
	})
	return ix
}

// prefix returns the entries whose token starts with p.
func (ix *index) prefix(p string) []entry {
	lo := sort.Search(len(ix.tokens), func(i int) bool { return ix.tokens[i].token >= p })
	hi := lo
	for hi < len(ix.tokens) && strings.HasPrefix(ix.tokens[hi].token, p) {
		hi++
	}
	return ix.tokens[lo:hi]
}

// Directory holds every country's companies.
type Directory struct {
	mu        sync.RWMutex
	countries map[string]*index
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory { return &Directory{countries: map[string]*index{}} }

// Set replaces the companies of a country.
func (d *Directory) Set(country string, cs []Company) {
	ix := build(cs)
	d.mu.Lock()
	d.countries[country] = ix
	d.mu.Unlock()
}

// Countries lists the countries the directory knows.
func (d *Directory) Countries() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]string, 0, len(d.countries))
	for c := range d.countries {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Has reports whether country has a directory.
func (d *Directory) Has(country string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.countries[country] != nil
}

// Len is the number of companies of country.
func (d *Directory) Len(country string) int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if ix := d.countries[country]; ix != nil {
		return len(ix.companies)
	}
	return 0
}

// Lookup finds a company by registration number.
func (d *Directory) Lookup(country, number string) (Company, bool) {
	d.mu.RLock()
	ix := d.countries[country]
	d.mu.RUnlock()
	if ix == nil {
		return Company{}, false
	}
	i, ok := ix.byNumber[NormalizeNumber(number)]
	if !ok {
		return Company{}, false
	}
	return ix.companies[i], true
}

// Ranks, best first.
const (
	rankNumber = iota
	rankExactName
	rankNamePrefix
	rankFirstToken
	rankAllTokens
)

// Search finds up to limit companies of country matching q, best first. A
// query that is a valid registration number matches that company exactly;
// otherwise names match when every query word is a prefix of some word of
// the name. exactMatch is true for the number or for an exact normalized name.
func (d *Directory) Search(country, q string, limit int) []Match {
	d.mu.RLock()
	ix := d.countries[country]
	d.mu.RUnlock()
	if ix == nil || limit <= 0 {
		return nil
	}
	var out []Match
	if n := NormalizeNumber(q); ValidNumber(country, n) {
		if i, ok := ix.byNumber[n]; ok {
			c := ix.companies[i]
			out = append(out, Match{CompanyID: c.ID, CompanyName: c.Name, ExactMatch: true})
		}
		return out
	}
	qt := Tokens(q)
	if len(qt) == 0 {
		return nil
	}
	qn := strings.Join(qt, " ")
	// Walk the rarest query word's candidates and check the other words.
	best := -1
	var cands []entry
	for i, t := range qt {
		e := ix.prefix(t)
		if best < 0 || len(e) < len(cands) {
			best, cands = i, e
		}
	}
	type hit struct {
		idx  int32
		rank int
	}
	seen := make(map[int32]bool, len(cands))
	var hits []hit
	for _, e := range cands {
		if seen[e.idx] {
			continue
		}
		seen[e.idx] = true
		name := ix.norm[e.idx]
		words := strings.Fields(name)
		if !allPrefixed(qt, words) {
			continue
		}
		r := rankAllTokens
		switch {
		case name == qn:
			r = rankExactName
		case strings.HasPrefix(name, qn):
			r = rankNamePrefix
		case len(words) > 0 && strings.HasPrefix(words[0], qt[0]):
			r = rankFirstToken
		}
		hits = append(hits, hit{e.idx, r})
	}
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].rank != hits[b].rank {
			return hits[a].rank < hits[b].rank
		}
		na, nb := ix.norm[hits[a].idx], ix.norm[hits[b].idx]
		if len(na) != len(nb) {
			return len(na) < len(nb)
		}
		return na < nb
	})
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		c := ix.companies[h.idx]
		out = append(out, Match{CompanyID: c.ID, CompanyName: c.Name, ExactMatch: h.rank == rankExactName})
	}
	return out
}

// allPrefixed reports whether every query word is a prefix of a distinct word.
func allPrefixed(q, words []string) bool {
	used := make([]bool, len(words))
	for _, t := range q {
		found := false
		for i, w := range words {
			if !used[i] && strings.HasPrefix(w, t) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
