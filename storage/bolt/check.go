package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

// Problem is one thing a check found wrong in a store file.
type Problem struct {
	// Kind is what is wrong: "page" (bbolt's own check, or a page a walk
	// could not read), "record" (a record that does not decode, or is kept
	// under a key it does not name), "index" (an index entry or counter
	// that does not agree with the records), "order" (an order that breaks
	// order.Verify) or "sequence" (a document number series behind the
	// largest number given out).
	Kind string
	// Key is where: a bucket and key.
	Key  string
	What string
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.Kind + ": " + p.What
	}
	return p.Kind + " " + p.Key + ": " + p.What
}

// Check verifies the file (see check) and returns its problems as one error,
// nil when there are none. Tests run it after every test and after each
// simulated crash.
func (s *Store) Check() error {
	var found []error
	err := s.db.View(func(btx *bbolt.Tx) error {
		_, err := check(context.Background(), btx, checkOpen, func(p Problem) {
			if len(found) < 50 {
				found = append(found, errors.New(p.String()))
			}
		})
		return err
	})
	return errors.Join(append([]error{err}, found...)...)
}

// Check verifies the file without writing to it (kassa store check): every
// problem it finds is given to problem, and counts says how many records of
// each kind it holds. An error means the file could not be checked (ctx
// ended, or a newer build's file).
func (r *ReadOnly) Check(ctx context.Context, problem func(Problem)) (counts map[storage.RecordKind]int, err error) {
	err = r.db.View(func(btx *bbolt.Tx) error {
		counts, err = check(ctx, btx, checkFile, problem)
		return err
	})
	return counts, err
}

// check runs bbolt's own consistency check (pages, freelist), then kassa's:
// every record decodes and names the key it is kept under (one walk, Dump's);
// every order has a meta record that matches it and satisfies order.Verify;
// every index entry, counter and expiry entry belongs to a stored record and
// every record has all of its entries, with their values; every document
// series (invoice, credit note, settlement) is at or past the largest number
// an order or settlement holds. Indexes that the next Open rebuilds (their
// mark in storeinfo is older than this build's, or the file was last written
// by another build) are not held to their records in mode checkFile.
func check(ctx context.Context, btx *bbolt.Tx, mode checkMode, problem func(Problem)) (map[storage.RecordKind]int, error) {
	for err := range btx.Check() {
		problem(Problem{Kind: "page", What: err.Error()})
	}
	c := &checker{btx: btx, mode: mode, problem: problem, counts: map[storage.RecordKind]int{}, used: map[string]int64{}}
	if err := c.phase("records", func() error { return walk(ctx, btx, c.record, c.badRecord) }); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, p := range []struct {
		name string
		fn   func()
	}{
		{"orders", c.orderIndexes}, {"sessions", c.sessionIndex}, {"settlement transactions", c.settleTxIDs},
		{"settlements", c.settleIndex}, {"settlement queue", c.settleQueue}, {"notifications", c.outboxIndexes},
		{"merchants", c.clients}, {"authorization tokens", c.authExpiry}, {"idempotency records", c.idemExpiry}, {"tasks", c.taskDue}, {"sequences", c.sequences},
	} {
		c.phase(p.name, func() error { p.fn(); return nil })
	}
	return c.counts, nil
}

// checkMode is what a check holds the file to.
type checkMode int

const (
	// checkFile is a file at rest (kassa store check): an index that the
	// next Open rebuilds is not held to its records, and every document
	// series is held to the numbers the records hold.
	checkFile checkMode = iota
	// checkOpen is an open store (Store.Check, in tests): Open brought
	// every index up to date, so each is held to its records. The series
	// are not: tests store orders numbered by fixtures, not by the store.
	checkOpen
)

type checker struct {
	btx     *bbolt.Tx
	mode    checkMode
	problem func(Problem)
	counts  map[storage.RecordKind]int
	// used is the largest number each (merchant, series) has given out
	// that a record holds, and seq what the series says.
	used map[string]int64
	seq  map[string]int64
}

// phase runs fn, turning bbolt's panic on a page that is none into a
// problem, so that one damaged bucket does not hide what the others hold;
// the checker's own panics are bugs, and passed on. The records walk gives
// bbolt's as an error saying the file is damaged.
func (c *checker) phase(name string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if !bboltPanicked() {
				panic(p)
			}
			c.problem(Problem{Kind: "page", What: fmt.Sprintf("the walk of %s stopped on a damaged page: %v", name, p)})
			err = nil
		}
	}()
	err = fn()
	var de *damagedError
	if errors.As(err, &de) {
		c.problem(Problem{Kind: "page", What: fmt.Sprintf("the walk of %s stopped on a damaged page: %v", name, de.cause)})
		return nil
	}
	return err
}

func (c *checker) add(kind string, bucket, k []byte, format string, args ...any) {
	c.problem(Problem{Kind: kind, Key: shownKey(bucket, k), What: fmt.Sprintf(format, args...)})
}

// shownKey is how a problem names bucket's key k. An authorization or
// customer token is a credential, so it is named as the logs name it, by
// its fingerprint (README "Logs"): an operator pastes a check's output into
// tickets. A key too short to hold its parts is fingerprinted whole.
func shownKey(bucket, k []byte) string {
	name, tokens := string(bucket), k
	switch {
	case bytes.Equal(bucket, bAuth), bytes.Equal(bucket, bCustomer):
	case bytes.Equal(bucket, bAuthExp) && len(k) >= timeLen:
		name, tokens = name+" "+getTime(k).UTC().Format(time.RFC3339Nano), k[timeLen:]
	case bytes.Equal(bucket, bAuthExp):
	default:
		return fmt.Sprintf("%s %q", bucket, k)
	}
	if merchant, tok, ok := cutLP(tokens); ok {
		return fmt.Sprintf("%s %q %s", name, merchant, token.Fingerprint(string(tok)))
	}
	return name + " " + token.Fingerprint(string(tokens))
}

func (c *checker) badRecord(bucket, k []byte, err error) error {
	c.add("record", bucket, k, "%v", err)
	return nil
}

func seriesKey(merchantID, series string) string { return string(key(merchantID, series)) }

// record decodes one record as the current code reads it, checks that it is
// kept under the key it names, and notes what the later checks need.
func (c *checker) record(r storage.Record) error {
	c.counts[r.Kind]++
	var err error
	mismatch := func(what, got, want string) {
		if err == nil && got != want {
			err = fmt.Errorf("the record's %s is %q, kept under %q", what, got, want)
		}
	}
	switch r.Kind {
	case storage.KindMerchant:
		var m storage.Merchant
		if err = storage.DecodeRecord(r.Body, &m); err == nil {
			mismatch("id", m.ID, r.ID)
		}
	case storage.KindOrder:
		var o order.Order
		if err = json.Unmarshal(r.Body, &o); err == nil {
			mismatch("merchant and id", o.MerchantID+"/"+o.ID, r.MerchantID+"/"+r.ID)
			mismatch("version", fmt.Sprint(o.Version), fmt.Sprint(r.Number))
			c.order(&o)
		}
	case storage.KindAuthorization:
		var a token.Authorization
		if err = storage.DecodeRecord(r.Body, &a); err == nil {
			// Tokens are credentials, named by fingerprint (see shownKey).
			mismatch("merchant and token", a.MerchantID+"/"+token.Fingerprint(a.Token), r.MerchantID+"/"+token.Fingerprint(r.ID))
		}
	case storage.KindCustomerToken:
		var ct token.Customer
		if err = storage.DecodeRecord(r.Body, &ct); err == nil {
			mismatch("merchant and id", ct.MerchantID+"/"+token.Fingerprint(ct.TokenID), r.MerchantID+"/"+token.Fingerprint(r.ID))
		}
	case storage.KindSession:
		var s session.Session
		if err = storage.DecodeRecord(r.Body, &s); err == nil {
			mismatch("merchant and id", s.MerchantID+"/"+s.ID, r.MerchantID+"/"+r.ID)
		}
	case storage.KindSettlementItem:
		var it storage.QueuedItem
		if err = storage.DecodeRecord(r.Body, &it); err == nil {
			mismatch("key", it.Key, r.ID)
		}
	case storage.KindSettlement:
		var s settlement.Settlement
		if err = storage.DecodeRecord(r.Body, &s); err == nil {
			mismatch("merchant and id", s.MerchantID+"/"+s.ID, r.MerchantID+"/"+r.ID)
			if n, ok := settlement.ReferenceNumber(s.Reference); ok {
				c.uses(s.MerchantID, settlement.Series, n)
			}
		}
	case storage.KindSettlementTransaction:
		var tr settlement.Transaction
		if err = storage.DecodeRecord(r.Body, &tr); err == nil {
			mismatch("seq", fmt.Sprint(tr.Seq), fmt.Sprint(r.Number))
		}
	case storage.KindTask:
		var t storage.Task
		if err = storage.DecodeRecord(r.Body, &t); err == nil {
			mismatch("id", t.ID, r.ID)
		}
	case storage.KindSequence:
		if c.seq == nil {
			c.seq = map[string]int64{}
		}
		c.seq[seriesKey(r.MerchantID, r.ID)] = r.Number
	case storage.KindIdempotency:
		var rec storage.IdempotencyRecord
		if err = storage.DecodeRecord(r.Body, &rec); err == nil {
			mismatch("merchant and key", rec.MerchantID+"/"+rec.Key, r.MerchantID+"/"+r.ID)
		}
	case storage.KindOutbox:
		var m storage.OutboxMessage
		if err = storage.DecodeRecord(r.Body, &m); err == nil {
			mismatch("id", m.ID, r.ID)
		}
	}
	if err != nil {
		c.problem(Problem{Kind: "record", Key: recordKey(r), What: err.Error()})
	}
	return nil
}

// recordKey names a record as Dump gives it.
func recordKey(r storage.Record) string {
	parts := []string{string(r.Kind)}
	id := fmt.Sprintf("%q", r.ID)
	if r.Kind == storage.KindAuthorization || r.Kind == storage.KindCustomerToken {
		id = token.Fingerprint(r.ID) // a credential: see shownKey
	}
	for _, p := range []string{fmt.Sprintf("%q", r.MerchantID), fmt.Sprintf("%q", r.SettlementID), id} {
		if p != `""` {
			parts = append(parts, p)
		}
	}
	if r.Kind == storage.KindSettlementTransaction {
		parts = append(parts, fmt.Sprint(r.Number))
	}
	return strings.Join(parts, " ")
}

func (c *checker) uses(merchantID, series string, n int64) {
	if k := seriesKey(merchantID, series); n > c.used[k] {
		c.used[k] = n
	}
}

func (c *checker) order(o *order.Order) {
	for _, f := range o.Verify() {
		c.add("order", bOrders, orderKey(o.MerchantID, o.ID), "%s", f)
	}
	for i := range o.Captured {
		c.uses(o.MerchantID, order.SeriesInvoice, o.Captured[i].DocumentSeq)
	}
	for i := range o.Refunded {
		c.uses(o.MerchantID, order.SeriesCreditNote, o.Refunded[i].DocumentSeq)
	}
	raw := c.btx.Bucket(bOrders).Get(orderKey(o.MerchantID, o.ID))
	m, err := orderMeta(raw)
	if err != nil {
		return // the walk named it
	}
	want := metaOf(o)
	if m.version != want.version || !m.created.Equal(want.created) || !m.expires.Equal(want.expires) || m.expirable != want.expirable {
		c.add("index", bOrders, orderKey(o.MerchantID, o.ID), "its meta record says version %d, created %v, expires %v, expirable %v; the order %d, %v, %v, %v",
			m.version, m.created, m.expires, m.expirable, want.version, want.created, want.expires, want.expirable)
	} else if c.current(keyStatusRules, order.StatusRules) && !slices.Equal(m.entries, want.entries) {
		c.add("index", bOrders, orderKey(o.MerchantID, o.ID), "its meta record's index entries %v, the order's %v", m.entries, want.entries)
	}
}

// current reports whether the index marked mark is kept up to version, so
// that the next Open leaves it as it is: otherwise Open rebuilds it from the
// records (rebuildIndex, sweepStatuses) and what it holds now is no fault.
func (c *checker) current(mark []byte, version uint64) bool {
	if c.mode == checkOpen {
		return true
	}
	info := c.btx.Bucket(bInfo)
	if info == nil {
		return false
	}
	// Open's own transaction is the one after the file's last commit.
	if !bytes.Equal(info.Get(keyLastCommit), lastCommitMark(uint64(c.btx.ID()))) {
		return false
	}
	v := info.Get(mark)
	return len(v) == 8 && binary.BigEndian.Uint64(v) >= version
}

// sequences: no series is behind the largest number a record holds of it,
// or the next document would repeat a number.
func (c *checker) sequences() {
	if c.mode == checkOpen {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(c.used)) {
		if used, at := c.used[k], c.seq[k]; at < used {
			c.add("sequence", bSeq, []byte(k), "is at %d, but %d was given out", at, used)
		}
	}
}

// orderIndexes: the order index, its counters and the expiry index hold
// exactly the entries the orders' meta records name. The two indexes are
// compared without a set of their expected entries (about ten an order,
// which at a million orders took gigabytes): each order's entries are looked
// up in them, and each of their entries in the order it names.
func (c *checker) orderIndexes() {
	ix, dues := c.btx.Bucket(bIndex), c.btx.Bucket(bDue)
	counts := map[string]int64{}
	missing, missingDue := 0, 0
	c.each(bOrders, func(k, v []byte) error {
		m, err := orderMeta(v)
		if err != nil {
			return nil // the walk named it
		}
		merchant, id, err := splitOrderKey(k)
		if err != nil {
			return nil
		}
		for _, ik := range m.indexKeys(merchant, id) {
			switch {
			case ix == nil:
				missing++
			case ix.Get(ik.key) == nil:
				c.add("index", bIndex, ik.key, "is missing")
			}
			if ik.count != nil {
				counts[string(ik.count)]++
			}
		}
		if m.expirable {
			switch dk := dueKey(m.expires, merchant, id); {
			case dues == nil:
				missingDue++
			case dues.Get(dk) == nil:
				c.add("index", bDue, dk, "is missing")
			}
		}
		return nil
	})
	if missing > 0 {
		c.add("index", bIndex, nil, "is missing; it should hold %d entries", missing)
	}
	if missingDue > 0 {
		c.add("index", bDue, nil, "is missing; it should hold %d entries", missingDue)
	}
	c.each(bIndex, func(k, _ []byte) error {
		if !c.indexesItsOrder(k) {
			c.add("index", bIndex, k, "indexes nothing stored")
		}
		return nil
	})
	// An expiry entry is the order's expiresAt, then its key in orders.
	c.each(bDue, func(k, _ []byte) error {
		if len(k) < timeLen {
			c.add("index", bDue, k, "indexes nothing stored")
			return nil
		}
		m, err := orderMeta(c.stored(bOrders, k[timeLen:]))
		if err != nil || !m.expirable || !bytes.Equal(putTime(nil, m.expires), k[:timeLen]) {
			c.add("index", bDue, k, "indexes nothing stored")
		}
		return nil
	})
	c.each(bCounts, func(k, v []byte) error {
		want, ok := counts[string(k)]
		delete(counts, string(k))
		switch {
		case !ok:
			c.add("index", bCounts, k, "counts entries of no stored order")
		case len(v) != 8:
			c.add("index", bCounts, k, "is %d bytes, not 8", len(v))
		case int64(binary.BigEndian.Uint64(v)) != want:
			c.add("index", bCounts, k, "is %d, the orders have %d entries", binary.BigEndian.Uint64(v), want)
		}
		return nil
	})
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		c.add("index", bCounts, []byte(k), "is missing; the orders have %d entries", counts[k])
	}
}

// indexesItsOrder reports whether order index entry k is one of the entries
// the meta record of the order it names lists: lp(merchant), the kind, the
// value (lp, or expiresAt for the expiry range), then createdAt and the id.
func (c *checker) indexesItsOrder(k []byte) bool {
	merchant, rest, ok := cutLP(k)
	if !ok || len(rest) == 0 {
		return false
	}
	kind, rest := rest[0], rest[1:]
	if kind == kindExpires {
		if len(rest) < timeLen {
			return false
		}
		rest = rest[timeLen:]
	} else if _, rest, ok = cutLP(rest); !ok {
		return false
	}
	if len(rest) < timeLen {
		return false
	}
	id := string(rest[timeLen:])
	m, err := orderMeta(c.stored(bOrders, orderKey(merchant, id)))
	if err != nil {
		return false
	}
	for _, ik := range m.indexKeys(merchant, id) {
		if bytes.Equal(ik.key, k) {
			return true
		}
	}
	return false
}

// stored is the value of key k in bucket b, nil when the file has no such
// bucket (a damaged file: an index left without its records names nothing).
func (c *checker) stored(b, k []byte) []byte {
	if bucket := c.btx.Bucket(b); bucket != nil {
		return bucket.Get(k)
	}
	return nil
}

// each walks bucket b, none when the file is from before it existed.
func (c *checker) each(b []byte, fn func(k, v []byte) error) {
	if bucket := c.btx.Bucket(b); bucket != nil {
		bucket.ForEach(fn)
	}
}

// outboxIndexes: both indexes of pending messages (by time, and by merchant
// then time) name every message not yet done at its next attempt, and
// nothing else; the done index names every done message at its creation,
// and the creation index every message, and nothing else.
func (c *checker) outboxIndexes() {
	byTime, byMerchant, done, created := map[string][]byte{}, map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	c.each(bOutbox, func(_, v []byte) error {
		var m storage.OutboxMessage
		if err := storage.DecodeRecord(v, &m); err != nil {
			return nil // the walk named it
		}
		created[string(outboxCreatedKey(&m))] = nil
		if m.Done() {
			done[string(outboxDoneKey(&m))] = nil
		} else {
			byTime[string(outboxDueKey(&m))] = nil
			byMerchant[string(outboxMerchantDueKey(&m))] = nil
		}
		return nil
	})
	c.sameKeys(bOutboxIx, created)
	c.sameKeys(bOutboxDue, byTime)
	if c.current(keyOutboxDone, 1) {
		c.sameKeys(bOutboxDone, done)
	}
	if c.current(keyOutboxMerchantDue, 1) {
		c.sameKeys(bOutboxMDue, byMerchant)
	}
}

// settleQueue: the settleqix index holds every queued item once, at its
// occurrence time, and nothing else.
func (c *checker) settleQueue() {
	if !c.current(keySettleQOrder, 1) {
		return
	}
	want := map[string][]byte{}
	c.each(bSettleQ, func(k, v []byte) error {
		if at, err := queuedOccurred(v); err == nil {
			want[string(settleQIxKey(at, string(k)))] = nil
		}
		return nil
	})
	c.sameKeys(bSettleQIx, want)
}

// settleTxIDs: the settletxid index names every settlement transaction at
// its place, and nothing else.
func (c *checker) settleTxIDs() {
	if !c.current(keySettleTxIDs, 1) {
		return
	}
	want := map[string][]byte{}
	c.each(bSettleTx, func(k, v []byte) error {
		if ik, seq, err := settleTxIDEntry(k, v); err == nil {
			want[string(ik)] = seq
		}
		return nil
	})
	c.sameKeys(bSettleTxID, want)
}

// settleIndex: the settleix index names every settlement at its creation,
// and nothing else.
func (c *checker) settleIndex() {
	c.sameKeys(bSettleIx, indexOf(c, bSettle, func(_ []byte, s *settlement.Settlement) ([]byte, []byte, bool) {
		return settleIxKey(s), nil, true
	}))
}

// clients: every merchant's client id names it, and no other client id is
// kept.
func (c *checker) clients() {
	c.sameKeys(bClients, indexOf(c, bMerchants, func(_ []byte, m *storage.Merchant) ([]byte, []byte, bool) {
		return []byte(m.ClientID), []byte(m.ID), m.ClientID != ""
	}))
}

// authExpiry: every authorization token is in the expiry index at its
// expiry, and nothing else is.
func (c *checker) authExpiry() {
	if !c.current(keyAuthExpiry, 1) {
		return
	}
	c.sameKeys(bAuthExp, indexOf(c, bAuth, func(k []byte, a *authExpiry) ([]byte, []byte, bool) {
		return authExpiryKey(a.ExpiresAt, k), nil, true
	}))
}

// idemExpiry: every idempotency record is in the expiry index at its
// expiry, and nothing else is.
func (c *checker) idemExpiry() {
	c.sameKeys(bIdemExp, indexOf(c, bIdem, func(k []byte, r *storage.IdempotencyRecord) ([]byte, []byte, bool) {
		return append(putTime(nil, r.ExpiresAt), k...), nil, true
	}))
}

// taskDue: every task is in the due index at its due time, and nothing else
// is.
func (c *checker) taskDue() {
	c.sameKeys(bTaskDue, indexOf(c, bTasks, func(_ []byte, t *storage.Task) ([]byte, []byte, bool) {
		return taskDueKey(t), nil, true
	}))
}

// indexOf is what an index of the records of bucket primary should hold:
// entry gives a record's index key and value (nil: any value), or false for
// a record the index leaves out. A record that does not decode is left to
// the walk, which names it.
func indexOf[T any](c *checker, primary []byte, entry func(k []byte, r *T) (key, value []byte, ok bool)) map[string][]byte {
	want := map[string][]byte{}
	c.each(primary, func(k, v []byte) error {
		var r T
		if storage.DecodeRecord(v, &r) != nil {
			return nil
		}
		if ik, iv, ok := entry(k, &r); ok {
			want[string(ik)] = iv
		}
		return nil
	})
	return want
}

// sessionIndex: the session index holds exactly the entries of the stored
// sessions (sessionEntries), with their values.
func (c *checker) sessionIndex() {
	if !c.current(keySessionIndex, sessionIndexVersion) {
		return
	}
	want := map[string][]byte{}
	c.each(bSessions, func(k, v []byte) error {
		var s session.Session
		if storage.DecodeRecord(v, &s) != nil {
			return nil // the walk named it
		}
		for _, e := range sessionEntries(&s) {
			if _, dup := want[string(e.key)]; dup {
				c.add("index", bSessionIx, e.key, "belongs to two sessions, one of them %q", k)
			}
			want[string(e.key)] = e.value
		}
		return nil
	})
	c.sameKeys(bSessionIx, want)
}

// sameKeys reports every entry of bucket b that want does not hold, or
// holds with another value (nil: any value), and every key of want that b
// does not hold. It takes want over: each entry of b is struck off it, so
// what is left is what b lacks, with no set of the keys seen beside it (at
// a million orders the order index has ten million entries, and such a set
// doubled the check's memory).
func (c *checker) sameKeys(b []byte, want map[string][]byte) {
	bucket := c.btx.Bucket(b)
	if bucket == nil {
		if len(want) > 0 {
			c.add("index", b, nil, "is missing; it should hold %d entries", len(want))
		}
		return
	}
	bucket.ForEach(func(k, v []byte) error {
		w, ok := want[string(k)]
		switch {
		case !ok:
			c.add("index", b, k, "indexes nothing stored")
		case w != nil && !bytes.Equal(v, w):
			c.add("index", b, k, "is %x, want %x", v, w)
		}
		delete(want, string(k))
		return nil
	})
	for _, k := range slices.Sorted(maps.Keys(want)) {
		c.add("index", b, []byte(k), "is missing")
	}
}

func splitOrderKey(k []byte) (merchant, id string, err error) {
	l, n := binary.Uvarint(k)
	if n <= 0 || uint64(len(k)-n) < l {
		return "", "", fmt.Errorf("bad order key %q", k)
	}
	return string(k[n : n+int(l)]), string(bytes.Clone(k[n+int(l):])), nil
}
