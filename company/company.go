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
	"unicode/utf8"

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

// legalForms are suffixes (and prefixes) that do not distinguish companies,
// folded as Tokens folds a name's words (a key with a diacritic would never
// match), abbreviated and written out: the bundled Swedish names end in
// "Aktiebolag" and "Handelsbolag" as well as "AB".
var legalForms = map[string]bool{"ab": true, "publ": true, "hb": true, "kb": true, "as": true, "asa": true, "ans": true,
	"da": true, "sa": true, "oy": true, "oyj": true, "ky": true, "tmi": true, "aps": true, "a/s": true, "is": true,
	"ivs": true, "k/s": true, "p/s": true, "i/s": true, "ltd": true, "limited": true, "gmbh": true, "ag": true,
	"inc": true, "llc": true, "plc": true, "bv": true, "nv": true, "ek": true, "ekonomisk": true, "forening": true,
	"aktiebolag": true, "handelsbolag": true, "kommanditbolag": true, "aksjeselskap": true, "allmennaksjeselskap": true,
	"osakeyhtio": true, "kommandiittiyhtio": true, "anpartsselskab": true, "aktieselskab": true,
	"interessentskab": true, "kommanditselskab": true}

// fold lower-cases s and strips diacritics (å → a, ø → o, æ → ae, ß → ss).
// Letters and digits in a compatibility form are read as the ones they
// stand for (the ligature "ﬁ" as "fi", full-width "Ｍ" as "m"), and
// invisible format characters (a soft hyphen, zero-width spaces and
// joiners, a byte order mark) are dropped: text pasted from a PDF or a web
// page carries them inside words that read the same without them. Symbols
// and superscripts are left as they are, so they still part words: NFKD
// would spell "™" as "tm" and "²" as "2", making "Acme™" the word "acmetm".
func fold(s string) string {
	var b strings.Builder
	var buf [utf8.UTFMax]byte
	for _, r := range norm.NFD.String(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if d := norm.NFKD.Properties(buf[:utf8.EncodeRune(buf[:], r)]).Decomposition(); d != nil {
				for _, c := range string(d) {
					foldRune(&b, c)
				}
				continue
			}
		}
		foldRune(&b, r)
	}
	return b.String()
}

func foldRune(b *strings.Builder, r rune) {
	switch r = unicode.ToLower(r); {
	case unicode.Is(unicode.Mn, r), unicode.Is(unicode.Cf, r):
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
}

// index is one country's immutable search structure. Companies are sorted
// by normalized name, so a name-prefix query is one binary search and its
// results are already in alphabetical order.
type index struct {
	companies []Company
	norm      []string         // normalized names, sorted
	words     [][]string       // normalized words of each name
	byNumber  map[string]int32 // registration number → company
	tokens    []entry          // sorted by token, then company
	maxWords  int              // the most words of any name
}

// build indexes a country's companies; numbers are keyed in their canonical
// form, which lookups ask for, whatever form a loader gave them in.
func build(country string, cs []Company) *index {
	type named struct {
		c     Company
		words []string
		norm  string
	}
	all := make([]named, len(cs))
	for i, c := range cs {
		w := Tokens(c.Name)
		all[i] = named{c, w, strings.Join(w, " ")}
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].norm != all[b].norm {
			return all[a].norm < all[b].norm
		}
		return all[a].c.ID < all[b].c.ID
	})
	ix := &index{companies: make([]Company, len(all)), norm: make([]string, len(all)), words: make([][]string, len(all)),
		byNumber: make(map[string]int32, len(all))}
	for i, n := range all {
		ix.companies[i], ix.norm[i], ix.words[i] = n.c, n.norm, n.words
		ix.maxWords = max(ix.maxWords, len(n.words))
		ix.byNumber[CanonicalNumber(country, n.c.ID)] = int32(i)
		for _, t := range n.words {
			ix.tokens = append(ix.tokens, entry{t, int32(i)})
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
	hi := lo + sort.Search(len(ix.tokens)-lo, func(i int) bool { return !strings.HasPrefix(ix.tokens[lo+i].token, p) })
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
	ix := build(country, cs)
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
	i, ok := ix.byNumber[CanonicalNumber(country, number)]
	if !ok {
		return Company{}, false
	}
	return ix.companies[i], true
}

// Ranks of word matches, best first (exact names and name prefixes come before both).
const (
	rankFirstToken = iota
	rankAllTokens
)

// Search finds up to limit companies of country matching q, best first. A
// query that is a registration number in the directory matches that company
// exactly (a valid number that is not, nothing);
// otherwise names match when every query word is a prefix of some word of
// the name. Order: the exact name, names starting with the query
// (alphabetical), names whose first word matches, any other match.
// In a country without a check-digit rule (an imported one) a query is
// searched as a name unless it is a listed number.
// exactMatch is true for the number or for an exact normalized name.
func (d *Directory) Search(country, q string, limit int) []Match {
	d.mu.RLock()
	ix := d.countries[country]
	d.mu.RUnlock()
	// Text no store could hold (NUL, invalid UTF-8) matches nothing, as on
	// every other lookup (docs/decisions.md); the word splitter would
	// otherwise read a NUL as a space.
	if ix == nil || limit <= 0 || !utf8.ValidString(q) || strings.IndexByte(q, 0) >= 0 {
		return nil
	}
	var out []Match
	n := CanonicalNumber(country, q)
	// A number in the directory is that company even when its check digit
	// does not hold (the sandbox fixtures' numbers are made up).
	if i, ok := ix.byNumber[n]; ok && n != "" {
		c := ix.companies[i]
		return append(out, Match{CompanyID: c.ID, CompanyName: c.Name, ExactMatch: true})
	}
	// A well-formed number that is not listed is no company; but only where
	// numbers carry a check digit: elsewhere any 4–20 alphanumerics pass, so
	// "Acme" would read as a number and its name never be searched.
	if HasCheckDigit(country) && ValidNumber(country, n) {
		return out
	}
	qt := Tokens(q)
	if len(qt) == 0 {
		return nil
	}
	out = ix.searchName(qt, limit)
	// A name is indexed without its legal form, so while a buyer types one
	// ("Approved Byggvaror A", "Göta Bygg AB (p") the last word matched
	// nothing of the company, which vanished until the form was complete.
	// Such a word may also start a word of a name ("Göta Bygg Park"): those
	// names come first, then the names matching without it.
	if last := qt[len(qt)-1]; len(out) < limit && len(qt) > 1 && legalFormPrefix(last) {
		for _, m := range ix.searchName(qt[:len(qt)-1], limit) {
			if len(out) == limit {
				break
			}
			if !slices.ContainsFunc(out, func(o Match) bool { return o.CompanyID == m.CompanyID }) {
				out = append(out, m)
			}
		}
	}
	return out
}

// legalFormPrefix reports whether w begins a legal form (Tokens drops the
// whole form, so w is a part of one).
func legalFormPrefix(w string) bool {
	for f := range legalForms {
		if strings.HasPrefix(f, w) {
			return true
		}
	}
	return false
}

// searchName finds up to limit companies whose names match the query words
// qt, best first (see Search).
func (ix *index) searchName(qt []string, limit int) []Match {
	var out []Match
	qn := strings.Join(qt, " ")
	// 1. Names that start with the query: one binary search, alphabetical.
	start := sort.SearchStrings(ix.norm, qn)
	i := start
	for ; i < len(ix.norm) && strings.HasPrefix(ix.norm[i], qn) && len(out) < limit; i++ {
		c := ix.companies[i]
		out = append(out, Match{CompanyID: c.ID, CompanyName: c.Name, ExactMatch: ix.norm[i] == qn})
	}
	// More query words than any name has cannot each start a word of their
	// own; looking them up would cost per word of whatever a buyer typed.
	if len(out) == limit || len(qt) > ix.maxWords {
		return out
	}
	// 2. Names whose words each start with a query word, in any order: the
	// intersection of each word's posting list (sorted by company, which is
	// alphabetical), ranked by whether the first word matches.
	// Longest first, so that allPrefixed's first fit is a full matching.
	longest := slices.Clone(qt)
	slices.SortStableFunc(longest, func(a, b string) int { return len(b) - len(a) })
	// A posting list costs every entry of its prefix: so each distinct word
	// once (one given again selects the same companies; allPrefixed gives it
	// a word of its own), the rarest first, and none once no company is
	// left. Otherwise "s s s …" built the list of every s-word 50 times.
	distinct := slices.Clone(qt)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	entries := make(map[string][]entry, len(distinct))
	for _, t := range distinct {
		entries[t] = ix.prefix(t)
	}
	slices.SortStableFunc(distinct, func(a, b string) int { return len(entries[a]) - len(entries[b]) })
	cands := postings(entries[distinct[0]])
	for _, t := range distinct[1:] {
		if len(cands) == 0 {
			break
		}
		cands = intersect(cands, postings(entries[t]))
	}
	type hit struct {
		rank int
		idx  int32
	}
	better := func(a, b hit) bool { return a.rank < b.rank || a.rank == b.rank && a.idx < b.idx }
	room := limit - len(out)
	best := make([]hit, 0, room+1)
	for _, idx := range cands {
		if strings.HasPrefix(ix.norm[idx], qn) {
			continue // already found in step 1
		}
		words := ix.words[idx]
		if len(words) < len(qt) || !allPrefixed(longest, words) {
			continue // two query words matched the same word of the name
		}
		h := hit{rankAllTokens, idx}
		if strings.HasPrefix(words[0], qt[0]) {
			h.rank = rankFirstToken
		}
		if len(best) == room && !better(h, best[room-1]) {
			continue
		}
		at := sort.Search(len(best), func(k int) bool { return better(h, best[k]) })
		best = append(best, hit{})
		copy(best[at+1:], best[at:])
		best[at] = h
		if len(best) > room {
			best = best[:room]
		}
	}
	for _, h := range best {
		c := ix.companies[h.idx]
		out = append(out, Match{CompanyID: c.ID, CompanyName: c.Name})
	}
	return out
}

// postings lists, sorted and without repeats, the companies of es, the
// entries of a prefix (index.prefix). One word's entries are already in
// company order; a prefix spanning several words needs a sort.
func postings(es []entry) []int32 {
	out := make([]int32, 0, len(es))
	for _, e := range es {
		out = append(out, e.idx)
	}
	if len(es) > 0 && es[0].token != es[len(es)-1].token {
		slices.Sort(out)
	}
	return slices.Compact(out)
}

// intersect returns the companies in both sorted lists.
func intersect(a, b []int32) []int32 {
	out := a[:0:0]
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// allPrefixed reports whether every query word is a prefix of a distinct
// word, given the query words longest first. Taking the first free word
// that fits is then never wrong: the words two query words start are either
// disjoint or nested (one query word starts the other), and the longer one,
// placed first, leaves the shorter one every word it could take instead. In
// another order "s" could take "stockholm" from "sto", which fits nothing
// else, though "sven" was free for "s".
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
