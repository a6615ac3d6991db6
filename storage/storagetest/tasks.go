package storagetest

import (
	"slices"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

func testTasks(t *testing.T, s storage.Store) {
	task := func(id string, due time.Duration) *storage.Task {
		return &storage.Task{ID: id, Kind: "autoCapture", MerchantID: "m1", OrderID: "o-" + id, DueAt: Now().Add(due)}
	}
	update(t, s, func(tx storage.Tx) error {
		for _, tk := range []*storage.Task{task("b", time.Minute), task("a", 2*time.Minute), task("c", time.Hour)} {
			if err := tx.ScheduleTask(tk); err != nil {
				return err
			}
		}
		return nil
	})
	due := func(at time.Time) []string {
		var ids []string
		view(t, s, func(tx storage.Tx) error {
			ts, err := tx.DueTasks(at, 10)
			for _, tk := range ts {
				ids = append(ids, tk.ID)
			}
			return err
		})
		return ids
	}
	if got := due(Now()); len(got) != 0 {
		t.Fatalf("due now %v", got)
	}
	if got := due(Now().Add(2 * time.Minute)); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("due in 2 min %v", got)
	}
	// Rescheduling moves a task; deleting removes it.
	update(t, s, func(tx storage.Tx) error {
		tk := task("b", 3*time.Hour)
		tk.Attempts = 1
		if err := tx.ScheduleTask(tk); err != nil {
			return err
		}
		return tx.DeleteTask("a")
	})
	if got := due(Now().Add(2 * time.Hour)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after reschedule %v", got)
	}
	if got := due(Now().Add(4 * time.Hour)); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("later %v", got)
	}
	err := s.Update(ctx, func(tx storage.Tx) error { return tx.DeleteTask("a") })
	wantKind(t, err, fault.NotFound)
}
