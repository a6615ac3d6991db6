package server

import (
	"context"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/settlement"
)

func (s *Server) sandboxMintToken(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req sandbox.TokenRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.cfg.Clock.Now()
	a, err := sandbox.Mint(&req, merchantOf(r.Context()), "at_"+kassa.RandomSecret(20), now, s.ledger.AuthorizationTTL())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.ledger.PutAuthorization(r.Context(), a); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sandbox.TokenResponse{AuthorizationToken: a.Token, ExpiresAt: a.ExpiresAt})
}

type merchantRequest struct {
	Name               string `json:"name"`
	RequireAck         bool   `json:"requireAcknowledgement"`
	FeeBasisPoints     int64  `json:"feeBasisPoints"`
	FeeFixedPerCapture int64  `json:"feeFixedPerCapture"`
}

func (s *Server) sandboxCreateMerchant(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req merchantRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	creds, _, err := s.ledger.EnsureMerchant(r.Context(), kassa.MerchantOptions{Name: req.Name, Sandbox: true, RequireAck: req.RequireAck,
		FeeBasisPoints: req.FeeBasisPoints, FeeFixedPerCapture: req.FeeFixedPerCapture})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, creds)
}

type clockState struct {
	Now    time.Time `json:"now"`
	Offset string    `json:"offset"`
}

func (s *Server) clockState() clockState {
	return clockState{Now: s.cfg.Clock.Now(), Offset: s.cfg.Clock.Offset().String()}
}

func (s *Server) sandboxGetClock(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, s.clockState())
}

// clockRequest moves the test clock: either advance by a Go duration
// ("36h", "90m") or set to an RFC 3339 time; exactly one of them.
type clockRequest struct {
	Advance string `json:"advance,omitempty"`
	Set     string `json:"set,omitempty"`
}

func (s *Server) sandboxSetClock(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req clockRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	var err error
	switch {
	case (req.Advance == "") == (req.Set == ""):
		err = fault.Invalidf("advance", "send exactly one of advance (a duration such as \"36h\") or set (an RFC 3339 time)")
	case req.Advance != "":
		d, perr := time.ParseDuration(req.Advance)
		if perr != nil {
			err = fault.Invalidf("advance", "must be a duration such as \"36h\" or \"90m\"")
		} else {
			err = s.cfg.Clock.Advance(d)
		}
	default:
		t, ok := parseDateTime(req.Set)
		if !ok {
			err = fault.Invalidf("set", "must be an RFC 3339 time such as 2026-12-24T12:00:00Z")
		} else {
			err = s.cfg.Clock.Set(t)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.clockState())
}

func (s *Server) sandboxFixtures(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]any{"fixtures": sandbox.Fixtures()})
}

type paymentRequest struct {
	Amount *int64 `json:"amount"`
}

func (s *Server) sandboxPay(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *paymentRequest) (*kassa.Result, error) {
		if b.Amount == nil {
			return nil, fault.Invalidf("amount", "is required")
		}
		return s.ledger.RegisterPayment(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), *b.Amount)
	})(w, r, p)
}

type markRequest struct {
	Status string `json:"status"`
}

func (s *Server) sandboxMark(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *markRequest) (*kassa.Result, error) {
		return s.ledger.MarkLedger(ctx, c, p.ByName("orderId"), p.ByName("ledgerId"), order.SubStatus(b.Status))
	})(w, r, p)
}

type riskRequest struct {
	Decision string `json:"decision"` // approve or deny
}

func (s *Server) sandboxRisk(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	bodyOp(s, false, func(ctx context.Context, c kassa.Call, p httprouter.Params, b *riskRequest) (*kassa.Result, error) {
		if b.Decision != "approve" && b.Decision != "deny" {
			return nil, fault.Invalidf("decision", "must be approve or deny")
		}
		return s.ledger.ResolveHold(ctx, c, p.ByName("orderId"), b.Decision == "approve")
	})(w, r, p)
}

func (s *Server) sandboxExpire(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	n, err := s.ledger.ExpireOrders(jobContext(r), 1000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"expired": n})
}

func (s *Server) sandboxAutoCapture(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	n, err := s.ledger.RunAutoCapture(jobContext(r), 1000)
	if err = s.logSetAside(err); err != nil { // as jobs/tasks
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"captured": n})
}

// settlementRunResponse lists the settlements a run made.
type settlementRunResponse struct {
	Settlements []settlement.Record `json:"settlements"`
}

func (s *Server) sandboxSettle(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	made, err := s.ledger.RunSettlements(jobContext(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The run settles every merchant's items, but each caller sees only its
	// own settlements, like everywhere else.
	me := merchantOf(r.Context())
	out := settlementRunResponse{Settlements: []settlement.Record{}}
	for i := range made {
		if made[i].MerchantID == me {
			out.Settlements = append(out.Settlements, made[i].View())
		}
	}
	writeJSON(w, http.StatusOK, out)
}
