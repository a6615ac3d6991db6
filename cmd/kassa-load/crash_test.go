package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAcknowledged(t *testing.T) {
	orders, captures, refunds := tallyOf(correctOrders()).acknowledged()
	if orders != 3 || captures != 3 || refunds != 1 {
		t.Fatalf("acknowledged() = %d orders, %d captures, %d refunds; want 3, 3, 1", orders, captures, refunds)
	}
	if o, c, r := newTally().acknowledged(); o+c+r != 0 {
		t.Fatalf("an empty tally acknowledged %d, %d, %d", o, c, r)
	}
}

// A round that finds an acknowledged capture missing says which order:
// before, the crash test sent verify's lines to io.Discard and printed only
// "2 mismatches", naming no order to look into.
func TestCheckRoundNamesTheOrder(t *testing.T) {
	acked := correctOrders()
	held := correctOrders()
	f := held["o1"]
	f.captures = f.captures[:1] // the second capture acknowledged, not stored
	f.uncaptured = 2500
	held["o1"] = f
	var out strings.Builder
	if _, bad := checkRound(context.Background(), fakeServer(t, held), tallyOf(acked), time.Now(), &out); bad != 1 ||
		!regexp.MustCompile(`(?m)^MISMATCH o1: `).MatchString(out.String()) {
		t.Fatalf("%d mismatches, want 1 with a line naming o1:\n%s", bad, out.String())
	}
}

// retryServer is fakeServer's orders (held) plus a partial capture of o2's
// 300 left, POST /v1/orders/o2/partialcapture: answer(n, applied) answers
// its n-th call (from 1), applied telling whether a call ran it before; a
// 2xx answer not marked Idempotent-Replayed runs it.
func retryServer(t *testing.T, held map[string]fakeOrder, answer func(w http.ResponseWriter, n int, applied bool)) *client {
	t.Helper()
	var mu sync.Mutex
	n, applied := 0, false
	get := fakeHandler(held)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != "POST" {
			get(w, r)
			return
		}
		if r.URL.Path != "/v1/orders/o2/partialcapture" || r.Header.Get("Idempotency-Key") != "k-pc" {
			http.Error(w, "unexpected "+r.URL.Path, 400)
			return
		}
		n++
		rec := httptest.NewRecorder()
		answer(rec, n, applied)
		if rec.Code/100 == 2 && rec.Header().Get("Idempotent-Replayed") != "true" {
			if applied {
				t.Errorf("the capture ran twice")
			}
			applied = true
			o := held["o2"]
			o.captures = append(o.captures, 300)
			o.uncaptured = 0
			held["o2"] = o
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return newClient(srv.URL, "id", "secret", 1)
}

// TestAfterRestartSettlesEachInFlightRequest: a request in flight at the kill
// must, sent again with its key on the restarted server, be replayed or run
// once. Before, a retry answered with a refusal or an error (a server that
// lost the request's token with its crash, or refuses every key it saw
// before a crash) counted as "open" and was dropped: nothing was applied
// and nothing tallied, so the orders agreed with the tally and the round
// passed, though the client following the protocol never got its capture.
func TestAfterRestartSettlesEachInFlightRequest(t *testing.T) {
	const first = `{"id":"o2","captured":[{"ledgerId":"c1"}]}`
	run := func(w http.ResponseWriter, _ int, _ bool) { w.Write([]byte(first)) }
	replay := func(w http.ResponseWriter, body string) {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write([]byte(body))
	}
	refuse := func(w http.ResponseWriter, code string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(409)
		fmt.Fprintf(w, `{"type":"https://kassa.dev/problems/%s"}`, code)
	}
	for _, tc := range []struct {
		name             string
		answer           func(w http.ResponseWriter, n int, applied bool)
		bad              int
		settled, replays int
	}{
		{"runs once, then replays", func(w http.ResponseWriter, n int, applied bool) {
			if applied {
				replay(w, first)
				return
			}
			run(w, n, applied)
		}, 0, 1, 0},
		{"in progress a while, then runs once", func(w http.ResponseWriter, n int, applied bool) {
			switch {
			case n < 3:
				refuse(w, "idempotency_request_in_progress")
			case applied:
				replay(w, first)
			default:
				run(w, n, applied)
			}
		}, 0, 1, 0},
		{"refused", func(w http.ResponseWriter, _ int, _ bool) { refuse(w, "action_not_available") }, 1, 0, 0},
		{"an error", func(w http.ResponseWriter, _ int, _ bool) { http.Error(w, `{"type":"internal"}`, 500) }, 1, 0, 0},
		{"in progress for ever", func(w http.ResponseWriter, _ int, _ bool) { refuse(w, "idempotency_request_in_progress") }, 1, 0, 0},
		{"runs once, then replays other bytes", func(w http.ResponseWriter, n int, applied bool) {
			if applied {
				replay(w, strings.Replace(first, "c1", "c2", 1))
				return
			}
			run(w, n, applied)
		}, 1, 1, 0},
		{"runs once, then again", func(w http.ResponseWriter, n int, applied bool) {
			if applied {
				refuse(w, "action_not_available")
				return
			}
			run(w, n, applied)
		}, 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := correctOrders()
			c := retryServer(t, held, tc.answer)
			tl := tallyOf(correctOrders())
			lost := []pending{{op: "partialCapture", method: "POST", path: "/v1/orders/o2/partialcapture", key: "k-pc",
				body: map[string]any{"totalCaptureAmount": 300}, onOK: func(response) {
					tl.apply("o2", func(e *expect) { e.captured += 300; e.uncaptured -= 300; e.captures++ })
				}}}
			var out strings.Builder
			s, bad, err := afterRestart(context.Background(), c, tl, lost, time.Now(), &out)
			if err != nil || bad != tc.bad || s.settled != tc.settled || s.replayed != tc.replays {
				t.Fatalf("afterRestart = %+v, %d bad, %v; want %d settled (%d replayed), %d bad:\n%s",
					s, bad, err, tc.settled, tc.replays, tc.bad, out.String())
			}
			if tc.bad > 0 && !strings.Contains(out.String(), "k-pc") {
				t.Fatalf("no line names the retried request's key:\n%s", out.String())
			}
		})
	}
}

// TestInFlightAtTheKill: a mutation sent before the kill and never answered
// was in flight at it; one answered (a 5xx, kept for a retry all the same)
// or sent after it was not. Before, the crash test did not say what its
// kills landed on, and a run whose every kill fell between requests passed.
func TestInFlightAtTheKill(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "k-gone" {
			conn, _, _ := w.(http.Hijacker).Hijack() // killed mid-request
			conn.Close()
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()
	var lost []pending
	w := &worker{c: newClient(srv.URL, "id", "secret", 1), st: newStats(), tl: newTally(), lostMu: &sync.Mutex{}, lost: &lost}
	before := time.Now()
	for _, key := range []string{"k-gone", "k-502"} {
		w.call(context.Background(), "fullCapture", "POST", "/v1/orders/o1/capture", nil, key, 200, nil)
	}
	after := time.Now()
	if len(lost) != 2 {
		t.Fatalf("%d requests kept for a retry, want both", len(lost))
	}
	if n := inFlightAt(lost, after); n != 1 {
		t.Errorf("%d in flight at a kill after both were sent, want 1 (the one never answered)", n)
	}
	if n := inFlightAt(lost, before); n != 0 {
		t.Errorf("%d in flight at a kill before either was sent, want 0", n)
	}
}

// TestFinalCheckReadsThroughAFreshServer: the last round's retries run on
// the server that then checks them, whose caches hold the rendered answers,
// so an order stored other than it was answered reads as answered there.
// Before, nothing read the orders again after that round; finalCheck reads
// them through a server started once more, here one that holds the second
// capture of o1 acknowledged and not stored, and stops it afterwards.
func TestFinalCheckReadsThroughAFreshServer(t *testing.T) {
	held := correctOrders()
	f := held["o1"]
	f.captures = f.captures[:1]
	f.uncaptured = 2500
	held["o1"] = f
	for name, tc := range map[string]struct {
		stored map[string]fakeOrder
		bad    int
	}{"as answered": {correctOrders(), 0}, "other than answered": {held, 1}} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(fakeHandler(tc.stored))
			defer srv.Close()
			stopped := 0
			var out strings.Builder
			bad, err := finalCheck(context.Background(), func() (string, func(), error) {
				return srv.URL, func() { stopped++ }, nil
			}, tallyOf(correctOrders()), time.Now(), &out)
			if err != nil || bad != tc.bad || stopped != 1 || strings.Count(out.String(), "MISMATCH o1") != tc.bad {
				t.Fatalf("finalCheck = %d bad, %v, stopped %d times; want %d bad (a line for o1 each), stopped once:\n%s",
					bad, err, stopped, tc.bad, out.String())
			}
		})
	}
}
