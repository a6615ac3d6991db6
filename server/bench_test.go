package server

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkGetOrder measures GET /v1/orders/{id} through the real handler
// (auth, store read, rendering, encoding, logging, metrics) without a network.
//
//	go test -run '^$' -bench GetOrder -benchmem ./server/
func BenchmarkGetOrder(b *testing.B) {
	e := newEnv(b, false)
	o := e.order("5560000001", "invoice")
	h := e.ts.Config.Handler
	path := "/v1/orders/" + o["id"].(string)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", e.auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
