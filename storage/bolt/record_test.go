package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
	"github.com/kassahq/kassa/storage"
)

// An order is stored as its meta record then json.Marshal's bytes of it,
// HTML escapes included, however the record is put together; the JSON the
// decoded-order cache is told of is those bytes.
func TestOrderRecordIsMetaThenJSON(t *testing.T) {
	_, f, s := openFresh(t)
	defer s.Close()
	o := f.Order(t, ordertest.Line("Tiles <b>&</b> grout Å", 2, 12500, 2500), ordertest.Line("Kakel", 1, 5000, 1200))
	o.MerchantID = "m1"
	o.Metadata = map[string]string{"note": "a < b & c > d"}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx storage.Tx) error { return tx.CreateOrder(o) }); err != nil {
		t.Fatal(err)
	}
	check := func(o *order.Order) {
		t.Helper()
		m := metaOf(o)
		js, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		want := encodeOrder(&m, js)
		err = s.View(ctx, func(stx storage.Tx) error {
			got := stx.(*tx).get(bOrders, orderKey(o.MerchantID, o.ID))
			if !bytes.Equal(got, want) {
				t.Fatalf("stored record of version %d:\n%q\nwant\n%q", o.Version, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		v, gotJS, err := marshalOrder(&m, o)
		if err != nil || !bytes.Equal(v, want) || !bytes.Equal(gotJS, js) || cap(v) > len(v)+len(v)/8+64 {
			t.Fatalf("marshalOrder: %v, %d bytes (cap %d), JSON equal %v", err, len(v), cap(v), bytes.Equal(gotJS, js))
		}
	}
	check(o)
	err := s.Update(ctx, func(tx storage.Tx) error {
		got, err := tx.GetOrder("m1", o.ID)
		if err != nil {
			return err
		}
		got.MerchantReference = "PO <42>"
		if err := tx.UpdateOrder(got); err != nil {
			return err
		}
		o = got
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check(o)
}
