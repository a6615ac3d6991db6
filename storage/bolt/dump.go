package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// dumped are the buckets that hold records, in storage.RecordKinds order;
// derived, those that hold only what the records determine (indexes,
// counters, marks), which a receiving store builds for itself. Every bucket
// is one or the other (TestDumpCoversEveryBucket): a bucket added later
// must be placed, or Dump refuses files that have it.
var (
	dumped = []struct {
		bucket []byte
		kind   storage.RecordKind
	}{
		{bMerchants, storage.KindMerchant}, {bOrders, storage.KindOrder}, {bAuth, storage.KindAuthorization},
		{bCustomer, storage.KindCustomerToken}, {bSessions, storage.KindSession}, {bSettleQ, storage.KindSettlementItem},
		{bSettle, storage.KindSettlement}, {bSettleTx, storage.KindSettlementTransaction}, {bTasks, storage.KindTask},
		{bSeq, storage.KindSequence}, {bIdem, storage.KindIdempotency}, {bOutbox, storage.KindOutbox},
	}
	derived = [][]byte{bClients, bIndex, bCounts, bDue, bAuthExp, bIdemExp, bOutboxDue, bOutboxIx, bOutboxMDue, bOutboxDone,
		bSessionIx, bSettleQIx, bSettleIx, bSettleTxID, bTaskDue, bInfo}
	// infoKeys are the names storeinfo may hold: marks of how the indexes
	// were built, and the signing key's check value (the copy carries the
	// key itself, which kassa store copy checks against it), no records.
	infoKeys = [][]byte{keyStatusRules, keyLastCommit, keySettleTxIDs, keySettleQOrder, keyOutboxMerchantDue,
		keyOutboxDone, keyAuthExpiry, keySessionIndex, keySigningKey}
)

// ReadOnly is a bbolt store file opened for reading only, as a source of a
// copy: unlike Open it writes nothing to the file (no index built, no mark),
// and it shares the file lock with other readers, so a server cannot open
// the file while it is open, nor can it be opened while a server has it.
type ReadOnly struct{ db *bbolt.DB }

// ErrInUse is the error of Open on a file that another Store holds (another
// process, such as a kassa serve or kassa settle, or a second Open in this
// one), and of OpenReadOnly on a file held for writing, once their Timeout
// has passed.
var ErrInUse = errors.New("the store file is in use by another process")

// inUse is err, marked ErrInUse as well when it is bbolt's timeout waiting
// for the file lock: bbolt says only "timeout", and an embedder should not
// need bbolt's own error values to tell a held file from a damaged one.
func inUse(err error) error {
	if errors.Is(err, bberrors.ErrTimeout) {
		return fmt.Errorf("%w (%w)", ErrInUse, err)
	}
	return err
}

// OpenReadOnly opens the store file at path for reading only, waiting up to
// timeout (default 5 s) for a writer's lock; a missing file is an error.
func OpenReadOnly(path string, timeout time.Duration) (*ReadOnly, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	// bbolt would set an empty file up, which through a read-only handle
	// fails as "bad file descriptor"; an empty file holds no store to read.
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		return nil, fault.Internalf(nil, "open %s: the file is empty (a first start cut short?): it holds no store", path)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err != nil {
		return nil, fault.Internalf(err, "open %s", path)
	}
	if err := cutShort(db, path); err != nil {
		db.Close()
		return nil, fault.Internalf(err, "open %s", path)
	}
	return &ReadOnly{db: db}, nil
}

// cutShort refuses a file cut short (a copy that ran out of disk), which
// ends before the pages its meta page counts: reading past its end faults
// the process, which no recover catches. A file longer than its pages is
// bbolt's growth. db is open read-only, which reads the meta pages alone.
func cutShort(db *bbolt.DB, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return db.View(func(btx *bbolt.Tx) error {
		if fi.Size() < btx.Size() {
			return fmt.Errorf("the file is cut short: it is %d bytes, its pages reach %d", fi.Size(), btx.Size())
		}
		return nil
	})
}

// Close releases the file.
func (r *ReadOnly) Close() error { return r.db.Close() }

// Dump gives every record of the file; see storage.Dumper.
func (r *ReadOnly) Dump(ctx context.Context, fn func(storage.Record) error) error {
	return r.db.View(func(btx *bbolt.Tx) error { return dump(ctx, btx, fn) })
}

// Dump gives every record of the open store, as of one read transaction;
// see storage.Dumper.
func (s *Store) Dump(ctx context.Context, fn func(storage.Record) error) error {
	return s.view(func(btx *bbolt.Tx) error { return dump(ctx, btx, fn) })
}

var (
	_ storage.Dumper = (*ReadOnly)(nil)
	_ storage.Dumper = (*Store)(nil)
)

func dump(ctx context.Context, btx *bbolt.Tx, fn func(storage.Record) error) error {
	// A record is named as the check names it (shownKey): a token's key
	// holds the token, a credential, and kassa store copy prints this.
	return walk(ctx, btx, fn, func(bucket, k []byte, err error) error {
		return fault.Internalf(err, "record %s", shownKey(bucket, k))
	})
}

// damagedError is walk's error on a page that is none.
type damagedError struct {
	path  string
	cause any
}

func (e *damagedError) Error() string { return fmt.Sprint(e.cause) }

// bboltPanicked reports whether the panic being recovered was raised in
// bbolt, which panics instead of erring on a page that is none: a damaged
// file. A panic raised in kassa's code is a bug, and its recoverer passes it
// on rather than blame the file. A deferred call runs above the panicking
// frames, so the first frame below runtime's panic machinery is where the
// panic was raised.
func bboltPanicked() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt.") || strings.HasPrefix(f.Function, "go.etcd.io/bbolt/")
		}
		if !more {
			return false
		}
	}
}

// walk gives fn every record of the file, kind by kind in RecordKinds order,
// and bad every stored value it cannot read as one (a bad key, an order
// without its meta record); an error of either stops it. Dump and Check
// both walk with it.
func walk(ctx context.Context, btx *bbolt.Tx, fn func(storage.Record) error, bad func(bucket, k []byte, err error) error) (err error) {
	// bbolt panics instead of erring on a page that is none (a damaged
	// file, which OpenReadOnly opens as it loads no freelist): a one-line
	// refusal, not a stack mid-copy. fn's own panics are the caller's.
	defer func() {
		if p := recover(); p != nil {
			if !bboltPanicked() {
				panic(p)
			}
			err = fault.Internalf(&damagedError{path: btx.DB().Path(), cause: p}, "%s is damaged", btx.DB().Path())
		}
	}()
	if err := dumpable(btx); err != nil {
		return err
	}
	n := 0
	for _, d := range dumped {
		b := btx.Bucket(d.bucket)
		if b == nil {
			continue // a file from before the bucket: none of its kind
		}
		err := b.ForEach(func(k, v []byte) error {
			if n++; n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			rec, err := record(d.kind, k, v)
			if err != nil {
				return bad(d.bucket, k, err)
			}
			return fn(rec)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dumpable refuses a file holding what Dump would leave out: a bucket, or
// a storeinfo name, this build does not know (a newer build's), or indexes
// of a newer build, whose records this build may not read whole.
func dumpable(btx *bbolt.Tx) error {
	known := func(name []byte, in ...[]byte) bool {
		for _, k := range in {
			if bytes.Equal(k, name) {
				return true
			}
		}
		return false
	}
	err := btx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		if known(name, derived...) {
			return nil
		}
		for _, d := range dumped {
			if bytes.Equal(d.bucket, name) {
				return nil
			}
		}
		return fmt.Errorf("the file holds a bucket %q this build of kassa cannot copy (written by a newer build?)", name)
	})
	if err != nil {
		return fault.Internalf(err, "cannot copy the file")
	}
	info := btx.Bucket(bInfo)
	if info == nil {
		return nil
	}
	err = info.ForEach(func(k, v []byte) error {
		if !known(k, infoKeys...) {
			return fmt.Errorf("the file's storeinfo holds %q, which this build of kassa does not know (written by a newer build?)", k)
		}
		if bytes.Equal(k, keyLastCommit) && len(v) == 16 && binary.BigEndian.Uint64(v[8:]) > openIndexes {
			return errors.New("the file was last written by a newer build of kassa: copy it with that build")
		}
		return nil
	})
	if err != nil {
		return fault.Internalf(err, "cannot copy the file")
	}
	return nil
}

// record reads one stored record of kind at key k, value v. Keys kept by
// merchant start with the merchant's id, length-prefixed (key).
func record(kind storage.RecordKind, k, v []byte) (storage.Record, error) {
	r := storage.Record{Kind: kind, Body: bytes.Clone(v)}
	switch kind {
	case storage.KindMerchant, storage.KindTask, storage.KindOutbox, storage.KindSettlementItem:
		r.ID = string(k)
		return r, nil
	case storage.KindSettlementTransaction:
		m, rest, ok := cutLP(k)
		if !ok {
			return r, errors.New("bad key")
		}
		s, rest, ok := cutLP(rest)
		if !ok || len(rest) != 4 {
			return r, errors.New("bad key")
		}
		r.MerchantID, r.SettlementID, r.Number = m, s, int64(binary.BigEndian.Uint32(rest))
		return r, nil
	}
	m, rest, ok := cutLP(k)
	if !ok {
		return r, errors.New("bad key")
	}
	r.MerchantID, r.ID = m, string(rest)
	switch kind {
	case storage.KindOrder:
		mb, js, err := splitOrder(r.Body) // the copy made above: bolt's v is its map's
		if err != nil {
			return r, err
		}
		meta, err := decodeMeta(mb)
		if err != nil {
			return r, err
		}
		r.Number, r.Body = meta.version, js
	case storage.KindSequence:
		if len(v) != 8 {
			return r, errors.New("a sequence value is not 8 bytes")
		}
		r.Number, r.Body = int64(binary.BigEndian.Uint64(v)), nil
	}
	return r, nil
}

// cutLP reads a length-prefixed string (lp) from the start of b.
func cutLP(b []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return "", nil, false
	}
	return string(b[n : n+int(l)]), b[n+int(l):], true
}
