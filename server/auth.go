package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

type ctxKey int

const (
	merchantKey ctxKey = iota
	requestIDKey
)

func merchantOf(ctx context.Context) string {
	m, _ := ctx.Value(merchantKey).(string)
	return m
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// accessClaims are what a bearer token asserts: merchant, the client secret
// it was obtained with (kassa.CredentialTag) and expiry.
type accessClaims struct {
	Merchant string `json:"m"`
	// Credential is empty in tokens of builds before it: they stay valid
	// until they expire, so that a rolling upgrade logs no client out.
	Credential string `json:"c,omitempty"`
	Expires    int64  `json:"e"`
}

// issueToken signs an access token. Tokens are stateless (HMAC-SHA256 with
// the server's key) so that every replica sharing the key accepts them and a
// restart does not log merchants out.
func (s *Server) issueToken(m *storage.Merchant, now time.Time) (string, int64) {
	// The expiry is kept in whole seconds, rounded up: rounded down, a token
	// was refused up to a second before the expires_in it was answered with.
	exp := now.Add(s.cfg.AccessTokenTTL).Add(time.Second - time.Nanosecond)
	payload, _ := json.Marshal(accessClaims{Merchant: m.ID, Credential: kassa.CredentialTag(m), Expires: exp.Unix()})
	p := base64.RawURLEncoding.EncodeToString(payload)
	return "kat_" + p + "." + s.sign("access", p), int64(s.cfg.AccessTokenTTL / time.Second)
}

func (s *Server) sign(purpose, msg string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signedBy reports whether sig is sign(purpose, msg), in constant time, so
// that the time of a refusal tells nothing of how much of a guess was right.
func (s *Server) signedBy(sig, purpose, msg string) bool {
	return sig != "" && hmac.Equal([]byte(sig), []byte(s.sign(purpose, msg)))
}

func (s *Server) verifyToken(tok string, now time.Time) (accessClaims, bool) {
	rest, ok := strings.CutPrefix(tok, "kat_")
	if !ok {
		return accessClaims{}, false
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok || !s.signedBy(sig, "access", p) {
		return accessClaims{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return accessClaims{}, false
	}
	var c accessClaims
	if json.Unmarshal(raw, &c) != nil || c.Merchant == "" || now.Unix() >= c.Expires {
		return accessClaims{}, false
	}
	return c, true
}

var errUnauthorized = fault.New(fault.Unauthorized, "unauthorized", "send a valid access token as 'authorization: Bearer …' (or client credentials as Basic)")

// authorization splits a request's Authorization header into its scheme,
// in lower case, and its credentials.
func authorization(r *http.Request) (scheme, cred string) {
	scheme, cred, _ = strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.ToLower(scheme), strings.TrimSpace(cred)
}

// basicAuth is the client id and secret of a Basic Authorization header.
// Unlike net/http's Request.BasicAuth it takes the credentials after more
// than one space, as RFC 9110 §11.4 (1*SP) allows and Bearer's are taken.
func basicAuth(r *http.Request) (id, secret string, ok bool) {
	scheme, cred := authorization(r)
	if scheme != "basic" {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// authenticate resolves the merchant of a request from a Bearer access token
// or from Basic client credentials.
func (s *Server) authenticate(r *http.Request) (string, error) {
	scheme, cred := authorization(r)
	switch scheme {
	case "bearer":
		c, ok := s.verifyToken(cred, time.Now())
		if !ok {
			return "", errUnauthorized
		}
		// The merchant must still exist and hold the secret the token was
		// obtained with (a token outlives nothing it names).
		m, err := s.ledger.Merchant(r.Context(), c.Merchant)
		if err != nil {
			if fault.Is(err, fault.NotFound) {
				return "", errUnauthorized
			}
			return "", err
		}
		if c.Credential != "" && !hmac.Equal([]byte(c.Credential), []byte(kassa.CredentialTag(m))) {
			return "", errUnauthorized
		}
		return m.ID, nil
	case "basic":
		id, secret, ok := basicAuth(r)
		if !ok {
			return "", errUnauthorized
		}
		m, err := s.authenticateBasic(r.Context(), id, secret)
		if err != nil {
			return "", err
		}
		return m.ID, nil
	}
	return "", errUnauthorized
}

// tokenResponse is the OAuth 2.0 access token response.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// oauthError is the OAuth 2.0 error response (RFC 6749 §5.2).
type oauthError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// handleToken implements the client credentials grant (RFC 6749 §4.4):
// client id and secret by HTTP Basic or as form fields.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		oauthFail(w, http.StatusBadRequest, "invalid_request", "send an application/x-www-form-urlencoded body")
		return
	}
	if bodyEncoding(r) != "" {
		oauthFail(w, http.StatusBadRequest, "invalid_request", "send the body without Content-Encoding")
		return
	}
	if err := r.ParseForm(); err != nil {
		fe := bodyReadError(err)
		oauthFail(w, statusOf[fe.Kind], "invalid_request", fe.Message)
		return
	}
	// RFC 6749 §3.2: no parameter more than once.
	for name, vs := range r.PostForm {
		if len(vs) > 1 {
			oauthFail(w, http.StatusBadRequest, "invalid_request", name+" is given more than once")
			return
		}
	}
	if r.PostForm.Get("grant_type") == "" {
		// RFC 6749 §5.2: a missing required parameter is invalid_request.
		oauthFail(w, http.StatusBadRequest, "invalid_request", "grant_type is required (client_credentials)")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthFail(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be client_credentials")
		return
	}
	for _, sc := range strings.Fields(r.PostForm.Get("scope")) {
		if !slices.Contains(grantedScopes, sc) {
			oauthFail(w, http.StatusBadRequest, "invalid_scope", "scopes are "+strings.Join(grantedScopes, " "))
			return
		}
	}
	id, secret, ok := basicAuth(r)
	if ok && (r.PostForm.Has("client_id") || r.PostForm.Has("client_secret")) {
		// RFC 6749 §2.3: one way of authenticating per request.
		oauthFail(w, http.StatusBadRequest, "invalid_request", "authenticate with Basic or with client_id and client_secret, not both")
		return
	}
	authenticate := s.authenticateBasic
	if !ok {
		// Form parameters arrive decoded already.
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		authenticate = s.ledger.Authenticate
	}
	if id == "" || secret == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="kassa"`)
		oauthFail(w, http.StatusUnauthorized, "invalid_client", "client id and secret are required")
		return
	}
	m, err := authenticate(r.Context(), id, secret)
	if err != nil {
		if fault.Is(err, fault.Unauthorized) {
			w.Header().Set("WWW-Authenticate", `Basic realm="kassa"`)
			oauthFail(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
			return
		}
		s.writeError(w, r, err)
		return
	}
	tok, exp := s.issueToken(m, time.Now())
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: exp, Scope: strings.Join(grantedScopes, " ")})
}

// tokenPath is the OAuth 2.0 token endpoint.
const tokenPath = "/oauth/token"

// refuse answers a request that Server.serve refuses before routing. On the
// token endpoint it is an RFC 6749 §5.2 invalid_request, as that endpoint's
// own refusals are: an OAuth client library reads no problem document.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fault.Error
	if r.Method != http.MethodPost || r.URL.Path != tokenPath || !errors.As(err, &fe) {
		s.writeError(w, r, err)
		return
	}
	desc := fe.Message
	if len(fe.Fields) > 0 {
		parts := make([]string, len(fe.Fields))
		for i, f := range fe.Fields {
			parts[i] = f.Field + " " + f.Message
		}
		desc = strings.Join(parts, "; ")
	}
	w.Header().Set("Cache-Control", "no-store")
	oauthFail(w, statusOf[fe.Kind], "invalid_request", desc)
}

// oauthFail answers a token request with an RFC 6749 §5.2 error.
func oauthFail(w http.ResponseWriter, status int, code, description string) {
	noteCode(w, code)
	writeJSON(w, status, oauthError{code, description})
}

// grantedScopes is what every token grants; a request may name any of them.
var grantedScopes = []string{"orders", "payments", "settlements"}

// authenticateBasic checks Basic credentials as sent and, when those are
// refused and carry escapes, as RFC 6749 §2.3.1 has an OAuth client send
// them: the id and the secret each form-urlencoded first (Go's
// golang.org/x/oauth2 does), so that a ':' in an id, or a '+', '/' or '%'
// in a secret, reach kassa escaped. Clients that send them as they are
// (curl -u) match the first check.
func (s *Server) authenticateBasic(ctx context.Context, id, secret string) (*storage.Merchant, error) {
	m, err := s.ledger.Authenticate(ctx, id, secret)
	if err == nil || !fault.Is(err, fault.Unauthorized) {
		return m, err
	}
	did, ierr := url.QueryUnescape(id)
	dsecret, serr := url.QueryUnescape(secret)
	if ierr != nil || serr != nil || (did == id && dsecret == secret) {
		return m, err
	}
	return s.ledger.Authenticate(ctx, did, dsecret)
}
