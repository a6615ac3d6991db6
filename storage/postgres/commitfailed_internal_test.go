package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestCommitFailedReadsTheUnlocalizedSeverity: a COMMIT answered by an
// error the server ended the backend with (FATAL, or PANIC, which a WAL
// write or fsync that failed raises) may have committed before it, and
// the severity that tells so is the unlocalized one: Severity is in the
// server's lc_messages, "FATALT" on a server set up in Swedish, which
// was taken for an answer, and a copy the database may have committed
// was reported as not made.
func TestCommitFailedReadsTheUnlocalizedSeverity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"ERROR, English", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, false},
		{"ERROR, Swedish", &pgconn.PgError{Severity: "FEL", SeverityUnlocalized: "ERROR", Code: "53100"}, false},
		{"FATAL, English", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, true},
		{"FATAL, Swedish", &pgconn.PgError{Severity: "FATALT", SeverityUnlocalized: "FATAL", Code: "57P01"}, true},
		{"PANIC, Swedish", &pgconn.PgError{Severity: "PANIK", SeverityUnlocalized: "PANIC", Code: "53100"}, true},
		{"FATAL, a server without the unlocalized field", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"answered ROLLBACK", pgx.ErrTxCommitRollback, false},
		{"no answer", fmt.Errorf("read: %w", errors.New("unexpected EOF")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := commitFailed(tc.err)
			if got := fault.IsOutcomeUnknown(err); got != tc.unknown {
				t.Fatalf("commitFailed(%v): outcome unknown %v (%v); want %v", tc.err, got, err, tc.unknown)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("commitFailed(%v) = %v: lost the cause", tc.err, err)
			}
		})
	}
}

// TestDurablyOnAConnectionLostBeforeCommit: a connection that broke before
// COMMIT was sent committed nothing, which durably's error must not call
// of unknown outcome (COMMIT on it fails as "conn closed", as it does
// when the answer is lost).
func TestDurablyOnAConnectionLostBeforeCommit(t *testing.T) {
	s := openFresh(t, 2)
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	err = s.durably(ctx, conn, func(tx pgx.Tx) error {
		// The session ends under the transaction; its error is what a
		// caller that read it would return, and is ignored here so that
		// durably goes on to COMMIT.
		tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
		return nil
	})
	if err == nil || fault.IsOutcomeUnknown(err) {
		t.Fatalf("durably on a connection lost before COMMIT: %v, want an error that is not of unknown outcome", err)
	}
}

// TestDurablyCommitIsBoundedOnASilentConnection: a COMMIT sent by durably
// (store copy's Load, the signing key at start, store rekey) on a
// connection gone silent without a reset (a pooler or balancer that keeps
// its side alive, a synchronous standby gone) returns once commitTimeout
// and cancelWait have passed, as Update's does, with an outcome unknown.
// It waited for the answer for good: kassa store copy, store rekey and a
// replica's start hung.
func TestDurablyCommitIsBoundedOnASilentConnection(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(pgtest.FreshSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	relay := newSilentRelay(t, u.Host)
	u.Host = relay.ln.Addr().String()
	s, err := Open(ctx, u.String(), Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	defer func(d time.Duration) { commitTimeout = d }(commitTimeout)
	commitTimeout = 300 * time.Millisecond
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		var start time.Time
		err := s.durably(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO signing_key (id, key_check) VALUES (1, '\x00')`); err != nil {
				return err
			}
			relay.silence.Store(true) // COMMIT goes out on a silent connection
			start = time.Now()
			return nil
		})
		done <- result{err, time.Since(start)}
	}()
	select {
	case r := <-done:
		relay.close() // pgx's cancel request for the dropped connection waits on it
		if !fault.IsOutcomeUnknown(r.err) {
			t.Errorf("durably whose COMMIT went unanswered: %v, want an outcome unknown", r.err)
		}
		if bound := commitTimeout + cancelWait; r.took > bound+2*time.Second {
			t.Errorf("durably whose COMMIT went unanswered returned after %v, want about %v", r.took, bound)
		}
	case <-time.After(commitTimeout + cancelWait + 10*time.Second):
		relay.close() // the connections closed, durably returns
		r := <-done
		t.Errorf("durably whose COMMIT went unanswered had not returned after %v (only once its connection was closed: %v), want about %v",
			commitTimeout+cancelWait+10*time.Second, r.err, commitTimeout+cancelWait)
	}
}

// TestDurablyCommitWaitingOnTheServerIsCancelled: a COMMIT that waits on
// the server (here a deferred trigger that sleeps) past commitTimeout is
// cancelled, as Update's is, rather than only dropped: a connection
// dropped would leave the server to commit once the wait ended, after the
// caller was told nothing, or an unknown outcome. The server's answer says
// nothing was written, which the error says (not an unknown outcome), and
// nothing is written later.
func TestDurablyCommitWaitingOnTheServerIsCancelled(t *testing.T) {
	s := openFresh(t, 2)
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	defer func(d time.Duration) { commitTimeout = d }(commitTimeout)
	commitTimeout = 300 * time.Millisecond
	const sleep = 3 * time.Second
	start := time.Now()
	err = s.durably(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE slow_commit (id int);
			CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(%d); RETURN NULL; END $$;
			CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow_commit DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();
			INSERT INTO slow_commit VALUES (1)`, int(sleep.Seconds())))
		return err
	})
	took := time.Since(start)
	if err == nil || fault.IsOutcomeUnknown(err) {
		t.Errorf("durably whose COMMIT waited on the server: %v, want the server's error (cancelled), not an unknown outcome", err)
	}
	if took > commitTimeout+2*time.Second {
		t.Errorf("durably whose COMMIT waited on the server returned after %v, want about %v", took, commitTimeout)
	}
	time.Sleep(sleep + time.Second - took) // a COMMIT left running would have landed
	var table *string
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('slow_commit')::text`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table != nil {
		t.Errorf("the transaction was committed after durably returned %v", err)
	}
}
