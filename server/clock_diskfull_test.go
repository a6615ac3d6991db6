//go:build linux

package server

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
)

// TestSandboxClockOnAFullDisk: a move of the sandbox clock whose file the
// disk has no room for is 503 store_unavailable with Retry-After (the file
// and the clock are as they were, so the same move may be sent again), not
// 500 internal; once space is freed the move is made and recorded.
func TestSandboxClockOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("needs root (CAP_SYS_ADMIN) to mount a small tmpfs as a disk to fill: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	path := filepath.Join(dir, "sandbox-clock.json")
	clock := NewClock(true)
	if err := clock.PersistTo(path); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, false, clock, openStore(t, clock.Now), nil)
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize), 0o600); err != nil {
		t.Fatal(err)
	}
	code, h, body := e.do("POST", "/sandbox/v1/clock", `{"advance":"1h"}`, e.auth)
	if code != 503 || body["code"] != "store_unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("clock move on a full disk: %d %v (Retry-After %q), want 503 store_unavailable with Retry-After", code, body, h.Get("Retry-After"))
	}
	if got := clock.Offset(); got != 0 {
		t.Fatalf("a move that was not recorded moved the clock by %v", got)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code, _, body := e.do("POST", "/sandbox/v1/clock", `{"advance":"1h"}`, e.auth); code != 200 || body["offset"] != "1h0m0s" {
		t.Fatalf("clock move once space was freed: %d %v", code, body)
	}
	b, err := os.ReadFile(path)
	var rec struct {
		Offset time.Duration `json:"offsetNanos"`
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.Offset != time.Hour {
		t.Fatalf("clock file %s: %v, want the 1h offset recorded", b, err)
	}
}

// TestClockMoveNotRecordedForLackOfSpace: a clock file the disk has no room
// for, or the user's quota, is a 503 (store_unavailable, the clock
// unmoved); another failure to record it is 500 internal. Without root's
// small tmpfs (TestSandboxClockOnAFullDisk) and for EDQUOT, which no disk
// here can be made to answer.
func TestClockMoveNotRecordedForLackOfSpace(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		kind  fault.Kind
		code  string
	}{
		{syscall.ENOSPC, fault.Unavailable, "store_unavailable"},
		{syscall.EDQUOT, fault.Unavailable, "store_unavailable"},
		{syscall.EIO, fault.Internal, "internal"},
	} {
		clock := NewClock(true)
		clock.persist = func(time.Duration) error {
			return &os.PathError{Op: "write", Path: "sandbox-clock.json", Err: tc.errno}
		}
		err := clock.Advance(time.Hour)
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != tc.kind || fe.Code != tc.code || !errors.Is(err, tc.errno) {
			t.Errorf("a move whose record failed with %v: %#v, want %v %s wrapping it", tc.errno, err, tc.kind, tc.code)
		}
		if got := clock.Offset(); got != 0 {
			t.Errorf("a move not recorded (%v) moved the clock by %v", tc.errno, got)
		}
	}
}
