package company

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"
)

// BenchmarkSearchMillion measures search over a generated directory of one
// million companies: one op is one query from a realistic mix (a name
// prefix, two words, a full name, a registration number). It reports p50
// and p99 latency of the queries and the heap the directory holds.
//
//	go test -run '^$' -bench SearchMillion -benchtime 20000x ./company/
func BenchmarkSearchMillion(b *testing.B) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cs := Generate("SE", 1_000_000, 42)
	d := NewDirectory()
	d.Set("SE", cs)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	queries := []string{"göta", "nordisk bygg", "sten logistik", cs[123456].Name, cs[999].ID, "Mälar Data", "fjäll tr", "skånska", "logistik", "bygg göta"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := queries[i%len(queries)]
		t0 := time.Now()
		res := d.Search("SE", q, 20)
		lat = append(lat, time.Since(t0))
		if len(res) == 0 {
			b.Fatalf("no result for %q", q)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	if rss, ok := residentMiB(); ok {
		b.ReportMetric(rss, "rss-MiB")
	}
	runtime.KeepAlive(d)
}

// residentMiB reads the process's resident set size from /proc (Linux).
func residentMiB() (float64, bool) {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(raw), &size, &resident); err != nil {
		return 0, false
	}
	return float64(resident*int64(os.Getpagesize())) / (1 << 20), true
}
