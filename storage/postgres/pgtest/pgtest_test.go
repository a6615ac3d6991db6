package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestLocaleOptionsNameTheProvider: a database's locale copied onto a new
// one names its provider, since CREATE DATABASE takes the one left out
// from the template (template0): on a cluster made with ICU as its
// default, the tests of a URL database of libc's C.UTF-8 ran on ICU.
func TestLocaleOptionsNameTheProvider(t *testing.T) {
	libc := map[string]any{"datlocprovider": "c", "datcollate": "C.UTF-8", "datctype": "C.UTF-8"}
	icu := map[string]any{"datlocprovider": "i", "datcollate": "C.UTF-8", "datctype": "C.UTF-8", "daticulocale": "sv-SE"}
	icu17 := map[string]any{"datlocprovider": "i", "datcollate": "C.UTF-8", "datctype": "C.UTF-8", "datlocale": "da-DK", "daticurules": "&a<b"}
	builtin := map[string]any{"datlocprovider": "b", "datcollate": "C", "datctype": "C", "datlocale": "C.UTF-8"}
	for _, c := range []struct {
		name      string
		cur, tmpl map[string]any
		want      string
	}{
		{"same", icu, icu, ""},
		{"libc on an ICU cluster", libc, icu, " TEMPLATE template0 LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' LOCALE_PROVIDER libc"},
		{"ICU on a libc cluster", icu, libc, " TEMPLATE template0 LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'sv-SE'"},
		{"ICU with rules (17)", icu17, libc, " TEMPLATE template0 LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'da-DK' ICU_RULES '&a<b'"},
		{"builtin", builtin, libc, " TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8'"},
	} {
		if got := localeOptions(c.cur, c.tmpl); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSameLocaleCopiesTheLocale: on the server, a database made with
// sameLocale's options of an ICU database has that database's provider and
// locale, whatever the server's version calls its columns.
func TestSameLocaleCopiesTheLocale(t *testing.T) {
	base := URL(t)
	ctx := context.Background()
	row := func(u string) map[string]any {
		t.Helper()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var m map[string]any
		if err := conn.QueryRow(ctx, `SELECT to_jsonb(d) FROM pg_database d WHERE datname = current_database()`).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	urlOf := func(name string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		return u.String()
	}
	if !ICUDatabases(t) {
		t.Skip("the server cannot make a database with an ICU default collation")
	}
	src := urlOf(create(t, base, "DATABASE", "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'da-DK' LOCALE 'C.UTF-8'", "WITH (FORCE)"))
	c, err := pgx.Connect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	opts, _, err := sameLocale(ctx, c)
	c.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, got := row(src), row(urlOf(create(t, base, "DATABASE", opts, "WITH (FORCE)")))
	for _, k := range []string{"datlocprovider", "datcollate", "datctype", "daticulocale", "datlocale", "daticurules"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("%s: %v, want %v (options %q)", k, got[k], want[k], opts)
		}
	}
	if !strings.Contains(fmt.Sprint(got["daticulocale"], got["datlocale"]), "da-DK") {
		t.Errorf("the copy's ICU locale: %v %v", got["daticulocale"], got["datlocale"])
	}
}

// TestPackageDatabaseHasTheURLsLocale: the package's database is made with
// the locale of the database KASSA_TEST_DATABASE_URL names (its provider,
// collation, character classes and ICU locale), so that a URL naming a
// Danish ICU database tests that collation; one with template1's locale is
// made from template1, as before (sameLocale says nothing). packageDatabase
// itself, not only sameLocale: without its options the database took
// template1's locale.
func TestPackageDatabaseHasTheURLsLocale(t *testing.T) {
	ctx := context.Background()
	cases := map[string]string{"template1's": "", "libc C": "TEMPLATE template0 LOCALE 'C'"}
	if ICUDatabases(t) {
		cases["ICU da-DK"] = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'da-DK' LOCALE 'C.UTF-8'"
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			src := FreshDatabase(t, opts)
			conn, err := pgx.Connect(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			got, _, err := sameLocale(ctx, conn)
			if err != nil || (opts == "") != (got == "") {
				t.Fatalf("sameLocale: %q, %v; want options only for a locale not template1's", got, err)
			}
			made, err := packageDatabase(src)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(made)
			t.Cleanup(func() { // kept for the next run, were it a package's
				if c, err := pgx.Connect(ctx, URL(t)); err == nil {
					c.Exec(ctx, "DROP DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)")
					c.Close(ctx)
				}
			})
			want, have := locale(t, conn, src), locale(t, conn, made)
			if want != have {
				t.Fatalf("the package's database has the locale %s; want the URL's, %s", have, want)
			}
		})
	}
}

// locale is the locale of the database dbURL names, as pg_database holds it.
func locale(t *testing.T, conn *pgx.Conn, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := conn.QueryRow(context.Background(), `SELECT to_jsonb(d) FROM pg_database d WHERE datname = $1`,
		strings.TrimPrefix(u.Path, "/")).Scan(&d); err != nil {
		t.Fatal(err)
	}
	var s string
	for _, k := range []string{"datlocprovider", "datcollate", "datctype", "daticulocale", "datlocale", "daticurules"} {
		s += fmt.Sprintf("%s=%v ", k, d[k])
	}
	return s
}

// TestPackageDatabaseFollowsTheURLsLocale: the package's database is kept
// for the next run, so one made while the URL's database had another locale
// (dropped and made again with a Danish ICU collation, say, to run the
// tests on it) was taken again as it was: the tests ran on the old
// collation, and passed or failed for it, not for the one the URL names.
func TestPackageDatabaseFollowsTheURLsLocale(t *testing.T) {
	ctx := context.Background()
	before, after := "TEMPLATE template0 LOCALE_PROVIDER libc LOCALE 'C'", "TEMPLATE template0 LOCALE_PROVIDER libc LOCALE 'C.UTF-8'"
	if ICUDatabases(t) {
		after = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'da-DK' LOCALE 'C.UTF-8'"
	}
	src := FreshDatabase(t, before)
	u, err := url.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	conn, err := pgx.Connect(ctx, URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	made := func() string {
		t.Helper()
		m, err := packageDatabase(src)
		if err != nil {
			t.Fatal(err)
		}
		mu, _ := url.Parse(m)
		t.Cleanup(func() { // kept for the next run, were it a package's
			conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{strings.TrimPrefix(mu.Path, "/")}.Sanitize()+" WITH (FORCE)")
		})
		return m
	}
	first := made()
	if want, have := locale(t, conn, src), locale(t, conn, first); want != have {
		t.Fatalf("the package's database has the locale %s; want the URL's, %s", have, want)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+after); err != nil {
		t.Fatal(err)
	}
	second := made()
	if want, have := locale(t, conn, src), locale(t, conn, second); want != have {
		t.Fatalf("after the URL's database was made again with another locale, the package's database has %s; want the URL's, %s", have, want)
	}
	// The first is still the one for the first locale: switching back and
	// forth makes nothing again.
	if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+before); err != nil {
		t.Fatal(err)
	}
	if again := made(); again != first {
		t.Fatalf("back on the first locale, the package's database is %s; want the first one, %s", again, first)
	}
}
