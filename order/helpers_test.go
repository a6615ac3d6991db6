package order_test

import (
	"reflect"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

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

var (
	snapshot  = ordertest.Snapshot
	wantFault = ordertest.WantFault
)
