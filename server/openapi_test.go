package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/company"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/token"
)

// The OpenAPI document is generated from the Go types the server decodes
// and encodes, so it cannot drift from them: TestOpenAPIUpToDate fails when
// server/openapi.json differs from what the types say, and
//
//	go test ./server -run TestOpenAPIUpToDate -update
//
// rewrites it. Every response of the HTTP tests is validated against it.
var update = flag.Bool("update", false, "rewrite server/openapi.json")

type param struct {
	name, desc, typ           string
	required, csv, deprecated bool
	enum                      reflect.Type // a filter's values: the enum of this type (enums)
}

type op struct {
	method, path, id, summary, tag string
	auth, idem                     bool
	body                           any // request body type (a zero value); nil: none
	bodyOptional                   bool
	status                         int
	resp                           any    // response body type; nil with contentType for non-JSON
	contentType                    string // default application/json
	location                       bool
	deprecated                     bool
	errs                           []int
	query                          []param
}

var (
	orderQuery = []param{
		{name: "q", typ: "string", desc: "exact order id, orderReference or merchantReference"},
		{name: "cursor", typ: "string", desc: "nextCursor of the previous page"},
		{name: "fromId", typ: "string", desc: "deprecated; same as cursor", deprecated: true},
		{name: "id", csv: true, desc: "order ids"}, {name: "storeId", csv: true}, {name: "orderReference", csv: true},
		{name: "merchantReference", csv: true}, {name: "status", csv: true, desc: "orders having any of these statuses", enum: statusType},
		{name: "statusAnd", csv: true, desc: "orders having all of these statuses", enum: statusType},
		{name: "statusNot", csv: true, desc: "orders having none of these statuses", enum: statusType},
		{name: "paymentMethodCategory", csv: true, enum: reflect.TypeOf(order.Category(""))},
		{name: "createdFrom", typ: "date-time"}, {name: "createdTo", typ: "date-time"},
		{name: "expiresFrom", typ: "date-time"}, {name: "expiresTo", typ: "date-time"},
		{name: "size", typ: "integer", desc: "1 to 1000, default 100"},
	}
	sessionQuery = []param{
		{name: "q", typ: "string", desc: "case-insensitive substring of id, merchantReference, externalSessionId or orderId"},
		{name: "fromId", typ: "string", desc: "nextFromId of the previous page"},
		{name: "storeId", csv: true}, {name: "orderId", csv: true}, {name: "merchantReference", csv: true},
		{name: "state", csv: true, enum: reflect.TypeOf(session.State(""))}, {name: "source", csv: true, enum: reflect.TypeOf(session.Source(""))},
		{name: "createdFrom", typ: "date-time"}, {name: "createdTo", typ: "date-time"},
		{name: "updatedFrom", typ: "date-time"}, {name: "updatedTo", typ: "date-time"},
		{name: "size", typ: "integer", desc: "1 to 1000, default 100"},
	}
	statusType = reflect.TypeOf(order.Status(""))
	std        = []int{400, 401, 404, 408, 409, 413, 415, 422}
	reads      = []int{400, 401, 404}
	orderR     = order.Response{}
)

func operations() []op {
	var ops []op
	add := func(o op) { ops = append(ops, o) }
	mut := func(method, path, id, summary string, body any, optional bool) {
		add(op{method: method, path: path, id: id, summary: summary, tag: "Order Management", auth: true, idem: true,
			body: body, bodyOptional: optional, status: 200, resp: orderR, errs: std})
	}
	add(op{method: "POST", path: "/oauth/token", id: "token", summary: "OAuth 2.0 client credentials grant (client id and secret by HTTP Basic or as form fields)",
		tag: "Authentication", status: 200, resp: tokenResponse{}, errs: []int{400, 401, 408, 413}})
	add(op{method: "GET", path: "/healthz", id: "health", summary: "Liveness", tag: "Operations", status: 200, resp: map[string]string{}})
	add(op{method: "GET", path: "/readyz", id: "ready", summary: "Readiness: the store answers (503 while the store does not, or while draining before a stop)", tag: "Operations", status: 200, resp: map[string]string{}, errs: []int{503}})
	add(op{method: "GET", path: "/metrics", id: "metrics", summary: "Prometheus text exposition", tag: "Operations", status: 200, contentType: "text/plain"})
	add(op{method: "GET", path: "/openapi.json", id: "openapi", summary: "This document", tag: "Operations", status: 200, resp: map[string]any{}})
	add(op{method: "GET", path: "/documents/{merchantId}/{orderId}/{ledgerId}", id: "document", tag: "Documents",
		summary: "An invoice (capture) or credit note (refund) with lines, VAT breakdown and totals; the link is signed and time-limited",
		status:  200, contentType: "text/html", errs: []int{403, 404},
		query: []param{{name: "expires", typ: "integer", required: true}, {name: "signature", typ: "string", required: true}}})
	add(op{method: "GET", path: "/checkout/{merchantId}/{sessionId}", id: "checkoutPage", tag: "Hosted checkout",
		summary: "The buyer's hosted checkout page of a session (the session's checkoutUrl); 429 shows it without results when q passes the company search limit", status: 200, contentType: "text/html", errs: []int{404, 429, 503},
		query: []param{{name: "sig", typ: "string", required: true}, {name: "q", typ: "string", desc: "company search"}}})
	add(op{method: "POST", path: "/checkout/{merchantId}/{sessionId}", id: "checkoutSubmit", tag: "Hosted checkout",
		summary: "The buyer approves or declines (HTML form); answers 303 to the page, 422 with the form and its errors, or 409 with the form when the order changed since the page was shown",
		status:  303, contentType: "text/html", errs: []int{404, 409, 422, 503}})

	add(op{method: "GET", path: "/v1/orders", id: "listOrders", summary: "List orders, newest first", tag: "Order Management", auth: true,
		status: 200, resp: OrderList{}, errs: reads, query: orderQuery})
	add(op{method: "GET", path: "/v1/orders/{orderId}", id: "getOrder", summary: "Get order", tag: "Order Management", auth: true, status: 200, resp: orderR, errs: reads})
	mut("POST", "/v1/orders/{orderId}", "editOrder", "Edit order: replace the uncaptured lines", order.EditRequest{}, false)
	mut("DELETE", "/v1/orders/{orderId}", "cancelOrder", "Cancel what is uncaptured", nil, false)
	mut("DELETE", "/v1/orders/{orderId}/{ledgerId}", "cancelLedger", "Cancel the uncaptured sub-order, or void a captured invoice", nil, false)
	mut("POST", "/v1/orders/{orderId}/acknowledge", "acknowledge", "Acknowledge an order", nil, false)
	mut("POST", "/v1/orders/{orderId}/capture", "capture", "Full capture (all remaining lines, or the given lines as the final capture)", capture.FullRequest{}, true)
	mut("POST", "/v1/orders/{orderId}/partialcapture", "partialCapture", "Partial capture by lines", capture.PartialRequest{}, false)
	mut("POST", "/v1/orders/{orderId}/customer", "editCustomer", "Edit customer", order.EditCustomerRequest{}, false)
	mut("POST", "/v1/orders/{orderId}/document/{ledgerId}/resend", "resendDocument", "Resend an invoice or card receipt", nil, false)
	mut("POST", "/v1/orders/{orderId}/extendexpiry", "extendExpiry", "Extend order expiry", nil, false)
	mut("POST", "/v1/orders/{orderId}/partialrefund/{ledgerId}", "partialRefund", "Partial refund of a capture by lines", refund.PartialRequest{}, false)
	mut("POST", "/v1/orders/{orderId}/refund/{ledgerId}", "refund", "Refund what remains refundable on a capture", refund.FullRequest{}, true)
	mut("POST", "/v1/orders/{orderId}/paymentmethod", "editPaymentMethod", "Change the payment method to advance invoice", order.EditPaymentMethodRequest{}, false)
	mut("POST", "/v1/orders/{orderId}/recourse/{ledgerId}", "recourse", "Hand an unpaid invoice back to the merchant", order.RecourseRequest{}, false)
	mut("POST", "/v1/orders/{orderId}/reference", "setReference", "Set or edit the merchant's order reference", order.ReferenceRequest{}, false)
	add(op{method: "GET", path: "/v1/orders/{orderId}/paymentstatus", id: "orderPaymentStatus", summary: "Payment status of an order (deprecated: use /v1/paymentstatus)",
		tag: "Order Management", auth: true, status: 200, resp: kassa.PaymentStatus{}, errs: reads, deprecated: true})
	add(op{method: "GET", path: "/v1/paymentstatus", id: "paymentStatus", summary: "Payment status of an order or a session", tag: "Order Management", auth: true,
		status: 200, resp: kassa.PaymentStatus{}, errs: reads,
		query: []param{{name: "orderId", typ: "string"}, {name: "sessionId", typ: "string", desc: "a session id or external:<id>"}}})

	tok := func(method, path, id, summary string, body any, status int, resp any) {
		add(op{method: method, path: path, id: id, summary: summary, tag: "Payments", auth: true, idem: true, body: body,
			status: status, resp: resp, errs: std})
	}
	tok("DELETE", "/v1/authorization-tokens/{token}", "deleteAuthorizationToken", "Withdraw an authorization token", nil, 204, nil)
	tok("POST", "/v1/authorization-tokens/{token}/customer-token", "createCustomerToken", "Turn an authorization token into a reusable customer token", token.CreateCustomerRequest{}, 200, kassa.CustomerTokenResponse{})
	tok("POST", "/v1/authorization-tokens/{token}/order", "createOrder", "Create an order from an authorization token", order.CreateRequest{}, 200, kassa.CreateOrderResponse{})
	add(op{method: "GET", path: "/v1/customer-tokens/{token}", id: "getCustomerToken", summary: "Get a customer token", tag: "Payments", auth: true, status: 200, resp: token.Record{}, errs: reads})
	tok("DELETE", "/v1/customer-tokens/{token}", "revokeCustomerToken", "Revoke a customer token", nil, 200, token.Record{})
	tok("POST", "/v1/customer-tokens/{token}/order", "createCustomerTokenOrder", "Create an order from a customer token (CustomerTokenOrderRequest: no customer; shippingAddress)", customerTokenOrderRequest{}, 200, kassa.CreateOrderResponse{})

	for _, api := range []struct{ base, param, tag, name string }{
		{"/v1/sessions", "id", "Checkout", "Session"}, {"/v1/payment-sessions", "sessionId", "Payments", "PaymentSession"}} {
		p := api.base + "/{" + api.param + "}"
		add(op{method: "POST", path: api.base, id: "create" + api.name, summary: "Open a session", tag: api.tag, auth: true, idem: true,
			body: session.CreateRequest{}, status: 201, resp: session.Record{}, location: true, errs: std})
		add(op{method: "GET", path: p, id: "get" + api.name, summary: "Get a session by id or external:<externalSessionId> (checkout sessions also by order id)",
			tag: api.tag, auth: true, status: 200, resp: session.Record{}, errs: reads})
		add(op{method: "POST", path: p, id: "update" + api.name, summary: "Update a session that the buyer has not approved", tag: api.tag, auth: true, idem: true,
			body: session.UpdateRequest{}, status: 200, resp: session.Record{}, errs: std})
		add(op{method: "DELETE", path: p, id: "delete" + api.name, summary: "Cancel a session", tag: api.tag, auth: true, idem: true,
			status: 200, resp: session.Record{}, errs: std})
	}
	add(op{method: "GET", path: "/v1/sessions", id: "listSessions", summary: "List sessions, newest first", tag: "Checkout", auth: true,
		status: 200, resp: kassa.SessionPage{}, errs: reads, query: sessionQuery})
	add(op{method: "GET", path: "/v1/settlements", id: "listSettlements", summary: "List settlements, newest first", tag: "Settlements", auth: true,
		status: 200, resp: kassa.SettlementPage{}, errs: reads, query: []param{{name: "storeId", csv: true}, {name: "id", csv: true},
			{name: "reference", csv: true}, {name: "currency", csv: true}, {name: "createdFrom", typ: "date-time"}, {name: "createdTo", typ: "date-time"},
			{name: "fromId", typ: "string", desc: "nextFromId of the previous page"}, {name: "size", typ: "integer", desc: "1 to 1000, default 100"}}})
	add(op{method: "GET", path: "/v1/settlements/{settlementId}", id: "getSettlement", summary: "Get a settlement", tag: "Settlements", auth: true,
		status: 200, resp: settlement.Record{}, errs: reads})
	add(op{method: "GET", path: "/v1/settlements/{settlementId}/tx", id: "settlementTransactions", summary: "A settlement's transactions, in order",
		tag: "Settlements", auth: true, status: 200, resp: kassa.TransactionPage{}, errs: reads,
		query: []param{{name: "fromId", typ: "string"}, {name: "size", typ: "integer", desc: "1 to 1000, default 100"}}})
	add(op{method: "GET", path: "/v1/settlements/{settlementId}/export.csv", id: "exportSettlement", summary: "A settlement's transactions as CSV for accounting (a final row holds the net)",
		tag: "Settlements", auth: true, status: 200, contentType: "text/csv", errs: reads})
	add(op{method: "GET", path: "/v1/notification-settings", id: "getNotificationSettings", summary: "The notification URL and subscribed topics (never the secret)",
		tag: "Notifications", auth: true, status: 200, resp: kassa.WebhookSettings{}, errs: reads})
	add(op{method: "PUT", path: "/v1/notification-settings", id: "setNotificationSettings",
		summary: "Set the notification URL and topics; the signing secret is in the answer only when it is new (first time, or rotateSecret)",
		tag:     "Notifications", auth: true, body: kassa.SetWebhookRequest{}, status: 200, resp: kassa.WebhookSettings{}, errs: []int{400, 401, 413, 415}})
	add(op{method: "DELETE", path: "/v1/notification-settings", id: "deleteNotificationSettings", summary: "Stop notifications",
		tag: "Notifications", auth: true, status: 204, errs: reads})
	add(op{method: "GET", path: "/v1/notifications", id: "listNotifications", summary: "The delivery log, newest first",
		tag: "Notifications", auth: true, status: 200, resp: kassa.NotificationPage{}, errs: reads,
		query: []param{{name: "fromId", typ: "string", desc: "nextFromId of the previous page"}, {name: "size", typ: "integer", desc: "1 to 1000, default 100"}}})
	add(op{method: "GET", path: "/v1/notifications/{notificationId}", id: "getNotification", summary: "One notification with its delivery attempts",
		tag: "Notifications", auth: true, status: 200, resp: kassa.Notification{}, errs: reads})
	add(op{method: "POST", path: "/v1/notifications/{notificationId}/redeliver", id: "redeliverNotification",
		summary: "Deliver a delivered or failed notification once more, with the same event id and body",
		tag:     "Notifications", auth: true, status: 200, resp: kassa.Notification{}, errs: []int{401, 404, 409}})
	add(op{method: "GET", path: "/v1/headless/search/companies", id: "searchCompanies", summary: "Search companies by name or registration number",
		tag: "Headless", status: 200, resp: CompanySearchResponse{}, errs: []int{400, 429},
		query: []param{{name: "q", typ: "string", required: true}, {name: "country", typ: "string", required: true}}})

	sb := func(method, path, id, summary string, body any, status int, resp any, errs []int) {
		add(op{method: method, path: path, id: id, summary: summary, tag: "Sandbox", auth: true, body: body, status: status, resp: resp, errs: errs})
	}
	// The sandbox's changes to an order take an Idempotency-Key as the API's do.
	sbKeyed := func(method, path, id, summary string, body any, status int, resp any, errs []int) {
		add(op{method: method, path: path, id: id, summary: summary, tag: "Sandbox", auth: true, idem: true, body: body, status: status, resp: resp, errs: errs})
	}
	sb("POST", "/sandbox/v1/authorization-tokens", "sandboxMintToken", "A buyer who completed checkout: mint an authorization token (see the buyer fixtures)", sandbox.TokenRequest{}, 201, sandbox.TokenResponse{}, []int{400, 401, 402, 413, 415})
	sb("POST", "/sandbox/v1/merchants", "sandboxCreateMerchant", "Create a sandbox merchant; the secret is shown only here", merchantRequest{}, 201, kassa.Credentials{}, []int{400, 401})
	sb("GET", "/sandbox/v1/clock", "sandboxGetClock", "Read the test clock", nil, 200, clockState{}, []int{401})
	sb("POST", "/sandbox/v1/clock", "sandboxSetClock", "Move the test clock forward: exactly one of advance (a duration such as 36h) or set (an RFC 3339 time)", clockRequest{}, 200, clockState{}, []int{400, 401, 403})
	sb("GET", "/sandbox/v1/fixtures", "sandboxFixtures", "The deterministic buyer fixtures", nil, 200, fixtureList{}, []int{401})
	sbKeyed("POST", "/sandbox/v1/orders/{orderId}/ledgers/{ledgerId}/payments", "sandboxPay", "The buyer pays (part of) a captured invoice", paymentRequest{}, 200, orderR, std)
	sbKeyed("POST", "/sandbox/v1/orders/{orderId}/ledgers/{ledgerId}/status", "sandboxMark", "Set reminder1, reminder2, debtCollection or invoiceDeliveryFailure on a capture", markRequest{}, 200, orderR, std)
	sbKeyed("POST", "/sandbox/v1/orders/{orderId}/risk", "sandboxRisk", "End the risk review of an order on hold: approve or deny", riskRequest{}, 200, orderR, std)
	sb("POST", "/sandbox/v1/settlements/run", "sandboxSettle", "Run settlements now (otherwise daily)", nil, 200, settlementRunResponse{}, []int{401})
	sb("POST", "/sandbox/v1/jobs/autocapture", "sandboxAutoCapture", "Run the auto-capture job now (otherwise every minute)", nil, 200, map[string]int{}, []int{401})
	sb("POST", "/sandbox/v1/jobs/tasks", "sandboxTasks", "Run the due scheduled tasks now: auto-capture, token expiry, reminders (otherwise every minute)", nil, 200, kassa.TaskStats{}, []int{401})
	sb("POST", "/sandbox/v1/jobs/notifications", "sandboxDeliverNotifications", "Deliver the notifications due now, up to 1000 (otherwise every second)", nil, 200, kassa.DeliveryStats{}, []int{401})
	sb("POST", "/sandbox/v1/jobs/expire", "sandboxExpire", "Run the expiry job now", nil, 200, map[string]int{}, []int{401})
	return ops
}

// fixtureList is the body of GET /sandbox/v1/fixtures.
type fixtureList struct {
	Fixtures []sandbox.Fixture `json:"fixtures"`
}

// Spec shapes that the server decodes into a Go type it shares with another
// shape: each gets a defined type of its own here, so that it gets a schema of
// its own, with the fields of the Go type that the shape lacks left out
// (omitFields) and fields whose shape differs given another type (fieldTypes).
type (
	// customerTokenOrderRequest is the spec's CustomerTokenOrderRequest: the
	// CreateOrderRequest without customer (refused) and with shippingAddress.
	// A locale is optional there (the spec has none; the server checks one sent).
	customerTokenOrderRequest order.CreateRequest
	// customerTokenCustomerData is the spec's CustomerTokenCustomerData:
	// OrderCustomerData without shippingAddress (refused).
	customerTokenCustomerData order.CustomerInput
	// advanceInvoicePaymentMethod is the payment method edit payment method
	// takes: provider service, type advanceInvoice only.
	advanceInvoicePaymentMethod order.PaymentMethod
)

var omitFields = map[reflect.Type][]string{
	reflect.TypeOf(order.CreateRequest{}):       {"shippingAddress"},
	reflect.TypeOf(customerTokenOrderRequest{}): {"customer"},
	reflect.TypeOf(customerTokenCustomerData{}): {"shippingAddress"},
}

var fieldTypes = map[reflect.Type]map[string]reflect.Type{
	reflect.TypeOf(token.CreateCustomerRequest{}):    {"customer": reflect.TypeOf(customerTokenCustomerData{})},
	reflect.TypeOf(order.EditPaymentMethodRequest{}): {"paymentMethod": reflect.TypeOf(advanceInvoicePaymentMethod{})},
}

// Request bodies: fields the spec (or kassa) requires.
var requiredFields = map[reflect.Type][]string{
	reflect.TypeOf(order.LineInput{}):                {"description", "quantity"},
	reflect.TypeOf(order.CreateRequest{}):            {"country", "currency", "locale"},
	reflect.TypeOf(customerTokenOrderRequest{}):      {"country", "currency"},
	reflect.TypeOf(order.EditRequest{}):              {"orderLines", "totalOrderAmount", "totalOrderAmountExclVat", "totalOrderVatAmount"},
	reflect.TypeOf(capture.PartialRequest{}):         {"orderLines", "totalCaptureAmount"},
	reflect.TypeOf(refund.PartialRequest{}):          {"orderLines", "totalRefundAmount"},
	reflect.TypeOf(order.EditPaymentMethodRequest{}): {"paymentMethod"},
	reflect.TypeOf(order.ReferenceRequest{}):         {"reference"},
	reflect.TypeOf(order.RecourseRequest{}):          {"reason"},
	reflect.TypeOf(token.CreateCustomerRequest{}):    {"country", "currency", "customer", "locale"},
	reflect.TypeOf(session.CreateRequest{}):          {"country", "currency", "locale", "orderLines"},
	reflect.TypeOf(sandbox.TokenRequest{}):           {"country", "currency", "locale"},
	reflect.TypeOf(paymentRequest{}):                 {"amount"},
	reflect.TypeOf(markRequest{}):                    {"status"},
	reflect.TypeOf(riskRequest{}):                    {"decision"},
	reflect.TypeOf(kassa.SetWebhookRequest{}):        {"url"},
}

// requestTypes are decoded from clients: only requiredFields are required there.
var requestTypes = map[reflect.Type]bool{}

type bound map[string]any

// Bounds from the spec's Limits table and kassa's own, by type and JSON field.
var bounds = map[reflect.Type]map[string]bound{
	reflect.TypeOf(order.LineInput{}): {
		"description": {"maxLength": 200}, "reference": {"maxLength": 200}, "quantity": {"minimum": 1, "maximum": 99999999},
		"totalAmount": amountBound, "totalVatAmount": amountBound, "unitDiscountAmount": amountBound, "unitPrice": amountBound,
		"vat": {"minimum": 0, "maximum": 10000}, "type": {"enum": order.LineTypes()},
	},
	reflect.TypeOf(order.TotalsInput{}):         {"totalOrderAmount": totalBound, "totalOrderAmountExclVat": totalBound, "totalOrderVatAmount": totalBound},
	reflect.TypeOf(order.CreateRequest{}):       createOrderBounds,
	reflect.TypeOf(customerTokenOrderRequest{}): createOrderBounds,
	reflect.TypeOf(order.AutoCapture{}):         {"delayMinutes": {"minimum": 0, "maximum": 10080}},
	reflect.TypeOf(order.Address{}): {"attentionName": {"maxLength": 100}, "careOf": {"maxLength": 100}, "companyName": {"maxLength": 100},
		"streetAddress": {"maxLength": 100}, "city": {"maxLength": 50}, "country": {"maxLength": 50}, "postalCode": {"maxLength": 10}},
	reflect.TypeOf(order.CustomerInput{}):         customerBounds,
	reflect.TypeOf(customerTokenCustomerData{}):   customerBounds,
	reflect.TypeOf(order.Contact{}):               {"firstName": {"maxLength": 200}, "lastName": {"maxLength": 200}, "email": emailBound, "phone": phoneBound},
	reflect.TypeOf(order.EditCustomerRequest{}):   {"reference1": {"maxLength": 200}, "reference2": {"maxLength": 200}, "email": emailBound, "phone": phoneBound},
	reflect.TypeOf(order.InvoiceChannelInput{}):   {"type": channelType, "destination": channelDestination, "details": {"maxLength": 200}},
	reflect.TypeOf(order.InvoiceChannel{}):        {"type": channelType, "destination": channelDestination, "state": {"enum": []string{"disabled", "enabled"}}},
	reflect.TypeOf(advanceInvoicePaymentMethod{}): {"provider": {"enum": []string{"service"}}, "type": {"enum": []string{"advanceInvoice"}}},
	reflect.TypeOf(token.CreateCustomerRequest{}): {"storeId": {"maxLength": 100}},
	reflect.TypeOf(session.UpdateRequest{}):       {"merchantReference": {"maxLength": 50}},
	reflect.TypeOf(OrderList{}):                   {"lastId": {"deprecated": true, "description": "deprecated: the same value as nextCursor"}},
	reflect.TypeOf(capture.PartialRequest{}):      {"totalCaptureAmount": totalBound},
	reflect.TypeOf(capture.FullRequest{}):         {"totalCaptureAmount": totalBound},
	reflect.TypeOf(refund.PartialRequest{}):       {"totalRefundAmount": totalBound, "note": {"maxLength": 200}},
	reflect.TypeOf(refund.FullRequest{}):          {"note": {"maxLength": 200}},
	reflect.TypeOf(order.ReferenceRequest{}):      {"reference": {"maxLength": 50}, "settlementReference": {"maxLength": 50}},
	reflect.TypeOf(order.RecourseRequest{}):       {"reason": {"minLength": 1, "maxLength": 200}},
	reflect.TypeOf(session.CreateRequest{}): {"merchantReference": {"maxLength": 50}, "externalSessionId": {"maxLength": 100}, "expiresInMinutes": {"minimum": 1, "maximum": 10080},
		"storeId": {"maxLength": 100}, "vatMode": {"enum": []string{"inclVat", "exclVat"}}},
	reflect.TypeOf(sandbox.TokenRequest{}): {"amount": {"minimum": 1, "maximum": 1000000000}},
	reflect.TypeOf(riskRequest{}):          {"decision": {"enum": []string{"approve", "deny"}}},
	reflect.TypeOf(markRequest{}):          {"status": {"enum": []string{"reminder1", "reminder2", "debtCollection", "invoiceDeliveryFailure"}}},
	reflect.TypeOf(kassa.PaymentStatus{}):  {"status": {"enum": kassa.PaymentStatuses()}},
}

var (
	amountBound        = bound{"minimum": -1000000000, "maximum": 1000000000}
	totalBound         = bound{"minimum": 0, "maximum": 1000000000}
	channelType        = bound{"enum": []string{"email", "edi", "snailmail", "kivra"}}
	channelDestination = bound{"enum": []string{"default", "channelOnly"}}
	createOrderBounds  = map[string]bound{"reference": {"maxLength": 50}, "settlementReference": {"maxLength": 50}, "storeId": {"maxLength": 100}, "vatMode": {"enum": []string{"inclVat", "exclVat"}}}
	customerBounds     = map[string]bound{"firstName": {"maxLength": 200}, "lastName": {"maxLength": 200}, "reference1": {"maxLength": 200}, "reference2": {"maxLength": 200},
		"companyId": {"maxLength": 50}, "country": {"maxLength": 50}, "email": emailBound, "phone": phoneBound}
	// kassa's own limits where the spec states none (docs/decisions.md, Money and lines).
	emailBound = bound{"maxLength": 254, "description": "an email address: text@text, no whitespace"}
	phoneBound = bound{"maxLength": 30}
)

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Enumerations of named string types.
var enums = map[reflect.Type][]string{
	reflect.TypeOf(order.Status("")):      strs(order.AllStatuses()),
	reflect.TypeOf(order.SubStatus("")):   {"partiallyPaid", "fullyPaid", "reminder1", "reminder2", "debtCollection", "invoiceDeliveryFailure", "void", "recourse"},
	reflect.TypeOf(order.EventType("")):   strs(order.AllEventTypes()),
	reflect.TypeOf(order.Action("")):      {"capture", "partialCapture", "refund", "partialRefund", "cancel", "editOrder", "editCustomer", "editPaymentMethod", "extendOrderExpiry", "resendOrderInvoice", "void", "recourseOrderInvoice"},
	reflect.TypeOf(order.Provider("")):    {"service", "external"},
	reflect.TypeOf(order.PaymentType("")): strs(order.PaymentTypes()),
	reflect.TypeOf(order.Category("")):    strs(order.Categories()),
	reflect.TypeOf(order.RiskTag("")):     {"unknown", "creditDeclined", "blacklisted", "possibleFraud"},
	reflect.TypeOf(money.VATMode("")):     {"inclVat", "exclVat"},
	reflect.TypeOf(token.State("")):       {"active", "revoked"},
	reflect.TypeOf(session.State("")):     strs(session.States()),
	reflect.TypeOf(session.Source("")):    strs(session.Sources()),
	reflect.TypeOf(sandbox.Outcome("")):   {"approved", "creditDeclined", "advanceInvoiceOnly", "possibleFraud", "blacklisted"},
	reflect.TypeOf(settlement.Kind("")):   {"capture", "refund", "fee", "adjustment", "recourse"},
}

var names = map[reflect.Type]string{
	reflect.TypeOf(order.Response{}):              "Order",
	reflect.TypeOf(order.OutputLine{}):            "OutputOrderLine",
	reflect.TypeOf(order.LineInput{}):             "OrderLine",
	reflect.TypeOf(order.Line{}):                  "SessionOrderLine",
	reflect.TypeOf(order.EventOut{}):              "OrderEvent",
	reflect.TypeOf(order.Summary{}):               "OrderSummary",
	reflect.TypeOf(order.Customer{}):              "LedgerCustomerData",
	reflect.TypeOf(order.CustomerInput{}):         "OrderCustomerData",
	reflect.TypeOf(order.Address{}):               "CompanyAddress",
	reflect.TypeOf(order.Contact{}):               "CompanyContact",
	reflect.TypeOf(order.PaymentMethod{}):         "SelectedPaymentMethod",
	reflect.TypeOf(order.CreateRequest{}):         "CreateOrderRequest",
	reflect.TypeOf(customerTokenOrderRequest{}):   "CustomerTokenOrderRequest",
	reflect.TypeOf(customerTokenCustomerData{}):   "CustomerTokenCustomerData",
	reflect.TypeOf(advanceInvoicePaymentMethod{}): "AdvanceInvoicePaymentMethod",
	reflect.TypeOf(order.EditRequest{}):           "EditLedgerOrderRequest",
	reflect.TypeOf(capture.FullRequest{}):         "FullCaptureRequest",
	reflect.TypeOf(capture.PartialRequest{}):      "PartialCaptureRequest",
	reflect.TypeOf(refund.FullRequest{}):          "RefundRequest",
	reflect.TypeOf(refund.PartialRequest{}):       "PartialRefundRequest",
	reflect.TypeOf(token.Record{}):                "CustomerToken",
	reflect.TypeOf(token.CreateCustomerRequest{}): "CreateCustomerTokenRequest",
	reflect.TypeOf(session.Record{}):              "Session",
	reflect.TypeOf(session.CreateRequest{}):       "CreateSessionRequest",
	reflect.TypeOf(session.UpdateRequest{}):       "UpdateSessionRequest",
	reflect.TypeOf(sandbox.TokenRequest{}):        "SandboxTokenRequest",
	reflect.TypeOf(sandbox.TokenResponse{}):       "SandboxTokenResponse",
	reflect.TypeOf(order.Totals{}):                "LineSums",
	reflect.TypeOf(company.Match{}):               "CompanyMatch",
}

type gen struct {
	schemas map[string]any
	owner   map[string]reflect.Type
}

var timeType = reflect.TypeOf(time.Time{})
var moneyType = reflect.TypeOf(money.Record{})

func (g *gen) name(t reflect.Type) string {
	if n, ok := names[t]; ok {
		return n
	}
	n := t.Name()
	if n == "" {
		panic("anonymous type")
	}
	return strings.ToUpper(n[:1]) + n[1:]
}

func (g *gen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == moneyType:
		return map[string]any{"$ref": "#/components/schemas/Money"}
	case t == reflect.TypeOf(json.RawMessage{}):
		return map[string]any{"description": "any JSON value"}
	}
	if e, ok := enums[t]; ok {
		return map[string]any{"type": "string", "enum": e}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t) // an anonymous struct stays inline
		}
		n := g.name(t)
		if prev, ok := g.owner[n]; ok && prev != t {
			panic(fmt.Sprintf("schema name %s for %v and %v", n, prev, t))
		}
		if _, done := g.owner[n]; !done {
			g.owner[n] = t
			g.schemas[n] = nil // reserve against recursion
			g.schemas[n] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + n}
	}
	panic(fmt.Sprintf("no schema for %v", t))
}

func (g *gen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if slices.Contains(omitFields[t], name) {
				continue
			}
			ft := f.Type
			if o, ok := fieldTypes[t][name]; ok {
				ft = o
				if f.Type.Kind() == reflect.Pointer {
					ft = reflect.PointerTo(o)
				}
			}
			s := g.schema(ft)
			if b, ok := bounds[t][name]; ok {
				if _, isRef := s["$ref"]; !isRef {
					for k, v := range b {
						s[k] = v
					}
				}
			}
			props[name] = s
			if !requestTypes[t] && !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, name)
			}
		}
	}
	walk(t)
	if r, ok := requiredFields[t]; ok {
		required = append(required, r...)
	}
	sort.Strings(required)
	required = slices.Compact(required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// markRequests records every struct reachable from request bodies as a
// request type (their required lists come from requiredFields alone).
func markRequests(t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == timeType || requestTypes[t] {
		return
	}
	requestTypes[t] = true
	for i := 0; i < t.NumField(); i++ {
		markRequests(t.Field(i).Type)
	}
	for _, o := range fieldTypes[t] {
		markRequests(o)
	}
}

func buildOpenAPI() map[string]any {
	for _, o := range operations() {
		if o.body != nil {
			markRequests(reflect.TypeOf(o.body))
		}
	}
	g := &gen{schemas: map[string]any{}, owner: map[string]reflect.Type{}}
	g.schemas["Money"] = map[string]any{"type": "object", "required": []string{"amount", "currency", "formatted", "formattedWithCurrency", "minorUnits"},
		"properties": map[string]any{
			"amount":                map[string]any{"type": "string", "description": "decimal with two fraction digits", "pattern": `^-?\d+\.\d{2}$`},
			"currency":              map[string]any{"type": "string", "description": "ISO 4217 code"},
			"formatted":             map[string]any{"type": "string", "description": "amount with thousands separators"},
			"formattedWithCurrency": map[string]any{"type": "string"},
			"minorUnits":            map[string]any{"type": "integer", "format": "int64"},
		}}
	g.schemas["Problem"] = g.object(reflect.TypeOf(Problem{}))
	g.owner["Problem"] = reflect.TypeOf(Problem{})
	g.schemas["FieldError"] = g.object(reflect.TypeOf(fault.FieldError{}))
	problems := g.schemas["Problem"].(map[string]any)["properties"].(map[string]any)
	problems["errors"] = map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/FieldError"}}
	g.schemas["OAuthError"] = g.object(reflect.TypeOf(oauthError{}))
	g.owner["OAuthError"] = reflect.TypeOf(oauthError{})

	paths := map[string]any{}
	for _, o := range operations() {
		item, _ := paths[o.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[o.path] = item
		}
		var params []any
		for _, seg := range strings.Split(o.path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
			}
		}
		for _, q := range o.query {
			s := map[string]any{"type": "string"}
			switch {
			case q.csv:
				items := map[string]any{"type": "string"}
				if q.enum != nil {
					// Any other value is refused (400 naming the filter).
					items["enum"] = enums[q.enum]
				}
				s = map[string]any{"type": "array", "items": items}
			case q.typ == "integer":
				s = map[string]any{"type": "integer"}
			case q.typ == "date-time":
				s = map[string]any{"type": "string", "format": "date-time"}
			}
			// A filter sent empty is refused (apiQuery).
			key := o.method + " " + strings.NewReplacer("{", ":", "}", "").Replace(o.path)
			if rp := apiQuery[key]; slices.Contains(rp.lists, q.name) {
				s["minItems"] = 1
			} else if slices.Contains(rp.filters, q.name) {
				s["minLength"] = 1
			}
			p := map[string]any{"name": q.name, "in": "query", "required": q.required, "schema": s}
			if q.csv {
				p["style"], p["explode"] = "form", false
			}
			if q.desc != "" {
				p["description"] = q.desc
			}
			if q.deprecated {
				p["deprecated"] = true
			}
			params = append(params, p)
		}
		if o.idem {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false,
				"description": "a unique key (≤ 255 printable ASCII characters; a UUID v4 is recommended) so that a retry is not performed twice; kept 24 h",
				"schema":      map[string]any{"type": "string", "maxLength": 255}})
		}
		params = append(params, map[string]any{"name": "X-Request-Id", "in": "header", "required": false,
			"description": "honoured and returned; generated when absent", "schema": map[string]any{"type": "string", "maxLength": 128}})
		opm := map[string]any{"operationId": o.id, "summary": o.summary, "tags": []string{o.tag}, "parameters": params}
		if o.deprecated {
			opm["deprecated"] = true
		}
		if o.auth {
			opm["security"] = []any{map[string]any{"oauth2": []string{}}, map[string]any{"bearer": []string{}}, map[string]any{"basic": []string{}}}
		} else {
			opm["security"] = []any{}
		}
		switch {
		case o.path == "/oauth/token":
			opm["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-www-form-urlencoded": map[string]any{"schema": map[string]any{
				"type": "object", "required": []string{"grant_type"}, "properties": map[string]any{
					"grant_type": map[string]any{"type": "string", "enum": []string{"client_credentials"}}, "client_id": map[string]any{"type": "string"},
					"client_secret": map[string]any{"type": "string"}, "scope": map[string]any{"type": "string", "description": "any of: orders payments settlements (every token has all three)"}}}}}}
		case o.id == "checkoutSubmit":
			opm["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/x-www-form-urlencoded": map[string]any{"schema": map[string]any{
				"type": "object", "properties": map[string]any{}}}}}
		case o.body != nil:
			opm["requestBody"] = map[string]any{"required": !o.bodyOptional, "content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(o.body))}}}
		}
		responses := map[string]any{}
		ok := map[string]any{"description": http.StatusText(o.status)}
		headers := map[string]any{"X-Request-Id": map[string]any{"schema": map[string]any{"type": "string"}}}
		if o.idem {
			headers["Idempotent-Replayed"] = map[string]any{"description": "true when the response replays an earlier request with the same Idempotency-Key", "schema": map[string]any{"type": "string"}}
		}
		if o.location {
			headers["Location"] = map[string]any{"description": "path of the new resource", "schema": map[string]any{"type": "string"}}
		}
		if o.deprecated {
			headers["Deprecation"] = map[string]any{"schema": map[string]any{"type": "string"}}
			headers["Link"] = map[string]any{"description": `the successor operation, rel="successor-version"`, "schema": map[string]any{"type": "string"}}
		}
		if o.id == "exportSettlement" {
			headers["Content-Disposition"] = map[string]any{"description": `attachment; filename="settlement-{settlementId}.csv"`, "schema": map[string]any{"type": "string"}}
		}
		ok["headers"] = headers
		switch {
		case o.status == http.StatusSeeOther || o.status == http.StatusNoContent:
		case o.contentType != "":
			ok["content"] = map[string]any{o.contentType: map[string]any{"schema": map[string]any{"type": "string"}}}
		case o.resp != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(o.resp))}}
		}
		responses[fmt.Sprint(o.status)] = ok
		errs := o.errs
		if queryChecked(o.path) && !slices.Contains(errs, http.StatusBadRequest) {
			// A query parameter the operation does not list is refused.
			errs = append([]int{http.StatusBadRequest}, errs...)
		}
		// Every route refuses before it is routed (Server.serve) a query
		// that is not URL-encoded or a single-valued header given twice
		// (400), and a Content-Length past the body limit (413).
		for _, code := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge} {
			if !slices.Contains(errs, code) {
				errs = append(slices.Clone(errs), code)
			}
		}
		if o.body != nil {
			// decodeBody refuses a body still arriving at the server's read
			// deadline (408) and one that is not JSON (415).
			for _, code := range []int{http.StatusRequestTimeout, http.StatusUnsupportedMediaType} {
				if !slices.Contains(errs, code) {
					errs = append(slices.Clone(errs), code)
				}
			}
		}
		if o.auth && !slices.Contains(errs, http.StatusServiceUnavailable) {
			// Every operation that needs credentials waits for the store,
			// which may be unavailable (docs/errors.md, store_unavailable).
			errs = append(slices.Clone(errs), http.StatusServiceUnavailable)
		}
		for _, code := range errs {
			r := map[string]any{"description": http.StatusText(code), "content": map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}}
			// Every answer carries the request id, a refusal too: it is what
			// a merchant quotes (docs/errors.md).
			eh := map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}}
			if code == http.StatusTooManyRequests || (code == http.StatusServiceUnavailable && o.auth) {
				eh["Retry-After"] = map[string]any{"description": "seconds to wait before sending the request again", "schema": map[string]any{"type": "integer"}}
			}
			if code == http.StatusUnauthorized && (o.auth || o.path == "/oauth/token") {
				eh["WWW-Authenticate"] = map[string]any{"$ref": "#/components/headers/WWW-Authenticate"}
			}
			r["headers"] = eh
			switch {
			case o.path == "/oauth/token":
				r["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/OAuthError"}}}
			case o.contentType == "text/html" || o.id == "ready" || o.id == "checkoutSubmit":
				r["content"] = map[string]any{"text/html": map[string]any{"schema": map[string]any{"type": "string"}}, "application/json": map[string]any{"schema": map[string]any{}}, "application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}
			}
			responses[fmt.Sprint(code)] = r
		}
		// Every path can also answer 405 (method not allowed) and 500 (a bug; never bad input).
		responses["default"] = map[string]any{"description": "error", "content": map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}}}
		opm["responses"] = responses
		item[strings.ToLower(o.method)] = opm
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "kassa", "version": "1.0",
			"description": "Business-to-business payments, checkout and order management: the /v1 interface of the spec, OAuth 2.0, idempotency, the sandbox and the hosted checkout. Errors are RFC 9457 problem documents (docs/errors.md). On /v1 and /sandbox/v1 operations, a query parameter the operation does not list, or a filter sent empty, is 400 validation_failed naming it."},
		"servers": []any{map[string]any{"url": "/"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas": g.schemas,
			"headers": map[string]any{
				"X-Request-Id":     map[string]any{"description": "the request's id (a problem document's requestId; OAuth errors carry it in this header only): honoured when the request sent one, generated otherwise", "schema": map[string]any{"type": "string"}},
				"WWW-Authenticate": map[string]any{"description": `the challenges, each on a line of its own: Basic realm="kassa", then (except on /oauth/token) Bearer realm="kassa"`, "schema": map[string]any{"type": "string"}},
			},
			"securitySchemes": map[string]any{
				"oauth2": map[string]any{"type": "oauth2", "flows": map[string]any{"clientCredentials": map[string]any{"tokenUrl": "/oauth/token", "scopes": oauthScopes()}},
					"description": "Every token is granted all three scopes, whichever a request names."},
				"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"basic":  map[string]any{"type": "http", "scheme": "basic", "description": "base64(clientId:clientSecret), accepted on every /v1 operation"},
			},
		},
	}
}

// oauthScopes declares grantedScopes, each with what it names.
func oauthScopes() map[string]any {
	about := map[string]string{
		"orders":      "Order Management API: orders, captures, refunds, documents",
		"payments":    "Payments API: authorization and customer tokens, sessions, payment status",
		"settlements": "settlements and their transactions",
	}
	m := map[string]any{}
	for _, sc := range grantedScopes {
		m[sc] = about[sc]
	}
	return m
}

func generatedOpenAPI(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(buildOpenAPI()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestOpenAPIUpToDate(t *testing.T) {
	want := generatedOpenAPI(t)
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(openAPI, want) {
		t.Fatal("server/openapi.json is out of date with the Go types: run go test ./server -run TestOpenAPIUpToDate -update")
	}
}

func TestOpenAPIIsValidAndCoversEveryRoute(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	s := New(Config{Sandbox: true})
	documented := map[string]bool{}
	for _, o := range operations() {
		documented[o.method+" "+o.path] = true
	}
	for _, r := range s.served {
		method, pattern, _ := strings.Cut(r, " ")
		path := pattern
		for _, seg := range strings.Split(pattern, "/") {
			if strings.HasPrefix(seg, ":") {
				path = strings.Replace(path, seg, "{"+seg[1:]+"}", 1)
			}
		}
		if !documented[method+" "+path] {
			t.Errorf("route %s %s is not in the OpenAPI document", method, path)
		}
		delete(documented, method+" "+path)
	}
	for r := range documented {
		t.Errorf("the OpenAPI document has %s, which the server does not serve", r)
	}
}

// TestQueryEnumsAreWhatTheServerTakes: every value a filter's enum lists in
// openapi.json is taken, and a value it does not list is refused naming the
// filter, so the document and the server agree on each filter's values.
func TestQueryEnumsAreWhatTheServerTakes(t *testing.T) {
	e := newSessionEnv(t)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
				Schema   struct {
					Items struct{ Enum []string }
				}
			}
		}
	}
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for path, item := range doc.Paths {
		for method, o := range item {
			for _, p := range o.Parameters {
				if p.In != "query" || len(p.Schema.Items.Enum) == 0 {
					continue
				}
				for _, v := range p.Schema.Items.Enum {
					if code, _, b := e.req(strings.ToUpper(method), path+"?"+p.Name+"="+v, "", e.auth, nil); code != 200 {
						t.Errorf("%s %s?%s=%s: %d %v", method, path, p.Name, v, code, b)
					}
					checked++
				}
				code, _, b := e.req(strings.ToUpper(method), path+"?"+p.Name+"=bogus", "", e.auth, nil)
				if code != 400 || !strings.Contains(fmt.Sprint(b["errors"]), p.Name) {
					t.Errorf("%s %s?%s=bogus: %d %v, want 400 naming %s", method, path, p.Name, code, b, p.Name)
				}
			}
		}
	}
	if checked < 40 {
		t.Fatalf("only %d enum values checked: the document lists fewer filter enums than it should", checked)
	}
}
