package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadKeyRefusesABadKeyFile: a server.key that is too short, no hex or
// unreadable (here a directory) fails the start; it is never used, nor
// replaced by a new key, which would refuse every token and link signed
// with the old one.
func TestLoadKeyRefusesABadKeyFile(t *testing.T) {
	t.Setenv("KASSA_KEY", "")
	for name, create := range map[string]func(string) error{
		"short":     func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("ab", 16)+"\n"), 0o600) },
		"not hex":   func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("zz", 32)+"\n"), 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "server.key")
		if err := create(path); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)
		if k, err := loadKey(dir); err == nil {
			t.Errorf("%s key file: loaded a key of %d bytes", name, len(k))
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("%s key file: replaced", name)
		}
	}
}
