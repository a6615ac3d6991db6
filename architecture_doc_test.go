package kassa_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitecturePackageMap keeps docs/architecture.md's package map
// whole: every package of the module has a row (the module root is
// `kassa`), and every row names a directory there is.
func TestArchitecturePackageMap(t *testing.T) {
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)`").FindAllStringSubmatch(string(b), -1) {
		rows = append(rows, m[1])
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no package map (| `package` | owns |)")
	}
	var pkgs []string
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(p))
			if dir == "." {
				dir = "kassa"
			}
			if !slices.Contains(pkgs, dir) {
				pkgs = append(pkgs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if !slices.Contains(rows, p) {
			t.Errorf("package %s has no row in docs/architecture.md's package map: add | `%s` | what it owns |", p, p)
		}
	}
	for _, r := range rows {
		if r == "kassa" {
			continue
		}
		if fi, err := os.Stat(filepath.FromSlash(r)); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md's package map has a row for %s, which is no directory of the module: remove it, or correct its path", r)
		}
	}
}
