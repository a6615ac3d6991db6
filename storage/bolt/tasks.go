package bolt

import (
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

func taskDueKey(t *storage.Task) []byte { return append(putTime(nil, t.DueAt), t.ID...) }

func (t *tx) ScheduleTask(task *storage.Task) error {
	if err := t.check(true); err != nil {
		return err
	}
	var old storage.Task
	ok, err := t.getRecord(bTasks, []byte(task.ID), &old)
	if err != nil {
		return err
	}
	if ok {
		if err := t.del(bTaskDue, taskDueKey(&old)); err != nil {
			return err
		}
	}
	if err := t.put(bTaskDue, taskDueKey(task), present); err != nil {
		return err
	}
	return t.putRecord(bTasks, []byte(task.ID), task)
}

func (t *tx) DueTasks(at time.Time, limit int) ([]*storage.Task, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var out []*storage.Task
	c := t.st.bucket(bTaskDue).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if getTime(k).After(at) {
			break
		}
		var task storage.Task
		ok, err := t.getRecord(bTasks, k[timeLen:], &task)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, &task)
		}
	}
	return out, nil
}

func (t *tx) DeleteTask(id string) error {
	var old storage.Task
	ok, err := t.getRecord(bTasks, []byte(id), &old)
	if err != nil {
		return err
	}
	if !ok {
		return fault.NotFoundf("task_not_found", "task %s not found", id)
	}
	if err := t.del(bTaskDue, taskDueKey(&old)); err != nil {
		return err
	}
	return t.del(bTasks, []byte(id))
}
