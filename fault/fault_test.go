package fault

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldsCollectsEveryFailure(t *testing.T) {
	var f Fields
	if f.Err() != nil || f.Len() != 0 {
		t.Fatal("empty Fields is an error")
	}
	f.Add("orderLines[2].quantity", "must be between %d and %d", 1, 99999999)
	f.Add("country", "is required")
	err := f.Err()
	var e *Error
	if !errors.As(err, &e) || e.Kind != Invalid || e.Code != "validation_failed" || len(e.Fields) != 2 ||
		e.Fields[0] != (FieldError{Field: "orderLines[2].quantity", Message: "must be between 1 and 99999999"}) {
		t.Fatalf("error %#v", err)
	}
	want := "validation_failed: the request has invalid fields; orderLines[2].quantity: must be between 1 and 99999999; country: is required"
	if err.Error() != want {
		t.Fatalf("Error() = %q", err.Error())
	}
}

func TestKindAndCodeThroughWrapping(t *testing.T) {
	base := InvalidCode("capture_amount_mismatch", "totalCaptureAmount", "must equal %d", 5)
	wrapped := fmt.Errorf("capture: %w", base)
	if KindOf(wrapped) != Invalid || CodeOf(wrapped) != "capture_amount_mismatch" || !Is(wrapped, Invalid) {
		t.Fatalf("kind %s code %s", KindOf(wrapped), CodeOf(wrapped))
	}
	if KindOf(errors.New("x")) != Internal || CodeOf(errors.New("x")) != "internal" || Is(nil, Internal) {
		t.Fatal("plain errors must be internal, nil is nothing")
	}
	na := NotAvailablef("capture is not available")
	if na.Kind != NotAvailable || na.Code != "action_not_available" {
		t.Fatalf("%#v", na)
	}
	cause := errors.New("disk")
	in := Internalf(cause, "save")
	if !errors.Is(in, cause) || in.Error() != "internal: save: disk" {
		t.Fatalf("internal %q", in.Error())
	}
	if Invalidf("x", "bad").Fields[0].Field != "x" || NotFoundf("order_not_found", "no").Kind != NotFound ||
		Conflictf("idempotency_request_in_progress", "busy").Kind != Conflict {
		t.Fatal("constructors")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Internal: "internal", Invalid: "invalid", NotAvailable: "not_available",
		Unsupported: "unsupported", Unavailable: "unavailable", TimedOut: "timed_out", Kind(99): "kind(99)"} {
		if k.String() != want {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
}
