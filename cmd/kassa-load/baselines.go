package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/bolt"
)

const baselineFor = 10 * time.Second

// hammer runs fn from n goroutines for d and returns operations per second
// and the sorted latencies.
func hammer(n int, d time.Duration, fn func(worker, i int) error) (float64, []time.Duration, error) {
	var count atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := fn(w, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				count.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	slices.Sort(lat)
	return float64(count.Load()) / time.Since(start).Seconds(), lat, firstErr
}

// throttled runs GETs at rate per second (spread over n goroutines) for d.
func throttled(n int, rate float64, d time.Duration, fn func() error) ([]time.Duration, error) {
	interval := time.Duration(float64(time.Second) * float64(n) / rate)
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			time.Sleep(interval * time.Duration(w) / time.Duration(n))
			next := time.Now()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				err := fn()
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, d)
				mu.Unlock()
				next = next.Add(interval)
				time.Sleep(time.Until(next))
			}
		}(w)
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, firstErr
}

func sampleOrder(ctx context.Context, c *client, tl *tally) ([]byte, error) {
	for id := range tl.orders {
		r, err := c.do(ctx, "GET", "/v1/orders/"+id, nil, "")
		if err == nil && r.status == 200 {
			return r.body, nil
		}
	}
	return nil, fmt.Errorf("no order to sample")
}

type fixedIDs struct{ n atomic.Int64 }

func (f *fixedIDs) NewID(kind string) string { return fmt.Sprintf("%s-%d", kind, f.n.Add(1)) }

type noSeq struct{}

func (noSeq) Next(string) (int64, error) { return 1, nil }

// storedOrder builds a domain order of about the tool's average size (11 lines).
func storedOrder(ids order.IDSource, now time.Time) (*order.Order, error) {
	req := &order.CreateRequest{Country: "SE", Currency: "SEK", Locale: "sv-SE", StoreID: "store-1"}
	for i := 0; i < 11; i++ {
		d, q, p, v := fmt.Sprintf("Item %d", i), int64(2), int64(100*(i+1)), int64(2500)
		req.OrderLines = append(req.OrderLines, order.LineInput{Description: &d, Quantity: &q, UnitPrice: &p, Vat: &v})
	}
	lines, mode, err := order.ValidateCreate(req, false, ids)
	if err != nil {
		return nil, err
	}
	return order.Create("m", req, lines, mode, order.Authorization{Country: "SE", Currency: "SEK",
		PaymentMethod: order.PaymentMethod{Provider: order.ProviderService, Type: order.PayInvoice}},
		order.Env{Now: now, IDs: ids, Docs: noSeq{}, Policy: order.DefaultPolicy()})
}

func runBaselines(ctx context.Context, c *client, conc int, mutationsPerSec float64, tl *tally, out, progress io.Writer) error {
	body, err := sampleOrder(ctx, c, tl)
	if err != nil {
		return err
	}
	var some string
	for id := range tl.orders {
		some = id
		break
	}
	fmt.Fprintf(out, "\nbaselines (%d concurrent, %s each; order JSON %d bytes)\n", conc, baselineFor, len(body))

	// GET /v1/orders/{id} through kassa, unthrottled: the peak.
	getPeak, getLat, err := hammer(conc, baselineFor, func(int, int) error {
		r, err := c.do(ctx, "GET", "/v1/orders/"+some, nil, "")
		if err == nil && r.status != 200 {
			err = fmt.Errorf("GET answered %d", r.status)
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kassa GET /v1/orders/{id}: %.0f/s (p50 %s, p99 %s)\n", getPeak, pct(getLat, .5), pct(getLat, .99))

	// (a) a bare httprouter handler serving the same JSON.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rt := httprouter.New()
	rt.GET("/v1/orders/:id", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	hs := &http.Server{Handler: rt}
	go hs.Serve(ln)
	defer hs.Close()
	sc := newClient("http://"+ln.Addr().String(), "x", "y", conc)
	static, _, err := hammer(conc, baselineFor, func(int, int) error {
		r, err := sc.do(ctx, "GET", "/v1/orders/x", nil, "")
		if err == nil && r.status != 200 {
			err = fmt.Errorf("static answered %d", r.status)
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "(a) static httprouter handler, same JSON: %.0f/s\n", static)

	// GET at half of the measured peak: latency when not saturated.
	half, err := throttled(conc, getPeak/2, baselineFor, func() error {
		_, err := c.do(ctx, "GET", "/v1/orders/"+some, nil, "")
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kassa GET at half of peak (%.0f/s): p50 %s, p99 %s, max %s\n", getPeak/2, pct(half, .5), pct(half, .99), pct(half, 1))

	dir, err := os.MkdirTemp("", "kassa-load-baseline")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// (b) kassa's own commit path: durable order creates through the store, no HTTP or JSON API.
	st, err := bolt.Open(filepath.Join(dir, "commit.db"), bolt.Options{})
	if err != nil {
		return err
	}
	ids := &fixedIDs{}
	template, err := storedOrder(ids, time.Now())
	if err != nil {
		return err
	}
	commit, _, err := hammer(conc, baselineFor, func(w, i int) error {
		o := template.Clone()
		o.ID = fmt.Sprintf("o-%d-%d", w, i)
		return st.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) })
	})
	st.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "(b) kassa commit path (storage/bolt Update + CreateOrder): %.0f/s\n", commit)

	// (c) bbolt DB.Batch puts of the same record size.
	rec, _ := json.Marshal(template)
	db, err := bbolt.Open(filepath.Join(dir, "batch.db"), 0o600, nil)
	if err != nil {
		return err
	}
	db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("b")); return err })
	batch, _, err := hammer(conc, baselineFor, func(w, i int) error {
		return db.Batch(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte("b")).Put([]byte(fmt.Sprintf("%d-%d", w, i)), rec)
		})
	})
	db.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "(c) bbolt DB.Batch puts (%d bytes): %.0f/s\n", len(rec), batch)

	check := func(name string, ok bool) string {
		if ok {
			return name + ": met"
		}
		return name + ": MISSED"
	}
	fmt.Fprintf(out, "\nratios\n")
	fmt.Fprintf(out, "HTTP mutations / (b) = %.2f  (target ≥ 0.5)  %s\n", mutationsPerSec/commit, check("", mutationsPerSec >= commit/2))
	fmt.Fprintf(out, "HTTP mutations / (c) = %.2f  (target ≥ 3)    %s\n", mutationsPerSec/batch, check("", mutationsPerSec >= 3*batch))
	fmt.Fprintf(out, "GET / (a)            = %.2f  (target ≥ 0.5)  %s\n", getPeak/static, check("", getPeak >= static/2))
	fmt.Fprintf(out, "GET p99 at half peak = %s (target < 5ms)  %s\n", pct(half, .99), check("", pct(half, .99) < 5*time.Millisecond))
	return nil
}
