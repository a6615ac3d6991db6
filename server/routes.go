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
	s.handleOn(s.ops, http.MethodGet, "/healthz", s.handleHealth)
	s.handleOn(s.ops, http.MethodGet, "/readyz", s.handleReady)
	s.handleOn(s.ops, http.MethodGet, "/metrics", s.handleMetrics)
	if s.cfg.BackupToken != "" {
		s.handleOn(s.ops, http.MethodGet, backupPath, s.handleBackup)
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
	s.handle(http.MethodGet, "/v1/orders", s.authed(s.listOrders))
	s.handle(http.MethodGet, "/v1/orders/:orderId", s.authed(s.getOrder))
	s.handle(http.MethodPost, "/v1/orders/:orderId", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditRequest) (*kassa.Result, error) {
		return s.ledger.EditOrder(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodDelete, "/v1/orders/:orderId", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelOrder(ctx, c, p.ByName("orderId"))
	})))
	s.handle(http.MethodDelete, "/v1/orders/:orderId/:ledgerId", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelLedger(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"))
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/acknowledge", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.Acknowledge(ctx, c, p.ByName("orderId"))
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/capture", s.authed(bodyOp(s, true, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *capture.FullRequest) (*kassa.Result, error) {
		return s.ledger.Capture(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/partialcapture", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *capture.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialCapture(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/customer", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditCustomerRequest) (*kassa.Result, error) {
		return s.ledger.EditCustomer(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/document/:ledgerId/resend", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ResendDocument(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"))
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/extendexpiry", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ExtendExpiry(ctx, c, p.ByName("orderId"))
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/partialrefund/:ledgerId", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *refund.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialRefund(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/refund/:ledgerId", s.authed(bodyOp(s, true, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *fullRefundBody) (*kassa.Result, error) {
		if err := b.Validate(); err != nil {
			return nil, err
		}
		return s.ledger.Refund(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), &b.FullRequest)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/paymentmethod", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.EditPaymentMethodRequest) (*kassa.Result, error) {
		return s.ledger.EditPaymentMethod(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/recourse/:ledgerId", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.RecourseRequest) (*kassa.Result, error) {
		return s.ledger.Recourse(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	})))
	s.handle(http.MethodPost, "/v1/orders/:orderId/reference", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *order.ReferenceRequest) (*kassa.Result, error) {
		return s.ledger.SetReference(ctx, c, p.ByName("orderId"), b)
	})))
	s.handle(http.MethodGet, "/v1/orders/:orderId/paymentstatus", s.authed(s.orderPaymentStatus))
	s.handle(http.MethodGet, "/v1/paymentstatus", s.authed(s.paymentStatus))

	// Headless API: company search needs no authentication (spec).
	s.handle(http.MethodGet, "/v1/headless/search/companies", s.searchCompanies)

	// Payments API: tokens.
	s.handle(http.MethodDelete, "/v1/authorization-tokens/:token", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.DeleteAuthorization(ctx, c, p.ByName("token"))
	})))
	s.handle(http.MethodPost, "/v1/authorization-tokens/:token/customer-token", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *token.CreateCustomerRequest) (*kassa.Result, error) {
		return s.ledger.CreateCustomerToken(ctx, c, p.ByName("token"), b)
	})))
	s.handle(http.MethodPost, "/v1/authorization-tokens/:token/order", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *authorizationOrderBody) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromAuthorization(ctx, c, p.ByName("token"), &b.CreateRequest)
	})))
	s.handle(http.MethodGet, "/v1/customer-tokens/:token", s.authed(s.getCustomerToken))
	s.handle(http.MethodDelete, "/v1/customer-tokens/:token", s.authed(s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.RevokeCustomerToken(ctx, c, p.ByName("token"))
	})))
	s.handle(http.MethodPost, "/v1/customer-tokens/:token/order", s.authed(bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *customerTokenOrderBody) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromCustomerToken(ctx, c, p.ByName("token"), &b.CreateRequest)
	})))

	s.sessionRoutes()
	s.settlementRoutes()
	s.notificationRoutes()
	s.handle(http.MethodGet, "/checkout/:merchantId/:sessionId", s.checkoutPage)
	s.handle(http.MethodPost, "/checkout/:merchantId/:sessionId", s.checkoutSubmit)

	if s.cfg.Sandbox {
		s.handle(http.MethodPost, "/sandbox/v1/authorization-tokens", s.authed(s.sandboxMintToken))
		s.handle(http.MethodPost, "/sandbox/v1/merchants", s.authed(s.sandboxCreateMerchant))
		s.handle(http.MethodGet, "/sandbox/v1/clock", s.authed(s.sandboxGetClock))
		s.handle(http.MethodPost, "/sandbox/v1/clock", s.authed(s.sandboxSetClock))
		s.handle(http.MethodGet, "/sandbox/v1/fixtures", s.authed(s.sandboxFixtures))
		s.handle(http.MethodPost, "/sandbox/v1/orders/:orderId/ledgers/:ledgerId/payments", s.authed(s.sandboxPay))
		s.handle(http.MethodPost, "/sandbox/v1/orders/:orderId/ledgers/:ledgerId/status", s.authed(s.sandboxMark))
		s.handle(http.MethodPost, "/sandbox/v1/orders/:orderId/risk", s.authed(s.sandboxRisk))
		s.handle(http.MethodPost, "/sandbox/v1/jobs/expire", s.authed(s.sandboxExpire))
		s.handle(http.MethodPost, "/sandbox/v1/settlements/run", s.authed(s.sandboxSettle))
		s.handle(http.MethodPost, "/sandbox/v1/jobs/autocapture", s.authed(s.sandboxAutoCapture))
		s.handle(http.MethodPost, "/sandbox/v1/jobs/tasks", s.authed(s.sandboxTasks))
		s.handle(http.MethodPost, "/sandbox/v1/jobs/notifications", s.authed(s.sandboxDeliver))
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
