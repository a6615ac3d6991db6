package bolt_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassahq/kassa/storage/bolt"
)

// TestOpenDamagedFile: a file whose pages past the two meta pages are
// garbage (a disk that lost them, a copy cut short and padded) makes bbolt
// panic as it reads the freelist, not return an error. Open returns one,
// naming the file, one line, not a stack.
func TestOpenDamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	copy(b[2*page:], bytes.Repeat([]byte{0x5a}, len(b)-2*page))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var st *bolt.Store
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Open of a damaged file panicked: %v", r)
			}
		}()
		st, err = bolt.Open(path, bolt.Options{})
	}()
	if err == nil {
		st.Close()
		t.Fatal("Open of a damaged file succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "damaged") || strings.Contains(msg, "\n") {
		t.Fatalf("Open of a damaged file: %q (want one line naming %s and saying it is damaged)", msg, path)
	}
}
