package bolt

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenPassesOnKassaPanic: Open refuses a file that makes bbolt panic as
// damaged, but a panic of kassa's own code at open (here while it rebuilds
// an index) is a bug, not a damaged file, and reaches the caller as a panic
// with its stack rather than an error telling the operator to distrust a
// sound file.
func TestOpenPassesOnKassaPanic(t *testing.T) {
	onRebuild = func([]byte) { panic("kassa's") }
	t.Cleanup(func() { onRebuild = nil })
	path := filepath.Join(t.TempDir(), "kassa.db")
	defer func() {
		if r := recover(); r != "kassa's" {
			t.Fatalf("recovered %v, want kassa's own panic", r)
		}
	}()
	s, err := Open(path, Options{})
	if err == nil {
		s.Close()
	}
	t.Fatalf("Open returned %v, want kassa's panic passed on", err)
}

// TestCheckPassesOnKassaPanic: a check phase turns bbolt's panic on a
// damaged page into a problem, but a panic of the checker's own code is a
// bug, not a damaged page, and is passed on.
func TestCheckPassesOnKassaPanic(t *testing.T) {
	var problems []string
	c := &checker{problem: func(p Problem) { problems = append(problems, p.String()) }}
	defer func() {
		if r := recover(); r != "kassa's" {
			t.Fatalf("recovered %v, want the checker's own panic", r)
		}
	}()
	c.phase("orders", func() error { panic("kassa's") })
	t.Fatalf("the checker's panic was taken for a damaged page: %s", strings.Join(problems, "; "))
}
