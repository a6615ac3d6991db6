package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// keyedServer answers POST /v1/orders/o1/partialrefund/c1 with a new refund
// id each time it runs the request; a key it has run before is answered by
// again(first answer) when set, else replayed as first answered.
func keyedServer(t *testing.T, again func(w http.ResponseWriter, first string)) *client {
	t.Helper()
	var mu sync.Mutex
	answers := map[string]string{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if first, ok := answers[key]; ok {
			if again != nil {
				again(w, first)
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.Write([]byte(first))
			return
		}
		n++
		answers[key] = fmt.Sprintf(`{"id":"o1","refunded":[{"ledgerId":"r%d"}]}`, n)
		w.Write([]byte(answers[key]))
	}))
	t.Cleanup(srv.Close)
	return newClient(srv.URL, "id", "secret", 1)
}

// refundAll sends n keyed refunds through the worker, as a load run does.
func refundAll(t *testing.T, c *client, tl *tally, n int) {
	t.Helper()
	var lost []pending
	w := &worker{c: c, st: newStats(), tl: tl, rng: rand.New(rand.NewPCG(1, 2)), lostMu: &sync.Mutex{}, lost: &lost}
	for i := range n {
		if !w.call(context.Background(), "partialRefund", "POST", "/v1/orders/o1/partialrefund/c1", map[string]any{"totalRefundAmount": 100},
			fmt.Sprint("k-pr-", i), 200, nil) {
			t.Fatal("refund not acknowledged")
		}
	}
}

func TestReplaysPassACorrectServer(t *testing.T) {
	c := keyedServer(t, nil)
	tl := newTally()
	refundAll(t, c, tl, 3)
	var out strings.Builder
	if checked, bad := replays(context.Background(), c, tl, &out); checked != 3 || bad != 0 {
		t.Fatalf("replays = %d checked, %d bad; want 3, 0:\n%s", checked, bad, out.String())
	}
}

// Before, nothing sent an acknowledged request twice: a run whose answers
// all arrived (every one of the normal mode; all but a few of the crash
// test's) passed a server whose key ran a capture or refund again, or
// replayed it with another refund's id, and verify, reading the orders,
// could not see it.
func TestReplaysReportEachDefect(t *testing.T) {
	for name, again := range map[string]func(w http.ResponseWriter, first string){
		"runs again and is refused": func(w http.ResponseWriter, _ string) {
			w.WriteHeader(409)
			w.Write([]byte(`{"type":"https://kassa.dev/problems/action_not_available"}`))
		},
		"runs again and refunds twice": func(w http.ResponseWriter, first string) {
			w.Write([]byte(strings.Replace(first, `"r`, `"again-r`, 1)))
		},
		"replays another refund's id": func(w http.ResponseWriter, first string) {
			w.Header().Set("Idempotent-Replayed", "true")
			w.Write([]byte(strings.Replace(first, `"r`, `"other-r`, 1)))
		},
		"replays without saying so": func(w http.ResponseWriter, first string) { w.Write([]byte(first)) },
	} {
		t.Run(name, func(t *testing.T) {
			c := keyedServer(t, again)
			tl := newTally()
			refundAll(t, c, tl, 3)
			var out strings.Builder
			if checked, bad := replays(context.Background(), c, tl, &out); checked != 0 || bad != 3 || strings.Count(out.String(), "MISMATCH replay of partialRefund") != 3 {
				t.Fatalf("replays = %d checked, %d bad; want 0, 3 with a MISMATCH line each:\n%s", checked, bad, out.String())
			}
		})
	}
}

// The sample stays bounded, and keeps acknowledged mutations from the whole
// run, not only its first.
func TestAckSampleIsBoundedAndSpread(t *testing.T) {
	tl := newTally()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 10 * ackSample
	for i := range n {
		tl.ack(acked{key: fmt.Sprint(i)}, nil, rng)
	}
	if len(tl.acks) != ackSample || tl.acked != n {
		t.Fatalf("%d kept of %d seen; want %d of %d", len(tl.acks), tl.acked, ackSample, n)
	}
	late := 0
	for _, a := range tl.acks {
		var i int
		fmt.Sscan(a.key, &i)
		if i >= n/2 {
			late++
		}
	}
	if late < ackSample/3 || late > 2*ackSample/3 {
		t.Fatalf("%d of %d kept are from the run's second half; want about half", late, ackSample)
	}
}
