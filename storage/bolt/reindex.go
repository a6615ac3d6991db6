package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/storage"
)

// statusesStale reports whether Open must sweep the orders' statuses
// (sweepStatuses) once its first transaction has committed: the file was
// indexed under older status rules than order.StatusRules. A file without
// orders, a new one above all, is marked as indexed under the current
// rules at once.
func statusesStale(btx *bbolt.Tx) (bool, error) {
	info := btx.Bucket(bInfo)
	if v := info.Get(keyStatusRules); len(v) == 8 && binary.BigEndian.Uint64(v) >= order.StatusRules {
		return false, nil
	}
	if onRebuild != nil {
		onRebuild(keyStatusRules)
	}
	if k, _ := btx.Bucket(bOrders).Cursor().First(); k != nil {
		return true, nil
	}
	return false, info.Put(keyStatusRules, binary.BigEndian.AppendUint64(nil, order.StatusRules))
}

// sweepWrites and sweepReads bound one transaction of sweepStatuses: the
// orders it rewrites and those it reads. Variables so that tests can make
// them small.
var sweepWrites, sweepReads = 1000, 20000

// sweepEvery is how often sweepStatuses logs its progress.
var sweepEvery = 5 * time.Second

// onSweptOrder, when set (tests), is told of each order sweepStatuses
// rewrites, with the bbolt transaction doing it; an error stops the sweep
// there, and Open fails with it.
var onSweptOrder func(txid int, k []byte) error

// sweepStatuses brings the status index up to order.StatusRules when the
// file was indexed under older rules: every order whose entries, computed
// as a write would (statuses as of the order's last change), differ from
// the stored ones is written again with its version unchanged. It runs
// once per rules change, at Open, before any other transaction. Deleting
// the storeinfo bucket's statusRules key makes the next Open sweep again
// (docs/postgres.md, upgrading).
//
// It commits in batches (sweepWrites, sweepReads): bbolt keeps a
// transaction's dirty pages in memory until its commit, and one
// transaction rewriting 300 000 stale orders held a 3 GB heap; in batches
// it stays near 160 MB (docs/decisions.md). Each batch walks on from the
// key after the last one the previous batch read, and marks its commit as
// this build's, so a restart after a crash between batches does not take
// it for another writer's. The rules are recorded by the batch that
// reaches the end; until then a restart sweeps again from the first order.
// No position is kept for it: the orders already rewritten are no longer
// stale and are only read again (all 300 000 in about 12 s, where
// rewriting them took 20 to 40 s), once, after a crash during a sweep that
// runs once per rules change; and a position would have to be forgotten,
// with the rules, whenever another writer wrote the file meanwhile.
func (s *Store) sweepStatuses(log *slog.Logger) error {
	sl := storage.NewSweepLog(log, "bolt", sweepEvery)
	var after []byte // the last key read; nil before the first batch
	for done := false; !done; {
		err := s.db.Update(func(btx *bbolt.Tx) error {
			type stale struct {
				key []byte
				o   *order.Order
				old meta
			}
			var todo []stale
			c := btx.Bucket(bOrders).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			var n int
			for ; k != nil && len(todo) < sweepWrites && n < sweepReads; k, v = c.Next() {
				n++
				after = append(after[:0], k...)
				old, err := orderMeta(v)
				if err != nil {
					continue // its reads fail the same way (and Check names it); Open must not
				}
				o, err := decodeOrder(v)
				if err != nil {
					continue
				}
				if m := metaOf(o); !slices.Equal(m.entries, old.entries) {
					todo = append(todo, stale{key: slices.Clone(k), o: o, old: old})
				}
			}
			if n > 0 {
				sl.Begin("the store opens once done")
			}
			// Written outside the walk: bbolt does not allow changing a
			// bucket that a cursor is iterating.
			now := s.clock().UTC()
			for _, st := range todo {
				if onSweptOrder != nil {
					if err := onSweptOrder(btx.ID(), st.key); err != nil {
						return err
					}
				}
				t := &tx{st: newState(btx, now, true, s)}
				if err := t.writeOrder(st.key, st.o, &st.old); err != nil {
					return err
				}
			}
			sl.Add(n, len(todo))
			if done = k == nil; done {
				if err := btx.Bucket(bInfo).Put(keyStatusRules, binary.BigEndian.AppendUint64(nil, order.StatusRules)); err != nil {
					return err
				}
			}
			return markOurs(btx)
		})
		if err != nil {
			return fmt.Errorf("sweep the orders' statuses: %w", err)
		}
		if !done {
			sl.Progress()
		}
	}
	sl.Done()
	return nil
}

// rebuildIndex fills the index bucket ix from scratch at Open, unless the
// file's mark says it holds version (or later) of that index already. It
// runs for a file made before the index existed, or last written by a
// build that did not keep it up (forgetIndexesAfterOtherWriters).
//
// fill hands over the entries in the order of the records they come from;
// they are put in key order. bbolt splits a node only at commit, so the
// new bucket is one node until then, and each Put shifts every entry after
// its place: entries in record order (random ids, or ids ascending where
// the index descends) made the rebuild quadratic, a file of 300 000 done
// notifications opening in tens of minutes. Appended in key order, each
// Put shifts nothing.
//
// A rebuild over records (from holds any) is logged at its start and end:
// at 300 000 records it holds Open for about 10 s, a silence that looks
// hung. A new file's indexes are built too, over nothing, and say nothing.
func rebuildIndex(btx *bbolt.Tx, log *slog.Logger, from, mark, ix []byte, version uint64, fill func(put func(k, v []byte)) error) error {
	info := btx.Bucket(bInfo)
	if v := info.Get(mark); len(v) == 8 && binary.BigEndian.Uint64(v) >= version {
		return nil
	}
	var start time.Time
	if log != nil {
		if k, _ := btx.Bucket(from).Cursor().First(); k != nil {
			start = time.Now()
			log.Info("bolt: rebuilding an index; the store opens once done", "index", string(ix), "from", string(from))
		}
	}
	if err := btx.DeleteBucket(ix); err != nil {
		return err
	}
	b, err := btx.CreateBucket(ix)
	if err != nil {
		return err
	}
	type kv struct{ k, v []byte }
	var entries []kv
	if err := fill(func(k, v []byte) { entries = append(entries, kv{k, v}) }); err != nil {
		return err
	}
	// Stable: of two entries with one key, the later is kept, as by Puts in
	// record order.
	slices.SortStableFunc(entries, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for _, e := range entries {
		if onIndexPut != nil {
			onIndexPut(ix, e.k)
		}
		if err := b.Put(e.k, e.v); err != nil {
			return err
		}
	}
	if onRebuild != nil {
		onRebuild(mark)
	}
	if !start.IsZero() {
		log.Info("bolt: rebuilt an index", "index", string(ix), "entries", len(entries),
			"took", time.Since(start).Round(time.Millisecond).String())
	}
	return info.Put(mark, binary.BigEndian.AppendUint64(nil, version))
}

// indexSettlementTxIDs builds the settletxid index: every settlement
// transaction's id, pointing at its place in the settlement.
func indexSettlementTxIDs(btx *bbolt.Tx, log *slog.Logger) error {
	return rebuildIndex(btx, log, bSettleTx, keySettleTxIDs, bSettleTxID, 1, func(put func(k, v []byte)) error {
		return btx.Bucket(bSettleTx).ForEach(func(k, v []byte) error {
			key, seq, err := settleTxIDEntry(k, v)
			if err != nil {
				return nil // its pages fail the same way (and Check names it); Open must not
			}
			put(key, seq)
			return nil
		})
	})
}

// reindexSessions builds the session index from the sessions, for files
// holding an older set of its kinds (sessionIndexVersion): files written
// before the storeId, merchantReference and updatedAt entries existed get
// them, and any entry no session accounts for is dropped.
func (s *Store) reindexSessions(btx *bbolt.Tx) error {
	return rebuildIndex(btx, s.opts.Logger, bSessions, keySessionIndex, bSessionIx, sessionIndexVersion, func(put func(k, v []byte)) error {
		return btx.Bucket(bSessions).ForEach(func(_, v []byte) error {
			var ss session.Session
			if err := storage.DecodeRecord(v, &ss); err != nil {
				return nil // its reads fail the same way (and Check names it); Open must not
			}
			for _, e := range sessionEntries(&ss) {
				put(e.key, e.value)
			}
			return nil
		})
	})
}

// indexSettlementQueue builds the settleqix index: every queued item at its
// occurrence time.
func indexSettlementQueue(btx *bbolt.Tx, log *slog.Logger) error {
	return rebuildIndex(btx, log, bSettleQ, keySettleQOrder, bSettleQIx, 1, func(put func(k, v []byte)) error {
		return btx.Bucket(bSettleQ).ForEach(func(k, v []byte) error {
			put(settleQIxKey(decodeOccurred(v), string(k)), present)
			return nil
		})
	})
}

// indexOutboxByMerchant builds the outboxmdue index: every pending message
// under its merchant, at its next attempt.
func indexOutboxByMerchant(btx *bbolt.Tx, log *slog.Logger) error {
	return rebuildIndex(btx, log, bOutbox, keyOutboxMerchantDue, bOutboxMDue, 1, func(put func(k, v []byte)) error {
		return btx.Bucket(bOutbox).ForEach(func(_, v []byte) error {
			var m storage.OutboxMessage
			if err := storage.DecodeRecord(v, &m); err != nil {
				return nil // its reads fail the same way (and Check names it); Open must not
			}
			if m.Done() {
				return nil
			}
			put(outboxMerchantDueKey(&m), present)
			return nil
		})
	})
}

// indexOutboxDone builds the outboxdone index: every done message at its
// creation time.
func indexOutboxDone(btx *bbolt.Tx, log *slog.Logger) error {
	return rebuildIndex(btx, log, bOutbox, keyOutboxDone, bOutboxDone, 1, func(put func(k, v []byte)) error {
		return btx.Bucket(bOutbox).ForEach(func(_, v []byte) error {
			var m storage.OutboxMessage
			if err := storage.DecodeRecord(v, &m); err != nil {
				return nil // its reads fail the same way (and Check names it); Open must not
			}
			if !m.Done() {
				return nil
			}
			put(outboxDoneKey(&m), present)
			return nil
		})
	})
}

// indexAuthExpiry builds the authexp index: every authorization token at
// its expiry.
func indexAuthExpiry(btx *bbolt.Tx, log *slog.Logger) error {
	return rebuildIndex(btx, log, bAuth, keyAuthExpiry, bAuthExp, 1, func(put func(k, v []byte)) error {
		return btx.Bucket(bAuth).ForEach(func(k, v []byte) error {
			var a authExpiry
			if err := storage.DecodeRecord(v, &a); err != nil {
				return nil // its reads fail the same way (and Check names it); Open must not
			}
			put(authExpiryKey(a.ExpiresAt, k), present)
			return nil
		})
	})
}

// markOurs records, in the transaction about to commit, that this build
// made it: every commit of this store does, so a file whose last commit is
// not so marked was last written by something else, an older build after
// a rollback above all. storeinfo sits in the root page, which a commit
// writes anyway.
func markOurs(btx *bbolt.Tx) error {
	return btx.Bucket(bInfo).Put(keyLastCommit, lastCommitMark(uint64(btx.ID())))
}

// openIndexes is the version of the set of indexes Open builds and every
// write keeps up. Raise it when one is added or changed: the mark carries
// it, so a build that marks its commits but does not keep the new index (a
// rollback to it, then this build again) is taken for another writer.
const openIndexes = 4

func lastCommitMark(txid uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, txid), openIndexes)
}

// onRebuild, when set (tests), is told of each index Open rebuilds.
var onRebuild func(mark []byte)

// onIndexPut, when set (tests), is told of each entry rebuildIndex puts.
var onIndexPut func(ix, k []byte)

// forgetIndexesAfterOtherWriters drops the marks of the indexes built once
// at Open when the file's last commit is not one of this build's: an older
// build (a rollback, then this build again) writes orders, sessions,
// settlements, notifications and tokens without keeping up the indexes it
// does not know, so each is rebuilt. A crash leaves the mark of the last
// commit in place, so a restart after one rebuilds nothing. A file from
// before the mark existed is rebuilt once.
func forgetIndexesAfterOtherWriters(btx *bbolt.Tx) error {
	info := btx.Bucket(bInfo)
	if bytes.Equal(info.Get(keyLastCommit), lastCommitMark(uint64(btx.ID())-1)) {
		return nil
	}
	for _, k := range [][]byte{keySettleTxIDs, keySettleQOrder, keyOutboxMerchantDue, keyOutboxDone, keyAuthExpiry, keySessionIndex, keyStatusRules} {
		if err := info.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// ours refuses a file that holds buckets but none of kassa's: another
// program's bbolt file (a wrong --data), which Open would otherwise fill
// with kassa's buckets and serve as an empty store. A file of an older or
// newer build holds some of them, and a new one none at all.
func ours(btx *bbolt.Tx) error {
	var other []byte
	err := btx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		for _, b := range buckets {
			if bytes.Equal(b, name) {
				return errKassaBucket
			}
		}
		if other == nil {
			other = bytes.Clone(name)
		}
		return nil
	})
	if errors.Is(err, errKassaBucket) || other == nil {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("not a kassa store: it holds a bucket %q and none of kassa's (another program's file?)", other)
}

var errKassaBucket = errors.New("a bucket of kassa's")
