package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
	"github.com/kassahq/kassa/settlement"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/token"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of everything the server serves.
func OpenAPI() []byte { return openAPI }

func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeRaw(w, http.StatusOK, s.openAPI())
}

// servedOpenAPI is the document of what a server's Handler serves: without
// the /sandbox/v1 operations when the sandbox is off, and without /metrics
// when it is on the operations listener (SeparateOps), since Handler
// answers them 404, so that a client generated from it does not call them.
func servedOpenAPI(sandbox, separateOps bool) []byte {
	return servedDocs[b2i(sandbox)][b2i(separateOps)]()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var servedDocs = [2][2]func() []byte{
	{sync.OnceValue(func() []byte { return openAPIFor(false, false, "") }), sync.OnceValue(func() []byte { return openAPIFor(false, true, "") })},
	{func() []byte { return openAPI }, sync.OnceValue(func() []byte { return openAPIFor(true, true, "") })},
}

// openAPIFor is the embedded document without the sandbox's paths (unless
// sandbox), without /metrics if separateOps, and with mount (the path of
// BaseURL), if any, as its server: a client generated from the document of
// a server under a prefix must call it there, not at the host's root.
func openAPIFor(sandbox, separateOps bool, mount string) []byte {
	var doc map[string]json.RawMessage
	var paths map[string]json.RawMessage
	if json.Unmarshal(openAPI, &doc) != nil || json.Unmarshal(doc["paths"], &paths) != nil {
		panic("server: the embedded openapi.json does not decode") // TestOpenAPIUpToDate keeps it valid
	}
	for p := range paths {
		if (!sandbox && strings.HasPrefix(p, "/sandbox/")) || (separateOps && p == "/metrics") {
			delete(paths, p)
		}
	}
	var err error
	if doc["paths"], err = json.Marshal(paths); err != nil {
		panic(err)
	}
	if mount != "" {
		if doc["servers"], err = json.Marshal([]map[string]string{{"url": mount}}); err != nil {
			panic(err)
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.draining.Load() {
		// Not an error: asked for, and polled until the stop.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining", "reason": "the server is stopping; requests are still served until it stops listening"})
		return
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			// The reason goes to the log only: it can name the database's
			// host and user, and this endpoint takes no credentials.
			s.notReady(w, r, err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "the store did not answer; see the server log"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.WriteTo(w)
}

// InstrumentStore wraps a store so that the latency of every durable commit
// is recorded in m: of the Updates that committed a write, not of those
// refused or failed, which roll back without a commit to time, nor of those
// whose function only read (a notification run that finds nothing due, two
// a second on an idle server), for which bbolt commits nothing and
// PostgreSQL flushes nothing: counted, they pulled the histogram toward
// zero and made most of it noise on a quiet server.
func InstrumentStore(st storage.Store, m *Metrics) storage.Store { return &timedStore{Store: st, m: m} }

type timedStore struct {
	storage.Store
	m *Metrics
}

func (t *timedStore) Update(ctx context.Context, fn func(storage.Tx) error) error {
	start := time.Now()
	var wrote bool
	err := t.Store.Update(ctx, func(tx storage.Tx) error {
		w := &writeTx{Tx: tx}
		var wtx storage.Tx = w
		if sc, ok := tx.(storage.SharedClock); ok {
			wtx = sharedClockTx{w, sc}
		}
		err := fn(wtx)
		// The last run's: a store may run fn again after a rollback.
		wrote = w.writes > 0
		return err
	})
	if err == nil && wrote {
		t.m.ObserveCommit(time.Since(start))
	}
	return err
}

// writeTx counts the writes of a transaction: every storage.Tx method that
// changes a record is here (TestWriteTxSeesEveryWrite), the readers are
// the embedded Tx's. A sweep that removed nothing wrote nothing.
type writeTx struct {
	storage.Tx
	writes int
}

// sharedClockTx is a writeTx of a transaction that reads a shared clock
// (storage/postgres), which the notification deliverer asks it for.
type sharedClockTx struct {
	*writeTx
	storage.SharedClock
}

// wrote counts a write that succeeded: one refused (a task already gone,
// which the caller may ignore) changed nothing.
func (t *writeTx) wrote(err error) error {
	if err == nil {
		t.writes++
	}
	return err
}

func (t *writeTx) swept(n int, err error) (int, error) {
	if n > 0 && err == nil {
		t.writes++
	}
	return n, err
}

func (t *writeTx) PutMerchant(m *storage.Merchant) error { return t.wrote(t.Tx.PutMerchant(m)) }
func (t *writeTx) CreateOrder(o *order.Order) error      { return t.wrote(t.Tx.CreateOrder(o)) }
func (t *writeTx) UpdateOrder(o *order.Order) error      { return t.wrote(t.Tx.UpdateOrder(o)) }
func (t *writeTx) PutAuthorization(a *token.Authorization) error {
	return t.wrote(t.Tx.PutAuthorization(a))
}
func (t *writeTx) DeleteAuthorizationsExpiredBefore(at time.Time, limit int) (int, error) {
	return t.swept(t.Tx.DeleteAuthorizationsExpiredBefore(at, limit))
}
func (t *writeTx) PutCustomerToken(c *token.Customer) error { return t.wrote(t.Tx.PutCustomerToken(c)) }
func (t *writeTx) PutSession(s *session.Session) error      { return t.wrote(t.Tx.PutSession(s)) }
func (t *writeTx) QueueSettlementItems(items []settlement.Item) error {
	return t.wrote(t.Tx.QueueSettlementItems(items))
}
func (t *writeTx) SaveSettlement(b settlement.Batch) error { return t.wrote(t.Tx.SaveSettlement(b)) }
func (t *writeTx) ScheduleTask(task *storage.Task) error   { return t.wrote(t.Tx.ScheduleTask(task)) }
func (t *writeTx) DeleteTask(id string) error              { return t.wrote(t.Tx.DeleteTask(id)) }
func (t *writeTx) NextSequence(merchantID, series string) (int64, error) {
	n, err := t.Tx.NextSequence(merchantID, series)
	return n, t.wrote(err)
}
func (t *writeTx) PutIdempotency(r *storage.IdempotencyRecord) error {
	return t.wrote(t.Tx.PutIdempotency(r))
}
func (t *writeTx) DeleteExpiredIdempotency(at time.Time, limit int) (int, error) {
	return t.swept(t.Tx.DeleteExpiredIdempotency(at, limit))
}
func (t *writeTx) AddOutbox(m *storage.OutboxMessage) error    { return t.wrote(t.Tx.AddOutbox(m)) }
func (t *writeTx) UpdateOutbox(m *storage.OutboxMessage) error { return t.wrote(t.Tx.UpdateOutbox(m)) }
func (t *writeTx) DeleteDoneOutbox(at time.Time, limit int) (int, error) {
	return t.swept(t.Tx.DeleteDoneOutbox(at, limit))
}

// backupWriteWindow is how long one write of a backup may take: the
// listener's write timeout bounds a whole response, which a backup of a
// large store to a remote host can outlast while it makes progress.
const backupWriteWindow = time.Minute

var errBackupUnauthorized = fault.New(fault.Unauthorized, "unauthorized", "send the server's backup token (kassa serve --backup-token) as 'authorization: Bearer …'")

var errBackupBusy = fault.New(fault.Conflict, "backup_in_progress", "a backup is under way; try again once it has ended")

var errBackupUnsupported = fault.New(fault.NotAvailable, "backup_unsupported",
	"this server's store is PostgreSQL: back up the database with pg_dump (docs/postgres.md)")

func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	// Compared as digests, in constant time: neither the token's length
	// nor its first wrong byte shows in the time of a refusal.
	scheme, cred := authorization(r)
	if scheme != "bearer" {
		cred = ""
	}
	got, want := sha256.Sum256([]byte(cred)), sha256.Sum256([]byte(s.cfg.BackupToken))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		s.writeError(w, r, errBackupUnauthorized)
		return
	}
	// HEAD is routed as GET, and a backup's headers come only with its
	// first byte: a monitor's HEAD would copy the whole store.
	if sr, ok := w.(*statusRecorder); ok && sr.head {
		w.Header().Set("Allow", http.MethodGet)
		s.writeError(w, r, &fault.Error{Kind: fault.MethodNotAllowed, Code: "method_not_allowed",
			Message: "HEAD is not allowed on /backup: it would make a backup to send its headers"})
		return
	}
	if s.cfg.Backup == nil {
		s.writeError(w, r, errBackupUnsupported)
		return
	}
	// Each backup spools a copy of the store beside it: two at once
	// would take twice the disk for nothing.
	if !s.backup.TryLock() {
		s.writeError(w, r, errBackupBusy)
		return
	}
	defer s.backup.Unlock()
	bw := &backupWriter{w: w, rc: http.NewResponseController(w)}
	err := s.cfg.Backup(bw)
	switch {
	case err == nil:
		return
	case !bw.started:
		if fault.KindOf(err) == fault.Internal {
			err = fault.Internalf(err, "backup")
		}
		s.writeError(w, r, err)
	default:
		s.log.ErrorContext(r.Context(), "backup cut short", slog.Any("err", err), slog.Int64("bytes", bw.n))
		panic(http.ErrAbortHandler)
	}
}

// backupWriter sends the backup's headers with its first byte, so that a
// backup failing before it can still be answered with a problem, and
// renews the write deadline before each write.
type backupWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	n       int64
}

func (b *backupWriter) Write(p []byte) (int, error) {
	if !b.started {
		b.started = true
		h := b.w.Header()
		h.Set("Content-Type", "application/x-tar")
		h.Set("Content-Disposition", `attachment; filename="kassa-backup-`+time.Now().UTC().Format("20060102T150405Z")+`.tar"`)
		h.Set("Cache-Control", "no-store")
		b.w.WriteHeader(http.StatusOK)
	}
	if err := b.rc.SetWriteDeadline(time.Now().Add(backupWriteWindow)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n, err := b.w.Write(p)
	b.n += int64(n)
	return n, err
}
