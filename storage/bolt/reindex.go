package bolt

import (
	"encoding/binary"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
)

// reindexStatuses brings the status index up to order.StatusRules when the
// file was indexed under older rules: every order whose statuses, computed
// now for the moment it was last written, differ from its stored entries is
// written again with its version unchanged. It runs once per rules change,
// at Open, before any other transaction.
func (s *Store) reindexStatuses(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if v := info.Get(keyStatusRules); v != nil && binary.BigEndian.Uint64(v) >= order.StatusRules {
		return nil
	}
	type stale struct {
		key []byte
		o   *order.Order
		old meta
	}
	var todo []stale
	err := btx.Bucket(bOrders).ForEach(func(k, v []byte) error {
		old, err := orderMeta(v)
		if err != nil {
			return err
		}
		o, err := decodeOrder(v)
		if err != nil {
			return err
		}
		if m := metaOf(o, o.UpdatedAt); !slices.Equal(m.entries, old.entries) {
			todo = append(todo, stale{key: slices.Clone(k), o: o, old: old})
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Written outside the walk: bbolt does not allow changing a bucket that a
	// cursor is iterating.
	for _, st := range todo {
		t := &tx{st: newState(btx, st.o.UpdatedAt, true, s)}
		if err := t.writeOrder(st.key, st.o, &st.old); err != nil {
			return err
		}
	}
	return info.Put(keyStatusRules, binary.BigEndian.AppendUint64(nil, order.StatusRules))
}
