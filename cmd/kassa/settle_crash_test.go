package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSettlementRunKilledMidway kills the server (SIGKILL) while a
// settlement run is in flight, round after round, with new captures and
// refunds in between. A run is one transaction, so after the restarts every
// capture and refund must be in exactly one settlement, and every
// settlement's transactions must sum to its net.
//
// A kill counts as landing mid-run when the run's request had been written
// and no answer came back (a kill after the answer, the run done, shows
// nothing). Each kill falls a random moment after the request was written,
// within about one run's time; the rounds go on until enough kills have
// landed mid-run, some before the run's commit and some after it (the
// settlements counted after the restart tell which), so the kills span the
// run rather than all falling before it began.
func TestSettlementRunKilledMidway(t *testing.T) {
	dir, bin := buildKassa(t)
	data := filepath.Join(dir, "data")
	var wantCaptured, wantRefunded int64
	const ordersPerRound, wantMidRun, maxRounds = 12, 8, 80
	rounds, before, after := 0, 0, 0 // kills mid-run, before and after its commit
	// window is how long after its request is written a run may still be
	// killed: one run's time, from the last run answered before its kill,
	// longer after each kill that found the run not yet committed.
	window := 4 * time.Millisecond
	lastMid, made := false, 0
	var c *client
	var stop func()
	for {
		cmd, base := launch(t, bin, data)
		stop = stopper(t, cmd)
		c = &client{t: t, base: base}
		c.token("demo", "demo-secret-123")
		if n := len(c.settlements()); lastMid && n > made {
			after++ // the run had committed, its answer was not yet out
		} else if lastMid {
			before++
			window = window * 3 / 2 // the run takes longer than the window
		}
		if before+after >= wantMidRun && before > 0 && after > 0 {
			break
		}
		if rounds == maxRounds {
			stop()
			t.Fatalf("in %d rounds %d kills landed mid-run before its commit and %d after, want %d in all and some of each", rounds, before, after, wantMidRun)
		}
		for i := range ordersPerRound {
			id := c.orderOf(fmt.Sprintf("r%d-%d", rounds, i), 10000+int64(i)*100)
			var o apiOrder
			c.do("POST", "/v1/orders/"+id+"/capture", "", fmt.Sprintf("cap-%d-%d", rounds, i), 200, &o)
			wantCaptured += o.CapturedAmount.MinorUnits
			if i%3 == 0 {
				c.do("POST", "/v1/orders/"+id+"/partialrefund/"+o.Captured[0].LedgerID,
					`{"orderLines":[{"description":"Return","quantity":1,"unitPrice":1000,"vat":2500}],"totalRefundAmount":1000}`,
					fmt.Sprintf("ref-%d-%d", rounds, i), 200, nil)
				wantRefunded += 1000
			}
		}
		made = len(c.settlements())
		rounds++
		// Start a run and kill the server at a random moment after its
		// request was written.
		wrote := make(chan time.Time, 1)
		answered := make(chan time.Time, 1) // zero: no answer
		go func() {
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote <- time.Now() }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", base+"/sandbox/v1/settlements/run", nil)
			req.Header.Set("Authorization", "Bearer "+c.bearer)
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err != nil {
				answered <- time.Time{}
				return
			}
			at := time.Now()
			resp.Body.Close()
			answered <- at
		}()
		var start time.Time
		select {
		case start = <-wrote:
		case <-time.After(30 * time.Second):
			t.Fatal("the settlement run's request was not written")
		}
		time.Sleep(time.Duration(rand.Int64N(int64(window))))
		cmd.Process.Kill()
		cmd.Wait()
		at := <-answered
		if lastMid = at.IsZero(); !lastMid {
			window = max(at.Sub(start), 100*time.Microsecond)
		}
	}
	defer stop()
	t.Logf("in %d rounds %d kills landed mid-run before its commit and %d after", rounds, before, after)

	// A last, uninterrupted run, then the books.
	c.do("POST", "/sandbox/v1/settlements/run", "", "", 200, nil)
	var gotCaptured, gotRefunded int64
	seen := map[string]int{}
	for _, s := range c.settlements() {
		var sum int64
		for _, tx := range c.settlementTx(s.ID) {
			seen[tx.Type+" "+tx.LedgerID]++
			sum += tx.Amount.MinorUnits
			switch tx.Type {
			case "capture":
				gotCaptured += tx.Amount.MinorUnits
			case "refund":
				gotRefunded -= tx.Amount.MinorUnits
			}
		}
		if sum != s.NetAmount.MinorUnits || s.GrossAmount.MinorUnits-s.RefundAmount.MinorUnits-s.FeeAmount.MinorUnits+s.AdjustmentAmount.MinorUnits != s.NetAmount.MinorUnits {
			t.Errorf("settlement %s: transactions sum to %d; gross %d refunds %d fees %d adjustments %d net %d", s.Reference, sum,
				s.GrossAmount.MinorUnits, s.RefundAmount.MinorUnits, s.FeeAmount.MinorUnits, s.AdjustmentAmount.MinorUnits, s.NetAmount.MinorUnits)
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s settled %d times", k, n)
		}
	}
	if gotCaptured != wantCaptured || gotRefunded != wantRefunded {
		t.Fatalf("settled captures %d refunds %d, want %d and %d", gotCaptured, gotRefunded, wantCaptured, wantRefunded)
	}
	if len(seen) != rounds*ordersPerRound+rounds*((ordersPerRound+2)/3) {
		t.Fatalf("%d settled transactions, want one per capture and refund", len(seen))
	}
}

// launch starts the server and returns it once it listens.
func launch(t *testing.T, bin, data string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data, "--client-id", "demo", "--client-secret", "demo-secret-123")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			base, _, _ := strings.Cut(rest, " ")
			go func() {
				for lines.Scan() {
				}
			}()
			return cmd, base
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("server did not start: %s", stderr.String())
	return nil, ""
}

// orderOf mints a token and creates a one-line order of amount (incl. 25 % VAT).
func (c *client) orderOf(key string, amount int64) string {
	var mint struct{ AuthorizationToken string }
	c.do("POST", "/sandbox/v1/authorization-tokens", `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"}}`, "", 201, &mint)
	var created struct{ OrderID string }
	c.do("POST", "/v1/authorization-tokens/"+mint.AuthorizationToken+"/order", fmt.Sprintf(`{"country":"SE","currency":"SEK","locale":"sv-SE",
		"orderLines":[{"description":"Goods","quantity":1,"unitPrice":%d,"vat":2500}]}`, amount), "create-"+key, 200, &created)
	return created.OrderID
}

type apiSettlement struct {
	ID, Reference                                                     string
	GrossAmount, RefundAmount, FeeAmount, AdjustmentAmount, NetAmount apiMoney
}

type apiSettlementTx struct {
	Type, LedgerID string
	Amount         apiMoney
}

func (c *client) settlements() []apiSettlement {
	var all []apiSettlement
	from := ""
	for {
		var page struct {
			Settlements []apiSettlement
			NextFromID  string
		}
		c.do("GET", "/v1/settlements?size=1000&fromId="+from, "", "", 200, &page)
		all = append(all, page.Settlements...)
		if from = page.NextFromID; from == "" {
			return all
		}
	}
}

func (c *client) settlementTx(id string) []apiSettlementTx {
	var all []apiSettlementTx
	from := ""
	for {
		var page struct {
			Transactions []apiSettlementTx
			NextFromID   string
		}
		c.do("GET", "/v1/settlements/"+id+"/tx?size=1000&fromId="+from, "", "", 200, &page)
		all = append(all, page.Transactions...)
		if from = page.NextFromID; from == "" {
			return all
		}
	}
}
