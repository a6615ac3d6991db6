package server

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// exposition is a /metrics page parsed by parseExposition: each sample's
// value by its series (name and labels, labels sorted), and each family's
// type.
type exposition struct {
	samples map[string]float64
	types   map[string]string
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// sample is one parsed sample line.
type sample struct {
	name   string
	labels map[string]string
	order  []string // label names as written
	value  float64
}

// series names a sample by its name and sorted labels, without le when
// drop is "le".
func (s sample) series(drop string) string {
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		if n != drop {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(s.name)
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, s.labels[n])
	}
	b.WriteByte('}')
	return b.String()
}

// parseSample parses a sample line of the text format 0.0.4 strictly:
// metric and label name grammar, label values quoted with only \\, \" and
// \n escaped, a value ParseFloat reads (or ±Inf, NaN), an optional integer
// timestamp.
func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	if !metricName.MatchString(s.name) {
		return s, fmt.Errorf("metric name %q", s.name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				return s, fmt.Errorf("label without =")
			}
			n := rest[:eq]
			if !labelName.MatchString(n) || strings.HasPrefix(n, "__") {
				return s, fmt.Errorf("label name %q", n)
			}
			if _, dup := s.labels[n]; dup {
				return s, fmt.Errorf("label %q twice", n)
			}
			rest = rest[eq+1:]
			if !strings.HasPrefix(rest, `"`) {
				return s, fmt.Errorf("label %q: value not quoted", n)
			}
			rest = rest[1:]
			var v strings.Builder
			closed := false
			for len(rest) > 0 && !closed {
				c := rest[0]
				rest = rest[1:]
				switch c {
				case '"':
					closed = true
				case '\\':
					if len(rest) == 0 {
						return s, fmt.Errorf("label %q: trailing backslash", n)
					}
					switch rest[0] {
					case '\\':
						v.WriteByte('\\')
					case '"':
						v.WriteByte('"')
					case 'n':
						v.WriteByte('\n')
					default:
						return s, fmt.Errorf("label %q: escape \\%c is not in the text format", n, rest[0])
					}
					rest = rest[1:]
				case '\n':
					return s, fmt.Errorf("label %q: raw newline", n)
				default:
					v.WriteByte(c)
				}
			}
			if !closed {
				return s, fmt.Errorf("label %q: unterminated value", n)
			}
			s.labels[n] = v.String()
			s.order = append(s.order, n)
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
			} else if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("after label %q: %q", n, rest)
			}
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return s, fmt.Errorf("no space before the value")
	}
	fields := strings.Split(rest[1:], " ")
	if len(fields) < 1 || len(fields) > 2 {
		return s, fmt.Errorf("value and timestamp %q", rest)
	}
	switch fields[0] {
	case "+Inf":
		s.value = math.Inf(1)
	case "-Inf":
		s.value = math.Inf(-1)
	case "NaN":
		s.value = math.NaN()
	default:
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || strings.ContainsAny(fields[0], "_xXpP") {
			return s, fmt.Errorf("value %q", fields[0])
		}
		s.value = v
	}
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("timestamp %q", fields[1])
		}
	}
	return s, nil
}

// familyOf is the family a sample of name belongs to given the declared
// types: a histogram's _bucket, _sum and _count belong to it.
func familyOf(name string, types map[string]string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && types[base] == "histogram" {
			return base
		}
	}
	return name
}

// parseExposition checks page against the Prometheus text format 0.0.4 and
// its histogram rules, failing t on the first violation.
func parseExposition(t testing.TB, page string) exposition {
	t.Helper()
	ex, err := checkExposition(page)
	if err != nil {
		t.Fatalf("%v\n%s", err, page)
	}
	return ex
}

// expositionError is a violation checkExposition found.
type expositionError struct{ error }

// checkExposition parses page, answering its first violation of the text
// format.
func checkExposition(page string) (ex exposition, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(expositionError)
			if !ok {
				panic(p)
			}
			err = e.error
		}
	}()
	t := struct{ Fatalf func(string, ...any) }{func(format string, a ...any) { panic(expositionError{fmt.Errorf(format, a...)}) }}
	ex = exposition{samples: map[string]float64{}, types: map[string]string{}}
	if page != "" && !strings.HasSuffix(page, "\n") {
		t.Fatalf("the page does not end with a line feed")
	}
	help := map[string]bool{}
	done := map[string]bool{}    // families whose lines ended
	sampled := map[string]bool{} // families with a sample so far
	current := ""
	var all []sample
	for n, line := range strings.Split(strings.TrimSuffix(page, "\n"), "\n") {
		fail := func(format string, a ...any) {
			t.Fatalf("line %d %q: %s", n+1, line, fmt.Sprintf(format, a...))
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			f := strings.SplitN(line, " ", 4)
			if len(f) < 3 || (f[1] != "HELP" && f[1] != "TYPE") {
				continue // a comment
			}
			name := f[2]
			if !metricName.MatchString(name) {
				fail("family name")
			}
			if sampled[name] || done[name] {
				fail("%s after the family's samples", f[1])
			}
			switch f[1] {
			case "HELP":
				if help[name] {
					fail("HELP twice")
				}
				help[name] = true
				if len(f) == 4 && strings.Contains(strings.NewReplacer(`\\`, "", `\n`, "").Replace(f[3]), `\`) {
					fail("HELP escape other than \\\\ and \\n")
				}
			case "TYPE":
				if _, dup := ex.types[name]; dup {
					fail("TYPE twice")
				}
				if len(f) != 4 {
					fail("TYPE without a type")
				}
				switch f[3] {
				case "counter", "gauge", "histogram", "summary", "untyped":
				default:
					fail("type %q", f[3])
				}
				ex.types[name] = f[3]
			}
			if current != name {
				if current != "" {
					done[current] = true
				}
				current = name
			}
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			fail("%v", err)
		}
		fam := familyOf(s.name, ex.types)
		if _, ok := ex.types[fam]; !ok {
			fail("sample of family %s, which has no TYPE before it", fam)
		}
		if fam != current {
			if done[fam] {
				fail("family %s's samples are not together", fam)
			}
			if current != "" {
				done[current] = true
			}
			current = fam
		}
		sampled[fam] = true
		key := s.series("")
		if _, dup := ex.samples[key]; dup {
			fail("series %s twice", key)
		}
		ex.samples[key] = s.value
		all = append(all, s)
		switch ex.types[fam] {
		case "counter":
			if s.value < 0 || math.IsNaN(s.value) {
				fail("counter value %v", s.value)
			}
		case "histogram":
			_, hasLe := s.labels["le"]
			if strings.HasSuffix(s.name, "_bucket") != hasLe {
				fail("le on a sample that is no bucket, or a bucket without le")
			}
			if hasLe && s.order[len(s.order)-1] != "le" {
				fail("le is not the last label")
			}
		}
	}
	// Histograms: per series, le increasing, counts cumulative, +Inf the count.
	type hist struct {
		les    []float64
		counts []float64
	}
	hists := map[string]*hist{}
	var keys []string
	for _, s := range all {
		if ex.types[familyOf(s.name, ex.types)] != "histogram" || !strings.HasSuffix(s.name, "_bucket") {
			continue
		}
		base := strings.TrimSuffix(s.name, "_bucket")
		k := sample{name: base, labels: s.labels}.series("le")
		h := hists[k]
		if h == nil {
			h = &hist{}
			hists[k] = h
			keys = append(keys, k)
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if s.labels["le"] == "+Inf" {
			le, err = math.Inf(1), nil
		}
		if err != nil {
			t.Fatalf("%s: le %q", k, s.labels["le"])
		}
		if n := len(h.les); n > 0 && (le <= h.les[n-1] || s.value < h.counts[n-1]) {
			t.Fatalf("%s: bucket le=%v count %v after le=%v count %v", k, le, s.value, h.les[n-1], h.counts[n-1])
		}
		h.les = append(h.les, le)
		h.counts = append(h.counts, s.value)
	}
	for _, k := range keys {
		h := hists[k]
		base, labels, _ := strings.Cut(k, "{")
		count, okc := ex.samples[base+"_count{"+labels]
		sum, oks := ex.samples[base+"_sum{"+labels]
		n := len(h.les)
		if !math.IsInf(h.les[n-1], 1) || !okc || !oks || h.counts[n-1] != count {
			t.Fatalf("%s: last bucket le=%v count %v, _count %v (%v), _sum %v (%v)", k, h.les[n-1], h.counts[n-1], count, okc, sum, oks)
		}
		if sum < 0 || math.IsNaN(sum) || (count == 0 && sum != 0) {
			t.Fatalf("%s: _sum %v with _count %v", k, sum, count)
		}
	}
	for _, s := range all {
		if base, ok := strings.CutSuffix(s.name, "_count"); ok && ex.types[base] == "histogram" && hists[sample{name: base, labels: s.labels}.series("")] == nil {
			t.Fatalf("%s: a _count without buckets", s.series(""))
		}
	}
	return ex, nil
}

// scrape fetches base+"/metrics" and parses it strictly, checking the
// Content-Type of the text format.
func scrape(t testing.TB, client *http.Client, url string) exposition {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	return parseExposition(t, string(b))
}

// TestExpositionCheckerRefusesBadPages: the checker the metrics tests rely
// on finds each violation of the format it is meant to find.
func TestExpositionCheckerRefusesBadPages(t *testing.T) {
	good := "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"\\\\\\n\"} 3\n" +
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5e-05\nh_count 2\n"
	ex, err := checkExposition(good)
	if err != nil || ex.samples[`a_total{x="q\"\\\n"}`] != 3 || ex.samples["h_count{}"] != 2 {
		t.Fatalf("good page: %v %v", err, ex.samples)
	}
	for name, page := range map[string]string{
		"no final line feed":     "# TYPE a counter\na 1",
		"sample before TYPE":     "a 1\n# TYPE a counter\n",
		"TYPE twice":             "# TYPE a counter\n# TYPE a counter\na 1\n",
		"HELP twice":             "# HELP a x\n# HELP a y\n# TYPE a counter\na 1\n",
		"HELP after samples":     "# TYPE a counter\na 1\n# HELP a x\n",
		"family split":           "# TYPE a counter\n# TYPE b counter\na 1\nb 1\na{x=\"1\"} 1\n",
		"Go escape in a label":   "# TYPE a counter\na{x=\"\\t\"} 1\n",
		"unicode escape":         "# TYPE a counter\na{x=\"\\u00e9\"} 1\n",
		"bad label name":         "# TYPE a counter\na{1x=\"1\"} 1\n",
		"reserved label name":    "# TYPE a counter\na{__x=\"1\"} 1\n",
		"bad metric name":        "# TYPE a-b counter\na-b 1\n",
		"series twice":           "# TYPE a counter\na{x=\"1\"} 1\na{x=\"1\"} 2\n",
		"negative counter":       "# TYPE a counter\na -1\n",
		"buckets not cumulative": "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"le not increasing":      "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"+Inf not the count":     "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
		"no +Inf bucket":         "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
		"count without buckets":  "# TYPE h histogram\nh_sum 1\nh_count 1\n",
		"bad value":              "# TYPE a counter\na one\n",
		"unquoted label":         "# TYPE a counter\na{x=1} 1\n",
	} {
		if _, err := checkExposition(page); err == nil {
			t.Errorf("%s: accepted %q", name, page)
		}
	}
}

// TestMetricsPageAfterOddRequests: whatever a client sends (invented
// methods, paths with quotes, backslashes, newlines, non-ASCII, token
// paths, HEAD and OPTIONS, refusals before routing), the page stays in the
// text format and its labels take only bounded values: the method one of
// nine or "other", the route a registered pattern or "unmatched", the
// status an HTTP status.
func TestMetricsPageAfterOddRequests(t *testing.T) {
	e := newEnv(t, false)
	id := e.order("5560000001", "invoice")["id"].(string)
	h := e.ts.Config.Handler
	odd := []struct{ method, target string }{
		{"GET", "/v1/orders/" + id}, {"HEAD", "/v1/orders/" + id}, {"OPTIONS", "/v1/orders/" + id},
		{"PUT", "/v1/orders/" + id}, {"GET", `/v1/orders/a"b\c`}, {"GET", "/v1/orders/%22%5C%0A"},
		{"GET", "/nope/%0Aroute=\"x\""}, {"GET", "/v1/orders//x"}, {"GET", "/v1/orders/x%2Fcapture"},
		{"GET", "/v1/orders?stauts=x"}, {"GET", "/v1/orders?id=%zz"}, {"GET", "/é/ü"},
		{"BREW", "/healthz"}, {`M"X`, "/metrics"}, {"m\\x", "/readyz"}, {"get", "/healthz"},
		{"GET", "/v1/authorization-tokens/abc%22def/order"}, {"HEAD", "/metrics"}, {"TRACE", "/"},
		{"CONNECT", "/"}, {"PATCH", "/v1/orders/" + id}, {"DELETE", "/v1/customer-tokens/x"},
		{"GET", "/checkout/m/s"}, {"POST", "/oauth/token"}, {"GET", "/documents/a/b/c"},
	}
	for _, o := range odd {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method = o.method
		u, err := url.ParseRequestURI(o.target)
		if err != nil {
			u = &url.URL{Path: o.target}
		}
		r.URL, r.RequestURI = u, o.target
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code < 100 || rec.Code > 599 {
			t.Errorf("%s %s answered %d", o.method, o.target, rec.Code)
		}
	}
	// And the same through a real connection, where net/http reads them.
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"BREW /healthz", "GET /v1/orders/\"x\"", "GET /%E2%80%A8/x", "OPTIONS *", "GET /v1/orders/a\\b"} {
		fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: kassa\r\nConnection: keep-alive\r\n\r\n", line)
	}
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: kassa\r\nConnection: close\r\n\r\n")
	io.Copy(io.Discard, conn)
	conn.Close()

	ex := scrape(t, http.DefaultClient, e.ts.URL+"/metrics")
	routes := map[string]bool{"unmatched": true, "/metrics": true}
	for _, mp := range e.srv.served {
		_, p, _ := strings.Cut(mp, " ")
		routes[p] = true
	}
	methods := map[string]bool{"other": true}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"} {
		methods[m] = true
	}
	n := 0
	for k := range ex.samples {
		s, err := parseSample(k[:len(k)-1] + "} 0")
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := s.labels["route"]; ok && !routes[r] {
			t.Errorf("%s: route label %q is no registered pattern", k, r)
		}
		if m, ok := s.labels["method"]; ok && !methods[m] {
			t.Errorf("%s: method label %q is unbounded", k, m)
		}
		if st, ok := s.labels["status"]; ok {
			if c, err := strconv.Atoi(st); err != nil || c < 100 || c > 599 {
				t.Errorf("%s: status label %q", k, st)
			}
		}
		if strings.HasPrefix(k, "kassa_http_requests_total") {
			n += int(ex.samples[k])
		}
	}
	// Every request counted: the order's two (mint, create), the odd ones
	// and the six on the connection ("OPTIONS *" included).
	if want := 2 + len(odd) + 6; n != want {
		t.Errorf("kassa_http_requests_total sums to %d, want %d", n, want)
	}
}

// TestMetricsUnderConcurrentLoad: while 16 clients send requests of known
// outcomes, every scrape parses, no series decreases from one scrape to the
// next, and afterwards each (method, route, status) counter has grown by
// exactly the requests sent with it, each route's latency histogram by as
// many, and the commit histogram by the store writes the requests made.
func TestMetricsUnderConcurrentLoad(t *testing.T) {
	m := NewMetrics()
	clock := NewClock(true)
	e := newEnvOn(t, false, clock, InstrumentStore(openStore(t, clock.Now), m), func(c *Config) { c.Metrics = m })
	id := e.order("5560000001", "invoice")["id"].(string)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	before := scrape(t, client, e.ts.URL+"/metrics")

	type call struct {
		method, path, auth, body string
		status                   int
		route                    string
		commits                  int
	}
	mint := `{"country":"SE","currency":"SEK","locale":"sv-SE","customer":{"companyId":"5560000001"},"paymentMethod":{"type":"invoice"}}`
	calls := []call{
		{"GET", "/healthz", "", "", 200, "/healthz", 0},
		{"GET", "/v1/orders/" + id, e.auth, "", 200, "/v1/orders/:orderId", 0},
		{"HEAD", "/v1/orders/" + id, e.auth, "", 200, "/v1/orders/:orderId", 0},
		{"GET", "/v1/orders/missing", e.auth, "", 404, "/v1/orders/:orderId", 0},
		{"GET", "/v1/orders/" + id, "", "", 401, "/v1/orders/:orderId", 0},
		{"GET", "/openapi.json", "", "", 200, "/openapi.json", 0}, // a body larger than net/http's buffer
		{"GET", "/no/such/route", "", "", 404, "unmatched", 0},
		{"BREW", "/healthz", "", "", 405, "unmatched", 0},
		{"POST", "/sandbox/v1/authorization-tokens", e.auth, mint, 201, "/sandbox/v1/authorization-tokens", 1},
	}
	const clients, rounds = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := calls[(c+i)%len(calls)]
				var body io.Reader
				if k.body != "" {
					body = strings.NewReader(k.body)
				}
				r, _ := http.NewRequest(k.method, e.ts.URL+k.path, body)
				if k.body != "" {
					r.Header.Set("Content-Type", "application/json")
				}
				if k.auth != "" {
					r.Header.Set("Authorization", k.auth)
				}
				resp, err := client.Do(r)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != k.status {
					errs <- fmt.Errorf("%s %s: %d, want %d", k.method, k.path, resp.StatusCode, k.status)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	scrapes := make(chan int)
	go func() {
		n, last := 0, before
		// Sent however the goroutine ends: a scrape that fails ends it
		// through t.Fatal's Goexit, and the test must then fail, not wait
		// for its timeout.
		defer func() { scrapes <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cur := scrape(t, client, e.ts.URL+"/metrics")
			n++
			for k, v := range last.samples {
				if family, _, _ := strings.Cut(k, "{"); cur.types[family] == "gauge" {
					continue // the process's goroutines and memory go both ways
				}
				if cur.samples[k] < v {
					t.Errorf("scrape %d: %s went from %v to %v", n, k, v, cur.samples[k])
				}
			}
			last = cur
		}
	}()
	wg.Wait()
	close(stop)
	n := <-scrapes
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := scrape(t, client, e.ts.URL+"/metrics")

	want := map[string]float64{}
	latency := map[string]float64{}
	commits := 0.0
	for c := range clients {
		for i := range rounds {
			k := calls[(c+i)%len(calls)]
			want[fmt.Sprintf(`kassa_http_requests_total{method=%q,route=%q,status="%d"}`, k.method, k.route, k.status)]++
			latency[k.route]++
			commits += float64(k.commits)
		}
	}
	// The scrapes before this one, the one before the load included.
	want[`kassa_http_requests_total{method="GET",route="/metrics",status="200"}`] += float64(n + 1)
	latency["/metrics"] += float64(n + 1)
	if k := `kassa_http_requests_total{method="BREW",route="unmatched",status="405"}`; want[k] > 0 {
		want[`kassa_http_requests_total{method="other",route="unmatched",status="405"}`] += want[k]
		delete(want, k)
	}
	for k, v := range after.samples {
		if !strings.HasPrefix(k, "kassa_http_requests_total") {
			continue
		}
		if got := v - before.samples[k]; got != want[k] {
			t.Errorf("%s grew by %v, want %v", k, got, want[k])
		}
	}
	for k, v := range want {
		if _, ok := after.samples[k]; !ok && v > 0 {
			t.Errorf("%s missing, want %v", k, v)
		}
	}
	for r, v := range latency {
		k := fmt.Sprintf(`kassa_http_request_duration_seconds_count{route=%q}`, r)
		if got := after.samples[k] - before.samples[k]; got != v {
			t.Errorf("%s grew by %v, want %v", k, got, v)
		}
	}
	if got := after.samples["kassa_store_commit_duration_seconds_count{}"] - before.samples["kassa_store_commit_duration_seconds_count{}"]; got != commits {
		t.Errorf("commits grew by %v, want %v", got, commits)
	}
	t.Logf("%d requests, %d scrapes during the load", clients*rounds, n)
}

// TestMetricsShowTheProcess: /metrics carries the process's goroutines and Go
// memory as gauges (an overload probe had nothing to count goroutines by),
// and the goroutine count follows goroutines started and ended.
func TestMetricsShowTheProcess(t *testing.T) {
	e := newEnv(t, false)
	before := scrape(t, http.DefaultClient, e.ts.URL+"/metrics")
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes"} {
		if before.types[name] != "gauge" || before.samples[name+"{}"] <= 0 {
			t.Fatalf("%s: type %q, value %v; want a positive gauge", name, before.types[name], before.samples[name+"{}"])
		}
	}
	if heap, sys := before.samples["go_memstats_heap_alloc_bytes{}"], before.samples["go_memstats_sys_bytes{}"]; heap > sys {
		t.Errorf("heap objects %v exceed the memory obtained from the OS %v", heap, sys)
	}
	const parked = 200
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(parked)
	for range parked {
		go func() {
			started.Done()
			<-release
		}()
	}
	started.Wait()
	during := scrape(t, http.DefaultClient, e.ts.URL+"/metrics")
	close(release)
	if got := during.samples["go_goroutines{}"] - before.samples["go_goroutines{}"]; got < parked/2 {
		t.Errorf("go_goroutines grew by %v with %d goroutines parked, want at least %d", got, parked, parked/2)
	}
}
