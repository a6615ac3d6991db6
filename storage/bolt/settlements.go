package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
)

func settleIxKey(s *settlement.Settlement) []byte {
	return append(putTime(lp(nil, s.MerchantID), s.CreatedAt), s.ID...)
}

func settleTxKey(merchantID, settlementID string, seq int) []byte {
	return binary.BigEndian.AppendUint32(lp(lp(nil, merchantID), settlementID), uint32(seq))
}

func settleTxIDKey(merchantID, settlementID, id string) []byte {
	return lp(lp(lp(nil, merchantID), settlementID), id)
}

// settleQIxKey is an item's place in the queue's oldest-first index.
func settleQIxKey(occurred time.Time, itemKey string) []byte {
	return append(putTime(make([]byte, 0, timeLen+len(itemKey)), occurred), itemKey...)
}

// queuedOccurred reads the occurrence time of a queued item.
func queuedOccurred(v []byte) (time.Time, error) {
	var it storage.QueuedItem
	err := storage.DecodeRecord(v, &it)
	return it.OccurredAt, err
}

// decodeOccurred is queuedOccurred for the write and rebuild paths: an item
// that does not decode sorts as the zero time (its reads fail anyway, and
// Check names it).
func decodeOccurred(v []byte) time.Time {
	at, _ := queuedOccurred(v)
	return at
}

// settleTxIDEntry is the settletxid entry of a stored settlement
// transaction (key k, JSON v): its id under the settlement's prefix, and
// its place. The write path builds the same key from the record it has
// (settleTxIDKey).
func settleTxIDEntry(k, v []byte) (key, seq []byte, err error) {
	var tr struct {
		ID string `json:"id"`
	}
	if len(k) < 4 {
		return nil, nil, fmt.Errorf("settlement transaction key %q is too short", k)
	}
	if err := json.Unmarshal(v, &tr); err != nil {
		return nil, nil, err
	}
	return lp(bytes.Clone(k[:len(k)-4]), tr.ID), bytes.Clone(k[len(k)-4:]), nil
}

func (t *tx) QueueSettlementItems(items []settlement.Item) error {
	for i := range items {
		k := []byte(items[i].Key)
		// An item queued again under its key leaves its old place in the
		// index, or the queue would list it twice.
		if old := t.get(bSettleQ, k); old != nil {
			if err := t.del(bSettleQIx, settleQIxKey(decodeOccurred(old), items[i].Key)); err != nil {
				return err
			}
		}
		if err := t.putRecord(bSettleQ, k, storage.QueuedItem(items[i])); err != nil {
			return err
		}
		if err := t.put(bSettleQIx, settleQIxKey(items[i].OccurredAt, items[i].Key), present); err != nil {
			return err
		}
	}
	return nil
}

// PendingSettlementItems walks the queue oldest first, ties by key.
func (t *tx) PendingSettlementItems(limit int) ([]settlement.Item, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var out []settlement.Item
	q := t.st.bucket(bSettleQ)
	c := t.st.bucket(bSettleQIx).Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if len(k) < timeLen {
			return nil, fault.Internalf(nil, "settlement queue index key %q is too short", k)
		}
		v := q.Get(k[timeLen:])
		if v == nil {
			return nil, fault.Internalf(nil, "settlement queue index names %q, which is not queued", k[timeLen:])
		}
		var it storage.QueuedItem
		if err := storage.DecodeRecord(v, &it); err != nil {
			return nil, fault.Internalf(err, "decode settlement item")
		}
		out = append(out, settlement.Item(it))
	}
	return out, nil
}

func (t *tx) QueuedSettlementItems(keys []string) ([]settlement.Item, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var out []settlement.Item
	q := t.st.bucket(bSettleQ)
	for _, k := range keys {
		v := q.Get([]byte(k))
		if v == nil {
			continue
		}
		var it storage.QueuedItem
		if err := storage.DecodeRecord(v, &it); err != nil {
			return nil, fault.Internalf(err, "decode settlement item")
		}
		out = append(out, settlement.Item(it))
	}
	return out, nil
}

func (t *tx) SaveSettlement(b settlement.Batch) error {
	if err := t.check(true); err != nil {
		return err
	}
	for _, k := range b.Keys {
		v := t.get(bSettleQ, []byte(k))
		if v == nil {
			return fault.Conflictf("settlement_item_gone", "settlement item %s is not pending", k)
		}
		if err := t.del(bSettleQIx, settleQIxKey(decodeOccurred(v), k)); err != nil {
			return err
		}
		if err := t.del(bSettleQ, []byte(k)); err != nil {
			return err
		}
	}
	s := &b.Settlement
	if s.ID == "" {
		return nil
	}
	if err := t.putRecord(bSettle, key(s.MerchantID, s.ID), s); err != nil {
		return err
	}
	if err := t.put(bSettleIx, settleIxKey(s), present); err != nil {
		return err
	}
	type idEntry struct{ k, seq []byte }
	ids := make([]idEntry, len(b.Transactions))
	for i := range b.Transactions {
		tr := &b.Transactions[i]
		if err := t.putRecord(bSettleTx, settleTxKey(s.MerchantID, s.ID, tr.Seq), tr); err != nil {
			return err
		}
		ids[i] = idEntry{settleTxIDKey(s.MerchantID, s.ID, tr.ID), binary.BigEndian.AppendUint32(nil, uint32(tr.Seq))}
	}
	// In key order: bbolt splits a leaf only at commit, so keys put in the
	// random order of the ids all land in one growing node, and each put
	// shifts the entries after it: 100 000 transactions took 7 s of the
	// writer. Put in order, each one goes to the end.
	slices.SortFunc(ids, func(a, b idEntry) int { return bytes.Compare(a.k, b.k) })
	for _, e := range ids {
		if err := t.put(bSettleTxID, e.k, e.seq); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) GetSettlement(merchantID, id string) (*settlement.Settlement, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var s settlement.Settlement
	ok, err := t.getRecord(bSettle, key(merchantID, id), &s)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.NotFoundf("settlement_not_found", "settlement %s not found", id)
	}
	return &s, nil
}

func (t *tx) ListSettlements(merchantID string, q settlement.Query) ([]*settlement.Settlement, string, error) {
	if err := t.check(false); err != nil {
		return nil, "", err
	}
	var from []byte
	if q.FromID != "" {
		s, err := t.GetSettlement(merchantID, q.FromID)
		if err != nil {
			return nil, "", err
		}
		from = settleIxKey(s)
	}
	// The index sorts a merchant's settlements by creation, so a created
	// range bounds the walk: it starts at createdTo and ends at createdFrom,
	// rather than reading every settlement of the merchant outside it (a
	// daily run makes one per store and currency: thousands a year).
	prefix := lp(nil, merchantID)
	if !q.CreatedTo.IsZero() {
		if to := putTime(bytes.Clone(prefix), q.CreatedTo); from == nil || bytes.Compare(to, from) < 0 {
			from = to
		}
	}
	var lower []byte
	if !q.CreatedFrom.IsZero() {
		lower = putTime(bytes.Clone(prefix), q.CreatedFrom)
	}
	return pageNewest(t, bSettleIx, prefix, from, lower, q.Size,
		func(id string) (*settlement.Settlement, error) { return t.GetSettlement(merchantID, id) },
		q.Match, func(s *settlement.Settlement) string { return s.ID })
}

func (t *tx) SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error) {
	if _, err := t.GetSettlement(merchantID, settlementID); err != nil {
		return nil, "", err
	}
	prefix := lp(lp(nil, merchantID), settlementID)
	start := prefix
	if fromID != "" {
		// Looked up, not found by decoding the transactions before it: a
		// walk of a large settlement would otherwise cost the square of its
		// size.
		seq := t.st.bucket(bSettleTxID).Get(settleTxIDKey(merchantID, settlementID, fromID))
		if len(seq) != 4 {
			return nil, "", fault.Invalidf("fromId", "is not a transaction of this settlement")
		}
		start = binary.BigEndian.AppendUint32(slices.Clip(prefix), binary.BigEndian.Uint32(seq)+1)
	}
	c := t.st.bucket(bSettleTx).Cursor()
	var page []settlement.Transaction
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(page) == size {
			return page, page[len(page)-1].ID, nil
		}
		var tr settlement.Transaction
		if err := json.Unmarshal(v, &tr); err != nil {
			return nil, "", fault.Internalf(err, "decode settlement transaction")
		}
		page = append(page, tr)
	}
	return page, "", nil
}
