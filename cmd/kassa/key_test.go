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

// TestOrderCacheBoundsChecked: --order-cache-mb takes 0 to 1048576 (MiB, a
// TiB); past it the byte count would overflow. Refused before the store is
// looked at (here a bogus one).
func TestOrderCacheBoundsChecked(t *testing.T) {
	for _, v := range []string{"-1", "1048577", "9223372036854775807"} {
		code, _, errb := runBounded(t, "serve", "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--store", "bogus", "--order-cache-mb", v)
		if code != 2 || !strings.Contains(errb, "--order-cache-mb") {
			t.Errorf("--order-cache-mb %s: exit %d, %s", v, code, errb)
		}
	}
}
