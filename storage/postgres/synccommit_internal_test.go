package postgres

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestWritesCommitDurablyWhateverTheDatabaseSets: a database or role with
// synchronous_commit = off (a tuning seen on managed databases) acknowledges
// a commit before its WAL is flushed, and a crash of the server then loses
// it: kassa's writes set it on for themselves. A stronger setting (waiting
// for a standby) is left as it is, and so are reads.
func TestWritesCommitDurablyWhateverTheDatabaseSets(t *testing.T) {
	base := pgtest.FreshSchema(t)
	for _, c := range []struct{ set, write, read string }{
		{"off", "on", "off"},
		{"local", "local", "local"},
		{"remote_apply", "remote_apply", "remote_apply"},
	} {
		// As ALTER DATABASE or ALTER ROLE would: the session's default.
		s, err := Open(context.Background(), base+"&options="+strings.ReplaceAll(url.QueryEscape("-c synchronous_commit="+c.set), "+", "%20"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		setting := func(update bool) string {
			var got string
			read := func(stx storage.Tx) error {
				_, err := stx.(*tx).scanRow("setting", `SELECT current_setting('synchronous_commit')`, nil, &got)
				return err
			}
			run := s.View
			if update {
				run = s.Update
			}
			if err := run(context.Background(), read); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := setting(true); got != c.write {
			t.Errorf("synchronous_commit = %s: an Update runs with %s, want %s", c.set, got, c.write)
		}
		if got := setting(false); got != c.read {
			t.Errorf("synchronous_commit = %s: a View runs with %s, want %s", c.set, got, c.read)
		}
		// The writes outside Update (store copy, the signing key).
		conn, err := s.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var outside string
		if err := s.durably(context.Background(), conn, func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT current_setting('synchronous_commit')`).Scan(&outside)
		}); err != nil {
			t.Fatal(err)
		}
		conn.Release()
		if outside != c.write {
			t.Errorf("synchronous_commit = %s: a write outside Update runs with %s, want %s", c.set, outside, c.write)
		}
		s.Close()
	}
}
