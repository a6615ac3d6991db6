// Command kassa-load measures a running kassa server: it drives a realistic
// mix of merchant operations with Idempotency-Keys from concurrent clients,
// reports throughput and latency per operation, and afterwards verifies
// against its own tally that every operation answered 2xx is reflected
// exactly once in the server's orders, to the minor unit, and that a sample
// of them sent again with their keys is replayed, byte for byte; a mutation of
// unknown outcome (no answer, or a 5xx: a load balancer's 502 may follow a
// capture kassa applied) is first sent again with its key. It reads them
// through the server it measured, whose caches of rendered orders answer
// those reads; crash and replicas read through a server started after the
// load, whose caches are empty (to check a server of your own that way,
// restart it, or run it with --order-cache-mb 0).
//
//	kassa-load -addr http://127.0.0.1:8080 -client-id ID -client-secret SECRET -concurrency 16 -duration 30s
//	kassa-load -baselines ...   also measure the baselines in the same run (ratios survive a noisy machine)
//	kassa-load crash -bin ./kassa -rounds 10   SIGKILL a server under load, restart, verify nothing is lost or doubled
//	kassa-load replicas -bin ./kassa -database-url URL -replicas 3 -kill   contended traffic across replicas on PostgreSQL
//	kassa-load scale -bin ./kassa -database-url URL   captures/s with 1, 2, 3 replicas against raw pgx inserts
//
// It sends traffic only to the address it is given (use loopback) and stops by itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// startCPUProfile profiles this process into path until the returned func is
// called; the load tool shares the machine's cores with the server, so its own
// cost per flow is part of what bounds the figures.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "crash" {
		return crash(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "replicas" {
		return replicas(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale" {
		return scale(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("kassa-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:8080", "base URL of the kassa server (loopback)")
	id := fs.String("client-id", "", "client id of a sandbox merchant")
	secret := fs.String("client-secret", "", "client secret")
	conc := fs.Int("concurrency", 16, "concurrent clients")
	dur := fs.Duration("duration", 30*time.Second, "how long to run the mix")
	mix := fs.String("mix", "get=1,list=1", "reads per order in the flow: get=N,list=N")
	baselines := fs.Bool("baselines", false, "also measure the static-handler, commit-path and bbolt Batch baselines, and GET at half of peak")
	cpuProfile := fs.String("cpuprofile", "", "diagnostics: write a CPU profile of the mix (not the baselines) to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	gets, lists, err := parseMix(*mix)
	var usage string
	switch {
	case err != nil:
		usage = err.Error()
	case fs.NArg() > 0:
		usage = fmt.Sprintf("unexpected argument %q (a boolean takes its value after =)", fs.Arg(0))
	case *id == "" || *secret == "":
		usage = "-client-id and -client-secret are required"
	case *conc < 1:
		usage = "-concurrency must be at least 1"
	case *dur <= 0 || *dur > time.Hour:
		usage = "-duration must be above 0 and at most 1h"
	}
	if usage != "" {
		fmt.Fprintln(stderr, "kassa-load:", usage)
		return 2
	}
	ctx := context.Background()
	c := newClient(*addr, *id, *secret, *conc)
	tl := newTally()
	var lost []pending
	fmt.Fprintf(stdout, "load: %d clients for %s against %s (mix get=%d list=%d)\n", *conc, *dur, *addr, gets, lists)
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintln(stderr, "kassa-load: -cpuprofile:", err)
		return 2
	}
	st, el := runLoad(ctx, c, *conc, *dur, gets, lists, tl, &lost, stderr)
	stopProfile()
	mps := st.report(stdout, el)
	if len(lost) > 0 {
		// Unknown outcomes (no answer, a 5xx) are settled before the
		// tally is checked: through a load balancer, or across a
		// server's restart, a capture answered 502 may well be applied.
		settled, replayed, open, _ := retryLost(ctx, c, lost, stdout)
		fmt.Fprintf(stdout, "%d mutations of unknown outcome sent again with their keys: %d replayed, %d applied now, %d still unanswered\n",
			len(lost), replayed, len(settled)-replayed, open)
	}
	bad := verify(ctx, c, tl, stdout)
	replayed, mismatched := replays(ctx, c, tl, stdout)
	fmt.Fprintf(stdout, "%d acknowledged mutations sent again with their keys: %d replayed as first answered\n", replayed+mismatched, replayed)
	bad += mismatched
	if *baselines {
		if err := runBaselines(ctx, c, *conc, mps, tl, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "kassa-load: baselines:", err)
			return 1
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}
