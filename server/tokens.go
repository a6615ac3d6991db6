package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

func (s *Server) getCustomerToken(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	c, err := s.ledger.GetCustomerToken(r.Context(), merchantOf(r.Context()), p.ByName("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Record)
}
