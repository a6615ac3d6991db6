package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/token"
)

func (s *Server) deleteAuthorization(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.DeleteAuthorization(r.Context(), c, p.ByName("token"))
	})(w, r, p)
}

func (s *Server) createCustomerToken(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *token.CreateCustomerRequest) (*kassa.Result, error) {
		return s.ledger.CreateCustomerToken(r.Context(), c, p.ByName("token"), b)
	})(w, r, p)
}

func (s *Server) createOrder(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.CreateRequest) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromAuthorization(r.Context(), c, p.ByName("token"), b)
	})(w, r, p)
}

func (s *Server) createOrderFromCustomerToken(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(r *http.Request, c kassa.Call, p httprouter.Params, b *order.CreateRequest) (*kassa.Result, error) {
		return s.ledger.CreateOrderFromCustomerToken(r.Context(), c, p.ByName("token"), b)
	})(w, r, p)
}

func (s *Server) getCustomerToken(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	c, err := s.ledger.GetCustomerToken(r.Context(), merchantOf(r.Context()), p.ByName("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Record)
}

func (s *Server) revokeCustomerToken(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	s.orderOp(func(r *http.Request, c kassa.Call, p httprouter.Params) (*kassa.Result, error) {
		return s.ledger.RevokeCustomerToken(r.Context(), c, p.ByName("token"))
	})(w, r, p)
}
