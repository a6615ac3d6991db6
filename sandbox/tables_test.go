package sandbox_test

import (
	"testing"

	"github.com/kassahq/kassa/sandbox"
)

// The fixtures decide which sandbox buyers every kassa instance in a process
// declines or flags: what an importer does with the slice it is handed must
// not change them.
func TestFixturesCannotBeChangedByACaller(t *testing.T) {
	fx := sandbox.Fixtures()
	declined := -1
	for i, f := range fx {
		if f.Outcome == sandbox.CreditDeclined && declined < 0 {
			declined = i
		}
	}
	if declined < 0 {
		t.Fatal("no creditDeclined fixture")
	}
	want := fx[declined]
	fx[declined].Outcome = sandbox.Approved
	fx[0].CompanyID = "5569999999"
	_ = append(fx, sandbox.Fixture{Country: "SE", CompanyID: "5568888888", Outcome: sandbox.Blacklisted})
	if got, ok := sandbox.Lookup(want.Country, want.CompanyID); !ok || got.Outcome != sandbox.CreditDeclined {
		t.Errorf("Lookup(%s, %s) = %+v, %v after a caller approved it in its copy", want.Country, want.CompanyID, got, ok)
	}
	for _, id := range []string{"5569999999", "5568888888"} {
		if f, ok := sandbox.Lookup("SE", id); ok {
			t.Errorf("Lookup(SE, %s) = %+v after a caller wrote it into its copy", id, f)
		}
	}
	if sandbox.Fixtures()[declined] != want {
		t.Error("a caller writing into the returned slice changed the next call's result")
	}
}
