package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage/memory"
)

// TestOpenAPIWithoutSandbox: a server with the sandbox off describes only
// what it serves. Its /openapi.json listed the /sandbox/v1 operations, which
// it answers 404, so a client generated from it called routes that are not
// there.
func TestOpenAPIWithoutSandbox(t *testing.T) {
	for _, on := range []bool{true, false} {
		s := memoryServer(Config{Sandbox: on})
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
		var doc struct {
			Paths map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); rec.Code != 200 || err != nil {
			t.Fatalf("sandbox %v: %d %v", on, rec.Code, err)
		}
		sandbox := 0
		for p := range doc.Paths {
			if strings.HasPrefix(p, "/sandbox/") {
				sandbox++
			}
		}
		if (sandbox > 0) != on || doc.Paths["/v1/orders/{orderId}"] == nil {
			t.Errorf("sandbox %v: %d sandbox paths of %d", on, sandbox, len(doc.Paths))
		}
	}
}

// memoryServer is a server on an empty memory store, with a fixed key and,
// unless c names a logger, a silent one: for tests of its routes and
// documents, which need no durable store.
func memoryServer(c Config) *Server {
	c.Ledger = kassa.New(memory.New(nil), kassa.Options{})
	c.Key = []byte("0123456789abcdef0123456789abcdef")
	if c.Logger == nil {
		c.Logger = quiet
	}
	return New(c)
}
