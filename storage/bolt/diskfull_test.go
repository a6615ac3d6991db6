//go:build linux

package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// mountSmallDisk mounts a tmpfs of size bytes on a temporary directory, or
// skips the test where it cannot (mounting takes root, CAP_SYS_ADMIN).
func mountSmallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("needs root (CAP_SYS_ADMIN) to mount a %s tmpfs as a disk to fill: %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestDiskFull fills the disk under a store: a write the disk has no room
// for is refused as store_unavailable (nothing done, send it again), reads
// go on, writes resume without a reopen once space is freed, and the file
// then holds every acknowledged write, numbered without gaps, and passes
// the consistency check.
func TestDiskFull(t *testing.T) {
	dir := mountSmallDisk(t, "3m")
	path := filepath.Join(dir, "kassa.db")
	// Room the test gives back once the disk is full.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := context.Background()
	ids := &counterIDs{prefix: "full-"}
	const m = "m1"
	var acked []string // order ids, by document number - 1
	write := func() error {
		var id string
		err := s.Update(ctx, func(tx storage.Tx) error {
			e := env(tx, m, ids)
			o := newOrder(t, m, 40, e)
			if n, err := tx.NextSequence(m, "doc"); err != nil {
				return err
			} else if n != int64(len(acked))+1 {
				t.Errorf("document number %d after %d acknowledged writes", n, len(acked))
			}
			id = o.ID
			return tx.CreateOrder(o)
		})
		if err == nil {
			acked = append(acked, id)
		}
		return err
	}
	var full error
	for range 5000 {
		if full = write(); full != nil {
			break
		}
	}
	if full == nil {
		t.Fatal("5000 orders fit on a 3 MB disk")
	}
	if fault.KindOf(full) != fault.Unavailable || fault.CodeOf(full) != "store_unavailable" || !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("write to a full disk: %v (kind %v, code %q), want store_unavailable wrapping ENOSPC", full, fault.KindOf(full), fault.CodeOf(full))
	}
	if len(acked) == 0 {
		t.Fatal("no write fitted before the disk was full")
	}
	// Reads are answered from what is on disk.
	if err := s.View(ctx, func(tx storage.Tx) error {
		_, err := tx.GetOrder(m, acked[len(acked)-1])
		return err
	}); err != nil {
		t.Fatalf("read on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := write(); err != nil {
			t.Fatalf("write after space was freed: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(path, bolt.Options{}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("consistency: %v", err)
	}
	if err := s.View(ctx, func(tx storage.Tx) error {
		for _, id := range acked {
			if _, err := tx.GetOrder(m, id); err != nil {
				t.Errorf("acknowledged order %s: %v", id, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFirstOpenOnAFullDisk: a store created on a disk with room for only
// part of a new file (bbolt writes its first four pages at once) fails to
// open, and leaves no file behind: once space is freed the next open creates
// the store. Before, the pages that fitted stayed as kassa.db, which every
// later open refused as cut short, until an operator removed it by hand.
func TestFirstOpenOnAFullDisk(t *testing.T) {
	dir := mountSmallDisk(t, "1m")
	path := filepath.Join(dir, "kassa.db")
	filler := filepath.Join(dir, "filler")
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	for _, room := range []int64{0, 4 << 10, 8 << 10, 12 << 10} {
		if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-room), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := bolt.Open(path, bolt.Options{})
		if err == nil {
			s.Close()
			t.Fatalf("a store opened with %d bytes of room", room)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("open with %d bytes of room: %v, want it to wrap ENOSPC", room, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("open with %d bytes of room left %d entries, want only the filler", room, len(entries))
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		s, err = bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatalf("open once space was freed after a first open with %d bytes of room: %v", room, err)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("consistency: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}
