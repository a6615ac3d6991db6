package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kassahq/kassa"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestClientSettingsOfTheDatabaseAreOverridden: a database (or role) whose
// client_encoding is not UTF8, or whose standard_conforming_strings is off
// (settings an old application may have needed), is served as any other:
// pgx speaks UTF-8 and needs both for its simple-protocol queries, which the
// start runs, and kassa's text reads back as it was written. The start
// failed with "simple protocol queries must be run with client_encoding=UTF8",
// also on a database in SQL_ASCII (initdb's without a locale), whose
// client_encoding defaults to its own.
func TestClientSettingsOfTheDatabaseAreOverridden(t *testing.T) {
	for _, c := range []struct{ name, create, setting string }{
		{"client_encoding", "", "client_encoding = 'LATIN1'"},
		{"standard_conforming_strings", "", "standard_conforming_strings = off"},
		// A database made by initdb without a locale: bytes are kept as
		// they are sent, which here is always valid UTF-8.
		{"SQL_ASCII", "ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var settings []string
			if c.setting != "" {
				settings = append(settings, c.setting)
			}
			u := pgtest.FreshDatabase(t, c.create, settings...)
			ledgers, creds := twoReplicasAt(t, u)
			ctx := context.Background()
			authorize(t, ledgers[0], creds.MerchantID, "t")
			const ref = `Åsa's "€" 😀 \`
			req := oneLineOrder()
			req.Reference = ref
			res, err := ledgers[0].CreateOrderFromAuthorization(ctx, kassa.Call{MerchantID: creds.MerchantID}, "t", req)
			if err != nil {
				t.Fatal(err)
			}
			page, _, err := ledgers[1].ListOrders(ctx, creds.MerchantID, storage.OrderQuery{MerchantReferences: []string{ref}, Size: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Orders) != 1 || page.Orders[0].ID != res.Order.ID || page.Orders[0].MerchantReference != ref {
				t.Fatalf("orders by reference %q: %+v, want %s", ref, page.Orders, res.Order.ID)
			}
			// What the database holds is the text itself, not its UTF-8
			// bytes read as Latin-1 characters.
			conn, err := pgx.Connect(ctx, u+"?client_encoding=UTF8")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM orders WHERE convert_to(merchant_ref, 'UTF8') = $1`, []byte(ref)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Fatalf("%d orders hold the reference's UTF-8 bytes, want 1", n)
			}
		})
	}
}

// TestDatabaseInAnotherEncodingIsRefused: a database whose encoding is
// neither UTF8 nor SQL_ASCII cannot hold every text kassa accepts (LATIN1
// has no €): the start is refused, naming the encoding, instead of a valid
// order being answered 400 "text must be valid UTF-8".
func TestDatabaseInAnotherEncodingIsRefused(t *testing.T) {
	u := pgtest.FreshDatabase(t, "ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
	s, err := postgres.Open(context.Background(), u, postgres.Options{})
	if err == nil {
		s.Close()
		t.Fatal("opened a LATIN1 database")
	}
	if msg := err.Error(); !strings.Contains(msg, "LATIN1") || !strings.Contains(msg, "UTF8") {
		t.Fatalf("error names neither the encoding nor the one needed: %s", msg)
	}
	// Nothing was made in it.
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables made in the refused database", tables)
	}
}

// TestUnsafeServerSettingsAreLogged: a server running with fsync = off or
// full_page_writes = off (postgresql.conf; no session can override them)
// may lose writes kassa acknowledged, or damage the cluster, when its
// machine crashes: Open says so through Options.Logger, naming the setting,
// and serves anyway (test and CI clusters run so on purpose). It said
// nothing. Whatever the test server runs with, the warnings match it.
func TestUnsafeServerSettingsAreLogged(t *testing.T) {
	u := freshSchema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync, fpw string
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('full_page_writes')`).Scan(&fsync, &fpw); err != nil {
		t.Fatal(err)
	}
	var want []string
	if fsync == "off" {
		want = append(want, "fsync")
	}
	if fpw == "off" {
		want = append(want, "full_page_writes")
	}
	var buf bytes.Buffer
	s, err := postgres.Open(ctx, u, postgres.Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var got []string
	for line := range strings.Lines(buf.String()) {
		var rec struct{ Level, Msg, Setting string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Setting != "" {
			if rec.Level != "WARN" || !strings.Contains(rec.Msg, rec.Setting+" = off") {
				t.Errorf("%s: %s %q", rec.Setting, rec.Level, rec.Msg)
			}
			got = append(got, rec.Setting)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fsync %s, full_page_writes %s: Open warned of %v, want %v", fsync, fpw, got, want)
	}
}

// TestApplicationNameNamesKassa: kassa's sessions name themselves in
// pg_stat_activity and the database's logs (application_name = kassa), so
// an operator tells them from others; they named nothing. A name the URL or
// PGAPPNAME gives (a replica's own) is kept.
func TestApplicationNameNamesKassa(t *testing.T) {
	u := freshSchema(t)
	for _, c := range []struct{ name, url, env, want string }{
		{"default", u, "", "kassa"},
		{"URL", u + "&application_name=billing-eu-1", "", "billing-eu-1"},
		{"PGAPPNAME", u, "billing-eu-2", "billing-eu-2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGAPPNAME", c.env) // empty: not set, for pgx
			s, err := postgres.Open(context.Background(), c.url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got string
			if err := s.Pool().QueryRow(context.Background(), `SELECT current_setting('application_name')`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("application_name %q, want %q", got, c.want)
			}
		})
	}
}
