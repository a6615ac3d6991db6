package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
	"github.com/kassahq/kassa/storage/storagetest"
)

// open opens a fresh store on the suite's clock; when the test ends the file
// must pass the consistency check.
func open(t *testing.T) storage.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kassa.db")
	s, err := bolt.Open(path, bolt.Options{Clock: storagetest.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Closed first (a test may have closed it), then the file as
		// written is opened again and checked.
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		again, err := bolt.Open(path, bolt.Options{Clock: storagetest.Clock})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer again.Close()
		if err := again.Check(); err != nil {
			t.Errorf("consistency: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) { storagetest.Run(t, open) }
