package session_test

import (
	"testing"

	"github.com/kassahq/kassa/session"
)

// States and Sources are shared by every kassa instance in a process: what an
// importer does with the slices it is handed must not change what a query
// accepts.
func TestStatesAndSourcesCannotBeChangedByACaller(t *testing.T) {
	states, sources := session.States(), session.Sources()
	first, firstSource := states[0], sources[0]
	states[0], sources[0] = "lost", "fax"
	_ = append(states, "archived")
	_ = append(sources, "telex")
	for _, q := range []session.Query{{States: []session.State{"lost"}}, {States: []session.State{"archived"}},
		{Sources: []session.Source{"fax"}}, {Sources: []session.Source{"telex"}}} {
		if err := q.Validate(); err == nil {
			t.Errorf("query %+v accepted after a caller changed its copy of the list", q)
		}
	}
	ok := session.Query{States: []session.State{first}, Sources: []session.Source{firstSource}}
	if err := ok.Validate(); err != nil {
		t.Errorf("query by %q and %q refused after a caller changed its copy: %v", first, firstSource, err)
	}
	if session.States()[0] != first || session.Sources()[0] != firstSource {
		t.Error("a caller writing into the returned slice changed the next call's result")
	}
}
