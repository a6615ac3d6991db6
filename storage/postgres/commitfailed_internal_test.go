package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
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
