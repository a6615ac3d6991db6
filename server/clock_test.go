package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
)

func TestSandboxClockSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox-clock.json")
	c := NewClock(true)
	if err := c.PersistTo(path); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(48 * time.Hour); err != nil {
		t.Fatal(err)
	}
	before := c.Now()

	restarted := NewClock(true)
	if err := restarted.PersistTo(path); err != nil {
		t.Fatal(err)
	}
	if got := restarted.Offset(); got != 48*time.Hour {
		t.Fatalf("offset after restart %v, want 48h", got)
	}
	if now := restarted.Now(); now.Before(before) {
		t.Fatalf("restarted clock reads %v, earlier than %v", now, before)
	}
	if err := restarted.Set(before.Add(240 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	again := NewClock(true)
	if err := again.PersistTo(path); err != nil {
		t.Fatal(err)
	}
	if got := again.Offset(); got < 287*time.Hour || got > 289*time.Hour {
		t.Fatalf("offset after set and restart %v, want about 288h", got)
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewClock(true).PersistTo(path); err == nil {
		t.Fatal("a damaged clock file was read as an offset")
	}
	// Well-formed but out of range: the message says why, not "(<nil>)".
	for _, rec := range []string{`{"offsetNanos":-5}`, fmt.Sprintf(`{"offsetNanos":%d}`, MaxClockOffset+1)} {
		if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		err := NewClock(true).PersistTo(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset") || strings.Contains(err.Error(), "<nil>") {
			t.Fatalf("clock file %s: %v (want it refused, naming the file and its offset)", rec, err)
		}
	}
}

func TestSandboxClockFileThatCannotBeWrittenFailsAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "sandbox-clock.json")
	if err := NewClock(true).PersistTo(path); err == nil {
		t.Fatal("a clock that cannot be recorded started anyway")
	}
	ok := filepath.Join(t.TempDir(), "sandbox-clock.json")
	if err := NewClock(true).PersistTo(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ok); err != nil {
		t.Fatalf("the clock file is not written at start: %v", err)
	}
	// A file there already is written again at start too (it shows in its
	// mode): a directory it could be read from but not replaced in (a data
	// directory made read-only) fails at start, not on the first move.
	kept := filepath.Join(t.TempDir(), "sandbox-clock.json")
	if err := os.WriteFile(kept, []byte(`{"offsetNanos":3600000000000}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewClock(true)
	if err := c.PersistTo(kept); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(kept); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("an existing clock file is not written again at start: %v, %v", fi.Mode(), err)
	}
	if got := c.Offset(); got != time.Hour {
		t.Fatalf("offset %v after the file was written again, want 1h", got)
	}
}

func TestSandboxClockStaysInRange(t *testing.T) {
	c := NewClock(true)
	if err := c.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	for name, move := range map[string]func() error{
		"advance": func() error { return c.Advance(1000000 * time.Hour) },
		"set":     func() error { return c.Set(time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC)) },
	} {
		err := move()
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.Invalid || len(fe.Fields) != 1 || fe.Fields[0].Field != name {
			t.Fatalf("%s out of range: %v", name, err)
		}
	}
	if got := c.Offset(); got != time.Hour {
		t.Fatalf("a refused move changed the offset to %v", got)
	}
	// Up to the bound, and not one step past it.
	if err := c.Advance(MaxClockOffset - time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(time.Nanosecond); err == nil {
		t.Fatal("moved past the bound")
	}
}
