package bolt_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

// The crash test re-executes the test binary as a writer process (this
// variable names its file) and kills it with SIGKILL.
const crashEnv = "KASSA_BOLT_CRASH_CHILD"

var crashMerchants = []string{"m1", "m2", "m3"}

// TestCrashSafety kills a process of concurrent writers at random moments
// and checks, after each kill, that the file passes bbolt's and the store's
// consistency checks, that every write the child acknowledged (printed after
// its Update returned nil) is there and complete, that every order keeps the
// ledger invariants, and that document numbers are unique and gapless. Each
// round logs how many writes were in flight at its kill (begun, not
// acknowledged): a kill that fell while none was proves little of a torn
// write, so the test fails unless one round in ten at least found some.
func TestCrashSafety(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path, os.Getenv(crashEnv+"_ROUND"))
		return
	}
	if testing.Short() {
		t.Skip("spawns and kills writer processes")
	}
	path := filepath.Join(t.TempDir(), "kassa.db")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	acked := map[string]ack{} // by order id: the latest acknowledged state
	const rounds = 12
	total, hits := 0, 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashSafety$", "-test.v=false")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, fmt.Sprint(crashEnv, "_ROUND=", round))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Let it get going, then kill it at a random moment.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("round %d: child wrote nothing", round)
		}
		time.Sleep(time.Duration(20+r.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		got := []string{first}
		for l := range lines {
			got = append(got, l)
		}
		cmd.Wait()
		acks, inFlight, err := parseRound(got)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, a := range acks {
			if prev, ok := acked[a.order]; !ok || a.step > prev.step {
				acked[a.order] = a
			}
		}
		total += len(acks)
		if inFlight > 0 {
			hits++
		}
		verifyCrashFile(t, path, acked)
		t.Logf("round %d: %d writes acknowledged before the kill, %d in flight at it; %d orders verified", round, len(acks), inFlight, len(acked))
	}
	if total < rounds*5 {
		t.Fatalf("only %d writes acknowledged in %d rounds: the test exercised too little", total, rounds)
	}
	// Eight writers spend nearly all their time in an Update, so nearly
	// every kill lands on some; one round in ten is a bound no slow machine
	// misses, and a child that wrote between kills only would.
	if hits < (rounds+9)/10 {
		t.Fatalf("only %d of %d kills fell while a write was in flight: the test showed little of a torn write", hits, rounds)
	}
}

// beginLine is what the child prints before each Update: a begun write
// with no acknowledgement after it was in flight when the child was killed.
const beginLine = "begin"

// parseRound reads a killed child's lines: the writes it acknowledged, and
// how many it had begun and not acknowledged (each writer has one Update at
// a time, so that is how many were in flight at the kill).
func parseRound(lines []string) (acks []ack, inFlight int, err error) {
	for _, l := range lines {
		if l == beginLine {
			inFlight++
			continue
		}
		a, err := parseAck(l)
		if err != nil {
			return nil, 0, err
		}
		acks = append(acks, a)
		inFlight--
	}
	if inFlight < 0 {
		return nil, 0, fmt.Errorf("%d acknowledgements more than writes begun", -inFlight)
	}
	return acks, inFlight, nil
}

func TestParseRoundCountsWritesInFlight(t *testing.T) {
	acks, inFlight, err := parseRound([]string{beginLine, beginLine, "m1 o1 0 0 0 0", beginLine, beginLine, "m2 o2 1 1000 0 1"})
	if err != nil || len(acks) != 2 || acks[1] != (ack{"m2", "o2", 1, 1000, 0, 1}) || inFlight != 2 {
		t.Fatalf("parseRound = %v, %d in flight, %v; want 2 acks (the second m2 o2 step 1) and 2 in flight", acks, inFlight, err)
	}
	if _, _, err := parseRound([]string{"m1 o1 0 0 0 0"}); err == nil {
		t.Fatal("an acknowledgement of a write never begun was accepted")
	}
}

// ack is one acknowledged write: order (of merchant) reached step with
// captured and refunded amounts (minor units incl. VAT) and ledger count.
type ack struct {
	merchant, order string
	step            int
	captured        int64
	refunded        int64
	ledgers         int
}

func (a ack) String() string {
	return fmt.Sprintf("%s %s %d %d %d %d", a.merchant, a.order, a.step, a.captured, a.refunded, a.ledgers)
}

func parseAck(l string) (ack, error) {
	f := strings.Fields(l)
	if len(f) != 6 {
		return ack{}, fmt.Errorf("bad line %q", l)
	}
	var a ack
	a.merchant, a.order = f[0], f[1]
	var errs [4]error
	a.step, errs[0] = strconv.Atoi(f[2])
	a.captured, errs[1] = strconv.ParseInt(f[3], 10, 64)
	a.refunded, errs[2] = strconv.ParseInt(f[4], 10, 64)
	a.ledgers, errs[3] = strconv.Atoi(f[5])
	for _, err := range errs {
		if err != nil {
			return ack{}, fmt.Errorf("bad line %q: %v", l, err)
		}
	}
	return a, nil
}

func verifyCrashFile(t *testing.T, path string, acked map[string]ack) {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatalf("consistency after crash: %v", err)
	}
	ctx := context.Background()
	err = s.View(ctx, func(tx storage.Tx) error {
		for _, a := range acked {
			o, err := tx.GetOrder(a.merchant, a.order)
			if err != nil {
				t.Fatalf("acknowledged %v: %v", a, err)
			}
			am := o.Amounts()
			// Later unacknowledged writes may have committed too, so the
			// order is at least as far as acknowledged.
			if am.Captured < a.captured || am.Refunded < a.refunded || len(o.Captured)+len(o.Refunded) < a.ledgers {
				t.Fatalf("acknowledged %v, stored captured %d refunded %d ledgers %d", a, am.Captured, am.Refunded,
					len(o.Captured)+len(o.Refunded))
			}
		}
		for _, m := range crashMerchants {
			var orders []*order.Order
			q := storage.OrderQuery{Size: storage.MaxPageSize}
			for {
				page, err := tx.ListOrders(m, q)
				if err != nil {
					return err
				}
				orders = append(orders, page.Orders...)
				if page.NextCursor == "" {
					break
				}
				q.Cursor = page.NextCursor
			}
			docs := map[string][]int64{}
			for _, o := range orders {
				checkLedger(t, o)
				for _, l := range o.Captured {
					docs[order.SeriesInvoice] = append(docs[order.SeriesInvoice], l.DocumentSeq)
				}
				for _, l := range o.Refunded {
					docs[order.SeriesCreditNote] = append(docs[order.SeriesCreditNote], l.DocumentSeq)
				}
			}
			for series, nums := range docs {
				slices.Sort(nums)
				for i, n := range nums {
					if n != int64(i+1) {
						t.Fatalf("%s %s numbers are not 1..%d once each: %v", m, series, len(nums), nums)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkLedger asserts the ledger invariants of design.md §3 on a stored order.
func checkLedger(t *testing.T, o *order.Order) {
	t.Helper()
	a := o.Amounts()
	var created, capturedEv, refundedEv int64
	for _, e := range o.Events {
		switch e.Type {
		case order.EventCreate:
			created = e.Amount
		case order.EventPartialCapture, order.EventFullCapture:
			capturedEv += e.Amount
		case order.EventPartialRefund, order.EventFullRefund:
			refundedEv += e.Amount
		}
	}
	switch {
	case a.Order != a.Captured+a.Uncaptured:
		t.Fatalf("%s: orderAmount %d != captured %d + uncaptured %d", o.ID, a.Order, a.Captured, a.Uncaptured)
	case created != a.Consumed+a.Uncaptured+o.CancelledAmount:
		t.Fatalf("%s: created %d != consumed %d + uncaptured %d + cancelled %d", o.ID, created, a.Consumed, a.Uncaptured, o.CancelledAmount)
	case a.Consumed > o.AuthorizedAmount:
		t.Fatalf("%s: consumed %d > authorized %d", o.ID, a.Consumed, o.AuthorizedAmount)
	case capturedEv != a.Consumed || refundedEv != a.Refunded:
		t.Fatalf("%s: events capture %d refund %d, ledgers %d %d", o.ID, capturedEv, refundedEv, a.Consumed, a.Refunded)
	}
	for _, l := range o.Captured {
		if r, c := o.RefundedOf(l.ID), order.SumLines(l.Lines, o.VATMode).Gross; r > c {
			t.Fatalf("%s: ledger %s refunded %d > captured %d", o.ID, l.ID, r, c)
		}
	}
	for _, l := range o.Refunded {
		if o.Ledger(l.RefundOf) == nil {
			t.Fatalf("%s: refund %s of unknown capture %s", o.ID, l.ID, l.RefundOf)
		}
	}
}

// crashChild writes until it is killed: each writer creates an order, then
// captures it in parts, refunds part of a capture and captures the rest,
// printing a line after each Update that returned nil.
func crashChild(path, round string) {
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	ids := &counterIDs{prefix: "r" + round + "-"}
	var out sync.Mutex
	ctx := context.Background()
	tb := &testing.T{}
	for w := range 8 {
		go func() {
			m := crashMerchants[w%len(crashMerchants)]
			for {
				var o *order.Order
				step := 0
				// The order of steps is fixed; each is one durable Update.
				for step < 5 {
					out.Lock()
					fmt.Fprintln(os.Stdout, beginLine)
					out.Unlock()
					err := s.Update(ctx, func(tx storage.Tx) error {
						e := env(tx, m, ids)
						var err error
						switch step {
						case 0:
							o = newOrder(tb, m, 4, e)
							return tx.CreateOrder(o)
						case 1, 2:
							if o, err = tx.GetOrder(m, o.ID); err != nil {
								return err
							}
							_, err = capture.Partial(o, &capture.PartialRequest{
								OrderLines:         []order.LineInput{{ID: ptr(o.Uncaptured.Lines[0].ID)}},
								TotalCaptureAmount: ptr(int64(1000))}, e)
						case 3:
							if o, err = tx.GetOrder(m, o.ID); err != nil {
								return err
							}
							_, err = refund.Partial(o, o.Captured[0].ID, &refund.PartialRequest{
								OrderLines: []order.LineInput{line("credit", 1, 300, 2500)}, TotalRefundAmount: ptr(int64(300))}, e)
						case 4:
							if o, err = tx.GetOrder(m, o.ID); err != nil {
								return err
							}
							_, err = capture.Full(o, nil, e)
						}
						if err != nil {
							return err
						}
						return tx.UpdateOrder(o)
					})
					if err != nil {
						fmt.Fprintln(os.Stderr, "child write:", err)
						os.Exit(3)
					}
					a := o.Amounts()
					out.Lock()
					fmt.Fprintln(os.Stdout, ack{m, o.ID, step, a.Captured, a.Refunded, len(o.Captured) + len(o.Refunded)})
					out.Unlock()
					step++
				}
			}
		}()
	}
	select {} // until killed
}
