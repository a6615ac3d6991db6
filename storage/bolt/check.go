package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// Check verifies the file: bbolt's own consistency check (pages, freelist),
// then kassa's: every order has a meta record whose version matches it, every
// index entry, counter and expiry entry belongs to a stored order and every
// order has all of its entries; the settlement transaction id index and the
// settlement queue's oldest-first index and the two indexes of pending outbox
// messages match what they index exactly. Tests run it after every test and after each
// simulated crash; an operator can run it on a copy of a production file.
func (s *Store) Check() error {
	return s.db.View(func(btx *bbolt.Tx) error {
		var errs []error
		for err := range btx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt check: %w", errors.Join(errs...))
		}
		if err := checkIndexes(btx); err != nil {
			return err
		}
		if err := checkSettleTxIDs(btx); err != nil {
			return err
		}
		if err := checkOutboxDue(btx); err != nil {
			return err
		}
		return checkSettleQueue(btx)
	})
}

// checkOutboxDue verifies that both indexes of pending outbox messages (by
// time, and by merchant then time) name every message not yet done at its
// next attempt, and nothing else, and that the done index names every done
// message at its creation, and nothing else.
func checkOutboxDue(btx *bbolt.Tx) error {
	byTime, byMerchant, done := map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	err := btx.Bucket(bOutbox).ForEach(func(k, v []byte) error {
		var m storage.OutboxMessage
		if err := storage.DecodeRecord(v, &m); err != nil {
			return fmt.Errorf("outbox message %q: %w", k, err)
		}
		if m.Done() {
			done[string(outboxDoneKey(&m))] = nil
		} else {
			byTime[string(outboxDueKey(&m))] = nil
			byMerchant[string(outboxMerchantDueKey(&m))] = nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := sameKeys(btx.Bucket(bOutboxDue), byTime, "outbox due index"); err != nil {
		return err
	}
	if err := sameKeys(btx.Bucket(bOutboxDone), done, "outbox done index"); err != nil {
		return err
	}
	return sameKeys(btx.Bucket(bOutboxMDue), byMerchant, "outbox merchant due index")
}

// checkSettleQueue verifies that the settleqix index holds every queued
// item once, at its occurrence time, and nothing else.
func checkSettleQueue(btx *bbolt.Tx) error {
	want := map[string][]byte{}
	err := btx.Bucket(bSettleQ).ForEach(func(k, v []byte) error {
		at, err := queuedOccurred(v)
		if err != nil {
			return fmt.Errorf("settlement item %q: %w", k, err)
		}
		want[string(settleQIxKey(at, string(k)))] = nil
		return nil
	})
	if err != nil {
		return err
	}
	return sameKeys(btx.Bucket(bSettleQIx), want, "settlement queue index")
}

// checkSettleTxIDs verifies that the settletxid index names every settlement
// transaction at its place, and nothing else.
func checkSettleTxIDs(btx *bbolt.Tx) error {
	want := map[string][]byte{}
	err := btx.Bucket(bSettleTx).ForEach(func(k, v []byte) error {
		ik, seq, err := settleTxIDEntry(k, v)
		if err != nil {
			return fmt.Errorf("settlement transaction %q: %w", k, err)
		}
		want[string(ik)] = seq
		return nil
	})
	if err != nil {
		return err
	}
	return sameKeys(btx.Bucket(bSettleTxID), want, "settlement transaction id index")
}

func checkIndexes(btx *bbolt.Tx) error {
	want := map[string][]byte{} // index keys the meta records name
	counts := map[string]int64{}
	due := map[string][]byte{}
	err := btx.Bucket(bOrders).ForEach(func(k, v []byte) error {
		m, err := orderMeta(v)
		if err != nil {
			return err
		}
		o, err := decodeOrder(v)
		if err != nil {
			return err
		}
		if o.Version != m.version {
			return fmt.Errorf("order %q has version %d, its meta %d", k, o.Version, m.version)
		}
		merchant, id, err := splitOrderKey(k)
		if err != nil {
			return err
		}
		for _, ik := range m.indexKeys(merchant, id) {
			want[string(ik.key)] = nil
			if ik.count != nil {
				counts[string(ik.count)]++
			}
		}
		if m.expirable {
			due[string(dueKey(m.expires, merchant, id))] = nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := sameKeys(btx.Bucket(bIndex), want, "index"); err != nil {
		return err
	}
	if err := sameKeys(btx.Bucket(bDue), due, "expiry index"); err != nil {
		return err
	}
	if err := checkSessionIndex(btx); err != nil {
		return err
	}
	seen := 0
	err = btx.Bucket(bCounts).ForEach(func(k, v []byte) error {
		seen++
		if got := int64(binary.BigEndian.Uint64(v)); got != counts[string(k)] {
			return fmt.Errorf("counter %q is %d, want %d", k, got, counts[string(k)])
		}
		return nil
	})
	if err == nil && seen != len(counts) {
		err = fmt.Errorf("%d counters, want %d", seen, len(counts))
	}
	return err
}

// sameKeys verifies that bucket b holds exactly the keys of want, each with
// its value where want gives one (nil: any value).
func sameKeys(b *bbolt.Bucket, want map[string][]byte, what string) error {
	n := 0
	err := b.ForEach(func(k, v []byte) error {
		w, ok := want[string(k)]
		if !ok {
			return fmt.Errorf("%s entry %q indexes nothing stored", what, k)
		}
		if w != nil && !bytes.Equal(v, w) {
			return fmt.Errorf("%s entry %q is %x, want %x", what, k, v, w)
		}
		n++
		return nil
	})
	if err == nil && n != len(want) {
		err = fmt.Errorf("%s has %d entries, want %d", what, n, len(want))
	}
	return err
}

func splitOrderKey(k []byte) (merchant, id string, err error) {
	l, n := binary.Uvarint(k)
	if n <= 0 || uint64(len(k)-n) < l {
		return "", "", fmt.Errorf("bad order key %q", k)
	}
	return string(k[n : n+int(l)]), string(bytes.Clone(k[n+int(l):])), nil
}

// checkSessionIndex: the session index holds exactly the entries of the
// stored sessions (sessionEntries), with their values.
func checkSessionIndex(btx *bbolt.Tx) error {
	want := map[string][]byte{}
	err := btx.Bucket(bSessions).ForEach(func(k, v []byte) error {
		var s session.Session
		if err := storage.DecodeRecord(v, &s); err != nil {
			return fmt.Errorf("session %q: %w", k, err)
		}
		for _, e := range sessionEntries(&s) {
			if _, dup := want[string(e.key)]; dup {
				return fmt.Errorf("session index entry %q belongs to two sessions", e.key)
			}
			want[string(e.key)] = e.value
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sameKeys(btx.Bucket(bSessionIx), want, "session index")
}
