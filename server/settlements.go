package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/settlement"
)

func (s *Server) settlementRoutes() {
	s.handleAuthed(http.MethodGet, "/v1/settlements", s.listSettlements)
	s.handleAuthed(http.MethodGet, "/v1/settlements/:settlementId", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		rec, err := s.ledger.GetSettlement(r.Context(), merchantOf(r.Context()), p.ByName("settlementId"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
	s.handleAuthed(http.MethodGet, "/v1/settlements/:settlementId/tx", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		var f fault.Fields
		v := r.URL.Query()
		size := settlement.DefaultPageSize
		if v.Has("size") {
			size = parseIntParam(&f, "size", queryValue(&f, v, "size"), 1, settlement.MaxPageSize)
		}
		fromID := queryValue(&f, v, "fromId")
		if err := f.Err(); err != nil {
			s.writeError(w, r, err)
			return
		}
		page, err := s.ledger.SettlementTransactions(r.Context(), merchantOf(r.Context()), p.ByName("settlementId"), fromID, size)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, page)
	})
	s.handleAuthed(http.MethodGet, "/v1/settlements/:settlementId/export.csv", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		id := p.ByName("settlementId")
		if _, err := s.ledger.GetSettlement(r.Context(), merchantOf(r.Context()), id); err != nil {
			s.writeError(w, r, err)
			return
		}
		out := &exportWriter{w: w, id: id}
		if err := s.ledger.ExportSettlement(r.Context(), merchantOf(r.Context()), id, out); err != nil {
			if !out.wrote {
				// The export writes only once every row is read, so a read
				// that failed sent nothing: answered with its failure, not
				// 200 with an empty file an import would take as whole.
				s.writeError(w, r, err)
				return
			}
			// Every row was read before the first byte went out, so what
			// failed is the client's connection (it hung up, or read too
			// slowly for the write timeout): noted for whoever is asked
			// about a short file, but no fault of the server's.
			s.log.InfoContext(r.Context(), "settlement export cut short", "err", err)
		}
	})
}

func (s *Server) listSettlements(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	v := r.URL.Query()
	var f fault.Fields
	one := func(name string) string { return queryValue(&f, v, name) }
	q := settlement.Query{StoreIDs: queryList(v["storeId"]), IDs: queryList(v["id"]), References: queryList(v["reference"]),
		Currencies: queryList(v["currency"]), FromID: one("fromId"),
		CreatedFrom: parseTime(&f, "createdFrom", one("createdFrom")), CreatedTo: parseUpperBound(&f, "createdTo", one("createdTo"))}
	checkRange(&f, "createdFrom", q.CreatedFrom, "createdTo", q.CreatedTo)
	for _, c := range q.Currencies {
		// A code no settlement can have ("sek") would list nothing, as if
		// there were no settlements in SEK.
		if _, ok := money.ParseCurrency(c); !ok {
			f.Add("currency", "%q is not an ISO 4217 code (upper case, e.g. SEK)", c)
		}
	}
	if v.Has("size") {
		q.Size = parseIntParam(&f, "size", one("size"), 1, settlement.MaxPageSize)
	}
	if err := f.Err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.ledger.ListSettlements(r.Context(), merchantOf(r.Context()), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// exportWriter sets the CSV headers with the first write of an export, so
// that an export that fails before it writes can still be answered with a
// problem document.
type exportWriter struct {
	w     http.ResponseWriter
	id    string
	wrote bool
}

func (e *exportWriter) Write(p []byte) (int, error) {
	if !e.wrote {
		e.wrote = true
		e.w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		e.w.Header().Set("Content-Disposition", `attachment; filename="settlement-`+e.id+`.csv"`)
	}
	return e.w.Write(p)
}
