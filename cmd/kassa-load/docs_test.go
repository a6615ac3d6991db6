package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// flagsOf is the set of flags mode (""; crash, replicas, scale) takes, read
// from its own usage message.
func flagsOf(t *testing.T, mode string) map[string]bool {
	t.Helper()
	args := []string{"-h"}
	if mode != "" {
		args = []string{mode, "-h"}
	}
	var usage strings.Builder
	run(args, io.Discard, &usage)
	flags := map[string]bool{"h": true, "help": true}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(usage.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 4 {
		t.Fatalf("kassa-load %s -h named no flags:\n%s", mode, usage.String())
	}
	return flags
}

// TestDocumentedFlagsExist holds every kassa-load command line in the docs
// and .ci/run to the flags of its mode: the figures in docs/benchmarks.md
// are only reproducible with the command they name.
func TestDocumentedFlagsExist(t *testing.T) {
	modes := map[string]map[string]bool{}
	for _, m := range []string{"", "crash", "replicas", "scale"} {
		modes[m] = flagsOf(t, m)
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../.ci/run")
	// A command line: kassa-load, then its words up to the end of the code
	// span, the line, or a shell separator.
	line := regexp.MustCompile("kassa-load\"?((?: +[^ `|;&()\n]+)*)")
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range line.FindAllStringSubmatch(string(b), -1) {
			words := strings.Fields(m[1])
			mode := ""
			if len(words) > 0 && modes[words[0]] != nil {
				mode, words = words[0], words[1:]
			}
			for _, w := range words {
				w = strings.TrimLeft(w, "[")
				if !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "--") && len(w) == 2 {
					continue
				}
				name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
				name = strings.TrimRight(name, "]`.,:")
				checked++
				if !modes[mode][name] {
					t.Errorf("%s: `kassa-load %s` has no flag -%s (in %q); fix the doc or the flag", f, mode, name, strings.TrimSpace(m[0]))
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d documented kassa-load flags found: is the pattern still right?", checked)
	}
}
