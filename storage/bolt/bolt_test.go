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
	s, err := bolt.Open(filepath.Join(t.TempDir(), "kassa.db"), bolt.Options{Clock: storagetest.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil {
			t.Errorf("consistency: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) { storagetest.Run(t, open) }
