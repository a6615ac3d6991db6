package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/storage"
)

// inSwedish returns u with the server's messages in Swedish (lc_messages
// sv_SE.UTF-8 in the startup options, as a DBA's ALTER DATABASE or ALTER
// ROLE … SET gives every session), or skips the test when the server cannot
// write them: the locale missing where the server runs (.ci/run generates
// it before the server starts) or a role that may not set lc_messages (a
// superuser's setting). It fails the test unless the severity the server
// writes is then Swedish, so that a pass proves something.
func inSwedish(t *testing.T, u string) string {
	t.Helper()
	ctx := context.Background()
	sv := withSetting(u, "lc_messages=sv_SE.UTF-8")
	conn, err := pgx.Connect(ctx, sv)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "22023" || pe.Code == "42501") {
		t.Skipf("the server cannot write its messages in Swedish: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT 1/0`)
	if errors.As(err, &pe) && pe.Code == "22012" && pe.Severity == "ERROR" {
		// The locale is there, the translations are not (a build
		// without NLS, an image that strips /usr/share/locale).
		t.Skipf("the server has no Swedish messages: %v", err)
	}
	if !errors.As(err, &pe) || pe.Code != "22012" || pe.Severity != "FEL" || pe.SeverityUnlocalized != "ERROR" {
		t.Fatalf("SELECT 1/0 on a server asked for Swedish: %#v, want severity FEL", err)
	}
	return sv
}

// TestTerminatedOnAServerThatSpeaksSwedish: a server whose lc_messages is
// not English writes a FATAL's severity in its language ("FATALT"); only
// the unlocalized one says FATAL. A backend the server ends (57P01) under a
// transaction is answered as on an English server, in every query mode: a
// read terminated at its commit stands as read, once; an update terminated
// while idle before its commit, or while its held write waits on a lock,
// never committed and runs again, writing once. pgx closes a connection on a
// FATAL by the localized severity only, so on such a server, without the
// store's own check of the unlocalized one, the connection stayed open
// after the FATAL, and in the exec and simple_protocol modes an update
// the server had rolled back was answered as of unknown outcome (500).
func TestTerminatedOnAServerThatSpeaksSwedish(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			u := freshSchema(t)
			sv := inSwedish(t, u)
			app := "kassa_sv_" + rand.Text()[:8]
			s := openNow(t, sv+"&default_query_exec_mode="+mode+"&application_name="+app)
			direct := openNow(t, u)
			db, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close(ctx)
			putMerchantM1(t, direct)

			attempts, name := 0, ""
			err = s.View(ctx, func(tx storage.Tx) error {
				attempts++
				m, err := tx.GetMerchant("m1")
				if err != nil {
					return err
				}
				name = m.Name
				cutConnections(t, app)
				return nil
			})
			if err != nil || attempts != 1 || name != "m" {
				t.Errorf("read terminated at its commit: %v after %d attempts, read %q; want its result, once", err, attempts, name)
			}

			for _, c := range []struct {
				name      string
				terminate func()
			}{
				{"idle before its commit", func() { cutConnections(t, app) }},
				{"waiting on a lock in its commit's round trip", func() { terminateWhenWaiting(t, u, app) }},
			} {
				putMerchantM1(t, direct)
				if _, err := db.Exec(ctx, `DELETE FROM tasks`); err != nil {
					t.Fatal(err)
				}
				attempts := 0
				err := s.Update(ctx, func(tx storage.Tx) error {
					attempts++
					if err := renameAndSchedule(tx); err != nil {
						return err
					}
					if attempts == 1 {
						c.terminate()
					}
					return nil
				})
				var tasks int
				if err := db.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
					t.Fatal(err)
				}
				if name := merchantName(t, direct); err != nil || attempts != 2 || tasks != 1 || name != "m+" {
					t.Errorf("update terminated %s: %v after %d attempts; %d tasks, name %q; want a success on the second attempt, written once",
						c.name, err, attempts, tasks, name)
				}
			}
		})
	}
}
