package kassa

import (
	"context"
	"net/http"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/notify"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/sandbox"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// TopicSessionAuthorized is sent when a buyer approves a session.
const TopicSessionAuthorized = notify.TopicSessionAuthorized

func sessionPath(src session.Source, id string) string {
	if src == session.SourcePayment {
		return "/v1/payment-sessions/" + id
	}
	return "/v1/sessions/" + id
}

// CreateSession opens a checkout session (POST /v1/sessions) or a payment
// session (POST /v1/payment-sessions): 201 with the session and its Location.
func (l *Ledger) CreateSession(ctx context.Context, call Call, src session.Source, req *session.CreateRequest) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	return l.run(ctx, call, request{"createSession", []string{string(src)}, req}, func(tx storage.Tx) (*Result, error) {
		s, err := session.New(call.MerchantID, src, req, l.opts.IDs, tx.Now(), func(id string) string {
			if l.opts.CheckoutURL == nil {
				return ""
			}
			return l.opts.CheckoutURL(call.MerchantID, id)
		})
		if err != nil {
			return nil, err
		}
		if s.ExternalSessionID != "" {
			switch _, err := tx.GetSessionByExternalID(call.MerchantID, s.ExternalSessionID); {
			case err == nil:
				return nil, errExternalSessionIDTaken()
			case !fault.Is(err, fault.NotFound):
				return nil, err
			}
		}
		if err := tx.PutSession(s); err != nil {
			if fault.CodeOf(err) == "session_exists" && s.ExternalSessionID != "" {
				// A session with this reference was created at the same
				// moment (another replica): the answer of the check above.
				return nil, errExternalSessionIDTaken()
			}
			return nil, err
		}
		res, err := jsonResult(http.StatusCreated, s.View(tx.Now()))
		if err != nil {
			return nil, err
		}
		res.Location = sessionPath(src, s.ID)
		return res, nil
	})
}

func errExternalSessionIDTaken() error {
	return fault.InvalidCode("external_session_id_taken", "externalSessionId", "another session has this externalSessionId")
}

// findSession resolves a path reference: a session id, "external:<id>", or
// (when byOrder) the id of the order created from the session.
func findSession(tx storage.Tx, merchantID, ref string, src session.Source, byOrder bool) (*session.Session, error) {
	if ext, ok := session.ExternalID(ref); ok {
		return checkSource(tx.GetSessionByExternalID(merchantID, ext))(src)
	}
	s, err := tx.GetSession(merchantID, ref)
	if fault.Is(err, fault.NotFound) && byOrder {
		s, err = tx.GetSessionByOrderID(merchantID, ref)
	}
	return checkSource(s, err)(src)
}

// checkSource scopes the Payments API to payment sessions; the Checkout API
// (whose list has a source filter) reaches every session of the merchant.
func checkSource(s *session.Session, err error) func(session.Source) (*session.Session, error) {
	return func(src session.Source) (*session.Session, error) {
		if err != nil {
			return nil, err
		}
		if src == session.SourcePayment && s.Source != src {
			return nil, fault.NotFoundf("session_not_found", "session not found")
		}
		return s, nil
	}
}

// GetSession reads a session by id, external id or (checkout API) order id.
func (l *Ledger) GetSession(ctx context.Context, merchantID, ref string, src session.Source) (session.Record, error) {
	var v session.Record
	err := l.store.View(ctx, func(tx storage.Tx) error {
		s, err := findSession(tx, merchantID, ref, src, src == session.SourceCheckout)
		if err != nil {
			return err
		}
		v = s.View(tx.Now())
		return nil
	})
	return v, err
}

// UpdateSession changes a session that has not been approved yet.
func (l *Ledger) UpdateSession(ctx context.Context, call Call, ref string, src session.Source, req *session.UpdateRequest) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	return l.run(ctx, call, request{"updateSession", []string{string(src), ref}, req}, func(tx storage.Tx) (*Result, error) {
		s, err := findSession(tx, call.MerchantID, ref, src, src == session.SourceCheckout)
		if err != nil {
			return nil, err
		}
		if err := s.Update(req, l.opts.IDs, tx.Now()); err != nil {
			return nil, err
		}
		if err := tx.PutSession(s); err != nil {
			return nil, err
		}
		return jsonResult(http.StatusOK, s.View(tx.Now()))
	})
}

// DeleteSession cancels a session that has not become an order.
func (l *Ledger) DeleteSession(ctx context.Context, call Call, ref string, src session.Source) (*Result, error) {
	// Whatever uses a session's token (an order, a customer token, its
	// deletion) locks the token and then the session. The cancel takes them
	// in that order too, so the token is looked up first: locking the
	// session first would deadlock with an order being made from its token
	// (PostgreSQL), and each such deadlock waits a second to be detected.
	tok, err := l.sessionToken(ctx, call.MerchantID, ref, src)
	if err != nil {
		return nil, err
	}
	return l.run(ctx, call, request{"deleteSession", []string{string(src), ref}, nil}, func(tx storage.Tx) (*Result, error) {
		var a *token.Authorization
		var aErr error
		if tok != "" {
			if a, aErr = tx.GetAuthorization(call.MerchantID, tok); aErr != nil && !fault.Is(aErr, fault.NotFound) {
				return nil, aErr
			}
		}
		s, err := findSession(tx, call.MerchantID, ref, src, false)
		if err != nil {
			return nil, err
		}
		if err := s.Cancel("cancelled by the merchant", tx.Now()); err != nil {
			return nil, err
		}
		if s.AuthorizationToken != "" {
			// The approval dies with the session: its token can no longer create an order.
			// A store error (a deadlock with the order being made from that
			// token, say) must reach the store's retry, not be taken for "gone".
			if s.AuthorizationToken != tok {
				// Approved since the look above.
				a, aErr = tx.GetAuthorization(call.MerchantID, s.AuthorizationToken)
			}
			switch {
			case fault.Is(aErr, fault.NotFound):
			case aErr != nil:
				return nil, aErr
			case a.UsedAt == nil:
				a.Deleted = true
				if err := tx.PutAuthorization(a); err != nil {
					return nil, err
				}
			}
		}
		if err := tx.PutSession(s); err != nil {
			return nil, err
		}
		return jsonResult(http.StatusOK, s.View(tx.Now()))
	})
}

// sessionToken is the authorization token of the session ref ("" when it
// has none, or there is no such session: the cancel then says so).
func (l *Ledger) sessionToken(ctx context.Context, merchantID, ref string, src session.Source) (string, error) {
	var tok string
	err := l.store.View(ctx, func(tx storage.Tx) error {
		s, err := findSession(tx, merchantID, ref, src, false)
		if err == nil {
			tok = s.AuthorizationToken
		}
		return err
	})
	if fault.Is(err, fault.NotFound) {
		return "", nil
	}
	return tok, err
}

// SessionPage is one page of GET /v1/sessions.
type SessionPage struct {
	Sessions   []session.Record `json:"sessions"`
	NextFromID string           `json:"nextFromId,omitempty"`
}

// ListSessions lists the merchant's checkout and payment sessions.
func (l *Ledger) ListSessions(ctx context.Context, merchantID string, q session.Query) (SessionPage, error) {
	if err := q.Validate(); err != nil {
		return SessionPage{}, err
	}
	out := SessionPage{Sessions: []session.Record{}}
	err := l.store.View(ctx, func(tx storage.Tx) error {
		page, next, err := tx.ListSessions(merchantID, q)
		for _, s := range page {
			out.Sessions = append(out.Sessions, s.View(tx.Now()))
		}
		out.NextFromID = next
		return err
	})
	return out, listFrom(err, q.FromID)
}

// BuyerSession reads a session for its hosted checkout page.
func (l *Ledger) BuyerSession(ctx context.Context, merchantID, id string) (session.Record, time.Time, error) {
	var v session.Record
	var now time.Time
	err := l.store.View(ctx, func(tx storage.Tx) error {
		s, err := tx.GetSession(merchantID, id)
		if err != nil {
			return err
		}
		now = tx.Now()
		v = s.View(now)
		return nil
	})
	return v, now, err
}

// Approval is what the buyer submits on the checkout page.
type Approval struct {
	Customer      order.CustomerInput
	CompanyName   string
	PaymentMethod order.PaymentType
	// Terms are the session's terms (session.Session.Terms) as the buyer saw
	// them; when the session no longer has them the approval is refused
	// (409 session_changed) and the buyer must look again.
	Terms string
}

// ApproveSession is the buyer approving on the hosted checkout: the buyer's
// credit is decided (the sandbox's fixture rules), an authorization token for
// the session's total is minted, and the session becomes authorized, all in
// one transaction with the merchant's notification.
func (l *Ledger) ApproveSession(ctx context.Context, merchantID, id string, a Approval) (session.Record, error) {
	var v session.Record
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		s, err := tx.GetSession(merchantID, id)
		if err != nil {
			return err
		}
		now := tx.Now()
		if st := s.StateAt(now); st != session.StateCreated {
			return fault.New(fault.NotAvailable, "session_"+string(st), "this checkout is %s", st)
		}
		if a.Terms != s.Terms() {
			return fault.Conflictf("session_changed", "the order changed since the buyer saw it")
		}
		amount := s.Totals.Gross
		req := &sandbox.TokenRequest{Country: s.Country, Currency: string(s.Currency), Locale: s.Locale,
			Customer: &a.Customer, Amount: &amount}
		req.PaymentMethod = &struct {
			Type string `json:"type"`
		}{Type: string(a.PaymentMethod)}
		if amount < 1 {
			req.Amount = nil
		}
		tok, err := sandbox.Mint(req, merchantID, "at_"+RandomSecret(20), now, l.opts.AuthorizationTTL)
		if err != nil {
			return err
		}
		if tok.Buyer.CompanyName == "" {
			tok.Buyer.CompanyName = a.CompanyName
		}
		tok.SessionID = s.ID
		// A total of 0 is not sent as an amount (the sandbox's tokens state
		// at least 1), but the buyer approved it: orders of more are refused.
		tok.ApprovedZero = amount == 0
		if err := s.Authorize(tok.Buyer, tok.PaymentMethod, tok.Token, tok.ExpiresAt, now); err != nil {
			return err
		}
		if err := tx.PutAuthorization(tok); err != nil {
			return err
		}
		if err := scheduleTokenExpiry(tx, merchantID, tok.Token, tok.ExpiresAt); err != nil {
			return err
		}
		if err := tx.PutSession(s); err != nil {
			return err
		}
		n, err := l.notifier(tx, merchantID)
		if err != nil {
			return err
		}
		if err := n.send(TopicSessionAuthorized, "", map[string]string{"sessionId": s.ID,
			"authorizationToken": tok.Token}); err != nil {
			return err
		}
		v = s.View(now)
		return nil
	})
	return v, err
}

// DeclineSession is the buyer declining on the hosted checkout.
func (l *Ledger) DeclineSession(ctx context.Context, merchantID, id string) (session.Record, error) {
	var v session.Record
	err := l.store.Update(ctx, func(tx storage.Tx) error {
		s, err := tx.GetSession(merchantID, id)
		if err != nil {
			return err
		}
		if err := s.Decline(tx.Now()); err != nil {
			return err
		}
		v = s.View(tx.Now())
		return tx.PutSession(s)
	})
	return v, err
}

// SessionPaymentStatus is the payment status of a session: its order's once
// the order exists, else derived from the session's state.
func (l *Ledger) SessionPaymentStatus(ctx context.Context, merchantID, sessionID string) (PaymentStatus, error) {
	var ps PaymentStatus
	err := l.store.View(ctx, func(tx storage.Tx) error {
		s, err := tx.GetSession(merchantID, sessionID)
		if ext, ok := session.ExternalID(sessionID); ok {
			s, err = tx.GetSessionByExternalID(merchantID, ext)
		}
		if err != nil {
			return err
		}
		now := tx.Now()
		if s.OrderID != "" {
			o, err := tx.GetOrder(merchantID, s.OrderID)
			if err != nil {
				return err
			}
			ps = PaymentStatusOf(o, now)
			return nil
		}
		if s.PaymentMethod != nil {
			pm := *s.PaymentMethod
			ps.PaymentMethod = &pm
		}
		switch s.StateAt(now) {
		case session.StateCompleted: // with a customer token: an order would have been read above
			ps.Status, ps.Note = "authorized", "the buyer approved; a customer token was made, to create orders with"
		case session.StateAuthorized:
			ps.Status, ps.Note = "authorized", "the buyer approved; create the order from the authorization token"
		case session.StateCancelled:
			ps.Status, ps.Note = "cancelled", "the session was cancelled or declined"
		case session.StateExpired:
			ps.Status, ps.Note = "expired", "the buyer did not complete the checkout in time"
			if s.AuthorizedAt != nil {
				// The buyer did finish: it is the merchant's order that never came.
				ps.Note = "the buyer approved, but the authorization expired before an order was created from it"
			}
		default:
			ps.Status, ps.Note = "pending", "the buyer has not completed the checkout"
		}
		return nil
	})
	return ps, err
}
