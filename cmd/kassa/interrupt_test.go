package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassahq/kassa/storage/bolt"
)

// interruptBinary starts the built kassa with args, sends it sig after
// wait, and returns its exit code, its stderr and how long it took to exit
// after the signal. It fails t if the process did not exit by itself (a
// signal that ended it reads as code -1).
func interruptBinary(t *testing.T, bin string, sig syscall.Signal, wait time.Duration, args ...string) (int, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(wait)
	sent := time.Now()
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), errb.String(), time.Since(sent)
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("kassa %s did not exit within 20 s of %v: %s", strings.Join(args, " "), sig, errb.String())
	}
	return 0, "", 0
}

// TestInterruptedCommandsSayWhatTheyLeft: settle, store copy and store
// check stop on SIGINT or SIGTERM with one line naming the command, the
// signal and what it left, and exit 128 and the signal's number (130,
// 143), instead of ending silently. Here each waits for the bolt store,
// which the test holds, and is interrupted while it waits.
func TestInterruptedCommandsSayWhatTheyLeft(t *testing.T) {
	dir, bin := buildKassa(t)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(data, "kassa.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		args []string
		sig  syscall.Signal
		code int
		line string
	}{
		{[]string{"settle", "--data", data}, syscall.SIGINT, 130, "kassa settle: interrupted (SIGINT); no settlement was written\n"},
		{[]string{"settle", "--data", data}, syscall.SIGTERM, 143, "kassa settle: interrupted (SIGTERM); no settlement was written\n"},
		{[]string{"store", "copy", "--data", data, "--database-url", "postgres://kassa@127.0.0.1:1/none"}, syscall.SIGINT, 130,
			"kassa store copy: interrupted (SIGINT); nothing was copied\n"},
		{[]string{"store", "check", "--data", data}, syscall.SIGTERM, 143,
			"kassa store check: interrupted (SIGTERM); nothing was checked (a check writes nothing)\n"},
	} {
		code, errs, _ := interruptBinary(t, bin, c.sig, 500*time.Millisecond, c.args...)
		if code != c.code || errs != c.line {
			t.Errorf("kassa %s, %v while it waits for the store: exit %d, stderr %q; want exit %d, stderr %q",
				strings.Join(c.args, " "), c.sig, code, errs, c.code, c.line)
		}
	}
}

// TestInterruptedCompaniesImport: an import interrupted while it reads its
// file (here a FIFO whose writer has not finished) stops at once, says the
// country's directory was not changed, and leaves it so.
func TestInterruptedCompaniesImport(t *testing.T) {
	interruptImport(t, syscall.SIGINT, func(fifo string) {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.WriteString("companyId,companyName\n5560000001,Acme AB\n")
		time.Sleep(10 * time.Second) // the rest of the file never comes
	})
}

// TestCompaniesImportInterruptedBeforeItsFileOpens: a FIFO no writer has
// opened yet holds the import's open of it; an interrupt there ends the
// import as one while it reads does. Before, open(2) was restarted after
// the signal, so the import went on waiting, having said nothing, for a
// second signal or a writer.
func TestCompaniesImportInterruptedBeforeItsFileOpens(t *testing.T) {
	interruptImport(t, syscall.SIGTERM, nil)
}

// interruptImport runs kassa companies import of a FIFO, which write (if
// not nil) writes, interrupts it with sig, and checks that it stopped at
// once, saying the SE directory was not changed, and left it so.
func interruptImport(t *testing.T, sig syscall.Signal, write func(fifo string)) {
	t.Helper()
	dir, bin := buildKassa(t)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "se.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if write != nil {
		go write(fifo)
	}
	code, errs, took := interruptBinary(t, bin, sig, 500*time.Millisecond, "companies", "import", "--country", "SE", "--data", data, fifo)
	if want := fmt.Sprintf("kassa companies import: interrupted (%s); the SE directory was not changed\n", signalName(sig)); code != 128+int(sig) || errs != want {
		t.Fatalf("import interrupted: exit %d, stderr %q; want %d, %q", code, errs, 128+int(sig), want)
	}
	if took > 2*time.Second {
		t.Fatalf("the import took %v to stop", took)
	}
	if _, err := os.Stat(filepath.Join(companiesDir(data), "SE.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SE.csv after an interrupted import: %v", err)
	}
}
