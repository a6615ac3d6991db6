package server

import (
	"bytes"
	"fmt"
	"io"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Metrics is a small Prometheus text-format registry: request counts by
// route, method and status, request latency and store commit latency
// histograms, and the process's goroutines and Go memory. Hand-written
// because the few series kassa exports do not justify the client library's
// dependency tree.
type Metrics struct {
	mu       sync.Mutex
	requests map[reqKey]uint64
	latency  map[string]*histogram // by route
	commits  *histogram
}

type reqKey struct {
	method, route string
	status        int
}

var buckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

type histogram struct {
	counts []uint64 // per bucket, cumulative on output
	sum    float64
	n      uint64
}

func newHistogram() *histogram { return &histogram{counts: make([]uint64, len(buckets))} }

func (h *histogram) observe(v float64) {
	for i, b := range buckets {
		if v <= b {
			h.counts[i]++
			break
		}
	}
	h.sum += v
	h.n++
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics {
	return &Metrics{requests: map[reqKey]uint64{}, latency: map[string]*histogram{}, commits: newHistogram()}
}

// ObserveRequest records one served request.
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[reqKey{method, route, status}]++
	h := m.latency[route]
	if h == nil {
		h = newHistogram()
		m.latency[route] = h
	}
	h.observe(d.Seconds())
}

// ObserveCommit records the latency of one durable store commit.
func (m *Metrics) ObserveCommit(d time.Duration) {
	m.mu.Lock()
	m.commits.observe(d.Seconds())
	m.mu.Unlock()
}

// WriteTo writes the registry in the Prometheus text exposition format.
// The page is rendered under the lock and written after it: every request
// and store commit takes the lock to be counted, so a scraper reading
// slowly, or a client that sends GET /metrics and reads nothing, held
// every other request and write of the server while its write waited.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var page bytes.Buffer
	m.render(&page)
	writeProcess(&page)
	return page.WriteTo(w)
}

// processSamples are the runtime/metrics read for writeProcess, under the
// names of Prometheus's Go collector, so that its dashboards read them: what
// an operator watches under overload (requests queued for the store hold
// goroutines and memory) without a profiler.
var processSamples = []struct{ runtime, name, help string }{
	{"/sched/goroutines:goroutines", "go_goroutines", "Number of goroutines that currently exist."},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects."},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", "Bytes of memory obtained from the OS."},
}

// writeProcess appends the process gauges; runtime/metrics reads them
// without stopping the world, and outside the registry's lock.
func writeProcess(w *bytes.Buffer) {
	read := make([]metrics.Sample, len(processSamples))
	for i, ps := range processSamples {
		read[i].Name = ps.runtime
	}
	metrics.Read(read)
	for i, ps := range processSamples {
		if read[i].Value.Kind() != metrics.KindUint64 {
			continue // not in this Go release
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", ps.name, ps.help, ps.name, ps.name, read[i].Value.Uint64())
	}
}

func (m *Metrics) render(w *bytes.Buffer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# HELP kassa_http_requests_total HTTP requests served, by method, route and status.\n")
	p("# TYPE kassa_http_requests_total counter\n")
	keys := make([]reqKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.route != b.route {
			return a.route < b.route
		}
		if a.method != b.method {
			return a.method < b.method
		}
		return a.status < b.status
	})
	for _, k := range keys {
		p("kassa_http_requests_total{method=%q,route=%q,status=\"%d\"} %d\n", k.method, k.route, k.status, m.requests[k])
	}
	p("# HELP kassa_http_request_duration_seconds HTTP request latency by route.\n")
	p("# TYPE kassa_http_request_duration_seconds histogram\n")
	routes := make([]string, 0, len(m.latency))
	for r := range m.latency {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	for _, r := range routes {
		writeHistogram(p, "kassa_http_request_duration_seconds", fmt.Sprintf("route=%q,", r), m.latency[r])
	}
	p("# HELP kassa_store_commit_duration_seconds Latency of durable store transactions that committed.\n")
	p("# TYPE kassa_store_commit_duration_seconds histogram\n")
	writeHistogram(p, "kassa_store_commit_duration_seconds", "", m.commits)
}

func writeHistogram(p func(string, ...any), name, labels string, h *histogram) {
	var cum uint64
	for i, b := range buckets {
		cum += h.counts[i]
		p("%s_bucket{%sle=\"%s\"} %d\n", name, labels, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	p("%s_bucket{%sle=\"+Inf\"} %d\n", name, labels, h.n)
	trim := labels
	if len(trim) > 0 {
		trim = "{" + trim[:len(trim)-1] + "}"
	}
	p("%s_sum%s %s\n", name, trim, strconv.FormatFloat(h.sum, 'g', -1, 64))
	p("%s_count%s %d\n", name, trim, h.n)
}
