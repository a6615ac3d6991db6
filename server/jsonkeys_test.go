package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kassahq/kassa/capture"
	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/order/ordertest"
)

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name, body string
		dst        any
		fields     []string
	}{
		{"plain", `{"orderLines":[{"id":"l1"}],"totalCaptureAmount":100}`, &capture.PartialRequest{}, nil},
		{"unknown field ignored", `{"totalCaptureAmount":1,"comment":{"x":[1,{"y":2}]}}`, &capture.PartialRequest{}, nil},
		{"escaped key that is a field", `{"totalCaptureAmount":1,"orderLines":[{"\u0069d":"l1"}]}`, &capture.PartialRequest{}, nil},
		{"strings holding braces and quotes", `{"orderLines":[{"description":"a \"}\" ,{","quantity":1}]}`, &capture.PartialRequest{}, nil},
		{"same key in two objects", `{"orderLines":[{"id":"a"},{"id":"b"}]}`, &capture.PartialRequest{}, nil},
		{"duplicate amount", `{"orderLines":[{"id":"l1"}],"totalCaptureAmount":1,"totalCaptureAmount":20000}`, &capture.PartialRequest{},
			[]string{"totalCaptureAmount"}},
		{"duplicate written with an escape", `{"totalCaptureAmount":1,"totalCaptureAmoun\u0074":2}`, &capture.PartialRequest{}, []string{"totalCaptureAmount"}},
		{"duplicate in a line", `{"orderLines":[{"id":"a","quantity":1,"quantity":5}]}`, &capture.PartialRequest{}, []string{"orderLines[0].quantity"}},
		{"duplicate metadata key", `{"metadata":{"a":"1","a":"2"}}`, &order.CreateRequest{}, []string{"metadata.a"}},
		{"duplicate under an unknown field", `{"extra":{"a":1,"a":2}}`, &capture.PartialRequest{}, []string{"extra.a"}},
		{"case-folded field", `{"ORDERLINES":[{"ID":"l1"}],"TotalCaptureAmount":20000}`, &capture.PartialRequest{},
			[]string{"ORDERLINES", "ORDERLINES[0].ID", "TotalCaptureAmount"}},
		{"metadata keys keep their case", `{"metadata":{"Ref":"1","ref":"2"}}`, &order.CreateRequest{}, nil},
		{"null metadata value", `{"metadata":{"costCenter":null,"k":"v"}}`, &order.CreateRequest{}, []string{"metadata.costCenter"}},
		{"null metadata value after spaces", `{"metadata":{"a" : 	null ,"null":"null"}}`, &order.CreateRequest{}, []string{"metadata.a"}},
		{"null metadata", `{"metadata":null}`, &order.CreateRequest{}, nil},
		{"null selection of a full capture", `{"orderLines": null}`, &capture.FullRequest{}, []string{"orderLines"}},
		{"null amount of a full capture", `{"totalCaptureAmount":null}`, &capture.FullRequest{}, nil},
		{"NUL in a key", `{"totalCaptureAmount\u0000":1,"totalCaptureAmount":2}`, &capture.PartialRequest{}, []string{"totalCaptureAmount\x00"}},
		{"NUL in a key of a line", `{"orderLines":[{"\u0000id":"x","id":"l1"}]}`, &capture.PartialRequest{}, []string{"orderLines[0].\x00id"}},
		{"NUL in a metadata key is the operation's to name", `{"metadata":{"a\u0000":"x"}}`, &order.CreateRequest{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fault.Fields
			checkKeys(&f, []byte(tt.body), reflect.TypeOf(tt.dst))
			if got := ordertest.FieldsOf(f.Err()); !slices.Equal(got, tt.fields) {
				t.Fatalf("findings %q, want %q (%v)", got, tt.fields, f.List())
			}
		})
	}
}

func TestCheckKeysNamesTheField(t *testing.T) {
	var f fault.Fields
	checkKeys(&f, []byte(`{"totalcaptureamount":1}`), reflect.TypeOf(&capture.PartialRequest{}))
	if l := f.List(); len(l) != 1 || !strings.Contains(l[0].Message, "totalCaptureAmount") {
		t.Fatalf("findings %v, want one naming totalCaptureAmount", l)
	}
}

func BenchmarkCheckKeysOrder(b *testing.B) {
	body := []byte(orderBody)
	t := reflect.TypeOf(&order.CreateRequest{})
	for b.Loop() {
		var f fault.Fields
		checkKeys(&f, body, t)
	}
}

// Through the router: an amount given twice, or under a case-folded name, is
// refused before anything is captured, though encoding/json would take it.
func TestAmbiguousKeysAreRefused(t *testing.T) {
	e := newSessionEnv(t)
	o := e.order("5560000001", "invoice")
	id := o["id"].(string)
	line := o["uncaptured"].(map[string]any)["orderLines"].([]any)[0].(map[string]any)
	lineID, total := line["id"].(string), int64(line["totalAmount"].(float64))
	for _, tt := range []struct{ body, field string }{
		{`{"orderLines":[{"id":"` + lineID + `"}],"totalCaptureAmount":1,"totalCaptureAmount":` + fmt.Sprint(total) + `}`, "totalCaptureAmount"},
		{`{"ORDERLINES":[{"id":"` + lineID + `"}],"totalCaptureAmount":` + fmt.Sprint(total) + `}`, "ORDERLINES"},
		{`{"orderLines":[{"id":"` + lineID + `"}],"totalCaptureAmount\u0000":1,"totalCaptureAmount":` + fmt.Sprint(total) + `}`, "totalCaptureAmount\x00"},
	} {
		code, _, b := e.req("POST", "/v1/orders/"+id+"/partialcapture", tt.body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := b["errors"].([]any)[0].(map[string]any)["field"]; f != tt.field {
			t.Fatalf("%s: field %v, want %s", tt.body, f, tt.field)
		}
	}
	_, _, o = e.req("GET", "/v1/orders/"+id, "", e.auth, nil)
	if len(o["captured"].([]any)) != 0 {
		t.Fatalf("captured after the refusals: %v", o["captured"])
	}
}

// Many keys: every duplicate is still found past the point where the set
// changes from a slice to a map.
func TestCheckKeysManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&b, `"k%d":0,`, i)
	}
	b.WriteString(`"k3":1,"k99":1}`)
	var f fault.Fields
	checkKeys(&f, []byte(b.String()), reflect.TypeOf(&capture.PartialRequest{}))
	if got := ordertest.FieldsOf(f.Err()); !slices.Equal(got, []string{"k3", "k99"}) {
		t.Fatalf("findings %q, want k3 and k99", got)
	}
}

// Input that is not JSON ends the walk instead of looping; only valid JSON
// reaches checkKeys, but a walk must never hang.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`[}`, `{"a":[}`, `{"a"`, `"`, `{"a":1,"a":2}`, `[{"x":1},{"x":2,"x":3}]`, `{"metadata":{"a"`, `{"metadata":{"a":`} {
		f.Add(s)
	}
	t := reflect.TypeOf(&order.CreateRequest{})
	f.Fuzz(func(_ *testing.T, body string) {
		var fs fault.Fields
		checkKeys(&fs, []byte(body), t)
	})
}

func BenchmarkCheckKeysMillionKeyBody(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 95_000 {
		fmt.Fprintf(&sb, `"%d":0,`, i)
	}
	sb.WriteString(`"x":0}`)
	body := []byte(sb.String())
	t := reflect.TypeOf(&capture.PartialRequest{})
	for b.Loop() {
		var f fault.Fields
		checkKeys(&f, body, t)
	}
}

// A 50-line order body: the key check runs on every request body, beside
// json.Unmarshal of the same bytes.
func BenchmarkCheckKeys50Lines(b *testing.B) {
	var ls []string
	for i := range 50 {
		ls = append(ls, fmt.Sprintf(`{"description":"Item %d","quantity":1,"unitPrice":%d,"vat":2500,"reference":"SKU-%d","type":"physical"}`, i, 1000+i, i))
	}
	body := []byte(`{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[` + strings.Join(ls, ",") + `]}`)
	t := reflect.TypeOf(&order.CreateRequest{})
	b.Run("checkKeys", func(b *testing.B) {
		for b.Loop() {
			var f fault.Fields
			checkKeys(&f, body, t)
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		for b.Loop() {
			var r order.CreateRequest
			json.Unmarshal(body, &r)
		}
	})
}

// A body of null is no object, as [] or 0 is not: decoded it would read as
// the body left out, which on a full capture captures every remaining line.
func TestNullBodyIsRefused(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	open := e.order("5560000001", "invoice")["id"].(string)
	for _, rt := range []string{"/v1/orders/" + open + "/capture", "/v1/orders/" + id + "/refund/" + capID, "/sandbox/v1/merchants", "/v1/orders/" + open + "/customer"} {
		for _, body := range []string{`null`, " null\n"} {
			code, _, b := e.req("POST", rt, body, e.auth, nil)
			wantProblem(t, code, b, 400, "validation_failed")
			if f := problemFields(b); f != "body" {
				t.Fatalf("%s %q: fields %s, want body", rt, body, f)
			}
		}
	}
	if o := e.get(open); len(o["captured"].([]any)) != 0 {
		t.Fatalf("captured after the refusals: %v", o["captured"])
	}
	if o := e.get(id); len(o["refunded"].([]any)) != 0 {
		t.Fatalf("refunded after the refusals: %v", o["refunded"])
	}
}

// Only JSON's whitespace (RFC 8259) around nothing is a body left out: a
// body of other Unicode spaces is not JSON, and read as left out it captured
// every remaining line.
func TestBodyOfOtherSpacesIsMalformed(t *testing.T) {
	e := newSessionEnv(t)
	id := e.order("5560000001", "invoice")["id"].(string)
	for _, body := range []string{"\u00a0", "\u0085", "\u3000", "\u2028", "\ufeff"} {
		code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", body, e.auth, nil)
		wantProblem(t, code, b, 400, "malformed_json")
	}
	if o := e.get(id); len(o["captured"].([]any)) != 0 {
		t.Fatalf("captured after the refusals: %v", o["captured"])
	}
	code, _, b := e.req("POST", "/v1/orders/"+id+"/capture", " \t\r\n", e.auth, nil)
	if code != 200 || len(b["captured"].([]any)) != 1 {
		t.Fatalf("capture with a body of JSON whitespace: %d %v", code, b)
	}
}

// A partial refund's body sent to the full refund's route is refused, not
// read as a full refund with unknown fields: it refunded the whole capture.
func TestFullRefundRefusesAPartialRefundsBody(t *testing.T) {
	e := newSessionEnv(t)
	id, capID, _ := e.capturedInvoice()
	rt := "/v1/orders/" + id + "/refund/" + capID
	for body, fields := range map[string]string{
		`{"orderLines":[{"description":"Grout","quantity":1,"unitPrice":100,"vat":2500}],"totalRefundAmount":100}`: "orderLines,totalRefundAmount",
		`{"totalRefundAmount":100,"note":"n"}`: "totalRefundAmount",
		`{"orderLines":[]}`:                    "orderLines",
		`{"note":7,"totalRefundAmount":100}`:   "note,totalRefundAmount",
	} {
		code, _, b := e.req("POST", rt, body, e.auth, nil)
		wantProblem(t, code, b, 400, "validation_failed")
		if f := problemFields(b); f != fields {
			t.Fatalf("%s: fields %s, want %s", body, f, fields)
		}
	}
	if o := e.get(id); len(o["refunded"].([]any)) != 0 {
		t.Fatalf("refunded after the refusals: %v", o["refunded"])
	}
	code, _, b := e.req("POST", rt, `{"note":"all of it","totalRefundAmount":null}`, e.auth, nil)
	if code != 200 || len(b["refunded"].([]any)) != 1 {
		t.Fatalf("full refund: %d %v", code, b)
	}
}
