package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/session"
)

// sessionRoutes registers the Checkout API (/v1/sessions) and the Payments
// API's sessions (/v1/payment-sessions) over the same use cases.
func (s *Server) sessionRoutes() {
	for _, api := range []struct {
		base, param string
		src         session.Source
	}{{"/v1/sessions", "id", session.SourceCheckout}, {"/v1/payment-sessions", "sessionId", session.SourcePayment}} {
		src, param := api.src, api.param
		s.handleAuthed(http.MethodPost, api.base, bodyOp(s, false, func(ctx context.Context, c kassa.Call, _ httprouter.Params, b *session.CreateRequest) (*kassa.Result, error) {
			return s.ledger.CreateSession(ctx, c, src, b)
		}))
		s.handleAuthed(http.MethodGet, api.base+"/:"+param, func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
			v, err := s.ledger.GetSession(r.Context(), merchantOf(r.Context()), p.ByName(param), src)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
		s.handleAuthed(http.MethodPost, api.base+"/:"+param, bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *session.UpdateRequest) (*kassa.Result, error) {
			return s.ledger.UpdateSession(ctx, c, p.ByName(param), src, b)
		}))
		s.handleAuthed(http.MethodDelete, api.base+"/:"+param, s.op(func(ctx context.Context, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
			return s.ledger.DeleteSession(ctx, c, p.ByName(param), src)
		}))
	}
	s.handleAuthed(http.MethodGet, "/v1/sessions", s.listSessions)
}

func parseSessionQuery(r *http.Request) (session.Query, error) {
	v := r.URL.Query()
	var f fault.Fields
	one := func(name string) string { return queryValue(&f, v, name) }
	// The spec declares updatedFrom twice, the second time for the upper
	// bound: a client that sends it twice learns the upper bound's name
	// instead of losing the bound.
	if vs := v["updatedFrom"]; differ(vs) {
		f.Add("updatedFrom", "is given more than once; the upper bound of the update time is updatedTo")
		v["updatedFrom"] = vs[:1]
	}
	q := session.Query{
		Q:                  one("q"),
		FromID:             one("fromId"),
		StoreIDs:           queryList(v["storeId"]),
		OrderIDs:           queryList(v["orderId"]),
		MerchantReferences: queryList(v["merchantReference"]),
		CreatedFrom:        parseTime(&f, "createdFrom", one("createdFrom")),
		CreatedTo:          parseUpperBound(&f, "createdTo", one("createdTo")),
		UpdatedFrom:        parseTime(&f, "updatedFrom", one("updatedFrom")),
		UpdatedTo:          parseUpperBound(&f, "updatedTo", one("updatedTo")),
	}
	checkRange(&f, "createdFrom", q.CreatedFrom, "createdTo", q.CreatedTo)
	checkRange(&f, "updatedFrom", q.UpdatedFrom, "updatedTo", q.UpdatedTo)
	for _, st := range queryList(v["state"]) {
		q.States = append(q.States, session.State(st))
	}
	for _, src := range queryList(v["source"]) {
		q.Sources = append(q.Sources, session.Source(src))
	}
	if v.Has("size") {
		q.Size = parseIntParam(&f, "size", one("size"), 1, 1000)
	}
	// Report the shape errors and the query's own errors together.
	var fe *fault.Error
	if err := q.Validate(); errors.As(err, &fe) {
		for _, e := range fe.Fields {
			f.Add(e.Field, "%s", e.Message)
		}
	}
	return q, f.Err()
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q, err := parseSessionQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.ledger.ListSessions(r.Context(), merchantOf(r.Context()), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
