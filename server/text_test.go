package server

import (
	"errors"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/kassahq/kassa/fault"
)

func TestValidText(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{`"plain"`, true},
		{`"åäö \u00e5"`, true},
		{`"\ud83d\ude00"`, true}, // a pair: 😀
		{`"\uD83D\uDE00"`, true},
		{`"\\ud800"`, true}, // an escaped backslash, then text
		{`"\ufffd"`, true},  // the replacement character itself, sent on purpose
		{`"\ud800"`, false},
		{`"\ude00"`, false},
		{`"\ud83d x"`, false},
		{`"\ud83d\u0041"`, false},
		{"\"\xc3\x28\"", false},
		{"\"\xff\xfe\"", false},
	} {
		if got := validText([]byte(c.raw)); got != c.want {
			t.Errorf("validText(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}

func TestCheckTextNamesEveryField(t *testing.T) {
	body := "{\"reference\":\"\xc3\x28\",\"orderLines\":[{\"description\":\"ok\"},{\"description\":\"\\ud800\"}],\"metadata\":{\"k\\udc00\":\"v\"},\"fine\":\"\\ud83d\\ude00\"}"
	err := checkText([]byte(body))
	if err == nil {
		t.Fatal("accepted")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != "validation_failed" {
		t.Fatalf("got %v", err)
	}
	var fields []string
	for _, f := range fe.Fields {
		fields = append(fields, f.Field)
	}
	if got := strings.Join(fields, ","); got != "reference,orderLines[1].description,metadata" {
		t.Fatalf("fields %s", got)
	}
	if err := checkText([]byte(`{"a":"\u00e5","b":["\ud83d\ude00"]}`)); err != nil {
		t.Fatalf("valid text refused: %v", err)
	}
}

func TestAmbiguousPath(t *testing.T) {
	for raw, want := range map[string]bool{
		"/v1/orders/abc/capture":    false,
		"/v1/orders/abc%2Fcapture":  true,
		"/v1/orders/abc%2fcapture":  true,
		"/v1/orders//abc":           true,
		"/v1/orders/a%20b":          false,
		"/v1/orders?cursor=a%2Fb":   false,
		"/documents/m/o/l?sig=a%2F": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := ambiguousPath(u); got != want {
			t.Errorf("ambiguousPath(%s) = %v, want %v", raw, got, want)
		}
	}
}

// The exact walk runs only for suspicious bodies, and its memory must not
// grow with the square of the nesting depth (a small body could otherwise
// exhaust the server).
func TestCheckTextDeepNestingStaysSmall(t *testing.T) {
	for _, depth := range []int{9000, 20000} { // the second is past the decoder's limit
		body := `{"a":"\ud800","b":` + strings.Repeat("[", depth) + `"\ud800"` + strings.Repeat("]", depth) + `}`
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := checkText([]byte(body))
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
			t.Errorf("depth %d: the text check allocated %d MB", depth, alloc>>20)
		}
		if depth == 9000 {
			var fe *fault.Error
			if !errors.As(err, &fe) || len(fe.Fields) != 2 || fe.Fields[0].Field != "a" || !strings.HasPrefix(fe.Fields[1].Field, "b[0][0]") {
				t.Fatalf("depth %d: %v", depth, err)
			}
		}
	}
}

// TestHiddenControlCharactersRefused: text that would show something other
// than what is stored (a control character, a line separator, a
// bidirectional override) is refused with its path, as NUL is; tab and line
// breaks, which a multi-line address or description may hold, are kept.
func TestHiddenControlCharactersRefused(t *testing.T) {
	e := newSessionEnv(t)
	for _, c := range []string{`\u0001`, `\u001b`, `\u007f`, `\u0085`, `\u009b`, `\u2028`, `\u2029`, `\u202e`, `\u202a`, `\u2066`, `\u2069`} {
		for field, body := range map[string]string{
			"reference":                 strings.Replace(orderBody, `"PO-1"`, `"PO`+c+`1"`, 1),
			"orderLines[0].description": strings.Replace(orderBody, `"Tiles"`, `"Til`+c+`es"`, 1),
			"metadata.k":                strings.Replace(orderBody, `"storeId":"s1",`, `"storeId":"s1","metadata":{"k":"v`+c+`"},`, 1),
			"metadata":                  strings.Replace(orderBody, `"storeId":"s1",`, `"storeId":"s1","metadata":{"k`+c+`":"v"},`, 1),
		} {
			code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
			wantProblem(t, code, b, 400, "validation_failed")
			if got := problemFields(b); got != field {
				t.Errorf("%s in %s: fields %s", c, field, got)
			}
		}
	}
	body := strings.Replace(orderBody, `"Tiles"`, `"Tiles\tgrey\r\n2nd line"`, 1)
	code, _, b := e.req("POST", "/v1/authorization-tokens/"+e.mint("5560000001", "invoice")+"/order", body, e.auth, nil)
	if code != 200 {
		t.Fatalf("tab and line breaks: %d %v", code, b)
	}
}
