// Package fault is the one vocabulary of failure shared by every layer of kassa.
//
// Domain packages return *Error values that carry a Kind (what sort of failure
// it is) and a stable machine Code; the HTTP layer maps kinds to statuses in a
// single table and never needs to inspect messages. Validation failures carry
// every offending field at once, each named by its JSON path.
package fault

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a failure so that transports can map it without parsing text.
type Kind int

const (
	// Internal is an unexpected failure: a bug or an I/O error. It is the zero
	// value so that an unclassified error is never mistaken for the caller's fault.
	Internal Kind = iota
	// Invalid means the request itself is wrong (bad field, bounds, sums).
	Invalid
	// NotFound means the resource does not exist or is not visible to the caller.
	NotFound
	// NotAvailable means the operation is not offered in the resource's current state.
	NotAvailable
	// Conflict means the request collided with concurrent work (version, idempotency key in flight).
	Conflict
	// Unauthorized means credentials are missing or wrong.
	Unauthorized
	// Forbidden means the caller is known but not allowed to do this.
	Forbidden
	// KeyReused means an idempotency key was reused with a different request.
	KeyReused
	// TooLarge means a body or collection exceeds a limit.
	TooLarge
	// RateLimited means the caller sent too many requests.
	RateLimited
	// Declined means the buyer's payment or credit was declined.
	Declined
	// Unsupported means the request's media type is not accepted.
	Unsupported
	// MethodNotAllowed means the resource exists but not with this method.
	MethodNotAllowed
	// Unavailable means a dependency (the database) cannot be reached for
	// now; nothing was done, and the same request may be sent again.
	Unavailable
	// TimedOut means the request did not arrive in time (its body was still
	// coming when the server stopped waiting); nothing was done, and the
	// same request may be sent again.
	TimedOut
)

var kindNames = [...]string{"internal", "invalid", "not_found", "not_available", "conflict",
	"unauthorized", "forbidden", "key_reused", "too_large", "rate_limited", "declined", "unsupported", "method_not_allowed", "unavailable", "timed_out"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// FieldError names one offending field by its JSON path, e.g. "orderLines[2].quantity".
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a classified failure.
type Error struct {
	Kind    Kind
	Code    string // stable machine code, e.g. "validation_failed"
	Message string // human-readable detail
	Fields  []FieldError
	Err     error // cause, for internal errors and wrapping
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given kind and code.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf reports an unknown resource.
func NotFoundf(code, format string, args ...any) *Error {
	return New(NotFound, code, format, args...)
}

// NotAvailablef reports an operation that the resource's state does not offer.
func NotAvailablef(format string, args ...any) *Error {
	return New(NotAvailable, "action_not_available", format, args...)
}

// Conflictf reports a collision with concurrent work.
func Conflictf(code, format string, args ...any) *Error {
	return New(Conflict, code, format, args...)
}

// Internalf wraps an unexpected failure.
func Internalf(err error, format string, args ...any) *Error {
	return &Error{Kind: Internal, Code: "internal", Message: fmt.Sprintf(format, args...), Err: err}
}

// CodeOutcomeUnknown is the code of a write whose outcome the store cannot
// tell (see OutcomeUnknown).
const CodeOutcomeUnknown = "outcome_unknown"

// OutcomeUnknown reports a write the store may or may not have made: its
// commit went out and no answer settled it. It is internal (the caller did
// nothing wrong), with a code of its own, so that a client learns to send
// the request again with its Idempotency-Key, which makes the change once or
// replays its answer, rather than to report a bug.
func OutcomeUnknown(err error, format string, args ...any) *Error {
	return &Error{Kind: Internal, Code: CodeOutcomeUnknown, Message: fmt.Sprintf(format, args...), Err: err}
}

// IsOutcomeUnknown reports whether err is a write the store may or may not
// have made (OutcomeUnknown): work that retries on a store's trouble retries
// on it too, with its key, and it is never taken for the caller's doing.
func IsOutcomeUnknown(err error) bool { return CodeOf(err) == CodeOutcomeUnknown }

// KindOf reports the kind of err; errors that carry none are Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// CodeOf reports the machine code of err ("internal" when it carries none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "internal"
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Fields collects validation failures so that one error can name every offending
// field at once. The zero value is ready to use.
type Fields struct {
	list []FieldError
}

// Add records a failure of field.
func (f *Fields) Add(field, format string, args ...any) {
	f.list = append(f.list, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Len reports how many failures were recorded.
func (f *Fields) Len() int { return len(f.list) }

// List returns the recorded failures.
func (f *Fields) List() []FieldError { return f.list }

// Err returns nil when nothing was recorded, else one Invalid error listing them all.
func (f *Fields) Err() error {
	if len(f.list) == 0 {
		return nil
	}
	return &Error{Kind: Invalid, Code: "validation_failed", Message: "the request has invalid fields", Fields: f.list}
}

// Invalidf returns a validation error for a single field.
func Invalidf(field, format string, args ...any) *Error {
	var f Fields
	f.Add(field, format, args...)
	return f.Err().(*Error)
}

// InvalidCode returns a validation error with a specific code (e.g. capture_amount_mismatch).
func InvalidCode(code, field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Kind: Invalid, Code: code, Message: msg, Fields: []FieldError{{Field: field, Message: msg}}}
}
