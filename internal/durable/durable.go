// Package durable writes small files that must survive a crash whole: after
// a crash such a file holds either its old or its new content, never a mix,
// and once WriteFile returns the new content is on disk.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// WriteFile replaces the file at path with b (mode perm): a synced
// temporary file in the same directory renamed over it, then the directory
// synced so that the rename itself is on disk.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	_, err := place(path, perm, bytesOf(b), os.Rename)
	return err
}

// bytesOf writes b to a temporary file.
func bytesOf(b []byte) func(*os.File) error {
	return func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}
}

// named makes err name path: most failures are of the temporary beside it,
// whose name (".server.key.123…") alone leaves an operator guessing.
func named(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("write %s: %w", path, err)
}

// CreateFile writes b to path (mode perm) as WriteFile does, but only if no
// file is there: created is false, and the file is left as it is, when one
// is, so that of several processes creating the same file at once exactly
// one wins and the others can read what it wrote.
func CreateFile(path string, b []byte, perm os.FileMode) (created bool, err error) {
	return place(path, perm, bytesOf(b), link)
}

// CreateWith is CreateFile for content that fill writes to the temporary
// file, named by its path (a database that lays out its own new file):
// whatever fill leaves when it fails (a disk with room for part of it) is
// never put at path.
func CreateWith(path string, perm os.FileMode, fill func(name string) error) (created bool, err error) {
	return place(path, perm, func(f *os.File) error { return fill(f.Name()) }, link)
}

// link puts tmp at path only if no file is there (errExists).
func link(tmp, path string) error {
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errExists
		}
		return err
	}
	return nil
}

var errExists = errors.New("exists")

// place writes a temporary file beside path with write, syncs it, puts it
// at path with put (rename, or link to create only), and syncs the
// directory.
func place(path string, perm os.FileMode, write func(*os.File) error, put func(tmp, path string) error) (bool, error) {
	created, err := placeTemp(path, perm, write, put)
	return created, named(path, err)
}

func placeTemp(path string, perm os.FileMode, write func(*os.File) error, put func(tmp, path string) error) (bool, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed; the spare name once linked
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return false, err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := put(tmp.Name(), path); errors.Is(err, errExists) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return false, err
	}
	defer dir.Close()
	return true, dir.Sync()
}

// LeftoverAge is how old a temporary file must be for RemoveLeftovers to take
// it: a younger one may be another process's write under way.
const LeftoverAge = 10 * time.Minute

// RemoveLeftovers removes the temporary files that writes of path left
// behind when their process died before putting them in place, and returns
// how many. path may hold glob patterns in its last element ("dir/*.csv").
func RemoveLeftovers(path string) (int, error) {
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		fi, err := os.Lstat(m)
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < LeftoverAge {
			continue
		}
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}
