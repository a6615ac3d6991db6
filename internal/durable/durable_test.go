package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteFileReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{`{"v":1}`, `{"v":2, "longer": true}`, `{}`} {
		if err := WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q %v, want %q", got, err, content)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestCreateFileOnceAmongMany: processes creating one file at once (replicas
// starting on an empty directory) see exactly one creation, and every one
// of them then reads the winner's content.
func TestCreateFileOnceAmongMany(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.key")
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 16 {
		wg.Go(func() {
			ok, err := CreateFile(path, []byte(fmt.Sprint("key-", i)), 0o600)
			if err != nil {
				t.Error(err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d creations, want 1", created.Load())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(entries))
	}
	if ok, err := CreateFile(path, []byte("late"), 0o600); ok || err != nil {
		t.Fatalf("creating over an existing file: %v %v", ok, err)
	}
	if got, _ := os.ReadFile(path); string(got) == "late" {
		t.Fatal("an existing file was replaced")
	}
}

// TestRemoveLeftovers: temporary files of writes that died are removed once
// old enough; a young one (a write under way), the file itself and other
// files are left alone.
func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write(".server.key.123", time.Hour)
	young := write(".server.key.456", time.Second)
	key := write("server.key", time.Hour)
	other := write(".other.789", time.Hour)
	oldCSV := write(".SE.csv.42", time.Hour)
	// Only regular files are taken: a directory of that name is no write's.
	oldDir := filepath.Join(dir, ".server.key.789")
	if err := os.Mkdir(oldDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if at := time.Now().Add(-time.Hour); os.Chtimes(oldDir, at, at) != nil {
		t.Fatal("chtimes")
	}
	n, err := RemoveLeftovers(filepath.Join(dir, "server.key"))
	if err != nil || n != 1 {
		t.Fatalf("removed %d, %v; want 1", n, err)
	}
	if n, err := RemoveLeftovers(filepath.Join(dir, "*.csv")); err != nil || n != 1 {
		t.Fatalf("csv: removed %d, %v; want 1", n, err)
	}
	for p, want := range map[string]bool{old: false, young: true, key: true, other: true, oldCSV: false, oldDir: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// TestWriteFileModeAndErrors: the file gets the mode asked for, not the
// temporary file's 0600; a file that cannot be put in place (a directory is
// there) is an error; and the temporary file is made beside the file, not
// in TMPDIR, where a rename could cross file systems.
func TestWriteFileModeAndErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(dir, "no-such-tmp"))
	path := filepath.Join(dir, "companies.csv")
	if err := WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v %v, want 0644", fi.Mode(), err)
	}
	taken := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(taken, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(taken, []byte("x"), 0o600); err == nil {
		t.Fatal("replacing a directory succeeded")
	}
	// A failure names the file written, not only the temporary beside it
	// (".server.key.123…: no space left on device" told an operator little).
	missing := filepath.Join(dir, "gone", "server.key")
	if _, err := CreateFile(missing, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), missing+":") {
		t.Fatalf("CreateFile in a missing directory: %v, want an error naming %s", err, missing)
	}
	if err := WriteFile(missing, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), missing+":") {
		t.Fatalf("WriteFile in a missing directory: %v, want an error naming %s", err, missing)
	}
}

// TestLeftoverOfADeadWriteIsRemoved: the temporary file a write leaves
// when its process dies before putting it in place is what RemoveLeftovers
// removes, once old enough.
func TestLeftoverOfADeadWriteIsRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.key")
	died := errors.New("died")
	_, err := place(path, 0o600, bytesOf([]byte("x")), func(tmp, _ string) error {
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(tmp, old, old); err != nil {
			return err
		}
		if n, err := RemoveLeftovers(path); n != 1 || err != nil {
			t.Errorf("the leftover %s: removed %d, %v; want 1", tmp, n, err)
		}
		return died
	})
	if !errors.Is(err, died) {
		t.Fatal(err)
	}
}
