package bolt

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/storage"
)

// TestDumpCoversEveryBucket: every bucket a store has is either dumped or
// known to hold only what the dumped records determine, so that a bucket
// added later cannot be left out of a copy unnoticed.
func TestDumpCoversEveryBucket(t *testing.T) {
	for _, b := range buckets {
		n := 0
		for _, d := range dumped {
			if bytes.Equal(d.bucket, b) {
				n++
			}
		}
		for _, d := range derived {
			if bytes.Equal(d, b) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("bucket %s is placed %d times among dumped and derived, want once", b, n)
		}
	}
	kinds := storage.RecordKinds()
	for i, d := range dumped {
		if d.kind != kinds[i] {
			t.Errorf("dumped bucket %s gives %s, out of storage.RecordKinds order", d.bucket, d.kind)
		}
	}
}

// TestDumpRefusesWhatItCannotCopy: a file holding a bucket this build does
// not know (a newer build's) is refused, not copied without it.
func TestDumpRefusesWhatItCannotCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DB().Update(func(btx *bbolt.Tx) error {
		_, err := btx.CreateBucket([]byte("newkind"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ro, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	err = ro.Dump(context.Background(), func(storage.Record) error { return nil })
	if err == nil || strings.Count(err.Error(), "newkind") != 1 {
		t.Fatalf("dump of a file with an unknown bucket: %v (want the bucket named, once)", err)
	}
}
