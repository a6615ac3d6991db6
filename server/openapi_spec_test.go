package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIStatesSpecShapes checks /openapi.json against what the interface
// spec states and the server enforces, where reflection over the Go types alone
// got it wrong: one Go type behind two spec shapes, bounds and enums on fields
// of types without them, and the deprecated parameter and field.
func TestOpenAPIStatesSpecShapes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(generatedOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	get := func(path ...string) any {
		var v any = doc
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[p]
		}
		return v
	}
	schema := func(name string) map[string]any {
		s, _ := schemas[name].(map[string]any)
		if s == nil {
			t.Errorf("no schema %s", name)
			return map[string]any{}
		}
		return s
	}
	props := func(name string) map[string]any {
		p, _ := schema(name)["properties"].(map[string]any)
		return p
	}
	required := func(name string) []string {
		var out []string
		r, _ := schema(name)["required"].([]any)
		for _, v := range r {
			out = append(out, v.(string))
		}
		return out
	}
	bodyRef := func(path, method string) string {
		ref, _ := get("paths", path, method, "requestBody", "content", "application/json", "schema", "$ref").(string)
		return strings.TrimPrefix(ref, "#/components/schemas/")
	}
	prop := func(schemaName, field, key string, want any) {
		t.Helper()
		got := props(schemaName)[field]
		m, _ := got.(map[string]any)
		if m == nil {
			t.Errorf("%s.%s: absent", schemaName, field)
			return
		}
		if !reflect.DeepEqual(m[key], want) {
			t.Errorf("%s.%s %s = %v, want %v", schemaName, field, key, m[key], want)
		}
	}
	enum := func(vs ...string) []any {
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = v
		}
		return out
	}

	// CreateOrderRequest (authorization token) and CustomerTokenOrderRequest
	// are two shapes: locale is required on the first, customer exists only on
	// the first and shippingAddress only on the second (the server refuses each
	// on the other route).
	authBody, ctBody := bodyRef("/v1/authorization-tokens/{token}/order", "post"), bodyRef("/v1/customer-tokens/{token}/order", "post")
	if authBody != "CreateOrderRequest" || ctBody != "CustomerTokenOrderRequest" {
		t.Errorf("order bodies: %q and %q, want CreateOrderRequest and CustomerTokenOrderRequest", authBody, ctBody)
	}
	if r := required("CreateOrderRequest"); !slices.Equal(r, []string{"country", "currency", "locale"}) {
		t.Errorf("CreateOrderRequest required %v", r)
	}
	if _, ok := props("CreateOrderRequest")["shippingAddress"]; ok {
		t.Error("CreateOrderRequest has shippingAddress (CustomerTokenOrderRequest only)")
	}
	if r := required("CustomerTokenOrderRequest"); !slices.Equal(r, []string{"country", "currency"}) {
		t.Errorf("CustomerTokenOrderRequest required %v", r)
	}
	if _, ok := props("CustomerTokenOrderRequest")["customer"]; ok {
		t.Error("CustomerTokenOrderRequest has customer")
	}
	prop("CustomerTokenOrderRequest", "shippingAddress", "$ref", "#/components/schemas/CompanyAddress")
	prop("CustomerTokenOrderRequest", "reference", "maxLength", float64(50))

	// CreateCustomerTokenRequest's customer is CustomerTokenCustomerData:
	// OrderCustomerData without shippingAddress.
	prop("CreateCustomerTokenRequest", "customer", "$ref", "#/components/schemas/CustomerTokenCustomerData")
	if _, ok := props("CustomerTokenCustomerData")["shippingAddress"]; ok {
		t.Error("CustomerTokenCustomerData has shippingAddress")
	}
	prop("CustomerTokenCustomerData", "firstName", "maxLength", float64(200))

	// Bounds and enums of the spec's field tables that the server enforces.
	prop("EditCustomerRequest", "reference1", "maxLength", float64(200))
	prop("EditCustomerRequest", "reference2", "maxLength", float64(200))
	prop("CompanyContact", "firstName", "maxLength", float64(200))
	prop("CompanyContact", "lastName", "maxLength", float64(200))
	prop("InvoiceChannelInput", "type", "enum", enum("email", "edi", "snailmail", "kivra"))
	prop("InvoiceChannelInput", "destination", "enum", enum("default", "channelOnly"))
	prop("InvoiceChannel", "type", "enum", enum("email", "edi", "snailmail", "kivra"))
	prop("InvoiceChannel", "destination", "enum", enum("default", "channelOnly"))
	prop("InvoiceChannel", "state", "enum", enum("disabled", "enabled"))
	prop("EditPaymentMethodRequest", "paymentMethod", "$ref", "#/components/schemas/AdvanceInvoicePaymentMethod")
	prop("AdvanceInvoicePaymentMethod", "provider", "enum", enum("service"))
	prop("AdvanceInvoicePaymentMethod", "type", "enum", enum("advanceInvoice"))
	prop("CreateCustomerTokenRequest", "storeId", "maxLength", float64(100))
	prop("CreateSessionRequest", "storeId", "maxLength", float64(100))
	prop("CreateSessionRequest", "vatMode", "enum", enum("inclVat", "exclVat"))
	prop("UpdateSessionRequest", "merchantReference", "maxLength", float64(50))
	// The spec leaves the payment status's type open; kassa's values (docs/decisions.md).
	prop("PaymentStatus", "status", "enum", enum("pending", "authorized", "partiallyCaptured", "captured",
		"partiallyRefunded", "refunded", "partiallyPaid", "paid", "cancelled", "expired", "denied"))
	// kassa's own limits on customer fields (docs/decisions.md).
	for _, name := range []string{"OrderCustomerData", "CustomerTokenCustomerData", "EditCustomerRequest", "CompanyContact"} {
		prop(name, "email", "maxLength", float64(254))
		prop(name, "phone", "maxLength", float64(30))
	}
	prop("OrderCustomerData", "companyId", "maxLength", float64(50))
	prop("OrderCustomerData", "country", "maxLength", float64(50))
	prop("InvoiceChannelInput", "details", "maxLength", float64(200))

	// Deprecated (spec, Versioning 2): the fromId parameter of GET /v1/orders,
	// the list's lastId, and the old payment status with its successor Link.
	params, _ := get("paths", "/v1/orders", "get", "parameters").([]any)
	found := false
	for _, p := range params {
		if m := p.(map[string]any); m["name"] == "fromId" {
			found = true
			if m["deprecated"] != true {
				t.Error("GET /v1/orders fromId is not marked deprecated")
			}
		}
	}
	if !found {
		t.Error("GET /v1/orders has no fromId")
	}
	prop("OrderList", "lastId", "deprecated", true)
	if get("paths", "/v1/orders/{orderId}/paymentstatus", "get", "responses", "200", "headers", "Link") == nil {
		t.Error("the deprecated payment status does not document its Link header")
	}
}

// TestOpenAPIStatesTheScopes: the token endpoint grants every token the
// scopes in grantedScopes and takes any of them in a request (docs/errors.md);
// the oauth2 scheme names the same, so that a client built from the document
// may ask for them (it declared none, which reads as a server without scopes).
func TestOpenAPIStatesTheScopes(t *testing.T) {
	var doc struct {
		Components struct {
			SecuritySchemes struct {
				OAuth2 struct {
					Flows struct {
						ClientCredentials struct {
							Scopes map[string]string `json:"scopes"`
						} `json:"clientCredentials"`
					} `json:"flows"`
				} `json:"oauth2"`
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	scopes := doc.Components.SecuritySchemes.OAuth2.Flows.ClientCredentials.Scopes
	if len(scopes) != len(grantedScopes) {
		t.Errorf("oauth2 scopes %v, want %v", scopes, grantedScopes)
	}
	for _, sc := range grantedScopes {
		if scopes[sc] == "" {
			t.Errorf("oauth2 scope %q is not declared (with a description): %v", sc, scopes)
		}
	}
}

// TestOpenAPIStatesRetryAfter: every operation that needs credentials waits
// for the store and may answer 503 store_unavailable, and company search
// 429 rate_limited; both carry Retry-After (docs/errors.md). A generated
// client learns of the status and the header only from the document: with
// 503 under "default" alone and no Retry-After, it had neither.
func TestOpenAPIStatesRetryAfter(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(generatedOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	for _, o := range operations() {
		op := doc["paths"].(map[string]any)[o.path].(map[string]any)[strings.ToLower(o.method)].(map[string]any)
		responses := op["responses"].(map[string]any)
		var want []string
		if o.auth {
			want = append(want, "503")
		}
		if o.id == "searchCompanies" {
			want = append(want, "429")
		}
		for _, code := range want {
			r, _ := responses[code].(map[string]any)
			h, _ := r["headers"].(map[string]any)
			if r == nil || h["Retry-After"] == nil {
				t.Errorf("%s %s: %s with Retry-After not stated (%v)", o.method, o.path, code, r)
			}
		}
	}
}

// TestOpenAPIStatesResponseHeaders: the headers the server sends that a
// client acts on are named in the document, as a generated client learns of a
// header only from it. Every problem answer carries X-Request-Id (docs/errors.md:
// quote it), the 401 of an operation that takes credentials its challenges
// (WWW-Authenticate, which clients that send Basic only when challenged
// need), and the settlement export its file name (Content-Disposition). They
// used to be stated on successes only, or nowhere. The answers checked are the
// router's own.
func TestOpenAPIStatesResponseHeaders(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(generatedOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	headers := func(o op, code string) map[string]any {
		op := doc["paths"].(map[string]any)[o.path].(map[string]any)[strings.ToLower(o.method)].(map[string]any)
		r, _ := op["responses"].(map[string]any)[code].(map[string]any)
		h, _ := r["headers"].(map[string]any)
		return h
	}
	for _, o := range operations() {
		op := doc["paths"].(map[string]any)[o.path].(map[string]any)[strings.ToLower(o.method)].(map[string]any)
		for code := range op["responses"].(map[string]any) {
			if code >= "400" && code != "default" && headers(o, code)["X-Request-Id"] == nil {
				t.Errorf("%s %s: %s without X-Request-Id", o.method, o.path, code)
			}
		}
		if o.auth || o.path == "/oauth/token" {
			if h := headers(o, "401"); h["WWW-Authenticate"] == nil {
				t.Errorf("%s %s: 401 without WWW-Authenticate", o.method, o.path)
			}
		}
		if o.id == "exportSettlement" {
			if h := headers(o, "200"); h["Content-Disposition"] == nil {
				t.Errorf("%s %s: 200 without Content-Disposition", o.method, o.path)
			}
		}
	}

	// What the document states is what the router sends.
	e := newSessionEnv(t)
	code, h, b := e.req("GET", "/v1/orders/nope", "", "", nil)
	wantProblem(t, code, b, 401, "unauthorized")
	if h.Get("WWW-Authenticate") == "" || h.Get("X-Request-Id") == "" {
		t.Errorf("401: WWW-Authenticate %q, X-Request-Id %q", h.Get("WWW-Authenticate"), h.Get("X-Request-Id"))
	}
	code, h, b = e.req("GET", "/v1/orders/nope", "", basic("m1", "s1"), nil)
	wantProblem(t, code, b, 404, "order_not_found")
	if h.Get("X-Request-Id") == "" || h.Get("X-Request-Id") != b["requestId"] {
		t.Errorf("404: X-Request-Id %q, requestId %v", h.Get("X-Request-Id"), b["requestId"])
	}
}
