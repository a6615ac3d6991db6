package server

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	err := s.ledger.ServeOrderJSON(r.Context(), merchantOf(r.Context()), p.ByName("orderId"), func(body []byte) {
		writeRaw(w, http.StatusOK, body)
	})
	if err != nil {
		s.writeError(w, r, err)
	}
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
	t, ok := parseDateTime(v)
	if !ok {
		f.Add(name, "must be an ISO 8601 date-time such as 2026-01-31T12:00:00Z")
	}
	return t
}

// parseDateTime reads an RFC 3339 date-time. time.Parse also takes an offset
// of +24:00 or a minute of 60, which RFC 3339 has not (its offsets run
// from -23:59 to +23:59) and no client means: they are refused like any
// other malformed time rather than read as another instant.
func parseDateTime(v string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	if n := len(v); v[n-1] != 'Z' {
		// Parse succeeded, so the value ends in ±hh:mm.
		if v[n-5:n-3] > "23" || v[n-2:] > "59" {
			return time.Time{}, false
		}
	}
	return t, true
}

// parseUpperBound is parseTime for an exclusive upper bound. The stores read
// the zero time as no bound at all, yet a client may send that instant
// (0001-01-01T00:00:00Z, the zero value of many languages' date types) as a
// bound, before which nothing was made: it becomes the instant just before,
// which is not the zero time and excludes the same records, since none is
// stamped that early.
func parseUpperBound(f *fault.Fields, name, v string) time.Time {
	t := parseTime(f, name, v)
	if v != "" && t.IsZero() {
		return t.Add(-time.Nanosecond)
	}
	return t
}

// checkRange refuses a range whose upper bound (exclusive) is not after its
// lower bound (inclusive): such a range holds nothing, and the bounds
// swapped, or one instant sent for "that day", listed nothing without a
// word, which a reconciliation reads as "no orders".
func checkRange(f *fault.Fields, fromName string, from time.Time, toName string, to time.Time) {
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		f.Add(toName, "must be after %s: the range is empty", fromName)
	}
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
	one := func(name string) string { return queryValue(&f, v, name) }
	q := storage.OrderQuery{
		Q:                  one("q"),
		Cursor:             one("cursor"),
		IDs:                queryList(v["id"]),
		StoreIDs:           queryList(v["storeId"]),
		OrderReferences:    queryList(v["orderReference"]),
		MerchantReferences: queryList(v["merchantReference"]),
		Status:             parseStatuses(&f, "status", v["status"]),
		StatusAnd:          parseStatuses(&f, "statusAnd", v["statusAnd"]),
		StatusNot:          parseStatuses(&f, "statusNot", v["statusNot"]),
		CreatedFrom:        parseTime(&f, "createdFrom", one("createdFrom")),
		CreatedTo:          parseUpperBound(&f, "createdTo", one("createdTo")),
		ExpiresFrom:        parseTime(&f, "expiresFrom", one("expiresFrom")),
		ExpiresTo:          parseUpperBound(&f, "expiresTo", one("expiresTo")),
	}
	checkRange(&f, "createdFrom", q.CreatedFrom, "createdTo", q.CreatedTo)
	checkRange(&f, "expiresFrom", q.ExpiresFrom, "expiresTo", q.ExpiresTo)
	// fromId is the deprecated name of cursor: both with different values
	// would leave one of them unread.
	cursorParam := "cursor"
	if fromID := one("fromId"); q.Cursor == "" {
		q.Cursor, cursorParam = fromID, "fromId"
	} else if fromID != "" && fromID != q.Cursor {
		f.Add("fromId", "is the deprecated name of cursor; send one of them")
	}
	if q.Cursor != "" && !kassa.ValidCursor(q.Cursor) {
		f.Add(cursorParam, "is not a cursor from this server (damaged, or from before an upgrade)")
	}
	for _, c := range queryList(v["paymentMethodCategory"]) {
		if !order.ValidCategory(order.Category(c)) {
			f.Add("paymentMethodCategory", "unknown payment method category %q", c)
			continue
		}
		q.Categories = append(q.Categories, order.Category(c))
	}
	if v.Has("size") {
		q.Size = parseIntParam(&f, "size", one("size"), 1, storage.MaxPageSize)
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

// op adapts a bodiless mutating operation to a handler.
func (s *Server) op(fn func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error)) func(http.ResponseWriter, *http.Request, httprouter.Params) {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		res, err := fn(r.Context(), s.call(r), p)
		s.writeResult(w, r, res, err)
	}
}

// bodyOp adapts a mutating operation with a JSON body of type T; optional
// allows the body to be omitted.
func bodyOp[T any](s *Server, optional bool, fn func(ctx context.Context, c kassa.Call, p httprouter.Params, body *T) (*kassa.Result, error)) func(http.ResponseWriter, *http.Request, httprouter.Params) {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		body := new(T)
		if err := s.decodeBody(w, r, body, optional); err != nil {
			s.writeError(w, r, err)
			return
		}
		res, err := fn(r.Context(), s.call(r), p, body)
		s.writeResult(w, r, res, err)
	}
}

func (s *Server) orderPaymentStatus(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	w.Header().Set("Deprecation", "true")
	w.Header().Set("Link", `</v1/paymentstatus?orderId=`+url.QueryEscape(p.ByName("orderId"))+`>; rel="successor-version"`)
	s.writePaymentStatus(w, r, p.ByName("orderId"))
}

func (s *Server) paymentStatus(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var f fault.Fields
	orderID, sessionID := queryValue(&f, q, "orderId"), queryValue(&f, q, "sessionId")
	if err := f.Err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case orderID == "" && sessionID == "":
		s.writeError(w, r, fault.Invalidf("orderId", "orderId or sessionId is required"))
	case orderID != "" && sessionID != "":
		s.writeError(w, r, fault.Invalidf("sessionId", "give orderId or sessionId, not both"))
	case orderID == "":
		ps, err := s.ledger.SessionPaymentStatus(r.Context(), merchantOf(r.Context()), sessionID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ps)
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
