package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/server"
	"github.com/kassahq/kassa/storage/memory"
)

// kassa's HTTP API under /payments/ of a platform's own mux, beside its
// other routes.
func ExampleServer_Handler() {
	// The ledger links documents and checkout pages through the server,
	// which is made after it: the functions read srv once it is set.
	var srv *server.Server
	ledger := kassa.New(memory.New(nil), kassa.Options{
		DocumentURL: func(o *order.Order, l *order.Ledger) string { return srv.DocumentURL(o, l) },
		CheckoutURL: func(m, s string) string { return srv.CheckoutURL(m, s) },
	})
	srv = server.New(server.Config{
		Ledger:  ledger,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		BaseURL: "https://platform.example.com/payments", // links and Location headers carry the prefix
	})
	mux := http.NewServeMux()
	mux.Handle("/payments/", http.StripPrefix("/payments", srv.Handler()))

	creds, _, err := ledger.EnsureMerchant(context.Background(), kassa.MerchantOptions{Name: "Tiles & Co"})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/payments/v1/sessions", strings.NewReader(
		`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"Tiles","quantity":4,"unitPrice":12500,"vat":2500}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(creds.ClientID, creds.ClientSecret) // or an access token from POST /payments/oauth/token
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)

	var session struct {
		CheckoutURL string `json:"checkoutUrl"` // the page to send the buyer to
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &session); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, strings.HasPrefix(rec.Header().Get("Location"), "/payments/v1/sessions/"))
	fmt.Println(strings.HasPrefix(session.CheckoutURL, "https://platform.example.com/payments/checkout/"))
	// Output:
	// 201 true
	// true
}
