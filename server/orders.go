package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/refund"
	"github.com/kassahq/kassa/storage"
)

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	o, now, err := s.ledger.GetOrder(r.Context(), merchantOf(r.Context()), p.ByName("orderId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.ledger.Render(o, now))
}

// OrderList is the spec's GetOrdersResponse.
type OrderList struct {
	Orders     []order.Summary `json:"orders"`
	NoOfOrders int             `json:"noOfOrders"`
	NextCursor string          `json:"nextCursor,omitempty"`
	// LastID is deprecated; it carries the same opaque value as NextCursor,
	// which the deprecated fromId parameter accepts.
	LastID string `json:"lastId,omitempty"`
}

func parseTime(f *fault.Fields, name, v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		f.Add(name, "must be an ISO 8601 date-time such as 2026-01-31T12:00:00Z")
	}
	return t
}

func parseStatuses(f *fault.Fields, name string, vals []string) []order.Status {
	var out []order.Status
	for _, v := range queryList(vals) {
		if !order.ValidStatus(v) {
			f.Add(name, "unknown order status %q", v)
			continue
		}
		out = append(out, order.Status(v))
	}
	return out
}

// parseOrderQuery reads every query parameter of GET /v1/orders, reporting
// all bad ones at once.
func parseOrderQuery(r *http.Request) (storage.OrderQuery, error) {
	v := r.URL.Query()
	var f fault.Fields
	q := storage.OrderQuery{
		Q:                  v.Get("q"),
		Cursor:             v.Get("cursor"),
		IDs:                queryList(v["id"]),
		StoreIDs:           queryList(v["storeId"]),
		OrderReferences:    queryList(v["orderReference"]),
		MerchantReferences: queryList(v["merchantReference"]),
		Status:             parseStatuses(&f, "status", v["status"]),
		StatusAnd:          parseStatuses(&f, "statusAnd", v["statusAnd"]),
		StatusNot:          parseStatuses(&f, "statusNot", v["statusNot"]),
		CreatedFrom:        parseTime(&f, "createdFrom", v.Get("createdFrom")),
		CreatedTo:          parseTime(&f, "createdTo", v.Get("createdTo")),
		ExpiresFrom:        parseTime(&f, "expiresFrom", v.Get("expiresFrom")),
		ExpiresTo:          parseTime(&f, "expiresTo", v.Get("expiresTo")),
	}
	if q.Cursor == "" {
		q.Cursor = v.Get("fromId")
	}
	for _, c := range queryList(v["paymentMethodCategory"]) {
		ok := false
		for _, known := range order.Categories {
			if string(known) == c {
				ok = true
			}
		}
		if !ok {
			f.Add("paymentMethodCategory", "unknown payment method category %q", c)
			continue
		}
		q.Categories = append(q.Categories, order.Category(c))
	}
	if v.Has("size") {
		q.Size = parseIntParam(&f, "size", v.Get("size"), 1, storage.MaxPageSize)
	}
	return q, f.Err()
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, err := parseOrderQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, now, err := s.ledger.ListOrders(r.Context(), merchantOf(r.Context()), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := OrderList{Orders: make([]order.Summary, 0, len(page.Orders)), NextCursor: page.NextCursor, LastID: page.NextCursor}
	for _, o := range page.Orders {
		out.Orders = append(out.Orders, o.Summary(now))
	}
	out.NoOfOrders = len(out.Orders)
	writeJSON(w, http.StatusOK, out)
}

// orderOp adapts a bodiless order operation.
func (s *Server) orderOp(op func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error)) func(http.ResponseWriter, *http.Request, httprouter.Params) {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		res, err := op(r, s.call(r), p)
		s.writeResult(w, r, res, err)
	}
}

// bodyOp adapts an order operation with a JSON body of type T.
func bodyOp[T any](s *Server, optional bool, op func(r *http.Request, c kassa.Call, p httprouter.Params, body *T) (*kassa.Result, error)) func(http.ResponseWriter, *http.Request, httprouter.Params) {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		body := new(T)
		if err := s.decodeBody(r, body, optional); err != nil {
			s.writeError(w, r, err)
			return
		}
		res, err := op(r, s.call(r), p, body)
		s.writeResult(w, r, res, err)
	}
}

func (s *Server) editOrder(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.EditRequest) (*kassa.Result, error) {
		return s.ledger.EditOrder(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelOrder(r.Context(), c, p.ByName("orderId"))
	})(w, r, p)
}

func (s *Server) cancelLedger(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.CancelLedger(r.Context(), c, p.ByName("orderId"), p.ByName("ledgerId"))
	})(w, r, p)
}

func (s *Server) acknowledge(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.Acknowledge(r.Context(), c, p.ByName("orderId"))
	})(w, r, p)
}

func (s *Server) capture(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, true, func(r *http.Request, c kassa.Call, p httprouter.Params, b *capture.FullRequest) (*kassa.Result, error) {
		return s.ledger.Capture(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) partialCapture(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *capture.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialCapture(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) editCustomer(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.EditCustomerRequest) (*kassa.Result, error) {
		return s.ledger.EditCustomer(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) resendDocument(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ResendDocument(r.Context(), c, p.ByName("orderId"), p.ByName("ledgerId"))
	})(w, r, p)
}

func (s *Server) extendExpiry(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.ExtendExpiry(r.Context(), c, p.ByName("orderId"))
	})(w, r, p)
}

func (s *Server) partialRefund(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *refund.PartialRequest) (*kassa.Result, error) {
		return s.ledger.PartialRefund(r.Context(), c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	})(w, r, p)
}

func (s *Server) refund(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, true, func(r *http.Request, c kassa.Call, p httprouter.Params, b *refund.FullRequest) (*kassa.Result, error) {
		return s.ledger.Refund(r.Context(), c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	})(w, r, p)
}

func (s *Server) editPaymentMethod(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.EditPaymentMethodRequest) (*kassa.Result, error) {
		return s.ledger.EditPaymentMethod(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) recourse(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.RecourseRequest) (*kassa.Result, error) {
		return s.ledger.Recourse(r.Context(), c, p.ByName("orderId"), p.ByName("ledgerId"), b)
	})(w, r, p)
}

func (s *Server) setReference(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.ReferenceRequest) (*kassa.Result, error) {
		return s.ledger.SetReference(r.Context(), c, p.ByName("orderId"), b)
	})(w, r, p)
}

func (s *Server) orderPaymentStatus(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	w.Header().Set("Deprecation", "true")
	w.Header().Set("Link", `</v1/paymentstatus?orderId=`+p.ByName("orderId")+`>; rel="successor-version"`)
	s.writePaymentStatus(w, r, p.ByName("orderId"))
}

func (s *Server) paymentStatus(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	orderID, sessionID := q.Get("orderId"), q.Get("sessionId")
	switch {
	case orderID == "" && sessionID == "":
		s.writeError(w, r, fault.Invalidf("orderId", "orderId or sessionId is required"))
	case orderID == "":
		// Checkout sessions are not part of this server yet, so no session id can be known.
		s.writeError(w, r, fault.NotFoundf("session_not_found", "no session %s", sessionID))
	default:
		s.writePaymentStatus(w, r, orderID)
	}
}

func (s *Server) writePaymentStatus(w http.ResponseWriter, r *http.Request, orderID string) {
	o, now, err := s.ledger.GetOrder(r.Context(), merchantOf(r.Context()), orderID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, kassa.PaymentStatusOf(o, now))
}
