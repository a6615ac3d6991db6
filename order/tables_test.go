package order_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// The package's enumerations and default policy are shared by every kassa
// instance in a process, so what an importer does with the values it is
// handed must not change what the package accepts.

func lineTypeRefused(typ string) bool {
	var f fault.Fields
	in := order.LineInput{Description: new("Bolts"), Quantity: ptr(1), UnitPrice: ptr(100), Vat: ptr(2500), Type: typ}
	order.ValidateLineFields(&f, "orderLines[0]", in, false)
	return slices.ContainsFunc(f.List(), func(e fault.FieldError) bool { return e.Field == "orderLines[0].type" })
}

func TestLineTypesCannotBeChangedByACaller(t *testing.T) {
	want := order.LineTypes()
	got := order.LineTypes()
	got[0] = "crypto"
	_ = append(got[:1], "loan")
	if !lineTypeRefused("crypto") || !lineTypeRefused("loan") {
		t.Fatal("a line type written into the returned slice is accepted")
	}
	if lineTypeRefused(string(want[0])) || lineTypeRefused(string(want[1])) {
		t.Fatalf("%q or %q is refused after a caller overwrote its copy", want[0], want[1])
	}
	if !slices.Equal(order.LineTypes(), want) {
		t.Fatalf("LineTypes() = %v after a caller changed its copy, want %v", order.LineTypes(), want)
	}
}

func TestPaymentTypesAndStatusesCannotBeChangedByACaller(t *testing.T) {
	pts := order.PaymentTypes()
	first := pts[0]
	pts[0] = "crypto"
	if order.ValidPaymentType("crypto") || !order.ValidPaymentType(first) {
		t.Fatal("changing the slice PaymentTypes returned changed which payment types are valid")
	}
	sts := order.AllStatuses()
	firstStatus := sts[0]
	sts[0] = "pawned"
	if order.ValidStatus("pawned") || !order.ValidStatus(string(firstStatus)) {
		t.Fatal("changing the slice AllStatuses returned changed which statuses are valid")
	}
}

// changeable reports whether writing into what list returned shows up in the
// next call.
func changeable[T ~string](list func() []T) bool {
	a := list()
	a[0] = "changed"
	return list()[0] == "changed"
}

func TestEnumerationsAreFreshCopies(t *testing.T) {
	for name, ok := range map[string]bool{
		"AllStatuses": changeable(order.AllStatuses), "AllEventTypes": changeable(order.AllEventTypes),
		"LineTypes": changeable(order.LineTypes), "PaymentTypes": changeable(order.PaymentTypes),
		"Categories": changeable(order.Categories), "RiskTags": changeable(order.RiskTags),
	} {
		if ok {
			t.Errorf("a caller writing into what %s returned changed the package's list", name)
		}
	}
}

// TestDefaultPolicyIsTheDesigns pins design.md's expiry periods. (That a
// caller's copy cannot change the default is the compiler's: a value.)
func TestDefaultPolicyIsTheDesigns(t *testing.T) {
	if d := order.DefaultPolicy(); d.ExpiryPeriod != 28*24*time.Hour || d.MaxExpiry != 180*24*time.Hour {
		t.Fatalf("DefaultPolicy() = %+v, want 28 and 180 days", d)
	}
}
