package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// readerFunc is an io.Reader of a function.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestCtxReader: a read once ctx has ended is not made (an input that
// takes no deadline would block it), and a read during which ctx ended
// fails with ctx's error, not what the input said (a deadline's error, or
// data the command would go on with).
func TestCtxReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	data := readerFunc(func(p []byte) (int, error) { calls++; return copy(p, "abc"), nil })
	p := make([]byte, 8)
	if n, err := (ctxReader{ctx, data}).Read(p); n != 3 || err != nil || string(p[:n]) != "abc" {
		t.Fatalf("a read with ctx live: %d, %v, %q; want 3, nil, abc", n, err, p[:n])
	}
	endsDuring := readerFunc(func(p []byte) (int, error) { cancel(); return copy(p, "def"), nil })
	if n, err := (ctxReader{ctx, endsDuring}).Read(p); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("a read during which ctx ended: %d, %v; want 0, context.Canceled", n, err)
	}
	calls = 0
	if n, err := (ctxReader{ctx, data}).Read(p); n != 0 || !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("a read once ctx ended: %d, %v, %d reads of the input; want 0, context.Canceled, none", n, err, calls)
	}
}

// TestSecondInterruptEndsTheProcess: the first SIGINT ends catchInterrupts'
// ctx, for the command to stop and say what it left; a second one, for a
// command slow to stop, ends the process at once, as with no handler.
// The test binary itself is the process (TestInterruptHelper).
func TestSecondInterruptEndsTheProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptHelper$")
	cmd.Env = append(os.Environ(), "KASSA_INTERRUPT_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	next := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	next("catching")
	cmd.Process.Signal(syscall.SIGINT)
	next("caught interrupt")
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("after a second SIGINT the process %v; want it ended by the signal", cmd.ProcessState)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("a second SIGINT did not end the process within 5 s")
	}
}

// TestInterruptHelper is TestSecondInterruptEndsTheProcess's process: it
// catches interrupts, says so, and after the first waits for 20 s, as a
// command slow to stop.
func TestInterruptHelper(t *testing.T) {
	if os.Getenv("KASSA_INTERRUPT_HELPER") != "1" {
		t.Skip("run by TestSecondInterruptEndsTheProcess")
	}
	in := catchInterrupts()
	defer in.stop()
	os.Stdout.WriteString("catching\n")
	<-in.ctx.Done()
	os.Stdout.WriteString("caught " + in.caught().String() + "\n")
	time.Sleep(20 * time.Second)
}
