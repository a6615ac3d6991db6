package bolt

import (
	"encoding/binary"
	"encoding/json"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// reindexStatuses brings the status index up to order.StatusRules when the
// file was indexed under older rules: every order whose entries, computed
// as a write would (statuses as of the order's last change), differ from
// the stored ones is written again with its
// version unchanged. It runs once per rules change, at Open, before any
// other transaction. Deleting the storeinfo bucket's statusRules key makes
// the next Open sweep again (docs/postgres.md, upgrading).
func (s *Store) reindexStatuses(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if v := info.Get(keyStatusRules); len(v) == 8 && binary.BigEndian.Uint64(v) >= order.StatusRules {
		return nil
	}
	now := s.clock().UTC()
	type stale struct {
		key []byte
		o   *order.Order
		old meta
	}
	var todo []stale
	err := btx.Bucket(bOrders).ForEach(func(k, v []byte) error {
		old, err := orderMeta(v)
		if err != nil {
			return nil // its reads fail the same way (and Check names it); Open must not
		}
		o, err := decodeOrder(v)
		if err != nil {
			return nil
		}
		if m := metaOf(o); !slices.Equal(m.entries, old.entries) {
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
		t := &tx{st: newState(btx, now, true, s)}
		if err := t.writeOrder(st.key, st.o, &st.old); err != nil {
			return err
		}
	}
	return info.Put(keyStatusRules, binary.BigEndian.AppendUint64(nil, order.StatusRules))
}

// indexSettlementTxIDs builds the settletxid index of a file made before it
// existed, once, at Open: every settlement transaction's id, pointing at its
// place in the settlement.
func indexSettlementTxIDs(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if info.Get(keySettleTxIDs) != nil {
		return nil
	}
	ids := btx.Bucket(bSettleTxID)
	err := btx.Bucket(bSettleTx).ForEach(func(k, v []byte) error {
		var tr struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(v, &tr); err != nil || len(k) < 4 {
			return nil // its pages fail the same way; Open must not
		}
		prefix, seq := k[:len(k)-4], k[len(k)-4:]
		return ids.Put(lp(slices.Clone(prefix), tr.ID), slices.Clone(seq))
	})
	if err != nil {
		return err
	}
	return info.Put(keySettleTxIDs, []byte{1})
}

// reindexSessions rebuilds the session index from the sessions when the file
// holds an older set of its kinds (sessionIndexVersion): files written before
// the storeId, merchantReference and updatedAt entries existed get them, and
// any entry no session accounts for is dropped. It runs at Open, in the
// transaction that creates the buckets, before any other.
func (s *Store) reindexSessions(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if v := info.Get(keySessionIndex); len(v) == 8 && binary.BigEndian.Uint64(v) >= sessionIndexVersion {
		return nil
	}
	if err := btx.DeleteBucket(bSessionIx); err != nil {
		return err
	}
	ix, err := btx.CreateBucket(bSessionIx)
	if err != nil {
		return err
	}
	err = btx.Bucket(bSessions).ForEach(func(_, v []byte) error {
		var ss session.Session
		if err := storage.DecodeRecord(v, &ss); err != nil {
			return nil // its reads fail the same way (and Check names it); Open must not
		}
		for _, e := range sessionEntries(&ss) {
			if err := ix.Put(e.key, e.value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return info.Put(keySessionIndex, binary.BigEndian.AppendUint64(nil, sessionIndexVersion))
}

// indexSettlementQueue builds the settleqix index of a file made before it
// existed, once, at Open: every queued item at its occurrence time.
func indexSettlementQueue(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if info.Get(keySettleQOrder) != nil {
		return nil
	}
	ix := btx.Bucket(bSettleQIx)
	err := btx.Bucket(bSettleQ).ForEach(func(k, v []byte) error {
		return ix.Put(settleQIxKey(decodeOccurred(v), string(k)), present)
	})
	if err != nil {
		return err
	}
	return info.Put(keySettleQOrder, []byte{1})
}
