package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// scale measures captures per second through HTTP on PostgreSQL with 1, 2
// and 3 replicas, and in the same run the baseline: raw pgx single-row
// INSERT transactions of the same size at the same concurrency. Each worker
// captures the lines of its own orders (50 lines unless -lines says
// otherwise) one partial capture at a time, spreading its requests over the
// replicas.
func scale(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kassa-load scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "path to the kassa binary")
	dbURL := fs.String("database-url", os.Getenv("KASSA_DATABASE_URL"), "PostgreSQL URL (KASSA_DATABASE_URL)")
	counts := fs.String("replicas", "1,2,3", "replica counts to measure")
	conc := fs.Int("concurrency", 16, "concurrent clients")
	dur := fs.Duration("duration", 10*time.Second, "measuring time per step")
	lines := fs.Int("lines", 50, "order lines per order, each captured on its own")
	merchants := fs.Int("merchants", 1, "merchants the clients are spread over (document numbers are gapless per merchant, so one merchant's captures commit one at a time)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *dur <= 0 || *dur > time.Hour || *bin == "" || *dbURL == "" || *conc < 1 || *merchants < 1 || *merchants > 100 || *lines < 1 || *lines > 1000 {
		fmt.Fprintln(stderr, "usage: kassa-load scale -bin PATH -database-url URL [-replicas 1,2,3] [-concurrency 16] [-duration 10s] [-merchants 1] [-lines 50]")
		return 2
	}
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 || n > 8 {
			fmt.Fprintln(stderr, "kassa-load scale: bad -replicas", *counts)
			return 2
		}
		ns = append(ns, n)
	}
	fmt.Fprintf(stdout, "scale: %d clients over %d merchant(s), %s per step, %d-line orders, partial captures of one line each\n", *conc, *merchants, *dur, *lines)
	fmt.Fprintf(stdout, "%-28s %10s %9s %9s %9s %6s\n", "", "per s", "p50", "p99", "max", "errors")
	var size int
	results := map[int]float64{}
	for _, n := range ns {
		cl, err := startCluster(*bin, *dbURL, n, 0, "scale", "scale-secret-123")
		if err != nil {
			fmt.Fprintln(stderr, "kassa-load scale:", err)
			return 1
		}
		rate, lat, errs, sz, err := measureCaptures(cl, n, *merchants, *lines, *conc, *dur)
		if err != nil {
			cl.stop()
			fmt.Fprintln(stderr, "kassa-load scale:", err)
			return 1
		}
		cl.stop()
		size = max(size, sz)
		results[n] = rate
		fmt.Fprintf(stdout, "%-28s %10.1f %9s %9s %9s %6d\n", fmt.Sprintf("captures, %d replica(s)", n), rate,
			pct(lat, .5).Round(10*time.Microsecond), pct(lat, .99).Round(10*time.Microsecond), pct(lat, 1).Round(10*time.Microsecond), errs)
	}
	rate, lat, err := rawInserts(*dbURL, *conc, *dur, size)
	if err != nil {
		fmt.Fprintln(stderr, "kassa-load scale: baseline:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%-28s %10.1f %9s %9s %9s %6d\n", fmt.Sprintf("raw pgx inserts (%d B)", size), rate,
		pct(lat, .5).Round(10*time.Microsecond), pct(lat, .99).Round(10*time.Microsecond), pct(lat, 1).Round(10*time.Microsecond), 0)
	for _, n := range ns {
		fmt.Fprintf(stdout, "captures with %d replica(s) / raw inserts: %.2f (target ≥ 0.30)\n", n, results[n]/rate)
	}
	return 0
}

// measureCaptures runs conc workers for d against the cluster's replicas,
// worker w acting for merchant w % merchants, and returns captures per
// second, sorted latencies, errors and the size of an order document.
func measureCaptures(cl *cluster, n, merchants, orderLines, conc int, d time.Duration) (float64, []time.Duration, int64, int, error) {
	creds := [][2]string{{cl.id, cl.sec}}
	for m := 1; m < merchants; m++ {
		r, err := cl.client(0).do(context.Background(), "POST", "/sandbox/v1/merchants", map[string]any{"name": fmt.Sprint("scale ", m)}, "")
		if err != nil || r.status != 201 {
			return 0, nil, 0, 0, fmt.Errorf("create merchant: %v %d %s", err, r.status, r.body)
		}
		var c struct{ ClientID, ClientSecret string }
		json.Unmarshal(r.body, &c)
		creds = append(creds, [2]string{c.ClientID, c.ClientSecret})
	}
	// clients[m][i]: merchant m on replica i.
	clients := make([][]*client, merchants)
	for m := range clients {
		for i := range n {
			clients[m] = append(clients[m], newClient(cl.bases[i], creds[m][0], creds[m][1], 64))
		}
	}
	var col collector
	var errs atomic.Int64
	var size atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		mine0 := clients[w%merchants]
		wg.Go(func() {
			clients := mine0
			var mine []time.Duration
			for k := 0; ctx.Err() == nil; k++ {
				lines, id, sz := newBigOrder(clients[(w+k)%n], orderLines, fmt.Sprintf("scale-%d-%d-%d", time.Now().UnixNano(), w, k))
				if id == "" {
					errs.Add(1)
					continue
				}
				size.Store(int64(sz))
				for j, l := range lines {
					if ctx.Err() != nil {
						break
					}
					t0 := time.Now()
					r, err := clients[(w+j)%n].do(context.Background(), "POST", "/v1/orders/"+id+"/partialcapture",
						map[string]any{"orderLines": []any{map[string]any{"id": l.ID}}, "totalCaptureAmount": l.TotalAmount},
						fmt.Sprintf("%s-%d", id, j))
					if err != nil || r.status != 200 {
						errs.Add(1)
						continue
					}
					mine = append(mine, time.Since(t0))
				}
			}
			col.add(mine)
		})
	}
	wg.Wait()
	rate, lat := col.result(time.Since(start))
	return rate, lat, errs.Load(), int(size.Load()), nil
}

// collector gathers the latencies of workers that each keep their own.
type collector struct {
	mu  sync.Mutex
	lat []time.Duration
}

func (c *collector) add(mine []time.Duration) {
	c.mu.Lock()
	c.lat = append(c.lat, mine...)
	c.mu.Unlock()
}

// result is operations per second over elapsed and the sorted latencies.
func (c *collector) result(elapsed time.Duration) (float64, []time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.Sort(c.lat)
	return float64(len(c.lat)) / elapsed.Seconds(), c.lat
}

type bigLine struct {
	ID          string `json:"id"`
	TotalAmount int64  `json:"totalAmount"`
}

// newBigOrder creates an order of size lines and returns its lines (not timed as captures).
func newBigOrder(c *client, size int, key string) ([]bigLine, string, int) {
	r, err := c.do(context.Background(), "POST", "/sandbox/v1/authorization-tokens", map[string]any{"country": "SE", "currency": "SEK",
		"locale": "sv-SE", "customer": map[string]any{"companyId": "5560000001"}}, "")
	if err != nil || r.status != 201 {
		return nil, "", 0
	}
	var tok struct{ AuthorizationToken string }
	json.Unmarshal(r.body, &tok)
	lines := make([]any, size)
	for i := range lines {
		lines[i] = map[string]any{"description": fmt.Sprint("Item ", i), "quantity": 1, "unitPrice": 1000 + i, "vat": 2500}
	}
	r, err = c.do(context.Background(), "POST", "/v1/authorization-tokens/"+tok.AuthorizationToken+"/order",
		map[string]any{"country": "SE", "currency": "SEK", "locale": "sv-SE", "orderLines": lines}, key)
	if err != nil || r.status != 200 {
		return nil, "", 0
	}
	var created struct{ OrderID string }
	json.Unmarshal(r.body, &created)
	r, err = c.do(context.Background(), "GET", "/v1/orders/"+created.OrderID, nil, "")
	if err != nil || r.status != 200 {
		return nil, "", 0
	}
	var o struct {
		Uncaptured struct{ OrderLines []bigLine } `json:"uncaptured"`
	}
	json.Unmarshal(r.body, &o)
	return o.Uncaptured.OrderLines, created.OrderID, len(r.body)
}

// rawInserts is the baseline: conc goroutines each committing single-row
// INSERT transactions of size bytes for d.
func rawInserts(url string, conc int, d time.Duration, size int) (float64, []time.Duration, error) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return 0, nil, err
	}
	cfg.MaxConns = int32(conc)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS kassa_load_raw (id bigserial PRIMARY KEY, body jsonb NOT NULL)`); err != nil {
		return 0, nil, err
	}
	defer pool.Exec(ctx, `DROP TABLE IF EXISTS kassa_load_raw`)
	// Text, not []byte: the exec and simple_protocol query modes (a URL
	// for a transaction pooler) send []byte as bytea, which jsonb refuses.
	b, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", max(size-12, 1))})
	body := string(b)
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var col collector
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			for tctx.Err() == nil {
				t0 := time.Now()
				tx, err := pool.Begin(ctx)
				if err == nil {
					if _, err = tx.Exec(ctx, `INSERT INTO kassa_load_raw (body) VALUES ($1)`, body); err == nil {
						err = tx.Commit(ctx)
					} else {
						tx.Rollback(ctx)
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			col.add(mine)
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, nil, e.(error)
	}
	rate, lat := col.result(time.Since(start))
	return rate, lat, nil
}
