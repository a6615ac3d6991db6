// Package pgtest gives tests an empty PostgreSQL schema of their own, in a
// database of their package's own on the server KASSA_TEST_DATABASE_URL
// names (URL), and skips them, saying why, when there is none. .ci/run
// starts a database and sets the variable.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// URL returns the test database's URL or skips the test. The database is
// this package's own: made once, on the server of KASSA_TEST_DATABASE_URL,
// named after that URL's database, the package's directory and that
// database's locale, with that locale (sameLocale), and kept for the
// package's next run: the URL's database made again with another locale
// gets another package database, not the one kept from before. go
// test runs the packages' test processes at once, and a migration's
// CREATE INDEX CONCURRENTLY waits for every older transaction of its
// database, while holding, as long as migration 8 is
// pending (in every fresh schema), a lock of the whole database: a test of
// one package holding a transaction open until its own migration, which
// waited for that lock, had built its index, and another package's migration
// waiting for that transaction, waited for each other until the test
// timeout. Neither waits on another database's transactions or locks.
func URL(t testing.TB) string {
	u := os.Getenv("KASSA_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("KASSA_TEST_DATABASE_URL not set: skipping PostgreSQL tests (.ci/run starts a database and sets it)")
	}
	own.Lock()
	defer own.Unlock()
	if own.url == "" {
		made, err := packageDatabase(u)
		if err != nil {
			t.Fatalf("pgtest: the package's database: %v", err)
		}
		own.url = made
	}
	return own.url
}

var own struct {
	sync.Mutex
	url string
}

// packageDatabase makes, if missing, the database of the package whose
// tests run in the working directory, on the server of base, and returns
// its URL.
func packageDatabase(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	opts, loc, err := sameLocale(ctx, conn)
	if err != nil {
		return "", err
	}
	// The locale is in the name: a database kept from a run when the URL's
	// database had another locale (made again since, with an ICU
	// collation to test it, say) would run the tests on that other one.
	sum := sha256.Sum256([]byte(dir + "\x00" + loc))
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		name = "kassa"
	}
	name = fmt.Sprintf("%.40s_p%x", name, sum[:4])
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+opts)
	var pe *pgconn.PgError
	// 42P04: made by an earlier run; 23505: by another process of the
	// package at the same moment.
	if err != nil && !(errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "23505")) {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// sameLocale returns the options of CREATE DATABASE that give a new
// database the locale (provider, collation, character classes) of the one
// conn is connected to, or "" when template1, the default template, has it
// already; and that locale, as text that differs with it. The tests then run on a database collating as the one
// KASSA_TEST_DATABASE_URL names (an ICU sv-SE one, say), not on the
// cluster's default. Read as JSON, so that the ICU locale's column is found
// under its name in PostgreSQL 15 and 16 (daticulocale) and after
// (datlocale).
func sameLocale(ctx context.Context, conn *pgx.Conn) (opts, locale string, err error) {
	var cur, tmpl map[string]any
	if err := conn.QueryRow(ctx, `SELECT to_jsonb(c), to_jsonb(t) FROM pg_database c, pg_database t
		WHERE c.datname = current_database() AND t.datname = 'template1'`).Scan(&cur, &tmpl); err != nil {
		return "", "", err
	}
	for _, k := range localeKeys {
		locale += fmt.Sprintf("%s=%v\x00", k, cur[k])
	}
	return localeOptions(cur, tmpl), locale, nil
}

// localeKeys are the columns of pg_database that make up its locale.
var localeKeys = []string{"datlocprovider", "datcollate", "datctype", "daticulocale", "datlocale", "daticurules"}

// localeOptions is sameLocale's answer for the pg_database rows (as JSON
// objects) of the database to copy the locale of and of template1. The
// provider is always named: left out, it is template0's, and on a cluster
// whose default is ICU a database of libc's C.UTF-8 came out ICU.
func localeOptions(cur, tmpl map[string]any) string {
	same := true
	for _, k := range localeKeys {
		if fmt.Sprint(cur[k]) != fmt.Sprint(tmpl[k]) {
			same = false
		}
	}
	if same {
		return ""
	}
	lit := func(v any) string { return "'" + strings.ReplaceAll(fmt.Sprint(v), "'", "''") + "'" }
	opts := " TEMPLATE template0 LC_COLLATE " + lit(cur["datcollate"]) + " LC_CTYPE " + lit(cur["datctype"])
	switch cur["datlocprovider"] {
	case "c":
		opts += " LOCALE_PROVIDER libc"
	case "b":
		opts += " LOCALE_PROVIDER builtin BUILTIN_LOCALE " + lit(cur["datlocale"])
	case "i":
		opts += " LOCALE_PROVIDER icu"
		for _, k := range []string{"daticulocale", "datlocale"} {
			if v, ok := cur[k].(string); ok && v != "" {
				opts += " ICU_LOCALE " + lit(v)
			}
		}
		if v, ok := cur["daticurules"].(string); ok && v != "" {
			opts += " ICU_RULES " + lit(v)
		}
	}
	return opts
}

// Selected reports whether KASSA_TEST_STORE asks the store-agnostic tests
// (HTTP, end to end) to run on PostgreSQL.
func Selected() bool { return os.Getenv("KASSA_TEST_STORE") == "postgres" }

// FreshSchema creates an empty schema, dropped when the test ends, and
// returns a URL whose connections use it.
func FreshSchema(t testing.TB) string {
	t.Helper()
	base := URL(t)
	schema := create(t, base, "SCHEMA", "", "CASCADE")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PoolerDatabase creates an empty database, dropped when the test ends, on
// the server of KASSA_TEST_DATABASE_URL, and returns its URL through the
// connection pooler of KASSA_TEST_POOLER_URL (a PgBouncer in transaction
// mode in front of that server that serves any database name, "* =
// host=…"; docs/postgres.md, Connection poolers), or skips the test. A
// database rather than a schema: PgBouncer refuses search_path in the
// startup packet. The URL keeps the pooler URL's parameters, and its query
// mode: default_query_exec_mode if that URL names one (exec or
// simple_protocol, for a pass of the tests in that mode), else
// cache_describe, the one docs/postgres.md gives.
func PoolerDatabase(t testing.TB) string {
	t.Helper()
	pooler := os.Getenv("KASSA_TEST_POOLER_URL")
	if pooler == "" {
		t.Skip("KASSA_TEST_POOLER_URL not set: skipping tests through a connection pooler")
	}
	name := create(t, URL(t), "DATABASE", "", "WITH (FORCE)")
	return poolerURL(t, pooler, name)
}

// poolerURL is the URL of database name through the pooler of pooler, in
// pooler's query mode or cache_describe.
func poolerURL(t testing.TB, pooler, name string) string {
	u, err := url.Parse(pooler)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	q := u.Query()
	if q.Get("default_query_exec_mode") == "" {
		q.Set("default_query_exec_mode", "cache_describe")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ICUDatabases reports whether the server of KASSA_TEST_DATABASE_URL can
// make a database whose default collation is ICU's: PostgreSQL 15 and
// later, built with ICU.
func ICUDatabases(t testing.TB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version, icu int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
		(SELECT count(*) FROM pg_collation WHERE collprovider = 'i')`).Scan(&version, &icu); err != nil {
		t.Fatal(err)
	}
	return version >= 150000 && icu > 0
}

// FreshDatabase creates an empty database on the server of
// KASSA_TEST_DATABASE_URL, created with createOpts (an encoding, a
// template) and given settings (ALTER DATABASE … SET, as an operator or a
// managed service does), dropped when the test ends, and returns its URL.
func FreshDatabase(t testing.TB, createOpts string, settings ...string) string {
	t.Helper()
	base := URL(t)
	name := create(t, base, "DATABASE", createOpts, "WITH (FORCE)")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	for _, s := range settings {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" SET "+s); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// create makes a kind ("SCHEMA", "DATABASE") of a fresh random name on the
// server of base, with createOpts, dropped (with dropOpts) when the test
// ends, and returns the name.
func create(t testing.TB, base, kind, createOpts, dropOpts string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "kassa_t_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if kind == "SCHEMA" {
		// Migration 13 makes btree_gin where it is missing, in the schema
		// migrating: in a test's, dropping that schema (CASCADE) would drop
		// the extension and with it the index of every other test's schema
		// then running. Made once in public; where it cannot be, the
		// migrations make it or go on without it.
		conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
	}
	if _, err := conn.Exec(ctx, "CREATE "+kind+" "+name+" "+createOpts); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), base); err == nil {
			c.Exec(context.Background(), "DROP "+kind+" "+name+" "+dropOpts)
			c.Close(context.Background())
		}
	})
	return name
}
