package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/storage"
	"github.com/kassahq/kassa/storage/postgres/pgtest"
)

// TestReadOnlyDatabaseIsUnavailable: a write refused because the database
// is read-only (a standby the address points at after a failover, or
// default_transaction_read_only) is store_unavailable (503, nothing was
// done, retry), not an internal error.
func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	// One connection, made read-only as a standby's would be.
	ro, err := Open(context.Background(), pgtest.FreshSchema(t), Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.pool.Exec(context.Background(), "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	err = ro.Update(context.Background(), func(tx storage.Tx) error {
		return tx.PutMerchant(&storage.Merchant{ID: "m1", Name: "m", ClientID: "c1", CreatedAt: time.Now()})
	})
	if !fault.Is(err, fault.Unavailable) {
		t.Fatalf("write on a read-only database: %v (kind %v), want unavailable", err, fault.KindOf(err))
	}
}
