package kassa

import (
	"context"
	"net/http"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/money"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// CreateOrderResponse is the spec's CreateOrderResponse (and CustomerTokenOrderResponse).
type CreateOrderResponse struct {
	OrderID string `json:"orderId"`
}

// CustomerTokenResponse is the answer to creating a customer token.
type CustomerTokenResponse struct {
	CustomerToken string `json:"customerToken"`
}

func (l *Ledger) requireAck(tx storage.Tx, merchantID string) (bool, error) {
	m, err := tx.GetMerchant(merchantID)
	if err != nil {
		return false, err
	}
	return m.RequireAck, nil
}

// createOrder stores a new order and, when it awaits acknowledgement,
// queues the merchant's notification in the same transaction.
func (l *Ledger) createOrder(tx storage.Tx, merchantID string, req *order.CreateRequest, lines []order.Line,
	mode money.VATMode, auth order.Authorization, env order.Env) (*Result, error) {
	o, err := order.Create(merchantID, req, lines, mode, auth, env)
	if err != nil {
		return nil, err
	}
	if err := tx.CreateOrder(o); err != nil {
		return nil, err
	}
	if err := scheduleAutoCapture(tx, o, autoCaptureDue(o)); err != nil {
		return nil, err
	}
	if err := scheduleExpiryReminder(tx, o); err != nil {
		return nil, err
	}
	n, err := l.notifier(tx, merchantID)
	if err != nil {
		return nil, err
	}
	if err := n.orderChanged(nil, o); err != nil {
		return nil, err
	}
	res, err := jsonResult(http.StatusOK, CreateOrderResponse{OrderID: o.ID})
	if err != nil {
		return nil, err
	}
	res.Order = o
	return res, nil
}

// CreateOrderFromAuthorization turns an authorization token into an order
// (POST /v1/authorization-tokens/{token}/order). The token is used up in the
// same transaction.
func (l *Ledger) CreateOrderFromAuthorization(ctx context.Context, call Call, tok string, req *order.CreateRequest) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	lines, mode, invalid := order.ValidateCreate(req, false, l.opts.IDs)
	if invalid != nil && !(req.VatMode == "" && validExclVAT(req, l.opts.IDs)) && !sessionMayStateLines(req, l.opts.IDs) {
		return nil, invalid
	}
	// Lines valid only in exclVat, and lines left out, wait for the token:
	// from a session they are read in its mode, or taken from it, as it
	// showed them (orderFromSession).
	return l.run(ctx, call, request{"createOrder", []string{tok}, req}, func(tx storage.Tx) (*Result, error) {
		a, err := tx.GetAuthorization(call.MerchantID, tok)
		if err != nil {
			return nil, err
		}
		env := l.env(tx, call.MerchantID)
		if err := a.Usable(env.Now); err != nil {
			return nil, err
		}
		ack, err := l.requireAck(tx, call.MerchantID)
		if err != nil {
			return nil, err
		}
		// A function the store runs again must start from the same values:
		// it changes only its own copies of what it shares with the call.
		oreq, olines, omode, oinvalid := req, lines, mode, invalid
		var s *session.Session
		if a.SessionID != "" {
			if s, err = tx.GetSession(call.MerchantID, a.SessionID); err != nil {
				return nil, err
			}
			oreq = orderFromSession(req, s)
			if oreq.VatMode != req.VatMode || len(oreq.OrderLines) != len(req.OrderLines) {
				// The lines are read in the session's mode, as the buyer saw them.
				if olines, omode, err = order.ValidateCreate(oreq, false, l.opts.IDs); err != nil {
					return nil, err
				}
				oinvalid = nil
			}
		}
		if oinvalid != nil {
			return nil, oinvalid
		}
		res, err := l.createOrder(tx, call.MerchantID, oreq, olines, omode, a.Approval(ack), env)
		if err != nil {
			return nil, err
		}
		if err := a.Consume(env.Now, "order:"+res.Order.ID); err != nil {
			return nil, err
		}
		if s != nil {
			if err := s.Complete(res.Order.ID, tx.Now()); err != nil {
				return nil, err
			}
			if err := tx.PutSession(s); err != nil {
				return nil, err
			}
		}
		return res, tx.PutAuthorization(a)
	})
}

// CreateOrderFromCustomerToken creates an order from a reusable customer token.
func (l *Ledger) CreateOrderFromCustomerToken(ctx context.Context, call Call, tokenID string, req *order.CreateRequest) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	lines, mode, err := order.ValidateCreate(req, true, l.opts.IDs)
	if err != nil {
		return nil, err
	}
	return l.run(ctx, call, request{"createOrderFromCustomerToken", []string{tokenID}, req}, func(tx storage.Tx) (*Result, error) {
		c, err := tx.GetCustomerToken(call.MerchantID, tokenID)
		if err != nil {
			return nil, err
		}
		ack, err := l.requireAck(tx, call.MerchantID)
		if err != nil {
			return nil, err
		}
		auth, err := c.Approval(ack)
		if err != nil {
			return nil, err
		}
		// What the order leaves out, the token it is made from says: its
		// language, and the store it was made for (whose settlements the
		// order's captures then join).
		oreq := req // the call's request stays as it came: the store may run this again
		if req.Locale == "" || req.StoreID == "" {
			req2 := *req
			if req2.Locale == "" {
				req2.Locale = c.Locale
			}
			if req2.StoreID == "" {
				req2.StoreID = c.StoreID
			}
			oreq = &req2
		}
		return l.createOrder(tx, call.MerchantID, oreq, lines, mode, auth, l.env(tx, call.MerchantID))
	})
}

// CreateCustomerToken turns an authorization token into a reusable customer token.
func (l *Ledger) CreateCustomerToken(ctx context.Context, call Call, tok string, req *token.CreateCustomerRequest) (*Result, error) {
	if err := missingRequest(req); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return l.run(ctx, call, request{"createCustomerToken", []string{tok}, req}, func(tx storage.Tx) (*Result, error) {
		a, err := tx.GetAuthorization(call.MerchantID, tok)
		if err != nil {
			return nil, err
		}
		creq := req
		var s *session.Session
		if a.SessionID != "" {
			if s, err = tx.GetSession(call.MerchantID, a.SessionID); err != nil {
				return nil, err
			}
			creq = customerTokenFromSession(req, s)
		}
		c, err := token.NewCustomer(a, creq, l.opts.IDs.NewID("customerToken"), tx.Now())
		if err != nil {
			return nil, err
		}
		if s != nil {
			// The session's approval is used up, as by an order: it is
			// completed, and can no longer be cancelled.
			if err := s.CompleteWithCustomerToken(c.TokenID, tx.Now()); err != nil {
				return nil, err
			}
			if err := tx.PutSession(s); err != nil {
				return nil, err
			}
		}
		if err := tx.PutAuthorization(a); err != nil {
			return nil, err
		}
		if err := tx.PutCustomerToken(c); err != nil {
			return nil, err
		}
		return jsonResult(http.StatusOK, CustomerTokenResponse{CustomerToken: c.TokenID})
	})
}

// DeleteAuthorization withdraws an authorization token (204, no body).
func (l *Ledger) DeleteAuthorization(ctx context.Context, call Call, tok string) (*Result, error) {
	return l.run(ctx, call, request{"deleteAuthorization", []string{tok}, nil}, func(tx storage.Tx) (*Result, error) {
		a, err := tx.GetAuthorization(call.MerchantID, tok)
		if err != nil {
			return nil, err
		}
		if err := a.Delete(tx.Now()); err != nil {
			return nil, err
		}
		if err := tx.PutAuthorization(a); err != nil {
			return nil, err
		}
		if a.SessionID != "" {
			// The session dies with its approval, as the token dies with a deleted session.
			s, err := tx.GetSession(call.MerchantID, a.SessionID)
			switch {
			case fault.Is(err, fault.NotFound):
			case err != nil:
				return nil, err
			case s.Withdraw(tok, tx.Now()):
				if err := tx.PutSession(s); err != nil {
					return nil, err
				}
			}
		}
		return &Result{Status: http.StatusNoContent}, nil
	})
}

// GetCustomerToken reads a customer token of the merchant.
func (l *Ledger) GetCustomerToken(ctx context.Context, merchantID, id string) (*token.Customer, error) {
	var c *token.Customer
	err := l.store.View(ctx, func(tx storage.Tx) error {
		var err error
		c, err = tx.GetCustomerToken(merchantID, id)
		return err
	})
	return c, err
}

// RevokeCustomerToken revokes a customer token and returns its record.
func (l *Ledger) RevokeCustomerToken(ctx context.Context, call Call, id string) (*Result, error) {
	return l.run(ctx, call, request{"revokeCustomerToken", []string{id}, nil}, func(tx storage.Tx) (*Result, error) {
		c, err := tx.GetCustomerToken(call.MerchantID, id)
		if err != nil {
			return nil, err
		}
		c.Revoke(tx.Now())
		if err := tx.PutCustomerToken(c); err != nil {
			return nil, err
		}
		return jsonResult(http.StatusOK, c.Record)
	})
}

// PutAuthorization stores a new authorization token for a merchant. The
// sandbox mints them; a production checkout front end would too. A token is
// put once: an id already held (by a token since used or expired, too) is a
// conflict, so a single-use token cannot be made usable again. The id of a
// deleted (withdrawn, never used) token is free to be put as a new token,
// as is the id of one SweepAuthorizations removed, its retention past its
// expiry over: ids must not be reused, and the sandbox's are random.
// Of puts of one id at the same moment, on any store and any number of
// replicas, one stores the token and the others get that conflict.
func (l *Ledger) PutAuthorization(ctx context.Context, a *token.Authorization) error {
	if a == nil {
		return fault.Invalidf("body", "an authorization token is required")
	}
	if err := a.Validate(); err != nil {
		return err
	}
	return l.store.Update(ctx, func(tx storage.Tx) error {
		if _, err := tx.GetMerchant(a.MerchantID); err != nil {
			return err
		}
		switch _, err := tx.GetAuthorization(a.MerchantID, a.Token); {
		case err == nil:
			return fault.Conflictf("authorization_token_exists", "an authorization token with this id was put before")
		case !fault.Is(err, fault.NotFound):
			return err
		}
		if err := scheduleTokenExpiry(tx, a.MerchantID, a.Token, a.ExpiresAt); err != nil {
			return err
		}
		return tx.PutAuthorization(a)
	})
}

// orderFromSession is the order request r completed with what the merchant
// told the session the buyer approved in: its store, its reference, its VAT
// mode, its metadata, the shipping address and references of its customer
// prefill, and its lines when r states neither lines nor a total. The spec names none of it, so the request's own value wins and
// the session's fills only what the request leaves empty; the buyer's
// approved details (company, billing address, contact) come from the token
// as before. r itself is left as it was sent (it is the request's
// fingerprint and a retried transaction's input).
func orderFromSession(r *order.CreateRequest, s *session.Session) *order.CreateRequest {
	out := *r
	if out.StoreID == "" {
		out.StoreID = s.StoreID
	}
	if out.Reference == "" {
		out.Reference = s.MerchantReference
	}
	// Left out, not sent empty: "orderLines": [] is a selection that came
	// out empty, as on a capture, not the session's lines.
	if out.OrderLines == nil && out.TotalOrderAmount == nil && len(s.OrderLines) > 0 &&
		(out.VatMode == "" || out.VatMode == string(s.VATMode)) {
		// The spec makes lines optional here, and the buyer approved these.
		out.OrderLines = make([]order.LineInput, len(s.OrderLines))
		for i, ln := range s.OrderLines {
			out.OrderLines[i] = ln.Input()
		}
		out.VatMode = string(s.VATMode)
	}
	if out.VatMode == "" && s.VATMode == money.ExclVAT {
		// Lines priced without VAT in the session are so in the order:
		// read in the default inclVat, they would bill less than approved.
		out.VatMode = string(s.VATMode)
	}
	if len(out.Metadata) == 0 && len(s.Metadata) > 0 {
		out.Metadata = s.Metadata // copied by order.Create
	}
	if p := s.Customer; p != nil && (p.ShippingAddress != nil || p.Reference1 != "" || p.Reference2 != "") {
		c := order.CustomerInput{}
		if r.Customer != nil {
			c = *r.Customer
		}
		if c.ShippingAddress == nil {
			c.ShippingAddress = p.ShippingAddress
		}
		fillReferences(&c.Reference1, &c.Reference2, p)
		out.Customer = &c
	}
	return &out
}

// sessionMayStateLines reports whether r leaves out its lines (nil, not
// empty) and total and is otherwise valid, so that the lines of the session
// behind its token, if any, may complete it.
func sessionMayStateLines(r *order.CreateRequest, ids order.IDSource) bool {
	if r.OrderLines != nil || r.TotalOrderAmount != nil {
		return false
	}
	x := *r
	x.OrderLines = []order.LineInput{{Description: new("stand-in"), Quantity: new(int64(1)), UnitPrice: new(int64(0)), Vat: new(int64(0))}}
	_, _, err := order.ValidateCreate(&x, false, ids)
	return err == nil
}

// validExclVAT reports whether r, which states no vatMode, is valid read in
// exclVat, the mode an order from an exclVat session's token takes.
func validExclVAT(r *order.CreateRequest, ids order.IDSource) bool {
	x := *r
	x.VatMode = string(money.ExclVAT)
	_, _, err := order.ValidateCreate(&x, false, ids)
	return err == nil
}

// customerTokenFromSession is orderFromSession for a customer token: the
// session's store and its prefill's references fill what r leaves empty.
func customerTokenFromSession(r *token.CreateCustomerRequest, s *session.Session) *token.CreateCustomerRequest {
	out := *r
	if out.StoreID == "" {
		out.StoreID = s.StoreID
	}
	if p := s.Customer; p != nil && r.Customer != nil && (p.Reference1 != "" || p.Reference2 != "") {
		c := *r.Customer
		fillReferences(&c.Reference1, &c.Reference2, p)
		out.Customer = &c
	}
	return &out
}

// fillReferences sets the buyer's references a request left empty to the
// session prefill's.
func fillReferences(ref1, ref2 *string, p *order.CustomerInput) {
	if *ref1 == "" {
		*ref1 = p.Reference1
	}
	if *ref2 == "" {
		*ref2 = p.Reference2
	}
}
