package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// interrupts catches SIGINT and SIGTERM while a command that does one piece
// of work runs (settle, store copy, store check, companies import). Without
// it the signal ended the process silently: its state was consistent (each
// is one transaction, or writes through a temporary file), but nothing said
// what was not done. The first signal ends ctx, so that the work stops
// where it can; the command then says what it left (report). A second one
// ends the process at once, as with no handler.
type interrupts struct {
	ctx  context.Context
	got  atomic.Value // the os.Signal caught, stored before ctx ends
	stop func()
}

func catchInterrupts() *interrupts {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interrupts{ctx: ctx}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			in.got.Store(s)
			signal.Stop(ch) // the next one ends the process
			cancel()
		case <-done:
		}
	}()
	in.stop = func() { signal.Stop(ch); close(done); cancel() }
	return in
}

// caught is the signal caught, nil when none was.
func (in *interrupts) caught() os.Signal {
	s, _ := in.got.Load().(os.Signal)
	return s
}

// report says on stderr that command was interrupted and what it left,
// and returns the exit code: 128 and the signal's number (130 for SIGINT,
// 143 for SIGTERM), as a shell reports a process the signal ended.
func (in *interrupts) report(stderr io.Writer, command, left string) int {
	s := in.caught()
	fmt.Fprintf(stderr, "kassa %s: interrupted (%s); %s\n", command, signalName(s), left)
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprint(s)
}

// ctxReader reads r until ctx ends: an input that blocks (a pipe, a FIFO)
// is woken by a read deadline where it takes one, and any read after the
// end fails with ctx's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if cerr := c.ctx.Err(); cerr != nil {
		return 0, cerr
	}
	return n, err
}

// openCtx opens name for reading unless ctx ends first: the open of a FIFO
// waits for a writer, and open(2) is restarted after a signal, so an
// interrupt would not end it. A file the open gives after ctx ended is
// closed.
func openCtx(ctx context.Context, name string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(name)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
