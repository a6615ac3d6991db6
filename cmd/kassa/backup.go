package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage/bolt"
)

// backupSpool names the temporary copy of the store a backup makes in the
// data directory (".backup.*").
const backupSpool = "backup"

// backupCopy wraps the writer the store is copied to, the spool file; a
// test replaces it to hold the copy midway while orders are written.
var backupCopy = func(w io.Writer) io.Writer { return w }

// removeBackupSpools removes the spool files of backups whose process died
// during them, and returns how many. Unlike durable.RemoveLeftovers it
// takes them at any age: the caller holds the bolt store open, so no other
// server is spooling a backup of this directory, and a supervisor that
// restarts a crashed server at once would otherwise leave a whole copy of
// the store on the disk for as long as the new run lasts.
func removeBackupSpools(data string) (int, error) {
	matches, err := filepath.Glob(filepath.Join(data, "."+backupSpool+".*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		if fi, err := os.Lstat(m); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// writeBackup writes to w a tar of what a restore of the data directory
// needs: kassa.db as of one read transaction, then server.key,
// sandbox-clock.json and companies/*.csv, those that exist. It is the
// whole directory's state rather than the store alone: without the key the
// restored server would refuse every access token, link and authorization
// token signed before, and without the sandbox clock it would date new
// records before those it holds.
//
// The store is copied to a spool file in the data directory first and the
// archive is written from it: the read transaction lasts as long as a local
// copy, not as long as a slow client, and a writer that must grow the
// file's map waits for that transaction to end (see bolt.Store.WriteTo). The
// small files are read after the copy: the sandbox clock only moves once it
// is recorded, so the one restored is at least the store's.
//
// Nothing is written to w before the copy is complete, so an error returned
// while w is untouched is a clean failure; after that it is a cut archive,
// which the caller must not end as a complete one.
func writeBackup(w io.Writer, data string, st *bolt.Store) error {
	// A copy the disk cannot hold is refused before it is begun: it would
	// fail anyway, and while it filled the disk the store's commits would
	// fail for want of room.
	if free, ok := freeSpace(data); ok {
		size, err := st.Size()
		if err != nil {
			return err
		}
		if free < size {
			return fault.New(fault.NotAvailable, "backup_no_room",
				"the data directory's disk has %d bytes free, and the copy of the store a backup makes there needs %d; free space and try again", free, size)
		}
	}
	spool, err := os.CreateTemp(data, "."+backupSpool+".*")
	if err != nil {
		return fmt.Errorf("spool file: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	buf := bufio.NewWriterSize(spool, 1<<20)
	size, err := st.WriteTo(backupCopy(buf))
	if err == nil {
		err = buf.Flush()
	}
	if err == nil {
		_, err = spool.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("copy the store to %s: %w", spool.Name(), err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "kassa.db", Mode: 0o600, Size: size, ModTime: now, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, spool); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("the copy of the store has %d bytes, not %d", n, size)
	}
	files := []string{"server.key", "sandbox-clock.json"}
	csvs, err := filepath.Glob(filepath.Join(companiesDir(data), "*.csv"))
	if err != nil {
		return err
	}
	for _, p := range csvs {
		files = append(files, path.Join("companies", filepath.Base(p)))
	}
	for _, name := range files {
		p := filepath.Join(data, filepath.FromSlash(name))
		if fi, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.Mode().IsRegular()) {
			continue // no key file with KASSA_KEY; no clock without the sandbox
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	return tw.Close()
}
