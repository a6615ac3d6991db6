package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeOrder is what a fake server holds of an order: amounts of its
// captures and refunds, and what is left uncaptured.
type fakeOrder struct {
	captures, refunds []int64
	uncaptured        int64
	orderAmount       int64 // 0: captured + uncaptured, as a correct server has it
}

func (f fakeOrder) body(id string) []byte {
	type m struct {
		MinorUnits int64 `json:"minorUnits"`
	}
	type sub struct {
		LedgerID         string `json:"ledgerId"`
		TotalOrderAmount m      `json:"totalOrderAmount"`
	}
	var captured, refunded int64
	var cs, rs []sub
	for i, a := range f.captures {
		captured += a
		cs = append(cs, sub{fmt.Sprintf("%s-c%d", id, i), m{a}})
	}
	for i, a := range f.refunds {
		refunded += a
		rs = append(rs, sub{fmt.Sprintf("%s-r%d", id, i), m{a}})
	}
	total := f.orderAmount
	if total == 0 {
		total = captured + f.uncaptured
	}
	b, _ := json.Marshal(map[string]any{"id": id, "orderAmount": m{total}, "capturedAmount": m{captured},
		"refundedAmount": m{refunded}, "uncapturedAmount": m{f.uncaptured}, "captured": cs, "refunded": rs})
	return b
}

// fakeServer answers GET /v1/orders/{id} and GET /v1/orders (two orders a
// page, in id order, paged by cursor) from orders.
func fakeServer(t *testing.T, orders map[string]fakeOrder) *client {
	t.Helper()
	srv := httptest.NewServer(fakeHandler(orders))
	t.Cleanup(srv.Close)
	return newClient(srv.URL, "id", "secret", 1)
}

// fakeHandler is fakeServer's handler, for a test server that answers more.
func fakeHandler(orders map[string]fakeOrder) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" {
			http.Error(w, "method", 405)
			return
		}
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/orders/"); ok {
			o, ok := orders[id]
			if !ok {
				http.Error(w, `{"error":"not_found"}`, 404)
				return
			}
			w.Write(o.body(id))
			return
		}
		if r.URL.Path != "/v1/orders" || r.URL.Query().Get("createdFrom") == "" {
			http.Error(w, "unexpected "+r.URL.String(), 400)
			return
		}
		ids := make([]string, 0, len(orders))
		for id := range orders {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := min(from+2, len(ids))
		page := map[string]any{"orders": []any{}}
		var list []any
		for _, id := range ids[from:end] {
			list = append(list, map[string]any{"id": id})
		}
		if list != nil {
			page["orders"] = list
		}
		if end < len(ids) {
			page["nextCursor"] = strconv.Itoa(end)
		}
		json.NewEncoder(w).Encode(page)
	}
}

// tallyOf is the tally a run that acknowledged exactly these orders keeps.
func tallyOf(orders map[string]fakeOrder) *tally {
	tl := newTally()
	for id, o := range orders {
		tl.apply(id, func(e *expect) {
			e.uncaptured = o.uncaptured
			for _, a := range o.captures {
				e.captured += a
				e.captures++
			}
			for _, a := range o.refunds {
				e.refunded += a
				e.refunds++
			}
		})
	}
	return tl
}

func correctOrders() map[string]fakeOrder {
	return map[string]fakeOrder{
		"o1": {captures: []int64{1500, 2500}, refunds: []int64{1000}},
		"o2": {captures: []int64{700}, uncaptured: 300},
		"o3": {uncaptured: 9900},
	}
}

func TestVerifyPassesACorrectServer(t *testing.T) {
	orders := correctOrders()
	if bad := verify(context.Background(), fakeServer(t, orders), tallyOf(orders), io.Discard); bad != 0 {
		t.Fatalf("a server that holds what the tally says: %d mismatches", bad)
	}
}

// Each defect verify exists for, one at a time: the server holds something
// other than what it acknowledged.
func TestVerifyReportsEachDefect(t *testing.T) {
	for name, change := range map[string]func(map[string]fakeOrder){
		"capture applied twice": func(o map[string]fakeOrder) {
			f := o["o2"]
			f.captures = []int64{700, 700}
			o["o2"] = f
		},
		"capture one minor unit off": func(o map[string]fakeOrder) {
			f := o["o1"]
			f.captures = []int64{1500, 2501}
			o["o1"] = f
		},
		"acknowledged refund not stored": func(o map[string]fakeOrder) {
			f := o["o1"]
			f.refunds = nil
			o["o1"] = f
		},
		"refund applied twice": func(o map[string]fakeOrder) {
			f := o["o1"]
			f.refunds = []int64{1000, 1000}
			o["o1"] = f
		},
		"order amount not captured plus uncaptured": func(o map[string]fakeOrder) {
			f := o["o3"]
			f.orderAmount = 9901
			o["o3"] = f
		},
		"acknowledged order lost": func(o map[string]fakeOrder) { delete(o, "o3") },
	} {
		t.Run(name, func(t *testing.T) {
			want := correctOrders()
			tl := tallyOf(want)
			held := correctOrders()
			change(held)
			var out strings.Builder
			if bad := verify(context.Background(), fakeServer(t, held), tl, &out); bad != 1 {
				t.Fatalf("%d mismatches, want 1:\n%s", bad, out.String())
			}
		})
	}
}

func TestUntalliedPassesACorrectServer(t *testing.T) {
	orders := correctOrders()
	orders["o4"] = fakeOrder{uncaptured: 1} // three pages
	var out strings.Builder
	if bad := untallied(context.Background(), fakeServer(t, orders), tallyOf(orders), time.Now(), &out); bad != 0 {
		t.Fatalf("every order listed is tallied: %d mismatches\n%s", bad, out.String())
	}
}

// An order the server made but never acknowledged (an error answered after
// the commit, or a retried create run again rather than replayed) is not in
// the tally, so verify, which reads the tallied orders, cannot see it.
func TestUntalliedReportsAnOrderNoAcknowledgedCreateMade(t *testing.T) {
	acked := correctOrders()
	held := correctOrders()
	held["o2-again"] = fakeOrder{uncaptured: 1000}
	c := fakeServer(t, held)
	if bad := verify(context.Background(), c, tallyOf(acked), io.Discard); bad != 0 {
		t.Fatalf("verify: %d mismatches; this test is about what it cannot see", bad)
	}
	var out strings.Builder
	if bad := untallied(context.Background(), c, tallyOf(acked), time.Now(), &out); bad != 1 || !strings.Contains(out.String(), "o2-again") {
		t.Fatalf("%d mismatches, want 1 naming o2-again:\n%s", bad, out.String())
	}
}

func TestUntalliedReportsAnOrderMissingFromTheList(t *testing.T) {
	acked := correctOrders()
	held := correctOrders()
	delete(held, "o1")
	var out strings.Builder
	if bad := untallied(context.Background(), fakeServer(t, held), tallyOf(acked), time.Now(), &out); bad != 1 {
		t.Fatalf("%d mismatches, want 1:\n%s", bad, out.String())
	}
}

func TestPct(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Millisecond
	}
	if got := pct(nil, .99); got != 0 {
		t.Errorf("pct of nothing = %s", got)
	}
	if got := pct(ds, 1); got != 100*time.Millisecond {
		t.Errorf("pct 1 = %s, want the max", got)
	}
	// The nearest rank, neither below (a latency target it decides would be
	// passed by rounding down) nor one rank above.
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{.5, 50 * time.Millisecond}, {.95, 95 * time.Millisecond}, {.99, 99 * time.Millisecond}, {0, time.Millisecond}} {
		if got := pct(ds, c.p); got != c.want {
			t.Errorf("pct %v of 1..100 ms = %s, want %s", c.p, got, c.want)
		}
	}
	if got := pct(ds[:3], .5); got != 2*time.Millisecond {
		t.Errorf("pct .5 of 1, 2, 3 ms = %s, want 2ms", got)
	}
}
