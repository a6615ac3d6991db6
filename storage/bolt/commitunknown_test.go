package bolt_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// TestCommitOfUnknownOutcomeStopsWrites: a commit bbolt reports failed
// after it may have written its meta page (a failed fsync, an I/O error) has
// an unknown outcome, and bbolt's rollback of its memory then no longer
// matches the file: a later commit could reuse pages the file still needs.
// The store used to go on taking writes; now it answers that commit
// internal (outcome unknown), refuses every later write as store_unavailable
// until it is reopened, says so in Healthy, and keeps serving reads. Opened
// again, it holds the commit (here made) and takes writes.
func TestCommitOfUnknownOutcomeStopsWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(s *bolt.Store, name string) error {
		return s.Update(ctx, func(tx storage.Tx) error {
			return tx.PutMerchant(&storage.Merchant{ID: name, Name: name, ClientID: "c-" + name})
		})
	}
	if err := put(s, "m-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Healthy(); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	bolt.FailCommitsAfter(s, errors.New("fdatasync: input/output error"))
	if err := put(s, "m-2"); fault.KindOf(err) != fault.Internal || fault.CodeOf(err) != fault.CodeOutcomeUnknown {
		t.Fatalf("commit of unknown outcome: %v (%v, %s), want internal, outcome_unknown", err, fault.KindOf(err), fault.CodeOf(err))
	}
	bolt.FailCommitsAfter(s, nil)
	if err := put(s, "m-3"); fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" {
		t.Fatalf("write after a commit of unknown outcome: %v, want store_unavailable", err)
	}
	if err := s.Healthy(); err == nil {
		t.Fatal("the store reads healthy after a commit of unknown outcome")
	}
	if err := s.View(ctx, func(tx storage.Tx) error { _, err := tx.GetMerchant("m-1"); return err }); err != nil {
		t.Fatalf("reads go on: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := put(s, "m-4"); err != nil {
		t.Fatalf("reopened: %v", err)
	}
	for _, id := range []string{"m-1", "m-2", "m-4"} {
		if err := s.View(ctx, func(tx storage.Tx) error { _, err := tx.GetMerchant(id); return err }); err != nil {
			t.Fatalf("reopened, %s: %v", id, err)
		}
	}
	if err := s.View(ctx, func(tx storage.Tx) error { _, err := tx.GetMerchant("m-3"); return err }); !fault.Is(err, fault.NotFound) {
		t.Fatalf("the refused write is there: %v", err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
}

// TestFullDiskAfterTheMetaPageIsNotNothingDone: a write refused for want of
// room is taken for "nothing done" only while the transaction did not become
// the file's state. On a copy-on-write filesystem (btrfs, ZFS) the in-place
// rewrite of the meta page needs room too, and a write cut short after the
// meta record (a page larger than the filesystem's block) leaves it current:
// bbolt then serves that commit, so answering store_unavailable ("nothing was
// done, retry") would invite a second application of an acknowledged-as-
// failed change. Such a failure is of unknown outcome and stops writes.
func TestFullDiskAfterTheMetaPageIsNotNothingDone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kassa.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	put := func(name string) error {
		return s.Update(ctx, func(tx storage.Tx) error {
			return tx.PutMerchant(&storage.Merchant{ID: name, Name: name, ClientID: "c-" + name})
		})
	}
	bolt.FailCommitsAfter(s, &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC})
	if err := put("m-1"); fault.KindOf(err) != fault.Internal || fault.CodeOf(err) != fault.CodeOutcomeUnknown {
		t.Fatalf("a commit made current, then reported ENOSPC: %v (%v), want internal (outcome unknown)", err, fault.KindOf(err))
	}
	if err := s.View(ctx, func(tx storage.Tx) error { _, err := tx.GetMerchant("m-1"); return err }); err != nil {
		t.Fatalf("the commit is served: %v", err)
	}
	if err := s.Healthy(); err == nil {
		t.Fatal("the store takes writes after a commit of unknown outcome")
	}
}
