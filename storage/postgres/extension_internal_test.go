package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A migration whose extension cannot be made is left pending only for want
// of the right to make it or of the extension itself: any other failure of
// CREATE EXTENSION (a lock it waited for too long, a cancel, a lost
// connection) fails the start as every other migration's does, rather than
// being logged as a missing right and passed over.
func TestExtensionMissingOnlyForRightsOrAbsence(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "42501"}, true},                            // insufficient_privilege
		{&pgconn.PgError{Code: "0A000"}, true},                            // feature_not_supported: not installed
		{&pgconn.PgError{Code: "58P01"}, true},                            // undefined_file: not installed, before PostgreSQL 15
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42501"}), true}, // as pgx may wrap it
		{&pgconn.PgError{Code: "55P03"}, false},                           // lock_not_available
		{&pgconn.PgError{Code: "57014"}, false},                           // query_canceled
		{&pgconn.PgError{Code: "42601"}, false},                           // syntax_error
		{&pgconn.PgError{Code: "40P01"}, false},                           // deadlock_detected
		{context.DeadlineExceeded, false},
		{errors.New("connection reset"), false},
		{nil, false},
	} {
		if got := extensionMissing(c.err); got != c.want {
			t.Errorf("extensionMissing(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
