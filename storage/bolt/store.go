// Package bolt is kassa's embedded default store: one bbolt file, fsync on
// every commit, a group commit so that concurrent writers share one fsync,
// and secondary indexes for every filter of the order list, so that no list
// or lookup path scans all of a merchant's orders when an index can answer.
//
// # Group commit
//
// Callers of Update enqueue their function; one committer goroutine takes
// everything queued, runs the functions one after another in a single bbolt
// read-write transaction and commits (and fsyncs) once. The next batch starts
// as soon as the previous fsync returns: there is no batching delay, unlike
// bbolt's DB.Batch, which waits up to MaxBatchDelay (10 ms) for a batch to
// fill. After handing out results the committer yields the processor once
// (runtime.Gosched, no timed wait), so that writers it just woke can queue
// their next function and share the next fsync instead of forming a second,
// alternating batch.
//
// The queue is the better choice, and the one used: docs/benchmarks.md
// measures it against DB.Batch with the same 16 writers and record size, and
// it commits about four times as many orders per second, because DB.Batch
// spends most of each 10 ms window waiting while the disk is idle. DB.Batch
// would also have re-run every function of a batch after any failure.
//
// bbolt has no savepoints, so each function of a batch is isolated by an undo
// journal: every put and delete it makes records the key's previous value,
// and when the function returns an error the journal is replayed backwards,
// leaving the transaction exactly as the previous function left it. The
// failing caller gets its error; the others commit. A function that panics is
// handled more bluntly, because a panic may have interrupted bbolt half-way:
// the whole transaction is rolled back, the panicking caller gets an internal
// error, and the remaining functions run again in a fresh transaction (the
// retry bbolt's DB.Batch does). storage.Store allows such re-runs.
//
// Every function of a batch sees the same Tx.Now, taken from the clock when
// the transaction starts. A caller returns only once its commit is durable.
//
// # Records and indexes
//
// Records are the JSON of the domain structs, in one flat bucket per concept,
// keyed by merchant first so that one merchant cannot address another's
// records. Each order has a small binary meta record listing its version and
// the index entries written for it, so that an update removes exactly the old
// entries (statuses depend on time, so they cannot be recomputed later) and so
// that list filters are checked without decoding orders. The meta record is
// stored in front of the order's JSON in the same value. ListOrders is
// described in query.go.
//
// Status filters see the statuses an order had when it was last written
// (computed with Tx.Now of that transaction). The only statuses that change
// with time alone are expired and readyForCapture at the expiry date; the
// expiry job (OrdersExpiringBefore, then UpdateOrder) rewrites orders as they
// expire, which moves them in the index.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/internal/durable"
	"github.com/kassahq/kassa/ordercache"
	"github.com/kassahq/kassa/storage"
)

// Options configure a Store. The zero value is the durable default.
type Options struct {
	// Clock gives each transaction its time; default time.Now.
	Clock func() time.Time
	// NoSync skips fsync on commit. Only for bulk loads and benchmark setup:
	// a crash may then lose acknowledged writes or corrupt the file. Never
	// set by default.
	NoSync bool
	// Timeout bounds the wait for the file lock held by another process;
	// default 5 s. Past it, Open fails with ErrInUse.
	Timeout time.Duration
	// MaxBatch caps how many Update functions share one transaction; default
	// 1000. Larger batches amortize the fsync further but make every caller
	// of the batch wait for all of its functions.
	MaxBatch int
	// DecodedOrderBytes bounds the cache of decoded orders (package
	// ordercache): 0 is its default, negative none.
	DecodedOrderBytes int64
	// Logger, when set, hears of the work Open does before the store
	// serves: the sweep of the orders' statuses after a change of the
	// status rules (its start, its progress every few seconds and its end;
	// 20 to 40 s at 300 000 stale orders), and each index it rebuilds over
	// existing records (after an older build wrote the file; about 10 s at
	// 300 000). A start silent that long looks hung.
	Logger *slog.Logger
}

// Store is a storage.Store on one bbolt file. Safe for concurrent use.
type Store struct {
	db      *bbolt.DB
	clock   func() time.Time
	opts    Options
	decoded *ordercache.Decoded
	// merchants caches decoded merchants (see storage.MerchantCache).
	merchants storage.MerchantCache

	mu      sync.Mutex
	cond    *sync.Cond // signalled when pending grows or the store closes
	pending []*call
	closed  bool
	done    chan struct{} // closed when the committer has exited

	calls, commits atomic.Int64 // functions committed, transactions committed
	outboxSkips    atomic.Int64 // merchants the claims' skip scan of outboxmdue visited, for tests

	// update is db.Update; tests make it report a commit failed.
	update func(func(*bbolt.Tx) error) error
	// unsure holds the failure of a commit whose outcome is unknown (see
	// commitError): from then on the store takes no writes.
	unsure atomic.Pointer[error]
}

type call struct {
	ctx context.Context
	fn  func(storage.Tx) error
	err chan error
	// state is queued until the committer claims the call to run fn, or
	// its caller, whose context ended first, abandons it: one of the two.
	state atomic.Int32
}

const (
	queued int32 = iota
	claimed
	abandoned
)

var _ storage.Store = (*Store)(nil)

// Open opens the store at path, creating the file if needed. A file that is
// no kassa store (another program's bbolt file) is refused without a write,
// and one so damaged that bbolt panics reading it is refused as damaged; if
// bbolt panicked inside its own open, it gave no handle back to close, so
// the file stays open, and locked, until the process ends.
func Open(path string, opts Options) (s *Store, err error) {
	var db *bbolt.DB
	defer func() {
		// bbolt panics instead of erring on some damaged pages (a freelist
		// or branch page that is none): a one-line refusal, not a stack.
		// kassa's own panics are bugs, passed on with theirs.
		if p := recover(); p != nil {
			if db != nil {
				db.Close()
			}
			if !bboltPanicked() {
				panic(p)
			}
			s, err = nil, fault.Internalf(fmt.Errorf("the file is damaged: %v", p), "open %s", path)
		}
	}()
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	// A new file is laid out beside path and put there only once whole:
	// bbolt writes its first pages at once, and of a disk with room for
	// some of them, the ones that fitted stayed as a file every later open
	// refused as cut short, until an operator removed it.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if _, err := durable.CreateWith(path, 0o600, func(name string) error {
			db, err := bbolt.Open(name, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
			if err != nil {
				return err
			}
			return db.Close()
		}); err != nil {
			return nil, fault.Internalf(err, "create the store")
		}
	}
	// A read-write open reads the freelist, which in a file cut short lies
	// past its end: a fault of the process. A read-only open reads the meta
	// pages alone, so it looks at the file's length first.
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		ro, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: opts.Timeout})
		if err != nil {
			return nil, fault.Internalf(inUse(err), "open %s", path)
		}
		err = cutShort(ro, path)
		ro.Close()
		if err != nil {
			return nil, fault.Internalf(err, "open %s", path)
		}
	}
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	if err != nil {
		return nil, fault.Internalf(inUse(err), "open %s", path)
	}
	if err := db.View(ours); err != nil {
		db.Close()
		return nil, fault.Internalf(err, "open %s", path)
	}
	s = &Store{db: db, clock: opts.Clock, opts: opts, done: make(chan struct{}), decoded: ordercache.NewDecoded(opts.DecodedOrderBytes)}
	s.update = db.Update
	// One transaction (one commit) at open: the buckets, indexes added since
	// the file was made, and the session index brought up to its current
	// kinds. The status index, if the file was indexed under older rules,
	// is brought up to the current ones after it, in transactions of its
	// own (sweepStatuses), still before any other.
	var sweep bool
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if err := forgetIndexesAfterOtherWriters(tx); err != nil {
			return err
		}
		if err := indexSettlementTxIDs(tx, opts.Logger); err != nil {
			return err
		}
		if err := indexSettlementQueue(tx, opts.Logger); err != nil {
			return err
		}
		if err := indexOutboxByMerchant(tx, opts.Logger); err != nil {
			return err
		}
		if err := indexOutboxDone(tx, opts.Logger); err != nil {
			return err
		}
		if err := indexAuthExpiry(tx, opts.Logger); err != nil {
			return err
		}
		var err error
		if sweep, err = statusesStale(tx); err != nil {
			return err
		}
		if err := s.reindexSessions(tx); err != nil {
			return err
		}
		return markOurs(tx)
	}); err != nil {
		db.Close()
		return nil, fault.Internalf(err, "initialize %s", path)
	}
	if sweep {
		if err := s.sweepStatuses(opts.Logger); err != nil {
			db.Close()
			return nil, fault.Internalf(err, "initialize %s", path)
		}
	}
	s.cond = sync.NewCond(&s.mu)
	go s.commitLoop()
	return s, nil
}

// DB exposes the underlying bbolt database, for consistency checks and tools.
func (s *Store) DB() *bbolt.DB { return s.db }

// Close lets queued commits finish, then closes the file. Updates after
// Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Signal()
	s.mu.Unlock()
	<-s.done
	if err := s.db.Close(); err != nil {
		return fault.Internalf(err, "close")
	}
	return nil
}

// Update runs fn in a read-write transaction, committed durably together
// with whatever other writers are queued at the same moment. It returns only
// once the commit is on disk (or has failed).
func (s *Store) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if ctx.Err() != nil {
		return storage.WaitEnded(ctx, nil)
	}
	if err := s.Healthy(); err != nil {
		return err
	}
	c := &call{ctx: ctx, fn: fn, err: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return storage.ErrClosed
	}
	s.pending = append(s.pending, c)
	if len(s.pending) == 1 {
		s.cond.Signal()
	}
	s.mu.Unlock()
	// The caller waits for the outcome even if ctx ends meanwhile: once fn
	// has run, the change may commit, and reporting failure for a committed
	// change would be a lie about money. A call still queued when ctx ends
	// (behind a long write, or a commit stuck on the disk) is abandoned
	// instead: the committer skips it, so the caller need not wait for its
	// turn to learn that nothing was done.
	select {
	case err := <-c.err:
		return err
	case <-ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) {
			return storage.WaitEnded(ctx, nil)
		}
		return <-c.err
	}
}

// View runs fn in a read-only transaction. Readers do not wait for writers.
func (s *Store) View(ctx context.Context, fn func(storage.Tx) error) error {
	if ctx.Err() != nil {
		return storage.WaitEnded(ctx, nil)
	}
	return s.view(func(btx *bbolt.Tx) error {
		t := &tx{st: newState(btx, s.clock().UTC(), false, s)}
		defer t.close()
		err, _ := run(fn, t)
		return err
	})
}

// view is bbolt's read transaction, with a closed store's error as the
// storage package names it.
func (s *Store) view(fn func(*bbolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, bberrors.ErrDatabaseNotOpen) {
		return storage.ErrClosed
	}
	return err
}

// run calls fn, turning a panic into an internal error and reporting it.
func run(fn func(storage.Tx) error, t *tx) (err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			err = fault.Internalf(fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "panic in transaction")
			panicked = true
		}
	}()
	return fn(t), false
}

func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		n := min(len(s.pending), s.opts.MaxBatch)
		batch := s.pending[:n:n]
		s.pending = s.pending[n:]
		if len(s.pending) == 0 {
			s.pending = nil // let the old backing array go
		}
		s.mu.Unlock()
		s.commit(batch)
		// Let callers the commit just woke enqueue their next function
		// before the next batch is taken: with 16 writers this turns two
		// alternating batches of 8 into one of ~16 per fsync. It is no timed
		// wait; with nothing else runnable Gosched returns at once.
		runtime.Gosched()
	}
}

// Sentinels that make db.Update roll back instead of committing.
var (
	errAbort   = errors.New("batch aborted by a panic")
	errNothing = errors.New("nothing to commit")
)

// commit runs one batch in one transaction; see the package documentation.
func (s *Store) commit(batch []*call) {
	for len(batch) > 0 {
		results := make([]error, len(batch))
		aborted := -1
		if s.unsure.Load() != nil {
			// A commit of this loop had an unknown outcome after these
			// calls were queued: none of them may commit.
			for _, c := range batch {
				c.err <- s.Healthy()
			}
			return
		}
		txid := -1
		err := s.update(func(btx *bbolt.Tx) error {
			txid = btx.ID()
			st := newState(btx, s.clock().UTC(), true, s)
			wrote := false
			for i, c := range batch {
				if c.ctx.Err() != nil {
					results[i] = storage.WaitEnded(c.ctx, nil)
					continue
				}
				if !c.state.CompareAndSwap(queued, claimed) && c.state.Load() != claimed {
					results[i] = storage.WaitEnded(c.ctx, nil) // abandoned; no one reads it
					continue
				}
				t := &tx{st: st}
				err, panicked := run(c.fn, t)
				t.close()
				if panicked {
					results[i], aborted = err, i
					return errAbort
				}
				if err != nil {
					results[i] = err
					if uerr := t.undo(); uerr != nil {
						// The journal could not be replayed: drop the whole
						// transaction rather than commit half a change.
						results[i], aborted = fault.Internalf(uerr, "undo a failed transaction: %v", err), i
						return errAbort
					}
					continue
				}
				wrote = wrote || len(t.journal) > 0
			}
			if !wrote {
				return errNothing
			}
			return markOurs(btx)
		})
		switch {
		case aborted >= 0:
			batch[aborted].err <- results[aborted]
			batch = append(batch[:aborted:aborted], batch[aborted+1:]...)
			continue
		case err != nil && err != errNothing:
			// The commit itself failed (I/O). Callers whose function failed
			// keep their own error.
			cerr := s.commitError(err, txid)
			for i, c := range batch {
				if results[i] == nil {
					results[i] = cerr
				}
				c.err <- results[i]
			}
		default:
			if err == nil {
				s.commits.Add(1)
				for _, r := range results {
					if r == nil {
						s.calls.Add(1)
					}
				}
			}
			for i, c := range batch {
				c.err <- results[i]
			}
		}
		return
	}
}

// commitError classifies a commit that failed. A disk with no room left
// (or a quota used up) makes bbolt's write of the transaction's new pages
// fail, before the meta page that would make them the file's state is
// written (a meta page is rewritten in place, which needs no new room except
// on a copy-on-write filesystem; see below): nothing was done, and the same request succeeds once space is freed, so
// the caller gets store_unavailable (503 with Retry-After when served), as
// for a PostgreSQL store that refuses writes. Every other failure is
// internal, and its outcome unknown: a failed sync, in particular, may
// follow the meta page's write. bbolt then rolls its memory back to the
// previous state while the file, or the page cache it reads through its
// map, may hold the new one, so a later commit could hand out pages the
// file still uses. As PostgreSQL stops on a failed fsync, the store stops
// taking writes until it is opened again (Healthy).
//
// A full disk is taken for "nothing done" only if transaction txid did not
// become current: on a copy-on-write filesystem (btrfs, ZFS) the meta
// page's rewrite needs room as well, and a write of it cut short after its
// record would leave the transaction current in the file's page cache,
// which bbolt then serves.
func (s *Store) commitError(err error, txid int) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "write" && (errors.Is(pe.Err, syscall.ENOSPC) || errors.Is(pe.Err, syscall.EDQUOT)) &&
		txid > 0 && !s.current(txid) {
		return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable",
			Message: "the store's disk is full; nothing was done, retry once space is freed", Err: err}
	}
	s.unsure.CompareAndSwap(nil, &err)
	return fault.OutcomeUnknown(err, "commit, outcome unknown")
}

// current reports whether the write transaction txid is the state bbolt
// reads, its meta page written; true when that cannot be read.
func (s *Store) current(txid int) bool {
	cur := -1
	if err := s.db.View(func(btx *bbolt.Tx) error { cur = btx.ID(); return nil }); err != nil {
		return true
	}
	return cur >= txid
}

// Healthy reports whether the store takes writes: not after a commit whose
// outcome is unknown (commitError), until the server restarts and opens the
// file again. Reads go on meanwhile.
func (s *Store) Healthy() error {
	if p := s.unsure.Load(); p != nil {
		return &fault.Error{Kind: fault.Unavailable, Code: "store_unavailable",
			Message: "a commit failed with its outcome unknown (the disk reported an I/O error); the store takes no writes until the server restarts", Err: *p}
	}
	return nil
}

// Size is how many bytes WriteTo would write now.
func (s *Store) Size() (n int64, err error) {
	err = s.view(func(btx *bbolt.Tx) error {
		n = btx.Size()
		return nil
	})
	return n, err
}

// WriteTo writes a consistent copy of the whole file to w, as of one read
// transaction: what was committed when it began, and nothing after. It is an
// online backup: writers go on meanwhile, except that one whose commit
// must grow the file's memory map waits for the copy to end, so w should
// be fast (a local file) rather than a network peer. The copy opens as a
// store like the original.
func (s *Store) WriteTo(w io.Writer) (n int64, err error) {
	err = s.view(func(btx *bbolt.Tx) error {
		n, err = btx.WriteTo(w)
		return err
	})
	return n, err
}
