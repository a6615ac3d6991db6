package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
)

// withSetting is u with a session default (as ALTER DATABASE or ALTER ROLE
// … SET gives every session) in its startup options.
func withSetting(u, setting string) string {
	return u + "&options=" + strings.ReplaceAll(url.QueryEscape("-c "+setting), "+", "%20")
}

// TestStatementTimeoutIsStoreUnavailable: a database or role with a
// statement_timeout (a DBA's protection) cancels a statement that waits on a
// lock longer (SQLSTATE 57014): the transaction is aborted and wrote
// nothing, so the caller is told store_unavailable (503 with Retry-After),
// as for the caller's own deadline, and may send the request again. It was
// an internal error, 500.
func TestStatementTimeoutIsStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	u := freshSchema(t)
	s := open(t, u)
	limited := open(t, withSetting(u, "statement_timeout=100ms"))

	holding, release := make(chan struct{}), make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	held := make(chan error, 1)
	go func() {
		held <- s.Update(ctx, func(tx storage.Tx) error {
			if _, err := tx.NextSequence("m1", "held"); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	start := time.Now()
	err := limited.Update(ctx, func(tx storage.Tx) error {
		_, err := tx.NextSequence("m1", "held")
		return err
	})
	waited := time.Since(start)
	close(release)
	if fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" {
		t.Fatalf("a lock wait cut by statement_timeout: %v (kind %v, code %s), want store_unavailable", err, fault.KindOf(err), fault.CodeOf(err))
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("the error does not keep the database's: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("no context ended, yet the error says one did: %v", err)
	}
	if waited > 10*time.Second {
		t.Fatalf("the Update returned after %v", waited)
	}
	if err := <-held; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	var n int64
	if err := s.Update(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.NextSequence("m1", "held")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("next number %d, want 2: the cancelled Update took one", n)
	}
}
