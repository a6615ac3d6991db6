package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/kassahq/kassa/fault"
)

// statusOf is the one table that maps failure kinds to HTTP statuses.
var statusOf = map[fault.Kind]int{
	fault.Internal:         http.StatusInternalServerError,
	fault.Invalid:          http.StatusBadRequest,
	fault.NotFound:         http.StatusNotFound,
	fault.NotAvailable:     http.StatusConflict,
	fault.Conflict:         http.StatusConflict,
	fault.Unauthorized:     http.StatusUnauthorized,
	fault.Forbidden:        http.StatusForbidden,
	fault.KeyReused:        http.StatusUnprocessableEntity,
	fault.TooLarge:         http.StatusRequestEntityTooLarge,
	fault.RateLimited:      http.StatusTooManyRequests,
	fault.Declined:         http.StatusPaymentRequired,
	fault.Unsupported:      http.StatusUnsupportedMediaType,
	fault.MethodNotAllowed: http.StatusMethodNotAllowed,
	fault.Unavailable:      http.StatusServiceUnavailable,
	fault.TimedOut:         http.StatusRequestTimeout,
}

var titleOf = map[fault.Kind]string{
	fault.Internal:         "Internal error",
	fault.Invalid:          "Invalid request",
	fault.NotFound:         "Not found",
	fault.NotAvailable:     "Action not available",
	fault.Conflict:         "Conflict",
	fault.Unauthorized:     "Unauthorized",
	fault.Forbidden:        "Forbidden",
	fault.KeyReused:        "Idempotency key reused",
	fault.TooLarge:         "Request too large",
	fault.RateLimited:      "Too many requests",
	fault.Declined:         "Declined",
	fault.Unsupported:      "Unsupported media type",
	fault.MethodNotAllowed: "Method not allowed",
	fault.Unavailable:      "Service unavailable",
	fault.TimedOut:         "Request timeout",
}

// Problem is an RFC 9457 problem document with kassa's extensions.
type Problem struct {
	Type      string             `json:"type"`
	Title     string             `json:"title"`
	Status    int                `json:"status"`
	Detail    string             `json:"detail"`
	Code      string             `json:"code"`
	Errors    []fault.FieldError `json:"errors,omitempty"`
	RequestID string             `json:"requestId"`
}

// problemBase prefixes problem type URIs; each code has a section in docs/errors.md.
const problemBase = "https://kassa.dev/problems/"

// statusClientClosed is recorded (in the access log and the metrics) for a
// request whose client hung up before the answer: not a server error, and
// no one reads the answer (nginx's convention).
const statusClientClosed = 499

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		fe = fault.Internalf(err, "unexpected failure")
	}
	status, ok := statusOf[fe.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	p := Problem{Type: problemBase + fe.Code, Title: titleOf[fe.Kind], Status: status, Detail: fe.Message,
		Code: fe.Code, Errors: fe.Fields, RequestID: requestID(r.Context())}
	switch {
	case clientGone(r, err):
		// The client hung up: whatever failed because of it is not the server's error.
		s.log.DebugContext(r.Context(), "client closed the request", slog.String("requestId", p.RequestID), slog.Any("err", err))
		status = statusClientClosed
		p = Problem{Type: problemBase + "client_closed_request", Title: "Client closed request", Status: status,
			Detail: "the client went away before the answer", Code: "client_closed_request", RequestID: p.RequestID}
	case fe.Kind == fault.Internal:
		// Only internal errors are logged with their cause; the client sees no internals.
		if !errors.Is(err, errRecovered) {
			s.log.ErrorContext(r.Context(), "internal error", slog.String("requestId", p.RequestID), slog.Any("err", err))
		}
		p.Detail = "an internal error occurred; quote the requestId when reporting it"
		switch {
		case fe.Code != fault.CodeOutcomeUnknown:
		case r.Header.Get("Idempotency-Key") != "":
			p.Detail = "the store did not confirm whether this request's change was made: send the request again with the same Idempotency-Key, which makes the change once or replays its first answer"
		default:
			// No key to send again with, and sent again without one a
			// change may be made twice (a second partial capture).
			p.Detail = "the store did not confirm whether this request's change was made: read what it changes before sending it again (a request sent with an Idempotency-Key can simply be sent again with it)"
		}
	case fe.Kind == fault.Unavailable:
		s.unavailable(w, r, err, slog.String("requestId", p.RequestID))
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		// Added: a route that also takes Basic has offered it already.
		w.Header().Add("WWW-Authenticate", `Bearer realm="kassa"`)
	}
	noteCode(w, p.Code)
	body, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(body)
}

// clientGone reports whether err is r's client hanging up, not a failure of
// the server's (the store timeout ends r's context too). A commit of
// unknown outcome is never the client's: the store waits for COMMIT apart
// from r's context, and the DeadlineExceeded in its chain is its own
// timeout, which an operator must see logged.
func clientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && context.Cause(r.Context()) != errStoreTimeout &&
		!fault.IsOutcomeUnknown(err) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode failure", http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, body)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
