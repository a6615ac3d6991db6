package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSeparateOpsTakesMetricsOffTheAPI: /metrics tells anyone who can reach
// the API (buyers' browsers reach it for checkout) the merchants' traffic,
// the routes' error rates and the store's latency. With SeparateOps the API
// answers it 404 like any unknown route and its /openapi.json leaves it
// out, while OpsHandler serves it; the health routes stay on both, as load
// balancers probe the port they send traffic to. Without it, the API keeps
// serving /metrics as before.
func TestSeparateOpsTakesMetricsOffTheAPI(t *testing.T) {
	for _, separate := range []bool{false, true} {
		logs := &logBuffer{}
		s := memoryServer(Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Sandbox: true, SeparateOps: separate})
		get := func(h http.Handler, path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec
		}
		api, ops := s.Handler(), s.OpsHandler()
		get(api, "/v1/orders") // a 401 the metrics count
		rec := get(api, "/metrics")
		if separate {
			var p map[string]any
			if rec.Code != http.StatusNotFound || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p["code"] != "route_not_found" {
				t.Errorf("separate: the API answered /metrics %d %s, want 404 route_not_found", rec.Code, rec.Body)
			}
		} else if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "kassa_http_requests_total") {
			t.Errorf("not separate: the API answered /metrics %d", rec.Code)
		}
		for _, p := range []string{"/healthz", "/readyz"} {
			if rec := get(api, p); rec.Code != http.StatusOK {
				t.Errorf("separate %v: the API answered %s %d", separate, p, rec.Code)
			}
		}
		var doc struct {
			Paths map[string]json.RawMessage `json:"paths"`
		}
		if rec := get(api, "/openapi.json"); rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &doc) != nil {
			t.Fatalf("separate %v: /openapi.json %d", separate, rec.Code)
		}
		if _, listed := doc.Paths["/metrics"]; listed == separate || doc.Paths["/healthz"] == nil || doc.Paths["/sandbox/v1/clock"] == nil {
			t.Errorf("separate %v: /openapi.json lists /metrics: %v, of %d paths", separate, listed, len(doc.Paths))
		}

		// The operations handler serves its three routes, and nothing of the API.
		for _, p := range []string{"/healthz", "/readyz"} {
			if rec := get(ops, p); rec.Code != http.StatusOK {
				t.Errorf("separate %v: ops %s %d", separate, p, rec.Code)
			}
		}
		for _, p := range []string{"/v1/orders", "/openapi.json", "/sandbox/v1/clock", "/oauth/token"} {
			if rec := get(ops, p); rec.Code != http.StatusNotFound {
				t.Errorf("separate %v: ops %s %d, want 404", separate, p, rec.Code)
			}
		}
		rec = get(ops, "/metrics")
		body := rec.Body.String()
		if rec.Code != 200 || !strings.Contains(body, `kassa_http_requests_total{method="GET",route="/v1/orders",status="401"} 1`) ||
			!strings.Contains(body, `kassa_http_requests_total{method="GET",route="/healthz",status="200"} 2`) {
			t.Errorf("separate %v: ops /metrics %d:\n%s", separate, rec.Code, body)
		}
		// Scrapes and probes every few seconds would bury the API's lines
		// at info: the operations handler logs its requests at debug.
		// The API's five requests; none of the operations handler's seven.
		n := 0
		for _, l := range logs.lines(t) {
			if l["msg"] == "request" {
				n++
			}
		}
		if n != 5 {
			t.Errorf("separate %v: %d request lines at info, want the API's 5:\n%s", separate, n, logs.b.String())
		}
	}
}
