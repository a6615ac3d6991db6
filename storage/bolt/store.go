// Package bolt is kassa's embedded default store: one bbolt file, fsync on
// every commit, and a group commit so that concurrent writers share one
// fsync. Orders carry secondary indexes for every filter of the order list,
// so no list or lookup path scans all of a merchant's orders when an index
// can answer.
//
// Group commit: callers of Update enqueue their function; one committer
// goroutine takes everything queued, runs it in one bbolt read-write
// transaction and commits once. The next batch starts as soon as the previous
// fsync returns (unlike bbolt's DB.Batch, which waits out MaxBatchDelay). If
// one function of a batch fails, the transaction is rolled back and the
// others are run again without it, so a failing caller never costs another
// its changes, and every caller returns only once its commit is durable.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// Options configure a Store. The zero value is the durable default.
type Options struct {
	// Clock gives each transaction its time; default time.Now.
	Clock func() time.Time
	// NoSync skips fsync on commit. Only for bulk loads and benchmarks'
	// setup: a crash may then lose acknowledged writes.
	NoSync bool
	// Timeout bounds the wait for the file lock held by another process; default 5 s.
	Timeout time.Duration
	// MaxBatch caps the functions committed together; default 256.
	MaxBatch int
}

// Store is a storage.Store on one bbolt file. Safe for concurrent use.
type Store struct {
	db    *bbolt.DB
	clock func() time.Time
	opts  Options

	queue chan *call
	done  chan struct{}
	once  sync.Once
	mu    sync.RWMutex // held for reading while enqueuing, for writing by Close
	shut  bool
}

type call struct {
	fn  func(storage.Tx) error
	err chan error
}

var buckets = [][]byte{bMerchants, bClients, bOrders, bOrderMeta, bIndex, bDue, bAuth, bCustomer, bSeq, bIdem, bIdemExp, bOutbox, bOutboxDue}

// Open opens (creating if needed) the store at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 256
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync, NoFreelistSync: false})
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt: init %s: %w", path, err)
	}
	s := &Store{db: db, clock: opts.Clock, opts: opts, queue: make(chan *call, 4096), done: make(chan struct{})}
	go s.commitLoop()
	return s, nil
}

// DB exposes the underlying bbolt database (for consistency checks and tools).
func (s *Store) DB() *bbolt.DB { return s.db }

// Close waits for queued commits and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return nil
	}
	s.shut = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	return s.db.Close()
}

var errClosed = fault.Internalf(errors.New("store closed"), "the store is closed")

// Update runs fn in a read-write transaction, committed durably together
// with whatever other writers are queued at the same moment.
func (s *Store) Update(ctx context.Context, fn func(storage.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call{fn: fn, err: make(chan error, 1)}
	s.mu.RLock()
	if s.shut {
		s.mu.RUnlock()
		return errClosed
	}
	s.queue <- c
	s.mu.RUnlock()
	// The caller waits for the outcome even if ctx ends: once queued, the
	// change may commit, and reporting failure for a committed change would
	// be a lie about money.
	return <-c.err
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(storage.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(btx *bbolt.Tx) error {
		return run(fn, &tx{b: btx, now: s.clock().UTC()})
	})
}

// run calls fn, turning a panic into an internal error.
func run(fn func(storage.Tx) error, t *tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fault.Internalf(fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "panic in transaction")
		}
	}()
	return fn(t)
}

func (s *Store) commitLoop() {
	defer close(s.done)
	for first := range s.queue {
		batch := []*call{first}
	drain:
		for len(batch) < s.opts.MaxBatch {
			select {
			case c, ok := <-s.queue:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

// errFailed marks a batch rolled back because one of its functions failed.
var errFailed = errors.New("a function of the batch failed")

func (s *Store) commit(batch []*call) {
	for len(batch) > 0 {
		failed, ferr := -1, error(nil)
		err := s.db.Update(func(btx *bbolt.Tx) error {
			t := &tx{b: btx, now: s.clock().UTC(), writable: true}
			for i, c := range batch {
				if err := run(c.fn, t); err != nil {
					failed, ferr = i, err
					return errFailed
				}
			}
			return nil
		})
		switch {
		case err == nil:
			for _, c := range batch {
				c.err <- nil
			}
			return
		case failed >= 0:
			batch[failed].err <- ferr
			batch = append(batch[:failed:failed], batch[failed+1:]...)
		default:
			// The commit itself failed (I/O): nobody's change is durable.
			for _, c := range batch {
				c.err <- fault.Internalf(err, "commit")
			}
			return
		}
	}
}
