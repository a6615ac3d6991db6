package postgres_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// icuDatabase returns the URL of a fresh database whose default collation
// is the ICU locale given (PostgreSQL 15 and later, built with ICU), or
// skips the test where the server cannot make one.
func icuDatabase(t *testing.T, locale string) string {
	t.Helper()
	if !pgtest.ICUDatabases(t) {
		t.Skip("the server cannot make a database with an ICU default collation")
	}
	return pgtest.FreshDatabase(t, "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '"+locale+"' LOCALE 'C.UTF-8'")
}

// TestMerchantsAreListedByIDOnAnyCollation: ListMerchants returns every
// merchant by id (storage.Tx), in the id's bytes as bbolt and the memory
// store order them, whatever the database's collation. On a Danish database
// "m-aa" (read as "m-å") came last, and on one collating digits as numbers
// "m-9" came before "m-10"; case and punctuation weigh differently too.
func TestMerchantsAreListedByIDOnAnyCollation(t *testing.T) {
	ids := []string{"m-b", "m-ab", "m-9", "m-aa", "m-10", "m-B", "m_a", "m-å"}
	want := slices.Sorted(slices.Values(ids))
	for _, locale := range []string{"da-DK", "sv-SE-u-kn-true", "en-US-u-ka-shifted"} {
		t.Run(locale, func(t *testing.T) {
			s := open(t, icuDatabase(t, locale))
			ctx := context.Background()
			err := s.Update(ctx, func(tx storage.Tx) error {
				for _, id := range ids {
					if err := tx.PutMerchant(&storage.Merchant{ID: id, Name: id, ClientID: "c" + id}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			err = s.View(ctx, func(tx storage.Tx) error {
				ms, err := tx.ListMerchants()
				for _, m := range ms {
					got = append(got, m.ID)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("merchants listed %q, want %q", got, want)
			}
		})
	}
}
