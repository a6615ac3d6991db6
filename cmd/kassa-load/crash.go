package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// crash runs rounds of: start the server on one data directory, load it,
// SIGKILL it at a random moment, restart it, retry every request that got no
// answer with its Idempotency-Key (each must be replayed or run once, and
// then replay that answer), verify every order against the tally, and
// send a sample of the acknowledged mutations again with their keys, which
// must replay what was first answered.
func crash(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kassa-load crash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "path to the kassa binary")
	rounds := fs.Int("rounds", 10, "kill-and-restart rounds (at least 10 for the target)")
	conc := fs.Int("concurrency", 8, "concurrent clients")
	maxUp := fs.Duration("max-up", 3*time.Second, "longest a round runs before the kill")
	store := fs.String("store", "bolt", "the server's store: bolt or postgres")
	dbURL := fs.String("database-url", os.Getenv("KASSA_DATABASE_URL"), "PostgreSQL URL for -store postgres (KASSA_DATABASE_URL)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *bin == "" || *rounds < 1 || *rounds > 1000 {
		fmt.Fprintln(stderr, "usage: kassa-load crash -bin PATH [-rounds 10] [-concurrency 8]")
		return 2
	}
	dir, err := os.MkdirTemp("", "kassa-crash")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	extra := storeArgs(*store, *dbURL)
	ctx := context.Background()
	tl := newTally()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	totalLost, totalRetried, replayed, totalResent, hits := 0, 0, 0, 0, 0
	since := time.Now()
	for round := 1; round <= *rounds; round++ {
		srv, base, err := startKassa(*bin, filepath.Join(dir, "data"), "crash", "crash-secret-123", extra...)
		if err != nil {
			fmt.Fprintln(stderr, "kassa-load crash:", err)
			return 1
		}
		c := newClient(base, "crash", "crash-secret-123", *conc)
		var lost []pending
		up := time.Duration(300+rng.IntN(int(maxUp.Milliseconds()))) * time.Millisecond
		lctx, cancel := context.WithCancel(ctx)
		killed := make(chan time.Time, 1)
		acksBefore := tl.ackCount()
		go func() {
			time.Sleep(up)
			killed <- time.Now()
			srv.Process.Signal(syscall.SIGKILL) // the crash: no shutdown, no flush beyond what was committed
			cancel()
		}()
		runLoad(lctx, c, *conc, time.Hour, 1, 0, tl, &lost, io.Discard)
		srv.Wait()
		cancel()
		// What the kill landed on: a kill while no mutation was under way
		// shows nothing of one cut off, so the run counts the rounds
		// whose kill found some.
		inFlight, acks := inFlightAt(lost, <-killed), tl.ackCount()-acksBefore
		if inFlight > 0 {
			hits++
		}

		srv, base, err = startKassa(*bin, filepath.Join(dir, "data"), "crash", "crash-secret-123", extra...)
		if err != nil {
			fmt.Fprintln(stderr, "kassa-load crash: restart:", err)
			return 1
		}
		c = newClient(base, "crash", "crash-secret-123", *conc)
		s, bad, err := afterRestart(ctx, c, tl, lost, since, stdout)
		if err != nil {
			fmt.Fprintln(stderr, err)
			srv.Process.Kill()
			return 1
		}
		totalRetried += s.settled
		replayed += s.replayed
		totalLost += len(lost)
		totalResent += s.resent
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
		fmt.Fprintf(stdout, "round %2d: killed after %s, %d mutations acknowledged before it and %d in flight at it; %d orders; %d unanswered requests retried; %d mismatches\n",
			round, up.Round(time.Millisecond), acks, inFlight, len(tl.orders), len(lost), bad)
		if bad > 0 {
			return 1
		}
	}
	if orders, captures, refunds := tl.acknowledged(); orders == 0 || captures == 0 || refunds == 0 {
		// A server that refuses every create, capture or refund loses and
		// doubles nothing: the test has then shown nothing about them.
		fmt.Fprintf(stdout, "FAILED: %d rounds acknowledged %d orders, %d captures, %d refunds: too few to check\n", *rounds, orders, captures, refunds)
		return 1
	}
	// The last round's retries ran on the server that then checked them,
	// whose caches of rendered orders held their answers: an order stored
	// other than it was answered would have read as answered. Each earlier
	// round's are read from the store by the next round's fresh server;
	// the last round's by one started once more.
	bad, err := finalCheck(ctx, func() (string, func(), error) {
		srv, base, err := startKassa(*bin, filepath.Join(dir, "data"), "crash", "crash-secret-123", extra...)
		if err != nil {
			return "", nil, err
		}
		return base, func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }, nil
	}, tl, since, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "kassa-load crash: last restart:", err)
		return 1
	}
	if bad > 0 {
		return 1
	}
	if hits < (*rounds+9)/10 {
		// Eight clients keep mutations under way nearly all the time, so
		// one round in ten is a bound no slow machine misses.
		fmt.Fprintf(stdout, "FAILED: %d of %d kills fell while a mutation was in flight: too few to show what a crash cuts off\n", hits, *rounds)
		return 1
	}
	fmt.Fprintf(stdout, "crash test: %d rounds (%d killed with mutations in flight), %d orders, 0 acknowledged mutations lost, 0 applied twice; %d in-flight retries (%d replayed, %d executed once), each replayed when sent again; %d acknowledged mutations sent again after a restart, each replayed as first answered\n",
		*rounds, hits, len(tl.orders), totalLost, replayed, totalRetried-replayed, totalResent)
	return 0
}

// restarted is what afterRestart counts: the requests of unknown outcome
// settled by a retry with their keys (replayed of them), and the
// acknowledged mutations sent again.
type restarted struct{ settled, replayed, resent int }

// afterRestart is what a round of the crash test does through the
// restarted server: retry every request that got no answer (or a 5xx) with
// its key, each of which must now be replayed or run once (the server has
// no other request of that key under way, and each was the last step of
// its order's flow, so nothing refuses it rightly); send each of those
// again, which must replay the retry's answer; then checkRound, which
// finds an applied one in the tally once. A retry answered with a refusal
// or an error is a failure, each a line on out: before, it was dropped, and
// a request the server neither ran nor replayed left the orders agreeing
// with the tally. err is a retry that got no answer either.
func afterRestart(ctx context.Context, c *client, tl *tally, lost []pending, since time.Time, out io.Writer) (s restarted, bad int, err error) {
	settled, replayed, open, err := retryLost(ctx, c, lost, out)
	if err != nil {
		return s, 0, err
	}
	s.settled, s.replayed = len(settled), replayed
	_, bad = replayAll(ctx, c, settled, out)
	resent, rbad := checkRound(ctx, c, tl, since, out)
	s.resent = resent
	return s, open + bad + rbad, nil
}

// finalCheck starts the server once more (start returns its address and
// how to stop it) and runs checkRound through it, whose caches are empty:
// every order is read from the store.
func finalCheck(ctx context.Context, start func() (base string, stop func(), err error), tl *tally, since time.Time, out io.Writer) (bad int, err error) {
	base, stop, err := start()
	if err != nil {
		return 0, err
	}
	defer stop()
	_, bad = checkRound(ctx, newClient(base, "crash", "crash-secret-123", 1), tl, since, out)
	fmt.Fprintf(out, "after a last restart: %d orders read from the store, %d mismatches\n", len(tl.orders), bad)
	return bad, nil
}

// checkRound is what each round of the crash test checks through the
// restarted server, each failure a line on out that names the order or the
// request: the orders against the tally, the replays of acknowledged
// mutations, the invariants, and that the server holds no order the tally
// does not.
func checkRound(ctx context.Context, c *client, tl *tally, since time.Time, out io.Writer) (resent, bad int) {
	bad = verify(ctx, c, tl, out)
	resent, rbad := replays(ctx, c, tl, out)
	bad += rbad + invariants(ctx, c, tl, out)
	bad += untallied(ctx, c, tl, since, out)
	return resent, bad
}

// invariants checks every tallied order's amounts agree with each other.
func invariants(ctx context.Context, c *client, tl *tally, out io.Writer) int {
	bad := 0
	for id := range tl.orders {
		r, err := c.do(ctx, "GET", "/v1/orders/"+id, nil, "")
		if err != nil || r.status != 200 {
			bad++
			continue
		}
		var o struct {
			OrderAmount, CapturedAmount, UncapturedAmount, RefundedAmount money
			Captured                                                      []struct {
				TotalOrderAmount money `json:"totalOrderAmount"`
			}
		}
		json.Unmarshal(r.body, &o)
		var sum int64
		for _, l := range o.Captured {
			sum += l.TotalOrderAmount.MinorUnits
		}
		if o.OrderAmount.MinorUnits != o.CapturedAmount.MinorUnits+o.UncapturedAmount.MinorUnits ||
			sum != o.CapturedAmount.MinorUnits || o.RefundedAmount.MinorUnits > o.CapturedAmount.MinorUnits {
			fmt.Fprintf(out, "INVARIANT broken on %s: %+v\n", id, o)
			bad++
		}
	}
	return bad
}

// storeArgs are the serve flags that select the store.
func storeArgs(store, dbURL string) []string {
	if store == "postgres" {
		return []string{"--store", "postgres", "--database-url", dbURL}
	}
	return nil
}

// startKassa starts "kassa serve" on data with a merchant of the given
// credentials and returns it once it listens.
func startKassa(bin, data, clientID, secret string, extra ...string) (*exec.Cmd, string, error) {
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data,
		"--client-id", clientID, "--client-secret", secret, "--log-level", "error"}, extra...)
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base, _, _ := strings.Cut(rest, " ")
			go io.Copy(io.Discard, out)
			return cmd, base, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, "", fmt.Errorf("kassa did not start: %s", stderr.String())
}
