package company

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/kassahq/kassa/fault"
)

// Word lists for plausible Nordic company names, per country.
var (
	nameParts = map[string][][]string{
		"SE": {{"Nordisk", "Svensk", "Göta", "Norrlands", "Skånska", "Västra", "Östra", "Mälar", "Dala", "Fjäll", "Hav", "Sjö", "Älv", "Björk", "Gran", "Ek", "Lind", "Stål", "Järn", "Sten"},
			{"Bygg", "Trä", "Verktyg", "Logistik", "Transport", "Data", "Konsult", "Elektro", "Maskin", "Plåt", "Måleri", "Rör", "Mekanik", "Livs", "Textil", "Möbel", "Grafiska", "Energi", "Miljö", "Fastighets"},
			{"AB", "AB", "AB", "Handelsbolag", "Aktiebolag", "AB (publ)"}},
		"NO": {{"Nordisk", "Norsk", "Fjord", "Vestlandets", "Trøndelag", "Bergens", "Oslo", "Lofoten", "Fjell", "Havbruk", "Skog", "Elv", "Bjørk", "Gran", "Stål", "Jern", "Stein", "Sør", "Nord", "Øst"},
			{"Bygg", "Tre", "Verktøy", "Logistikk", "Transport", "Data", "Konsult", "Elektro", "Maskin", "Rør", "Mekanikk", "Mat", "Tekstil", "Møbel", "Energi", "Miljø", "Eiendom", "Fisk", "Olje", "Frakt"},
			{"AS", "AS", "AS", "ASA", "ANS", "DA"}},
		"FI": {{"Suomen", "Pohjolan", "Järvi", "Metsä", "Kivi", "Teräs", "Koivu", "Kuusi", "Tunturi", "Meri", "Lappi", "Savo", "Häme", "Karjala", "Itä", "Länsi", "Pohjois", "Etelä", "Rauta", "Kallio"},
			{"Rakennus", "Puu", "Työkalu", "Logistiikka", "Kuljetus", "Data", "Konsultointi", "Sähkö", "Kone", "Putki", "Mekaniikka", "Elintarvike", "Tekstiili", "Huonekalu", "Energia", "Ympäristö", "Kiinteistö", "Kala", "Paino", "Maalaus"},
			{"Oy", "Oy", "Oy", "Oyj", "Ky", "Tmi"}},
		"DK": {{"Nordisk", "Dansk", "Jysk", "Fyns", "Sjællands", "Øresund", "Vestjysk", "Bornholms", "Skov", "Hav", "Fjord", "Bøge", "Ege", "Stål", "Jern", "Sten", "Syd", "Nord", "Øst", "Vest"},
			{"Byg", "Træ", "Værktøj", "Logistik", "Transport", "Data", "Rådgivning", "El", "Maskin", "Rør", "Mekanik", "Føde", "Tekstil", "Møbel", "Energi", "Miljø", "Ejendom", "Fisk", "Tryk", "Maler"},
			{"ApS", "ApS", "A/S", "A/S", "I/S", "K/S"}},
	}
	districts = []string{"Nord", "Syd", "Väst", "Öst", "Centrum", "City", "Hamn", "Park", "Center", "Group", "Partner", "Service", "Team", "Invest", "Holding", "Solutions", "Trading", "Teknik", "Design", "Produktion"}
	countries = []string{"DK", "FI", "NO", "SE"}
)

// Countries lists the countries of the bundled dataset. Each call returns a
// new slice, so a caller changing it does not change what Bundled builds.
func Countries() []string { return slices.Clone(countries) }

// numberBody returns the digits before the check digit of a registration
// number for country, derived from seq so that numbers are unique.
func numberBody(country string, r *rand.Rand) []int {
	var n int
	var lead []int
	switch country {
	case "SE":
		lead, n = []int{5, 5, 6}, 6 // 556xxxxxx + check: limited companies
	case "NO":
		lead, n = []int{9}, 7
	case "FI":
		lead, n = []int{2}, 6
	case "DK":
		lead, n = []int{3}, 6
	}
	body := append([]int{}, lead...)
	for i := 0; i < n; i++ {
		body = append(body, r.IntN(10))
	}
	return body
}

// Generate returns n plausible companies of country with valid, unique
// registration numbers. The same seed gives the same list.
func Generate(country string, n int, seed uint64) []Company {
	parts := nameParts[country]
	if parts == nil {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, uint64(len(country))+uint64(country[0])<<8+uint64(country[1])))
	seen := map[string]bool{}
	names := map[string]int{}
	out := make([]Company, 0, n)
	for len(out) < n {
		body := numberBody(country, r)
		c, ok := CheckDigit(country, body)
		if !ok {
			continue
		}
		var b strings.Builder
		for _, d := range append(body, c) {
			b.WriteByte(byte('0' + d))
		}
		id := b.String()
		if seen[id] {
			continue
		}
		seen[id] = true
		// Two words from 20 × 20 give 400 stems; a district word keeps larger lists plausible.
		name := parts[0][r.IntN(len(parts[0]))] + " " + parts[1][r.IntN(len(parts[1]))]
		if k := names[name]; k > 0 {
			name = fmt.Sprintf("%s %s", name, districts[r.IntN(len(districts))])
		}
		names[name]++
		out = append(out, Company{ID: id, Name: name + " " + parts[2][r.IntN(len(parts[2]))], Country: country})
	}
	return out
}

// BundledSize is the number of generated companies per country in the binary.
const BundledSize = 5000

// Bundled returns the directory kassa ships with: generated companies for
// each country plus extra companies (the sandbox's fixture buyers).
func Bundled(extra []Company) *Directory {
	d := NewDirectory()
	for _, c := range countries {
		cs := Generate(c, BundledSize, 1)
		for _, e := range extra {
			if e.Country == c {
				cs = append(cs, e)
			}
		}
		d.Set(c, cs)
	}
	return d
}

// ReadCSV reads companies of country from CSV with a header naming the
// columns "companyId" (or "id") and "companyName" (or "name"). Every
// registration number must be valid for country; the first bad row is
// reported with its line number.
func ReadCSV(country string, r io.Reader) ([]Company, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fault.Invalidf("file", "cannot read the CSV header: %v", err)
	}
	idCol, nameCol := -1, -1
	for i, h := range head {
		switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) {
		case "companyid", "id":
			idCol = i
		case "companyname", "name":
			nameCol = i
		}
	}
	if idCol < 0 || nameCol < 0 {
		return nil, fault.Invalidf("file", "the header must name the columns companyId and companyName")
	}
	var out []Company
	seen := map[string]bool{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fault.Invalidf("file", "line %d: %v", line, err)
		}
		if idCol >= len(rec) || nameCol >= len(rec) {
			return nil, fault.Invalidf("file", "line %d: missing columns", line)
		}
		id, name := CanonicalNumber(country, rec[idCol]), strings.TrimSpace(rec[nameCol])
		switch {
		case !ValidNumber(country, id):
			return nil, fault.Invalidf("file", "line %d: %q is not a valid %s registration number", line, rec[idCol], country)
		case name == "" || len([]rune(name)) > 200:
			return nil, fault.Invalidf("file", "line %d: the name must be 1 to 200 characters", line)
		case seen[id]:
			return nil, fault.Invalidf("file", "line %d: registration number %s appears twice", line, id)
		}
		seen[id] = true
		out = append(out, Company{ID: id, Name: name, Country: country})
	}
	return out, nil
}

// WriteCSV writes companies in the format ReadCSV reads.
func WriteCSV(w io.Writer, cs []Company) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"companyId", "companyName"})
	for _, c := range cs {
		cw.Write([]string{c.ID, c.Name})
	}
	cw.Flush()
	return cw.Error()
}
