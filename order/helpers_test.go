package order_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// snapshot is the stored form of o, to prove that a refused operation left it untouched.
func snapshot(t testing.TB, o *order.Order) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantFault checks that err is a *fault.Error of kind and code naming exactly fields (in order).
func wantFault(t testing.TB, err error, kind fault.Kind, code string, fields ...string) {
	t.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v, want a fault of kind %s", err, kind)
	}
	if fe.Kind != kind || fe.Code != code {
		t.Fatalf("error kind/code = %s/%s, want %s/%s (%v)", fe.Kind, fe.Code, kind, code, err)
	}
	if fields == nil {
		return
	}
	var got []string
	for _, f := range fe.Fields {
		got = append(got, f.Field)
	}
	if !slices.Equal(got, fields) {
		t.Fatalf("error fields = %q, want %q\n(%v)", got, fields, err)
	}
}

func eventTypes(o *order.Order) []order.EventType {
	var ts []order.EventType
	for _, e := range o.Events {
		ts = append(ts, e.Type)
	}
	return ts
}

func actions(o *order.Order, l *order.Ledger, f interface{ Env() order.Env }) []order.Action {
	env := f.Env()
	return o.Actions(l, env.Now, env.Policy)
}

func equal[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
