package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// newStore is the path of a new, empty store, closed.
func newStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kassa.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// damagedStore is the path of a new store whose pages past the two meta
// pages are garbage.
func damagedStore(t *testing.T) string {
	t.Helper()
	path := newStore(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	copy(b[2*page:], bytes.Repeat([]byte{0x5a}, len(b)-2*page))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenDamagedFile: a file whose pages past the two meta pages are
// garbage (a disk that lost them, a copy cut short and padded) makes bbolt
// panic as it reads the freelist, not return an error. Open returns one,
// naming the file, one line, not a stack.
func TestOpenDamagedFile(t *testing.T) {
	path := damagedStore(t)
	var st *bolt.Store
	var err error
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

// TestOpenForeignFile: a bbolt file another program made, given as the
// store (a wrong --data), is refused and left as it was, instead of having
// kassa's buckets added to it and being served as an empty store.
func TestOpenForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("w1"), []byte("blue"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bolt.Open(path, bolt.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of another program's bbolt file succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, `"widgets"`) {
		t.Fatalf("Open of another program's bbolt file: %q (want the file and its bucket named)", msg)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("Open of another program's bbolt file wrote to it")
	}
}

// TestDumpDamagedFile: kassa store copy reads the file with OpenReadOnly,
// which loads no freelist, so a damaged file opens, and bbolt then panics
// on the first page that is none. Dump returns an error naming the file
// instead of taking the process down with a stack mid-copy.
func TestDumpDamagedFile(t *testing.T) {
	path := damagedStore(t)
	ro, err := bolt.OpenReadOnly(path, 0)
	if err != nil {
		t.Skipf("the damaged file is refused at open already: %v", err)
	}
	defer ro.Close()
	n := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Dump of a damaged file panicked: %v", r)
			}
		}()
		err = ro.Dump(t.Context(), func(storage.Record) error { n++; return nil })
	}()
	if err == nil {
		t.Fatalf("Dump of a damaged file succeeded with %d records", n)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "damaged") || strings.Contains(msg, "\n") {
		t.Fatalf("Dump of a damaged file: %q (want one line naming %s and saying it is damaged)", msg, path)
	}
}

// TestDumpPassesOnCallersPanic: a panic of the function Dump hands records
// to is the caller's, not a damaged file's, and reaches the caller as one.
func TestDumpPassesOnCallersPanic(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(t.Context(), func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m1", Name: "m", ClientID: "c1"})
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != "caller's" {
			t.Fatalf("recovered %v, want the caller's own panic", r)
		}
	}()
	s.Dump(t.Context(), func(storage.Record) error { panic("caller's") })
}

// TestOpenReadOnlyCutShortFile: a file cut short (a copy that ran out of
// disk) ends before the pages its meta page counts, and reading one past
// its end is a fault of the process, which no recover catches: kassa store
// check and kassa store copy died with a stack of the runtime. OpenReadOnly
// refuses it in one line naming the file.
func TestOpenReadOnlyCutShortFile(t *testing.T) {
	path := newStore(t)
	if err := os.Truncate(path, int64(3*os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	ro, err := bolt.OpenReadOnly(path, 0)
	if err == nil {
		ro.Close()
		t.Fatal("OpenReadOnly of a file cut short succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "cut short") || strings.Contains(msg, "\n") {
		t.Fatalf("OpenReadOnly of a file cut short: %q (want one line naming %s and saying it is cut short)", msg, path)
	}
	// The server's open too: bbolt's own read of the freelist past the end
	// faulted the process (kassa serve died with the runtime's stack).
	rw, err := bolt.Open(path, bolt.Options{})
	if err == nil {
		rw.Close()
		t.Fatal("Open of a file cut short succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "cut short") || strings.Contains(msg, "\n") {
		t.Fatalf("Open of a file cut short: %q (want one line naming %s and saying it is cut short)", msg, path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(3*os.Getpagesize()) {
		t.Fatalf("a refused open changed the file: %v, %v", fi.Size(), err)
	}
}

// TestOpenReadOnlyEmptyFile: an empty kassa.db (a first start cut short)
// is said to be empty, not "bad file descriptor" from bbolt setting it up
// through a read-only handle.
func TestOpenReadOnlyEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := bolt.OpenReadOnly(path, 0)
	if err == nil {
		ro.Close()
		t.Fatal("OpenReadOnly of an empty file succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "empty") || strings.Contains(msg, "descriptor") {
		t.Fatalf("OpenReadOnly of an empty file: %q (want it named and said to be empty)", msg)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("a refused open wrote to the file: %v", err)
	}
}

// TestOpenInUse: a second Open of a file that a Store holds (another
// process, or a second store in this one) gives up after Timeout with
// ErrInUse, which an embedder can tell apart from a damaged file without
// importing bbolt's own error values.
func TestOpenInUse(t *testing.T) {
	path := newStore(t)
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	second, err := bolt.Open(path, bolt.Options{Timeout: 100 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of a file in use succeeded")
	}
	if !errors.Is(err, bolt.ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Open: %v, want ErrInUse naming %s", err, path)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("second Open gave up after %v, want about its 100ms Timeout", waited)
	}
	// The store that holds the file goes on.
	if err := s.Update(context.Background(), func(storage.Tx) error { return nil }); err != nil {
		t.Fatalf("the first store after the refused Open: %v", err)
	}
}
