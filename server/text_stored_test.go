package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kassahq/kassa/storage"
)

// storeLineText rewrites the description of the uncaptured lines of order
// id in the store: text an older build took before CheckText refused
// hidden control characters.
func storeLineText(t *testing.T, st storage.Store, merchant, id, desc string) {
	t.Helper()
	err := st.Update(context.Background(), func(tx storage.Tx) error {
		o, err := tx.GetOrder(merchant, id)
		if err != nil {
			return err
		}
		for i := range o.Uncaptured.Lines {
			o.Uncaptured.Lines[i].Description = desc
		}
		return tx.UpdateOrder(o)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A line stored before the rule on hidden control characters is captured
// by id with the line as Get order shows it: the text is the stored line's,
// not new text, and a capture of it must not be refused for it.
func TestCaptureByIDOfLineStoredBeforeTheTextRule(t *testing.T) {
	e, st, _ := kakelEnv(t)
	o := e.order("5560000001", "invoice")
	id, merchant := o["id"].(string), o["merchantId"].(string)
	storeLineText(t, st, merchant, id, "Tiles\u2028(grey)")
	o = e.get(id)
	ls := lines(o["uncaptured"])
	first, _ := json.Marshal(map[string]any{"orderLines": ls[:1], "totalCaptureAmount": ls[0].(map[string]any)["totalAmount"]})
	code, _, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", string(first), e.auth, nil)
	if code != 200 {
		t.Fatalf("partial capture of a stored line as Get order shows it: %d %v", code, b)
	}
	// New text is still refused.
	code, _, b = e.req("POST", "/v1/orders/"+id+"/partialcapture",
		`{"totalCaptureAmount":100,"orderLines":[{"description":"Grout\u2028","quantity":1,"unitPrice":100,"vat":2500}]}`, e.auth, nil)
	if code != 400 {
		t.Fatalf("a new line with U+2028: %d %v, want 400", code, b)
	}
}
