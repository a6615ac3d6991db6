// Package durable writes small files that must survive a crash whole: after
// a crash such a file holds either its old or its new content, never a mix,
// and once WriteFile returns the new content is on disk.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with b (mode perm): a synced
// temporary file in the same directory renamed over it, then the directory
// synced so that the rename itself is on disk.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
