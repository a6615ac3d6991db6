package company

import (
	"runtime"
	"strings"
	"testing"
)

// A query's words each cost the posting list of every company with a word
// they start, built (and, for a prefix of several words, sorted) in full.
// Once an import holds one long name (maxWords lets up to 50 query words
// through), "s s s … s" built the list of every company with an s-word 50
// times, twice with the legal form being typed: 127 ms a search over 100 000
// companies, 20 a second from one address. A word given again selects the
// same companies, and once few candidates are left, checking their words is
// cheaper than building another list.
func TestSearchWorkBoundedByTheRarestWord(t *testing.T) {
	cs := Generate("SE", 20_000, 1)
	long := Company{ID: "5560360793", Name: strings.TrimSpace(strings.Repeat("Sten ", 60)), Country: "SE"}
	d := NewDirectory()
	d.Set("SE", append(cs, long))
	alloc := func(q string) (uint64, []Match) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := d.Search("SE", q, 20)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, m
	}
	// One posting list of "s": an int32 for each entry of a word starting with s.
	one := uint64(4 * len(d.countries["SE"].prefix("s")))
	// Each distinct word may cost one list (sorted: twice its size), no more.
	for q, distinct := range map[string]uint64{strings.TrimSpace(strings.Repeat("s ", 50)): 1,
		strings.TrimSpace(strings.Repeat("st ", 50)): 1, "sten s st ste " + strings.TrimSpace(strings.Repeat("s ", 40)): 4} {
		work, m := alloc(q)
		if len(m) != 1 || m[0].CompanyID != long.ID || m[0].ExactMatch {
			t.Errorf("%q: %+v, want only %s, not exact", q, m, long.ID)
		}
		if work > 2*distinct*one+64<<10 {
			t.Errorf("%q allocated %d bytes, %d times the %d of s's posting list", q, work, work/one, one)
		}
	}
	// A word no company has is the rarest: its empty list is built first,
	// and no other after it (under 1 KB a search, where s's list is 32 KB),
	// wherever it stands in the query.
	for _, q := range []string{"zzzq s", "s zzzq", "s st zzzq s"} {
		if work, m := alloc(q); len(m) != 0 || work > one/4 {
			t.Errorf("%q: %d matches, allocated %d bytes; want none, and no posting list of s (%d bytes) built", q, len(m), work, one)
		}
	}
}
