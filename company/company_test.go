package company

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestValidNumber(t *testing.T) {
	cases := []struct {
		country, number string
		want            bool
	}{
		{"SE", "5560360793", true}, // a real Swedish organisationsnummer shape (Luhn)
		{"SE", "5560360794", false},
		{"SE", "556036079", false},
		{"NO", "923609016", true},
		{"NO", "923609017", false},
		{"FI", "01120389", true},
		{"FI", "01120388", false},
		{"DK", "10150817", true},
		{"DK", "10150818", false},
		{"SE", "55603607X3", false},
	}
	for _, c := range cases {
		if got := ValidNumber(c.country, NormalizeNumber(c.number)); got != c.want {
			t.Errorf("ValidNumber(%s, %s) = %v, want %v", c.country, c.number, got, c.want)
		}
	}
	if NormalizeNumber(" 556036-0793 ") != "5560360793" {
		t.Errorf("normalize")
	}
}

func TestGeneratedNumbersAreValidAndUnique(t *testing.T) {
	for _, c := range Countries() {
		cs := Generate(c, 3000, 7)
		seen := map[string]bool{}
		for _, co := range cs {
			if !ValidNumber(c, co.ID) {
				t.Fatalf("%s: invalid %s", c, co.ID)
			}
			if seen[co.ID] {
				t.Fatalf("%s: duplicate %s", c, co.ID)
			}
			seen[co.ID] = true
		}
		if again := Generate(c, 3000, 7); again[2999] != cs[2999] {
			t.Fatalf("%s: generation is not deterministic", c)
		}
	}
}

func TestSearchRanksAndFolds(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{
		{ID: "5560360793", Name: "Göta Bygg AB", Country: "SE"},
		{ID: "5560000001", Name: "Göta Byggvaror AB", Country: "SE"},
		{ID: "5560000019", Name: "Västra Göta Bygg Handelsbolag", Country: "SE"},
		{ID: "5560000027", Name: "Nordisk Data AB", Country: "SE"},
	})
	names := func(ms []Match) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.CompanyName)
		}
		return strings.Join(s, "|")
	}
	cases := []struct {
		q, want string
		exact   bool
	}{
		{"gota bygg", "Göta Bygg AB|Göta Byggvaror AB|Västra Göta Bygg Handelsbolag", true},
		{"GÖTA BYGG AB", "Göta Bygg AB|Göta Byggvaror AB|Västra Göta Bygg Handelsbolag", true},
		{"bygg göta", "Göta Bygg AB|Göta Byggvaror AB|Västra Göta Bygg Handelsbolag", false},
		{"byggv", "Göta Byggvaror AB", false},
		{"556036-0793", "Göta Bygg AB", true},
		{"5560360794", "", false},
		{"nord dat", "Nordisk Data AB", false},
		{"xyz", "", false},
		{"göta\x00bygg", "", false}, // text no store holds matches nothing
		{"\x00göta", "", false},
		{"göta \xff", "", false},
	}
	for _, c := range cases {
		got := d.Search("SE", c.q, 10)
		if names(got) != c.want {
			t.Errorf("Search(%q) = %s, want %s", c.q, names(got), c.want)
			continue
		}
		if len(got) > 0 && got[0].ExactMatch != c.exact {
			t.Errorf("Search(%q)[0].ExactMatch = %v", c.q, got[0].ExactMatch)
		}
	}
	if d.Search("NO", "gota", 10) != nil {
		t.Errorf("unknown country should give nothing")
	}
	if got := d.Search("SE", "göta", 1); len(got) != 1 {
		t.Errorf("limit: %d", len(got))
	}
}

func TestCSVRoundTripAndErrors(t *testing.T) {
	cs := Generate("NO", 50, 3)
	var buf bytes.Buffer
	if err := WriteCSV(&buf, cs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCSV("NO", &buf)
	if err != nil || len(back) != 50 || back[49] != cs[49] {
		t.Fatalf("round trip: %v %d", err, len(back))
	}
	for _, bad := range []string{
		"companyId,companyName\n923609017,Bad Check AS\n",
		"id,name\n923609016,\n",
		"foo,bar\n1,2\n",
		"companyId,companyName\n923609016,A AS\n923 609 016,B AS\n",
	} {
		if _, err := ReadCSV("NO", strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestSearchFindsListedNumbersWithoutCheckDigits: a number in the directory
// is found by number even when it fails its country's check digit (the
// sandbox's fixture buyers in NO, FI and DK), with or without separators; a
// number that is valid but unknown finds nothing.
func TestSearchFindsListedNumbersWithoutCheckDigits(t *testing.T) {
	d := NewDirectory()
	d.Set("NO", []Company{{ID: "910000001", Name: "Godkjent Bygg AS", Country: "NO"}, {ID: "910000002", Name: "Avslått AS", Country: "NO"}})
	d.Set("FI", []Company{{ID: "10000011", Name: "Hyväksytty Oy", Country: "FI"}})
	for _, c := range []struct{ country, q, want string }{
		{"NO", "910000001", "Godkjent Bygg AS"}, {"NO", "910 000 002", "Avslått AS"}, {"FI", "1000001-1", "Hyväksytty Oy"},
	} {
		got := d.Search(c.country, c.q, 10)
		if len(got) != 1 || got[0].CompanyName != c.want || !got[0].ExactMatch {
			t.Errorf("search %s %q: %+v, want %s", c.country, c.q, got, c.want)
		}
	}
	if got := d.Search("NO", "974760673", 10); len(got) != 0 {
		t.Errorf("a valid number that is not listed found %+v", got)
	}
}

// A buyer types a registration number in many forms: each of them is the
// one listed company, a form that is whole but no number is told apart
// from a number still being typed, and the forms of one number are one.
func TestParseNumberForms(t *testing.T) {
	for _, c := range []struct {
		country, s, n string
		whole         bool
	}{
		{"SE", "5560360793", "5560360793", true},
		{"SE", "556036-0793", "5560360793", true},
		{"SE", " 556 036 0793 ", "5560360793", true},
		{"SE", "165560360793", "5560360793", true},
		{"SE", "16556036-0793", "5560360793", true},
		{"SE", "SE556036079301", "5560360793", true},
		{"SE", "se 556036-0793 01", "5560360793", true},
		{"SE", "5560360794", "5560360794", true}, // whole; ValidNumber refuses it
		{"SE", "SE556036079302", "", true},
		{"SE", "555560360793", "", true},
		{"SE", "1655603607931", "", true},
		{"SE", "SE5560360793", "", false}, // a VAT id being typed
		{"SE", "16556036079", "", false},
		{"SE", "556036", "", false},
		{"SE", "Göta Bygg", "", false},
		{"SE", "Sea 12", "", false},
		{"NO", "923609016", "923609016", true},
		{"NO", "NO923609016MVA", "923609016", true},
		{"NO", "NO 923 609 016 MVA", "923609016", true},
		{"NO", "923609016 MVA", "923609016", true},
		{"NO", "NO923609016", "923609016", true},
		{"FI", "0112038-9", "01120389", true},
		{"FI", "FI01120389", "01120389", true},
		{"DK", "DK 10 15 08 17", "10150817", true},
		{"DK", "DK101508170", "", true},
		{"GB", "GB123456", "", false},
	} {
		n, whole := ParseNumber(c.country, c.s)
		if n != c.n || whole != c.whole {
			t.Errorf("ParseNumber(%s, %q) = %q, %v; want %q, %v", c.country, c.s, n, whole, c.n, c.whole)
		}
	}
	if !SameNumber("SE", "556000-0001", "SE556000000101") || !SameNumber("SE", "165560000001", "5560000001") {
		t.Error("the forms of one SE number are not the same number")
	}
	if SameNumber("SE", "5560000001", "5560000019") || SameNumber("GB", "ab-1", "AB1") || SameNumber("SE", "Å1", "1") {
		t.Error("different ids are the same number")
	}
}

func TestSearchAndLookupReadEveryNumberForm(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{{ID: "5560360793", Name: "Göta Bygg AB", Country: "SE"}, {ID: "5560000001", Name: "Approved Byggvaror AB", Country: "SE"}})
	d.Set("NO", []Company{{ID: "910000001", Name: "Godkjent Bygg AS", Country: "NO"}})
	d.Set("DK", []Company{{ID: "10000001", Name: "Godkendt Byg ApS", Country: "DK"}})
	for _, c := range []struct{ country, q, want string }{
		{"SE", "165560360793", "5560360793"}, {"SE", "SE556036079301", "5560360793"}, {"SE", "SE 556000-0001 01", "5560000001"},
		{"SE", "16556000-0001", "5560000001"}, {"NO", "NO910000001MVA", "910000001"}, {"NO", "910 000 001 MVA", "910000001"},
		{"DK", "DK10000001", "10000001"},
	} {
		got := d.Search(c.country, c.q, 10)
		if len(got) != 1 || got[0].CompanyID != c.want || !got[0].ExactMatch {
			t.Errorf("Search(%s, %q) = %+v, want %s", c.country, c.q, got, c.want)
		}
		if co, ok := d.Lookup(c.country, c.q); !ok || co.ID != c.want {
			t.Errorf("Lookup(%s, %q) = %+v %v, want %s", c.country, c.q, co, ok, c.want)
		}
	}
	// A valid number that is not listed, in its 12-digit form, is no
	// company; it was searched as a name.
	if got := d.Search("SE", "165560360801", 10); len(got) != 0 {
		t.Errorf("unlisted 12-digit number found %+v", got)
	}
}

// A legal form written out ("Aktiebolag" for AB, "Handelsbolag" for HB;
// the bundled Swedish names use both) distinguishes no company either: the
// name without it is an exact match, and the long and short forms find
// each other. A form with a letter folded away ("förening") is dropped too.
func TestSearchIgnoresWrittenOutLegalForms(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{{ID: "5560360793", Name: "Göta Bygg AB (publ)", Country: "SE"},
		{ID: "5561414474", Name: "Göta Bygg Park Aktiebolag", Country: "SE"},
		{ID: "5560909391", Name: "Västra Data Handelsbolag", Country: "SE"},
		{ID: "5560000001", Name: "Mälar Ekonomisk Förening", Country: "SE"}})
	for _, c := range []struct{ q, want string }{
		{"Göta Bygg Aktiebolag", "5560360793"}, {"Göta Bygg Park AB", "5561414474"}, {"Göta Bygg Park", "5561414474"},
		{"Västra Data", "5560909391"}, {"Västra Data HB", "5560909391"}, {"Mälar", "5560000001"},
	} {
		got := d.Search("SE", c.q, 10)
		if len(got) == 0 || got[0].CompanyID != c.want || !got[0].ExactMatch {
			t.Errorf("Search(%q) = %+v, want %s first and exact", c.q, got, c.want)
		}
	}
	if got := d.Search("SE", "aktiebolag", 10); len(got) != 0 {
		t.Errorf("a legal form alone matched %+v", got)
	}
}

// TestLookupOfANumberListedWithSeparators: the index keys numbers in their
// canonical form, as lookups ask for it, whatever form the companies were
// given in (a fixture or import written "556000-0001").
func TestLookupOfANumberListedWithSeparators(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{{ID: "556000-0001", Name: "Bindestreck AB", Country: "SE"}})
	for _, q := range []string{"5560000001", "556000-0001", "SE556000000101"} {
		if c, ok := d.Lookup("SE", q); !ok || c.Name != "Bindestreck AB" {
			t.Errorf("lookup %q: %v %v", q, c, ok)
		}
	}
}

// TestSearchCostsNothingPerWordBeyondTheLongestName: a name matches only
// when each query word starts a word of its own, so a query of more words
// than any name has matches no name by its words. Search used to look up
// and intersect every query word's companies anyway: an embedder passing a
// buyer's 0.8 MB of one-letter words to it spent seconds of CPU. Counted in
// allocations, which do not depend on the machine: beyond tokenizing the
// query, such a search may not allocate per word.
func TestSearchCostsNothingPerWordBeyondTheLongestName(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{
		{ID: "5560360793", Name: "Göta Bygg AB", Country: "SE"},
		{ID: "5560000019", Name: "Västra Göta Bygg Handelsbolag", Country: "SE"},
	})
	q := strings.Repeat("g ", 5000)
	if got := d.Search("SE", q, 10); len(got) != 0 {
		t.Fatalf("a query of 5000 words matched %v", got)
	}
	tokens := testing.AllocsPerRun(5, func() { Tokens(q) })
	search := testing.AllocsPerRun(5, func() { d.Search("SE", q, 10) })
	if search > tokens+50 {
		t.Fatalf("searching 5000 words allocated %.0f times, tokenizing them %.0f: the search works per word", search, tokens)
	}
	// Within the longest name's words, every word still counts.
	if got := d.Search("SE", "v g b", 10); len(got) != 1 || got[0].CompanyName != "Västra Göta Bygg Handelsbolag" {
		t.Fatalf("v g b: %v", got)
	}
}

// TestSearchKeepsLimitRankAndFlags: each step of a search stays within the
// limit, a name whose first word matches the query's first comes first,
// only the exact name is flagged exact, and so on for the smaller rules
// hand-made mutants showed no test held.
func TestSearchKeepsLimitRankAndFlags(t *testing.T) {
	d := NewDirectory()
	d.Set("SE", []Company{
		{ID: "5560000001", Name: "Göta Bygg AB", Country: "SE"},
		{ID: "5560000019", Name: "Göta Bygg Bo AB", Country: "SE"},
		{ID: "5560000027", Name: "Göta Bygg Västra Anläggning AB", Country: "SE"},
		{ID: "5560000035", Name: "Allt Göta Bygg AB", Country: "SE"},
		{ID: "5560000043", Name: "Bygg Väst Göta AB", Country: "SE"},
		{ID: "5560000050", Name: "Väst Göta Bygg AB", Country: "SE"},
		{ID: "5560000068", Name: "Västra Göta Bygg Akustik AB", Country: "SE"},
	})
	d.Set("NO", []Company{{ID: "910000001", Name: "Nordisk Data AS", Country: "NO"}})
	d.Set("GB", []Company{{ID: "01234567", Name: "Acme Widgets Ltd", Country: "GB"}})
	ids := func(ms []Match) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.CompanyID[len(m.CompanyID)-2:])
			if m.ExactMatch {
				s[len(s)-1] += "!"
			}
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		country, q string
		limit      int
		want       string
	}{
		{"SE", "göta bygg", 10, "01! 19 27 35 43 50 68"},
		{"SE", "göta bygg", 2, "01! 19"},
		{"SE", "göta bygg v", 2, "27 43"},               // step 1, then step 2 in the room left
		{"SE", "göta bygg ak", 2, "68 01!"},             // a legal form being typed: then the names without it
		{"SE", "bygg göta", 10, "43 35 01 19 27 50 68"}, // first word first, then alphabetical
		{"SE", "göta göta", 10, ""},                     // two query words never match one word
		{"SE", "5560000001", 0, ""},
		{"NO", "data nord", 10, "01"}, // as many words as the longest name
		{"GB", "acme", 10, "67"},      // no check digit: a name, though 4–20 alphanumerics
	} {
		if got := ids(d.Search(c.country, c.q, c.limit)); got != c.want {
			t.Errorf("Search(%s, %q, %d) = %s, want %s", c.country, c.q, c.limit, got, c.want)
		}
	}
	for n, want := range map[string]bool{"abc": false, "abcd": true, strings.Repeat("a", 20): true, strings.Repeat("a", 21): false} {
		if ValidNumber("GB", n) != want {
			t.Errorf("ValidNumber(GB, %d characters) = %v", len(n), !want)
		}
	}
}

// TestSymbolsStaySeparators: the compatibility forms search reads as
// letters are letters (a ligature, full-width); a symbol or a superscript
// that NFKD spells out in letters or digits ("™" as "TM", "²" as "2")
// still parts words, as it did, so "Acme" is an exact match for
// "Acme™ AB".
func TestSymbolsStaySeparators(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string
	}{
		{"Acme™ AB", []string{"acme"}},
		{"Bygg² Fastigheter AB", []string{"bygg", "fastigheter"}},
		{"Café℃ AB", []string{"cafe"}},
		{"½ Bygg AB", []string{"bygg"}},
		{"Malmö ﬁskeri AB", []string{"malmo", "fiskeri"}},
		{"Ｍａｌｍö Ｆｉｓｋｅｒｉ ＡＢ", []string{"malmo", "fiskeri"}},
		{"Malm\u00adö Fiskeri\u200bföretag", []string{"malmo", "fiskeriforetag"}},
		{"Bygg １２３ AB", []string{"bygg", "123"}},
	} {
		if got := Tokens(c.name); !slices.Equal(got, c.want) {
			t.Errorf("Tokens(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	d := NewDirectory()
	d.Set("SE", []Company{{ID: "5560360793", Name: "Acme™ AB", Country: "SE"}})
	if got := d.Search("SE", "Acme", 10); len(got) != 1 || !got[0].ExactMatch {
		t.Errorf(`Search("Acme") = %+v, want Acme™ AB as an exact match`, got)
	}
}

// TestFold: a name folds to the letters it reads as, whatever invisible
// format characters (soft hyphen, zero-width joiner and space, byte order
// mark) it carries and in whatever compatibility form (ligature,
// full-width, mathematical bold) its letters were pasted; compatibility
// forms are read before lower-casing, since "𝐌" has no lower case of its
// own and is an "M".
func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"Malmö Fiskeriföretag":         "malmo fiskeriforetag",
		"Malmo\u0308":                  "malmo",
		"Malm\u00adö Fiskeri\u00adför": "malmo fiskerifor",
		"Mal\u200dm\u200bö":            "malmo",
		"\ufeffMalmö":                  "malmo",
		"\ufb01skeri":                  "fiskeri",
		"Ｍａｌｍö":                        "malmo",
		"𝐌𝐀𝐋𝐌Ö":                        "malmo",
		"Ærø Straße Đakovo":            "aero strasse dakovo",
	} {
		if got := fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
}
