package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestBodyChecksAreBoundedInWork: a body within the limit is refused with
// bounded work and a bounded answer, however it is built. Found by a probe of
// a hostile client: 700 KB of `[1,1,…]` as orderLines was answered with a
// 21 MB problem document (one finding per element) after 330 MB of
// allocations and 0.4 s, and 1 MiB of `{}` lines was decoded into 349 000
// lines (190 MB) before the 1 000-line limit refused them; with
// --max-body-mb 64 either took gigabytes of one request. Each was measured on
// the server's own process (the client's reading is not counted apart, so
// the bound leaves room for it).
func TestBodyChecksAreBoundedInWork(t *testing.T) {
	e := newEnv(t, false) // the OpenAPI check would decode the answer too
	const limit = 1 << 20
	fill := func(head, elem, sep, tail string) string {
		n := (limit - len(head) - len(tail)) / (len(elem) + len(sep))
		return head + strings.Repeat(elem+sep, n-1) + elem + tail
	}
	create := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[`
	for _, c := range []struct {
		name, body string
		field      string // a field the answer names
	}{
		{"an array of wrong-typed lines", fill(create, "1", ",", "]}"), "orderLines"},
		{"an array of empty lines", fill(create, "{}", ",", "]}"), "orderLines"},
		{"an array under an ignored field", fill(`{"x":[`, "0", ",", "]}"), "x"},
		{"wrong-typed fields in lines", fill(create, `{"quantity":"x"}`, ",", "]}"), "orderLines"},
		{"a key given again and again", fill(`{`, `"a":1`, ",", "}"), "a"},
		{"arrays of arrays beside a wrong-typed field", fill(`{"country":1,"x":[`, "["+strings.Repeat("0,", 9000)+"0]", ",", "]}"), "country"},
		{"an object of many keys", manyKeys(`{"country":"SE","currency":"SEK","locale":"sv-SE","totalOrderAmount":100,"metadata":{`, limit), "metadata"},
		{"a body of many keys", manyKeys(`{`, limit), "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.body) > limit {
				t.Fatalf("body of %d bytes", len(c.body))
			}
			r, _ := http.NewRequest("POST", e.ts.URL+"/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", strings.NewReader(c.body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", e.auth)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"code":"validation_failed"`) || !strings.Contains(string(b), `"field":"`+c.field) {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if len(b) > 128<<10 {
				t.Errorf("answered with %d bytes, want at most 128 KiB", len(b))
			}
			if alloc > 8<<20 {
				t.Errorf("allocated %d MB for a body of %d bytes, want at most 8", alloc>>20, len(c.body))
			}
			t.Logf("%d bytes answered, %d MB allocated", len(b), alloc>>20)
		})
	}
}

// manyKeys is head and as many distinct keys as fit in limit bytes, closed.
func manyKeys(head string, limit int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len() < limit-30; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":""`, i)
	}
	b.WriteString(strings.Repeat("}", strings.Count(head, "{")))
	return b.String()
}

// TestBodyFindingsAreCapped: a body with more findings than maxFindings, each
// array within bounds, is answered with the first maxFindings and says so.
func TestBodyFindingsAreCapped(t *testing.T) {
	e := newSessionEnv(t)
	body := `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[` +
		strings.Repeat(`{"description":"x","quantity":"1","unitPrice":"100","vat":2500},`, 1500) + `{}]}`
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	errs := b["errors"].([]any)
	if len(errs) != maxFindings || b["detail"] != "the request has invalid fields; the first 1000 are named" {
		t.Fatalf("%d findings, detail %q", len(errs), b["detail"])
	}
	first, _ := json.Marshal(errs[0])
	if string(first) != `{"field":"orderLines[0].quantity","message":"must be an integer"}` && string(first) != `{"field":"orderLines[0].unitPrice","message":"must be an integer"}` {
		t.Fatalf("first finding %s", first)
	}
	// One fewer than the cap is named whole, with the usual detail.
	body = `{"country":"SE","currency":"SEK","locale":"sv-SE","orderLines":[` +
		strings.Repeat(`{"description":"x","quantity":"1","unitPrice":100,"vat":2500},`, 998) + `{"description":"x","quantity":"1","unitPrice":100,"vat":2500}]}`
	code, _, b = e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	wantProblem(t, code, b, 400, "validation_failed")
	if n := len(b["errors"].([]any)); n != 999 || b["detail"] != "the request has invalid fields" {
		t.Fatalf("%d findings, detail %q", n, b["detail"])
	}
}
