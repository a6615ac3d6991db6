package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func openAPIRouter() (routers.Router, error) {
	specOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.PlainBodyDecoder)
		doc, err := openapi3.NewLoader().LoadFromData(openAPI)
		if err != nil {
			specErr = err
			return
		}
		doc.Servers = nil // match whatever host the test server has
		specRouter, specErr = legacy.NewRouter(doc)
	})
	return specRouter, specErr
}

// validating wraps h so that every response it writes is checked against
// /openapi.json: status, headers' presence and body schema, by kin-openapi
// and by the stricter conformance (conform_test.go). A response the document
// does not describe fails the test.
func validating(t *testing.T, h http.Handler) http.Handler {
	router, err := openAPIRouter()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if r.Method == http.MethodHead || r.Method == http.MethodOptions {
			return // every GET answers HEAD too and every route OPTIONS; the document lists the GETs
		}

		for _, e := range loadConformance().checkResponse(r.Method, r.URL.Path, rec.Code, rec.Header(), rec.Body.Bytes()) {
			t.Errorf("%s %s → %d: %s\nbody: %.300s", r.Method, r.URL.Path, rec.Code, e, rec.Body.String())
		}
		route, params, err := router.FindRoute(r.Clone(context.Background()))
		if err != nil {
			if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
				return // unknown routes are refused by design and are not in the document
			}
			t.Errorf("%s %s answered %d but is not in the OpenAPI document: %v", r.Method, r.URL.Path, rec.Code, err)
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{ExcludeRequestBody: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes(rec.Body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s → %d does not match the OpenAPI document: %v\nbody: %.500s", r.Method, r.URL.Path, rec.Code, err, rec.Body.String())
		}
	})
}
