package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/token"
)

func (s *Server) routes() {
	s.router = s.newRouter()
	s.ops = s.newRouter()

	s.handle(http.MethodPost, tokenPath, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { s.handleToken(w, r) })
	// Load balancers and orchestrators probe the port they send traffic to,
	// so the health routes stay on the API with SeparateOps; /metrics tells
	// traffic volumes and error rates, which the public must not read.
	s.handle(http.MethodGet, "/healthz", s.handleHealth)
	s.handle(http.MethodGet, "/readyz", s.handleReady)
	if !s.cfg.SeparateOps {
		s.handle(http.MethodGet, "/metrics", s.handleMetrics)
	}
	s.handleOn(s.ops, http.MethodGet, "/healthz", false, s.handleHealth)
	s.handleOn(s.ops, http.MethodGet, "/readyz", false, s.handleReady)
	s.handleOn(s.ops, http.MethodGet, "/metrics", false, s.handleMetrics)
	if s.cfg.BackupToken != "" {
		s.handleOn(s.ops, http.MethodGet, backupPath, false, s.handleBackup)
	}
	s.apiRoutes()
}

// backupPath is the operations route of a backup, which refuses HEAD.
const backupPath = "/backup"

// newRouter is a router that answers what no route matches with a problem
// document, as every answer of the server is.
func (s *Server) newRouter() *httprouter.Router {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, fault.NotFoundf("route_not_found", "no route %s %s", req.Method, req.URL.Path))
	})
	// httprouter sets Allow from the registered methods; HEAD is answered
	// for every GET route (see Server.serve) without being registered,
	// except /backup's (handleBackup).
	allowHead := func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == backupPath {
			return
		}
		if allow := w.Header().Get("Allow"); strings.Contains(allow, http.MethodGet) {
			w.Header().Set("Allow", allow+", "+http.MethodHead)
		}
	}
	r.GlobalOPTIONS = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allowHead(w, req)
		w.WriteHeader(http.StatusNoContent)
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		allowHead(w, req)
		s.writeError(w, req, &fault.Error{Kind: fault.MethodNotAllowed, Code: "method_not_allowed",
			Message: req.Method + " is not allowed on " + req.URL.Path})
	})
	r.PanicHandler = nil // the outer middleware recovers and logs
	return r
}

// apiRoutes registers the routes of the public API.
func (s *Server) apiRoutes() {
	s.handle(http.MethodGet, "/openapi.json", s.handleOpenAPI)
	s.handle(http.MethodGet, "/documents/:merchantId/:orderId/:ledgerId", s.handleDocument)

	// Order Management API.
	s.handleAuthed(http.MethodGet, "/v1/orders", s.listOrders)
	s.handleAuthed(http.MethodGet, "/v1/orders/:orderId", s.getOrder)
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditRequest) (*kassa.Result, error) {
		return s.ledger.EditOrder(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodDelete, "/v1/orders/:orderId", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelOrder(ctx, c, p.ByName("orderId"))
	}))
	s.handleAuthed(http.MethodDelete, "/v1/orders/:orderId/:ledgerId", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelLedger(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/acknowledge", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.Acknowledge(ctx, c, p.ByName("orderId"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/capture", bodyOp(s, true, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *capture.FullRequest) (*kassa.Result, error) {
		return s.ledger.Capture(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/partialcapture", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *capture.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialCapture(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/customer", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditCustomerRequest) (*kassa.Result, error) {
		return s.ledger.EditCustomer(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/document/:ledgerId/resend", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ResendDocument(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/extendexpiry", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ExtendExpiry(ctx, c, p.ByName("orderId"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/partialrefund/:ledgerId", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *refund.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialRefund(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/refund/:ledgerId", bodyOp(s, true, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *fullRefundBody) (*kassa.Result, error) {
		if err := b.Validate(); err != nil {
			return nil, err
		}
		return s.ledger.Refund(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), &b.FullRequest)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/paymentmethod", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditPaymentMethodRequest) (*kassa.Result, error) {
		return s.ledger.EditPaymentMethod(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/recourse/:ledgerId", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.RecourseRequest) (*kassa.Result, error) {
		return s.ledger.Recourse(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/orders/:orderId/reference", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.ReferenceRequest) (*kassa.Result, error) {
		return s.ledger.SetReference(ctx, c, p.ByName("orderId"), b)
	}))
	s.handleAuthed(http.MethodGet, "/v1/orders/:orderId/paymentstatus", s.orderPaymentStatus)
	s.handleAuthed(http.MethodGet, "/v1/paymentstatus", s.paymentStatus)

	// Headless API: company search needs no authentication (spec).
	s.handle(http.MethodGet, "/v1/headless/search/companies", s.searchCompanies)

	// Payments API: tokens.
	s.handleAuthed(http.MethodDelete, "/v1/authorization-tokens/:token", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.DeleteAuthorization(ctx, c, p.ByName("token"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/authorization-tokens/:token/customer-token", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *token.CreateCustomerRequest) (*kassa.Result, error) {
		return s.ledger.CreateCustomerToken(ctx, c, p.ByName("token"), b)
	}))
	s.handleAuthed(http.MethodPost, "/v1/authorization-tokens/:token/order", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *authorizationOrderBody) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromAuthorization(ctx, c, p.ByName("token"), &b.CreateRequest)
	}))
	s.handleAuthed(http.MethodGet, "/v1/customer-tokens/:token", s.getCustomerToken)
	s.handleAuthed(http.MethodDelete, "/v1/customer-tokens/:token", s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.RevokeCustomerToken(ctx, c, p.ByName("token"))
	}))
	s.handleAuthed(http.MethodPost, "/v1/customer-tokens/:token/order", bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *customerTokenOrderBody) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromCustomerToken(ctx, c, p.ByName("token"), &b.CreateRequest)
	}))

	s.sessionRoutes()
	s.settlementRoutes()
	s.notificationRoutes()
	s.handle(http.MethodGet, "/checkout/:merchantId/:sessionId", s.checkoutPage)
	s.handle(http.MethodPost, "/checkout/:merchantId/:sessionId", s.checkoutSubmit)

	if s.cfg.Sandbox {
		s.handleAuthed(http.MethodPost, "/sandbox/v1/authorization-tokens", s.sandboxMintToken)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/merchants", s.sandboxCreateMerchant)
		s.handleAuthed(http.MethodGet, "/sandbox/v1/clock", s.sandboxGetClock)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/clock", s.sandboxSetClock)
		s.handleAuthed(http.MethodGet, "/sandbox/v1/fixtures", s.sandboxFixtures)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/orders/:orderId/ledgers/:ledgerId/payments", s.sandboxPay)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/orders/:orderId/ledgers/:ledgerId/status", s.sandboxMark)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/orders/:orderId/risk", s.sandboxRisk)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/jobs/expire", s.sandboxExpire)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/settlements/run", s.sandboxSettle)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/jobs/autocapture", s.sandboxAutoCapture)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/jobs/tasks", s.sandboxTasks)
		s.handleAuthed(http.MethodPost, "/sandbox/v1/jobs/notifications", s.sandboxDeliver)
	}
}

// fullRefundBody is a full refund's body, which refuses the partial
// refund's amount fields: ignored as unknown fields, a body meant for
// …/partialrefund refunded the whole capture. null is the field left out.
type fullRefundBody struct {
	refund.FullRequest
	OrderLines        any `json:"orderLines"`
	TotalRefundAmount any `json:"totalRefundAmount"`
}

func (b *fullRefundBody) Validate() error {
	var f fault.Fields
	if b.OrderLines != nil {
		f.Add("orderLines", "a full refund refunds every line of the capture: send lines to …/partialrefund/{ledgerId}")
	}
	if b.TotalRefundAmount != nil {
		f.Add("totalRefundAmount", "a full refund refunds all that is left of the capture: send an amount to …/partialrefund/{ledgerId}")
	}
	return f.Err()
}

// createOrderBody is a create-order body that checks itself (see
// withOwnChecks); the two routes check it by their own rules.
type createOrderBody struct{ order.CreateRequest }

type (
	authorizationOrderBody struct{ createOrderBody }
	customerTokenOrderBody struct{ createOrderBody }
)

func (b *authorizationOrderBody) Validate() error {
	_, _, err := order.ValidateCreate(&b.CreateRequest, false, order.NoIDs{})
	return err
}

func (b *customerTokenOrderBody) Validate() error {
	_, _, err := order.ValidateCreate(&b.CreateRequest, true, order.NoIDs{})
	return err
}

// DependsOn: the top-level totals (totalOrderAmount, …) are compared with
// sums of the lines, which may hold a stand-in anywhere, and vatMode decides
// how every line's VAT is computed.
func (b *createOrderBody) DependsOn(finding, wrongTyped string) bool {
	return (strings.HasPrefix(finding, "total") && !strings.ContainsAny(finding, ".[")) ||
		(wrongTyped == "vatMode" && under(finding, "orderLines"))
}
