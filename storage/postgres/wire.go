package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kassahq/kassa/fault"
)

// wire is a transaction on one pooled connection that saves round trips,
// which on a busy machine cost more than the statements themselves:
//
//   - BEGIN is not sent on its own but in front of the first statement.
//   - A statement whose only outcomes are success or an error (a write, or
//     a lock to take before a read; see tx.later) is held back and sent in
//     front of the next statement, or with COMMIT.
//
// The second matters most to document numbers: a capture holds its
// merchant's number row locked from taking a number to its commit, and the
// writes after the number (the order, the settlement item, the idempotency
// record) now reach the server together with the COMMIT, in one round trip,
// instead of one each.
//
// Statements run in order on the server, so a held write is always visible
// to the statements after it. A held write that fails fails the transaction:
// the error is returned by the statement it was sent with (or by commit),
// and the server skips everything after it in that round trip, COMMIT
// included.
type wire struct {
	ctx  context.Context
	conn *pgxpool.Conn
	// held are the statements for the next round trip; until the first
	// one, they start with BEGIN.
	held []heldWrite
	// open: BEGIN was queued, so the transaction must be ended (a ROLLBACK
	// when none is open only draws a warning).
	open bool
	// err is the first failure of a round trip's held part. It sticks:
	// whether BEGIN ran and which held writes were applied is then unknown,
	// so every later statement, and commit, returns it instead of running.
	err error
	// readOnly: a View's transaction, which wrote nothing whatever becomes
	// of its COMMIT.
	readOnly bool
	// setup is how many of the first held statements start the
	// transaction (BEGIN, SET LOCAL): with only those, nothing was sent.
	setup int
	// pool opens the connection that asks what became of a transaction
	// whose COMMIT went unanswered (see settle).
	pool *pgxpool.Pool
	// xid and life are what the commit's round trip read ahead of COMMIT
	// (see commitProbe); probed says it was read.
	xid    *int64
	life   string
	probed bool
}

// newWire starts a transaction of opts on conn; BEGIN, and after it the
// setup statements (SET LOCAL), wait for the first round trip like any held
// statement.
func newWire(ctx context.Context, pool *pgxpool.Pool, conn *pgxpool.Conn, opts pgx.TxOptions, setup ...string) *wire {
	begin := "begin isolation level " + string(opts.IsoLevel)
	if opts.AccessMode != "" {
		begin += " " + string(opts.AccessMode)
	}
	w := &wire{ctx: ctx, pool: pool, conn: conn, readOnly: opts.AccessMode == pgx.ReadOnly,
		held: []heldWrite{{sql: begin, fail: func(err error) error { return dbErr(err, "begin") }}}}
	for _, sql := range setup {
		w.held = append(w.held, heldWrite{sql: sql, fail: func(err error) error { return dbErr(err, "begin") }})
	}
	w.setup = len(w.held)
	return w
}

// heldWrite is a statement waiting for the next round trip; fail maps its
// error. A statement with dest has its one row read into it.
type heldWrite struct {
	sql  string
	args []any
	fail func(error) error
	dest []any
}

// heldErr is the error of a round trip's held part (BEGIN or a held
// write), already mapped: the statement it was sent with passes it on as it
// is, instead of treating it as its own.
type heldErr struct{ err error }

func (e *heldErr) Error() string { return e.err.Error() }
func (e *heldErr) Unwrap() error { return e.err }

// roundTrip sends the held statements, then stmt (if any), in one batch;
// read takes stmt's result. A failure of the held part sticks (w.err). A
// server error is mapped by the statement it belongs to; anything else (a
// statement pgx could not prepare or encode, a broken connection, a
// cancelled context) fails the whole round trip and is nobody's own.
func (w *wire) roundTrip(stmt string, args []any, read func(pgx.BatchResults) error) error {
	if w.err != nil {
		return w.err
	}
	b := &pgx.Batch{}
	for _, h := range w.held {
		b.Queue(h.sql, h.args...)
	}
	if stmt != "" {
		b.Queue(stmt, args...)
	}
	if stmt == "commit" && afterCommitForTests != "" {
		b.Queue(afterCommitForTests)
	}
	held := w.held
	w.held, w.open = nil, true
	br := w.conn.SendBatch(w.ctx, b)
	var err error
	for _, h := range held {
		if h.dest != nil {
			err = br.QueryRow().Scan(h.dest...)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			var pe *pgconn.PgError
			var pre pgx.ErrPreprocessingBatch
			if !errors.As(err, &pe) || errors.As(err, &pre) {
				err = &heldErr{fault.Internalf(err, "postgres: round trip")}
			} else {
				err = &heldErr{h.fail(err)}
			}
			w.err = err
			break
		}
	}
	if err == nil && read != nil {
		// The statement's own error is its caller's to judge (no rows, a
		// constraint); the server has aborted the transaction if it must.
		err = read(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// flush sends the held statements on their own.
func (w *wire) flush() error {
	if w.err != nil || len(w.held) == 0 {
		return w.err
	}
	return w.roundTrip("", nil, nil)
}

// direct: nothing is held, so a statement can go as it is.
func (w *wire) direct() bool { return w.err == nil && len(w.held) == 0 }

func (w *wire) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if w.direct() {
		return w.conn.Exec(w.ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	err := w.roundTrip(sql, args, func(br pgx.BatchResults) error {
		var err error
		tag, err = br.Exec()
		return err
	})
	return tag, err
}

func (w *wire) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if w.direct() {
		return w.conn.QueryRow(w.ctx, sql, args...)
	}
	return rowFunc(func(dest ...any) error {
		return w.roundTrip(sql, args, func(br pgx.BatchResults) error { return br.QueryRow().Scan(dest...) })
	})
}

// rowFunc is a pgx.Row whose Scan runs the query.
type rowFunc func(dest ...any) error

func (f rowFunc) Scan(dest ...any) error { return f(dest...) }

// Query sends the held statements first: the rows are read after their own round
// trip (lists and job claims, not the hot path).
func (w *wire) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.conn.Query(w.ctx, sql, args...)
}

func (w *wire) CopyFrom(_ context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := w.flush(); err != nil {
		return 0, err
	}
	return w.conn.CopyFrom(w.ctx, table, cols, src)
}

// commit sends the held statements and COMMIT in one round trip. A transaction
// that never sent anything has nothing to commit; one whose round trip
// failed (w.err) is not committed. A held write's error comes back as a
// *heldErr, which dbErr passes on as it is.
//
// The caller's context does not reach this round trip: once COMMIT is on
// its way the server may apply it whatever the client does, and a deadline
// that cut the reply short would report a committed change (a capture) as
// failed, for a caller to apply again. Like the embedded store, which
// commits a write that was queued, the answer is waited for, bounded by
// commitTimeout for a connection that went silent (an outcome then unknown).
func (w *wire) commit() error {
	if w.err != nil {
		return w.err
	}
	if !w.open && len(w.held) == w.setup {
		return nil // only BEGIN (and its setup) is held: nothing was ever sent
	}
	if !w.readOnly {
		// COMMIT never goes first in its round trip. A connection terminated
		// while the transaction waited for its next statement (idle in
		// transaction, where most of its time is spent) has its notice sent
		// before COMMIT leaves: it then answers this statement, so COMMIT
		// never ran and the transaction may run again, where as COMMIT's own
		// answer it would leave the outcome unknown. The statement reads
		// what settle needs should COMMIT's answer be lost; it runs after
		// the held writes, which may be the first to give the transaction
		// an id.
		w.held = append(w.held, heldWrite{sql: commitProbe, fail: func(err error) error { return dbErr(err, "commit") },
			dest: []any{&w.xid, &w.life}})
	}
	callerCtx := w.ctx
	ctx, stop := boundCommit(callerCtx, w.conn.Conn().PgConn())
	w.ctx = ctx
	defer func() { w.ctx = callerCtx }()
	// Closed already (fn went on after a statement that broke it): the
	// round trip then sends nothing, and pgx says "conn closed".
	closedBefore := w.conn.Conn().IsClosed()
	reached, committed := false, false
	err := w.roundTrip("commit", nil, func(br pgx.BatchResults) error {
		reached, w.probed = true, !w.readOnly
		tag, err := br.Exec()
		committed = err == nil && tag.String() == "COMMIT"
		if err != nil {
			return err
		}
		if tag.String() != "COMMIT" {
			// A transaction that failed earlier answers COMMIT with ROLLBACK.
			return fmt.Errorf("commit answered %q: %w", tag.String(), pgx.ErrTxCommitRollback)
		}
		return nil
	})
	cancelledHere := stop()
	if cancelledHere {
		defer w.conn.Conn().Close(context.Background()) // once the answer is judged
	}
	if err == nil || committed {
		// COMMIT was answered COMMIT: a failure after it (a FATAL read
		// with ReadyForQuery) does not undo it.
		w.open = false
		return nil
	}
	var pe *pgconn.PgError
	var pre pgx.ErrPreprocessingBatch
	answered, preprocessing := errors.As(err, &pe), errors.As(err, &pre)
	fatal := answered && endsBackend(pe)
	if w.readOnly && (fatal || !answered) && !errors.Is(err, pgx.ErrTxCommitRollback) {
		// A read's result stands whatever became of its COMMIT on a
		// connection that broke (no answer, a termination notice): it was
		// read in one snapshot, wrote nothing, and COMMIT adds nothing to
		// it. Running it again would run the caller's function twice. The
		// broken connection is dropped on release. An ordinary error, or
		// COMMIT answered ROLLBACK (a statement failed), is the read's.
		return nil
	}
	if answered && pe.Code == "57014" && !fatal {
		// Cancelled, past commitTimeout or by the database's own
		// statement_timeout (a held write waiting on a lock): the
		// transaction was aborted and COMMIT, if it was still to run,
		// skipped.
		if !cancelledHere {
			return &heldErr{storeUnavailable(statementCancelled, err)}
		}
		return &heldErr{storeUnavailable("the database did not complete the commit in time (a lock held elsewhere?)", err)}
	}
	// Only the server's own reasons for ending a backend prove that the
	// statements after the one they answer never ran: a proxy in between
	// (a pooler that lost its server) may answer FATAL for a server that
	// committed before it died.
	ended := fatal && slices.Contains(serverEndedBackend, pe.Code)
	// pgconn.SafeToRetry means not a byte was sent, but "conn closed", which
	// it also calls safe, is what pgx answers a read with once the
	// connection broke: in the exec and simple_protocol query modes (the
	// URL's default_query_exec_mode, as behind a transaction pooler) a read
	// that failed midway through the answer is dropped, and the next one
	// says the connection is closed. Only a connection closed before the
	// round trip began proves it was not sent.
	unsent := pgconn.SafeToRetry(err) && (closedBefore || !errors.Is(err, pgconn.ErrConnClosed))
	if unsent || w.conn.Conn().IsClosed() && (preprocessing || !reached && ended) {
		// COMMIT never ran: not a byte of the round trip was sent, or the
		// server ended the connection at an earlier statement (a FATAL in
		// the held part), or in the prepare round trip, which pgx finishes
		// before it sends any statement of the batch, so also when COMMIT
		// goes alone and its own first read is the prepare's answer. It
		// may run again.
		return &connLost{dbErr(err, "commit")}
	}
	var h *heldErr
	if errors.As(err, &h) && !fault.Is(h.err, fault.Internal) {
		return err // a held write was refused, so COMMIT was skipped
	}
	// A FATAL as COMMIT's own answer may have ended the connection after the
	// commit was durable.
	if reached && fatal || fatal && !ended || !answered && !preprocessing && !errors.Is(err, pgx.ErrTxCommitRollback) {
		// No answer from the server (a broken connection, commitTimeout):
		// it may have committed. The server is asked; when it cannot say,
		// the error says so, for an operator reading the log.
		switch w.settle(callerCtx) {
		case "committed":
			w.open = false
			return nil
		case "aborted":
			return &connLost{dbErr(err, "commit")}
		}
		return &heldErr{fault.OutcomeUnknown(err, "postgres: COMMIT was sent but not answered, so whether it committed is unknown")}
	}
	return err
}

// commitProbe is the last statement before a writable transaction's
// COMMIT: its id, if it has one (none: it wrote nothing), and the life of
// the server it runs on (serverLife).
const commitProbe = "select txid_current_if_assigned(), " + serverLife

// serverLife names one run of a server, during which it never hands out a
// transaction id twice: its start, and when its shared statistics were last
// reset. A crash of one backend makes the server restart all of them and
// replay its log without a new start time, and the log it had not yet
// flushed is gone, ids given out in it included, so after such a restart
// another transaction may get our id. Crash recovery resets the statistics
// (checked by hand: pg_stat_get_bgwriter_stat_reset_time changes, the start
// time does not); so does an operator's pg_stat_reset_shared, which only
// makes an outcome unknown that could have been known. Text of epoch
// seconds, whatever the session's time zone and date style.
const serverLife = `extract(epoch from pg_postmaster_start_time())::text || '/' ||
	coalesce(extract(epoch from pg_stat_get_bgwriter_stat_reset_time())::text, '-')`

// settle asks the server, on a connection of its own, what became of a
// transaction whose COMMIT went unanswered: "committed", "aborted" (it
// wrote nothing and may run again) or "" (unknown). Only the server that
// gave the id, in the same run, can say: after a restart, a crash recovery
// or a failover the same id may be another transaction's (a promoted
// standby that never saw this one, or a server that lost the end of its
// log, hands it out again), so another serverLife leaves the outcome
// unknown. A transaction still in progress
// (its backend still finishing, or not yet aware its client is gone) is
// asked about again, for settleWait at most.
//
// A connection of its own, not one of the pool: the pool may be taken by
// requests waiting on the same outage, and this one still holds its own.
func (w *wire) settle(ctx context.Context) string {
	if !w.probed {
		return "" // the id was never read
	}
	if w.xid == nil {
		return "committed" // no id: it wrote nothing, so COMMIT changes nothing
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWait)
	defer cancel()
	select {
	case settling <- struct{}{}:
		defer func() { <-settling }()
	case <-ctx.Done():
		return ""
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		if conn == nil || conn.IsClosed() {
			conn, _ = pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig.Copy())
		}
		var status *string
		var life string
		err := errors.New("no connection")
		if conn != nil {
			err = conn.QueryRow(ctx, settleQuery, *w.xid).Scan(&status, &life)
		}
		switch {
		case err == nil && life != w.life, err == nil && status == nil:
			return "" // another server or run of it, or an id too old to say
		case err == nil && (*status == "committed" || *status == "aborted"):
			return *status
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settleQuery reads a transaction's status only once a snapshot no longer
// sees it running, so that the answer is final: a transaction that has
// marked its commit in the commit log, but not yet left the running ones
// (waiting for a synchronous standby), is not reported committed before
// others can see it, and older servers, which looked at the
// commit log first, cannot report one that commits meanwhile as aborted.
const settleQuery = `select case when txid_visible_in_snapshot($1, txid_current_snapshot()) then txid_status($1) else 'in progress' end, ` + serverLife

// settling bounds the connections settle opens at once, beside the pool:
// in an outage every unanswered COMMIT asks, and a replica must not add a
// pool's worth of connections to a database near max_connections.
var settling = make(chan struct{}, 4)

// settleWait bounds settle. With commitTimeout and cancelWait it stays
// under kassa serve's 30 s shutdown grace.
const settleWait = 5 * time.Second

// endsBackend reports whether pe ends the connection it came on: a FATAL,
// or a PANIC (a failed write or sync of the write-ahead log), which may
// follow a commit record written. The severity read is the unlocalized one:
// Severity is in the server's lc_messages ("FATALT" in Swedish), and a
// FATAL read as an ordinary error answered a commit the server had made
// as if nothing was done.
func endsBackend(pe *pgconn.PgError) bool {
	severity := pe.SeverityUnlocalized
	if severity == "" {
		severity = pe.Severity // a server before 9.6
	}
	return severity == "FATAL" || severity == "PANIC"
}

// serverEndedBackend are the SQLSTATEs of the FATAL a PostgreSQL server
// sends when it ends a backend itself: pg_terminate_backend or a shutdown
// (57P01), a crash of another backend (57P02), a server not accepting
// connections (57P03), and the idle timeouts (25P03, 57P05).
var serverEndedBackend = []string{"57P01", "57P02", "57P03", "25P03", "57P05"}

// afterCommitForTests, when set by a test, is sent after COMMIT in its round
// trip: a statement that ends the connection there (pg_terminate_backend)
// makes the server's FATAL follow COMMIT's answer, as a termination at that
// moment does.
var afterCommitForTests string

// commitTimeout bounds the wait for COMMIT's answer, which the caller's
// context does not cut short (see commit). Held writes travel with COMMIT
// and may wait on a row lock; past it the statement is cancelled and its
// answer waited for cancelWait more. Both stay under kassa serve's 30 s
// shutdown grace, so a commit in flight at SIGTERM is answered. A variable
// for tests.
var commitTimeout = 15 * time.Second

// boundCommit bounds the wait for the answer to a round trip that carries
// COMMIT on pg (wire.commit, durably), which the caller's context does not
// reach: the context it returns ends commitTimeout+cancelWait from now,
// whatever caller's does. Past commitTimeout the statement running is
// cancelled rather than the connection dropped: one waiting on the server
// (a held write on a lock held elsewhere, a synchronous standby) would
// otherwise go on there, and commit once it may, after the caller was told
// the outcome is unknown. The server's answer then says what happened.
//
// stop ends the bound and reports whether the cancel request was sent. The
// caller must then close the connection once it has judged the answer: the
// request may reach the server after the answer, and would cancel whatever
// the connection ran next.
func boundCommit(caller context.Context, pg *pgconn.PgConn) (ctx context.Context, stop func() (cancelled bool)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(caller), commitTimeout+cancelWait)
	sent := make(chan struct{})
	timer := time.AfterFunc(commitTimeout, func() {
		defer close(sent)
		cctx, ccancel := context.WithTimeout(context.Background(), cancelWait)
		defer ccancel()
		pg.CancelRequest(cctx)
	})
	return ctx, func() bool {
		defer cancel()
		if timer.Stop() {
			return false
		}
		<-sent
		return true
	}
}

// cancelWait bounds the cancel request and the wait for the answer to the
// statement it cancelled; a connection silent that long leaves the outcome
// unknown.
const cancelWait = 5 * time.Second

// rollback ends the transaction if it is open. When that fails, the pool
// drops the connection on release rather than reuse it mid-transaction.
func (w *wire) rollback() {
	w.held = nil
	if w.open {
		if _, err := w.conn.Exec(context.Background(), "rollback"); err == nil {
			w.open = false
		}
	}
}
