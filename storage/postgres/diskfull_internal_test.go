package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/storage"
)

// TestDiskFullIsUnavailable: a write the database's disk has no room for
// (53100 disk_full, "could not extend file …: No space left on device") is
// store_unavailable, 503 with nothing done, as the bbolt store answers its
// own full disk, and not an internal error: the error aborted the
// transaction, and the same write succeeds once space is freed. Triggers
// raise the error the database raises when a table cannot grow, both on a
// statement sent at once and on an order update held back for the commit's
// round trip.
func TestDiskFullIsUnavailable(t *testing.T) {
	s := openFresh(t, 2)
	ctx := context.Background()
	o := &order.Order{ID: "o1", MerchantID: "m1", CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()}
	if err := s.Update(ctx, func(st storage.Tx) error { return st.CreateOrder(o) }); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
		END $$`,
		`CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON merchants FOR EACH ROW EXECUTE FUNCTION disk_full()`,
		`CREATE TRIGGER disk_full BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION disk_full()`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	merchant := func(st storage.Tx) error {
		return st.PutMerchant(&storage.Merchant{ID: "m1", Name: "m", ClientID: "c1", CreatedAt: time.Now()})
	}
	update := func(st storage.Tx) error {
		got, err := st.GetOrder("m1", "o1")
		if err != nil {
			return err
		}
		return st.UpdateOrder(got)
	}
	for name, write := range map[string]func(storage.Tx) error{"sent at once": merchant, "held for the commit": update} {
		err := s.Update(ctx, write)
		var pe *pgconn.PgError
		if fault.KindOf(err) != fault.Unavailable || fault.CodeOf(err) != "store_unavailable" || !errors.As(err, &pe) || pe.Code != "53100" {
			t.Errorf("write %s on a full disk: %v (kind %v, code %q), want store_unavailable wrapping 53100", name, err, fault.KindOf(err), fault.CodeOf(err))
		}
	}
	if _, err := s.pool.Exec(ctx, `DROP FUNCTION disk_full() CASCADE`); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(storage.Tx) error{"sent at once": merchant, "held for the commit": update} {
		if err := s.Update(ctx, write); err != nil {
			t.Errorf("write %s once space is freed: %v", name, err)
		}
	}
	if err := s.View(ctx, func(st storage.Tx) error {
		got, err := st.GetOrder("m1", "o1")
		if err == nil && got.Version != 2 {
			t.Errorf("order version %d after one update that fitted, want 2", got.Version)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
