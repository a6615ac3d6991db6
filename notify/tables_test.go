package notify_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/notify"
)

// The topic list and the default retry schedule are shared by every kassa
// instance in a process: what an importer does with the values it is handed
// must not change what the package accepts or delivers.
func TestOrderEventTopicsCannotBeChangedByACaller(t *testing.T) {
	topics := notify.OrderEventTopics()
	first := topics[0]
	topics[0] = "order.hijack"
	_ = append(topics, "order.steal")
	for _, topic := range []string{"order.hijack", "order.steal"} {
		if notify.ValidateSubscriptions([]string{topic}) == nil {
			t.Errorf("subscribing to %q accepted after a caller changed its copy of the topics", topic)
		}
		if notify.Wants([]string{notify.AllOrderEvents}, topic) || slices.Contains(notify.Subscribable(), topic) {
			t.Errorf("%q delivered or subscribable after a caller changed its copy of the topics", topic)
		}
	}
	if !notify.Wants([]string{notify.AllOrderEvents}, first) || notify.OrderEventTopics()[0] != first {
		t.Errorf("%q lost after a caller overwrote it in its copy", first)
	}
}

// TestDefaultRetryIsTheDocumented pins the schedule DefaultRetry's doc
// states. (That a caller's copy cannot change it is the compiler's: a value.)
func TestDefaultRetryIsTheDocumented(t *testing.T) {
	if d := notify.DefaultRetry(); d != (notify.Retry{Base: 30 * time.Second, Cap: 6 * time.Hour, MaxAttempts: 12}) {
		t.Fatalf("DefaultRetry() = %+v, want 30 s doubling to a 6 h cap, 12 attempts", d)
	}
}
