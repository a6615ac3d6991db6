package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/fault"
)

func (s *Server) routes() {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, fault.NotFoundf("route_not_found", "no route %s %s", req.Method, req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, &fault.Error{Kind: fault.NotAvailable, Code: "method_not_allowed",
			Message: req.Method + " is not allowed on " + req.URL.Path})
	})
	r.PanicHandler = nil // the outer middleware recovers and logs
	s.router = r

	s.handle(http.MethodPost, "/oauth/token", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { s.handleToken(w, r) })
	s.handle(http.MethodGet, "/healthz", s.handleHealth)
	s.handle(http.MethodGet, "/readyz", s.handleReady)
	s.handle(http.MethodGet, "/metrics", s.handleMetrics)
	s.handle(http.MethodGet, "/openapi.json", s.handleOpenAPI)
	s.handle(http.MethodGet, "/documents/:merchantId/:orderId/:ledgerId", s.handleDocument)

	// Order Management API.
	s.handle(http.MethodGet, "/v1/orders", s.authed(s.listOrders))
	s.handle(http.MethodGet, "/v1/orders/:orderId", s.authed(s.getOrder))
	s.handle(http.MethodPost, "/v1/orders/:orderId", s.authed(s.editOrder))
	s.handle(http.MethodDelete, "/v1/orders/:orderId", s.authed(s.cancelOrder))
	s.handle(http.MethodDelete, "/v1/orders/:orderId/:ledgerId", s.authed(s.cancelLedger))
	s.handle(http.MethodPost, "/v1/orders/:orderId/acknowledge", s.authed(s.acknowledge))
	s.handle(http.MethodPost, "/v1/orders/:orderId/capture", s.authed(s.capture))
	s.handle(http.MethodPost, "/v1/orders/:orderId/partialcapture", s.authed(s.partialCapture))
	s.handle(http.MethodPost, "/v1/orders/:orderId/customer", s.authed(s.editCustomer))
	s.handle(http.MethodPost, "/v1/orders/:orderId/document/:ledgerId/resend", s.authed(s.resendDocument))
	s.handle(http.MethodPost, "/v1/orders/:orderId/extendexpiry", s.authed(s.extendExpiry))
	s.handle(http.MethodPost, "/v1/orders/:orderId/partialrefund/:ledgerId", s.authed(s.partialRefund))
	s.handle(http.MethodPost, "/v1/orders/:orderId/refund/:ledgerId", s.authed(s.refund))
	s.handle(http.MethodPost, "/v1/orders/:orderId/paymentmethod", s.authed(s.editPaymentMethod))
	s.handle(http.MethodPost, "/v1/orders/:orderId/recourse/:ledgerId", s.authed(s.recourse))
	s.handle(http.MethodPost, "/v1/orders/:orderId/reference", s.authed(s.setReference))
	s.handle(http.MethodGet, "/v1/orders/:orderId/paymentstatus", s.authed(s.orderPaymentStatus))
	s.handle(http.MethodGet, "/v1/paymentstatus", s.authed(s.paymentStatus))

	// Headless API: company search needs no authentication (spec).
	s.handle(http.MethodGet, "/v1/headless/search/companies", s.searchCompanies)

	// Payments API: tokens.
	s.handle(http.MethodDelete, "/v1/authorization-tokens/:token", s.authed(s.deleteAuthorization))
	s.handle(http.MethodPost, "/v1/authorization-tokens/:token/customer-token", s.authed(s.createCustomerToken))
	s.handle(http.MethodPost, "/v1/authorization-tokens/:token/order", s.authed(s.createOrder))
	s.handle(http.MethodGet, "/v1/customer-tokens/:token", s.authed(s.getCustomerToken))
	s.handle(http.MethodDelete, "/v1/customer-tokens/:token", s.authed(s.revokeCustomerToken))
	s.handle(http.MethodPost, "/v1/customer-tokens/:token/order", s.authed(s.createOrderFromCustomerToken))

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
	}
}
