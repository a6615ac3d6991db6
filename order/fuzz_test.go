package order_test

import (
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

// FuzzValidateCreate decodes arbitrary JSON into a CreateRequest and validates
// it: no panic, and either a validation error naming at least one field or
// lines whose amounts and sums respect the spec's bounds.
func FuzzValidateCreate(f *testing.F) {
	for _, s := range []string{
		`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[{"description":"a","quantity":2,"unitPrice":12500,"vat":2500}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv-SE","vatMode":"exclVat","orderLines":[{"description":"a","quantity":1,"totalAmount":1000000000,"vat":10000}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv","totalOrderAmount":12500,"totalOrderVatAmount":2500}`,
		`{"country":"SE","currency":"SEK","locale":"sv","orderLines":[{"description":"a","quantity":99999999,"unitPrice":-1000000000,"unitDiscountAmount":1000000000}]}`,
		`{"country":"SE","currency":"SEK","locale":"sv","orderLines":[{"description":"a","quantity":3,"totalAmount":-7,"unitDiscountAmount":-1000000000,"vat":2500,"totalVatAmount":-1}]}`,
		`{"orderLines":[{}],"metadata":{"":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r order.CreateRequest
		if json.Unmarshal(b, &r) != nil {
			return
		}
		for _, fromToken := range []bool{false, true} {
			lines, mode, err := order.ValidateCreate(&r, fromToken, &ordertest.IDs{})
			if err != nil {
				var fe *fault.Error
				if fault.KindOf(err) != fault.Invalid || !asFault(err, &fe) || len(fe.Fields) == 0 {
					t.Fatalf("error %v is not a validation error naming fields", err)
				}
				continue
			}
			if !mode.Valid() || len(lines) == 0 || len(lines) > order.MaxLines {
				t.Fatalf("mode %q, %d lines", mode, len(lines))
			}
			for _, l := range lines {
				if l.Quantity < 1 || l.Quantity > order.MaxQuantity || abs(l.TotalAmount) > order.MaxLineAmount ||
					abs(l.TotalVatAmount) > order.MaxLineAmount || abs(l.UnitPrice) > order.MaxLineAmount || l.Vat < 0 || l.Vat > 10000 {
					t.Fatalf("line out of bounds: %+v", l)
				}
			}
			s := order.SumLines(lines, mode)
			if s.Gross < 0 || s.Gross > order.MaxTotal || s.Gross != s.Net+s.VAT {
				t.Fatalf("sums out of bounds: %+v", s)
			}
		}
	})
}

func asFault(err error, fe **fault.Error) bool {
	e, ok := err.(*fault.Error)
	*fe = e
	return ok
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
