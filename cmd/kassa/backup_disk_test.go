//go:build linux

package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage/bolt"
)

// TestBackupNoRoom: a backup whose copy of the store the data directory's
// disk cannot hold is refused before anything is written (409
// backup_no_room), rather than filling the disk, which fails the store's
// commits until the spool file is gone, only to fail itself. Needs root to
// mount a small tmpfs as the disk; skipped otherwise.
func TestBackupNoRoom(t *testing.T) {
	data := t.TempDir()
	if err := syscall.Mount("tmpfs", data, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("needs root (CAP_SYS_ADMIN) to mount a 4 MB tmpfs as the data directory's disk: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(data, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	st, err := bolt.Open(filepath.Join(data, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Ballast in a bucket of its own: the store's copy is what counts.
	if err := st.DB().Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("test-ballast"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), make([]byte, 1<<20))
	}); err != nil {
		t.Fatal(err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(data, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if err := os.WriteFile(filepath.Join(data, "filler"), make([]byte, free-256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	err = writeBackup(io.Discard, data, st)
	if fault.KindOf(err) != fault.NotAvailable || fault.CodeOf(err) != "backup_no_room" {
		t.Fatalf("backup to a disk without room for the copy: %v (kind %v, code %q), want backup_no_room", err, fault.KindOf(err), fault.CodeOf(err))
	}
	if left, _ := filepath.Glob(filepath.Join(data, ".backup.*")); len(left) > 0 {
		t.Errorf("spool files left: %v", left)
	}
}
