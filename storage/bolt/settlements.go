package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/settlement"
)

func settleIxKey(s *settlement.Settlement) []byte {
	return append(putTime(lp(nil, s.MerchantID), s.CreatedAt), s.ID...)
}

func settleTxKey(merchantID, settlementID string, seq int) []byte {
	return binary.BigEndian.AppendUint32(lp(lp(nil, merchantID), settlementID), uint32(seq))
}

func (t *tx) QueueSettlementItems(items []settlement.Item) error {
	for i := range items {
		if err := t.putRecord(bSettleQ, []byte(items[i].Key), &items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) PendingSettlementItems(limit int) ([]settlement.Item, error) {
	if err := t.check(false); err != nil {
		return nil, err
	}
	var out []settlement.Item
	c := t.st.bucket(bSettleQ).Cursor()
	for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
		var it settlement.Item
		if err := json.Unmarshal(v, &it); err != nil {
			return nil, fault.Internalf(err, "decode settlement item")
		}
		out = append(out, it)
	}
	return out, nil
}

func (t *tx) SaveSettlement(b settlement.Batch) error {
	if err := t.check(true); err != nil {
		return err
	}
	for _, k := range b.Keys {
		if t.get(bSettleQ, []byte(k)) == nil {
			return fault.Conflictf("settlement_item_gone", "settlement item %s is not pending", k)
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
	for i := range b.Transactions {
		if err := t.putRecord(bSettleTx, settleTxKey(s.MerchantID, s.ID, b.Transactions[i].Seq), &b.Transactions[i]); err != nil {
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
	return pageNewest(t, bSettleIx, lp(nil, merchantID), from, q.Size,
		func(id string) (*settlement.Settlement, error) { return t.GetSettlement(merchantID, id) },
		q.Match, func(s *settlement.Settlement) string { return s.ID })
}

func (t *tx) SettlementTransactions(merchantID, settlementID, fromID string, size int) ([]settlement.Transaction, string, error) {
	if _, err := t.GetSettlement(merchantID, settlementID); err != nil {
		return nil, "", err
	}
	prefix := lp(lp(nil, merchantID), settlementID)
	c := t.st.bucket(bSettleTx).Cursor()
	k, v := c.Seek(prefix)
	found := fromID == ""
	var page []settlement.Transaction
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var tr settlement.Transaction
		if err := json.Unmarshal(v, &tr); err != nil {
			return nil, "", fault.Internalf(err, "decode settlement transaction")
		}
		if !found {
			found = tr.ID == fromID
			continue
		}
		if len(page) == size {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, tr)
	}
	if !found {
		return nil, "", fault.Invalidf("fromId", "is not a transaction of this settlement")
	}
	return page, "", nil
}
