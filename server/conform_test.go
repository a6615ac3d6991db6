package server

import (
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// conformance is a strict reading of /openapi.json, stricter than the
// general-purpose validator of validating (kin-openapi): what a client
// generated from the document (Go, TypeScript, Java with Jackson's
// FAIL_ON_UNKNOWN_PROPERTIES) would break on. It checks that
//
//   - the status is one the operation lists; "default" covers only 405 and
//     500, as the document says;
//   - the content type is the one listed for that status;
//   - the body matches the schema: $ref, type (null is no string, object or
//     array), enum, format date-time, pattern, bounds, required, and no
//     property the schema does not declare (an object schema with
//     properties is closed unless it has additionalProperties);
//   - (checkRequest, in TestEveryAnswerMatchesTheDocument) the JSON bodies
//     sent as valid match the operation's request schema, so that the walk
//     cannot drift from the document. Other tests send bodies the server
//     takes leniently by design (unknown fields ignored, null as a field
//     left out, a line captured by id alone), so they are not held to it.
type conformance struct {
	doc     map[string]any
	schemas map[string]any
	ops     []conformOp
}

type conformOp struct {
	method string
	path   string
	segs   []string // path segments; "{x}" matches any one segment
	op     map[string]any
}

var (
	conformOnce sync.Once
	conformDoc  *conformance
)

func loadConformance() *conformance {
	conformOnce.Do(func() {
		c := &conformance{}
		if err := json.Unmarshal(openAPI, &c.doc); err != nil {
			panic(err)
		}
		c.schemas = c.doc["components"].(map[string]any)["schemas"].(map[string]any)
		for path, item := range c.doc["paths"].(map[string]any) {
			for method, op := range item.(map[string]any) {
				c.ops = append(c.ops, conformOp{strings.ToUpper(method), path, strings.Split(path, "/"), op.(map[string]any)})
			}
		}
		// A literal segment wins over a parameter (…/document/{ledgerId}/resend
		// before /v1/orders/{orderId}/{ledgerId}): most literal segments first.
		literals := func(o conformOp) int {
			n := 0
			for _, s := range o.segs {
				if !strings.HasPrefix(s, "{") {
					n++
				}
			}
			return n
		}
		sort.SliceStable(c.ops, func(i, j int) bool { return literals(c.ops[i]) > literals(c.ops[j]) })
		conformDoc = c
	})
	return conformDoc
}

// find is the operation for method and path, or nil.
func (c *conformance) find(method, path string) map[string]any {
	if o := c.match(method, path); o != nil {
		return o.op
	}
	return nil
}

// match is the operation of method and path (without its query), if any.
func (c *conformance) match(method, path string) *conformOp {
	segs := strings.Split(path, "/")
	for i, o := range c.ops {
		if o.method != method || len(o.segs) != len(segs) {
			continue
		}
		match := true
		for i, s := range o.segs {
			if !strings.HasPrefix(s, "{") && s != segs[i] || strings.HasPrefix(s, "{") && segs[i] == "" {
				match = false
				break
			}
		}
		if match {
			return &c.ops[i]
		}
	}
	return nil
}

// checkResponse answers what in an answer to method and path the document
// does not promise; nil when everything matches.
func (c *conformance) checkResponse(method, path string, status int, hdr http.Header, body []byte) []string {
	op := c.find(method, path)
	if op == nil || status == statusClientClosed {
		// Unknown routes answer 404 or 405 (validating checks them); a
		// client that hung up reads no answer (docs/errors.md, 499).
		return nil
	}
	var errs []string
	responses := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		if status != http.StatusMethodNotAllowed && status != http.StatusInternalServerError {
			return []string{fmt.Sprintf("status %d is not listed for the operation", status)}
		}
		resp = responses["default"].(map[string]any)
	}
	content, _ := resp["content"].(map[string]any)
	ct := hdr.Get("Content-Type")
	if len(content) == 0 {
		if len(body) > 0 {
			errs = append(errs, fmt.Sprintf("status %d has no content in the document, but the answer has a %q body", status, ct))
		}
		return errs
	}
	mt, _, err := mime.ParseMediaType(ct)
	media, ok := content[mt].(map[string]any)
	switch {
	case err != nil || !ok:
		var listed []string
		for k := range content {
			listed = append(listed, k)
		}
		sort.Strings(listed)
		errs = append(errs, fmt.Sprintf("content type %q is not among %v", ct, listed))
	case strings.HasSuffix(mt, "json"):
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			errs = append(errs, fmt.Sprintf("body is not JSON: %v", err))
		} else {
			errs = append(errs, c.check("response", media["schema"], v)...)
		}
	}
	return errs
}

// checkRequest answers what in a JSON request body for method and path the
// operation's request schema refuses.
func (c *conformance) checkRequest(method, path string, body []byte) []string {
	op := c.find(method, path)
	if op == nil {
		return []string{"no operation " + method + " " + path}
	}
	rb, ok := op["requestBody"].(map[string]any)
	if !ok {
		return []string{"the operation takes no body"}
	}
	media, ok := rb["content"].(map[string]any)["application/json"].(map[string]any)
	if !ok {
		return []string{"the operation takes no JSON body"}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{"the body is not JSON"}
	}
	return c.check("request", media["schema"], v)
}

// check validates v against schema s, answering every mismatch with its JSON path.
func (c *conformance) check(at string, s any, v any) []string {
	sm, _ := s.(map[string]any)
	if sm == nil {
		return nil
	}
	if ref, ok := sm["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		target, ok := c.schemas[name]
		if !ok {
			return []string{at + ": unresolved " + ref}
		}
		return c.check(at, target, v)
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, a...)) }
	if e, ok := sm["enum"].([]any); ok && !slices.Contains(e, v) {
		bad("%#v is not in enum %v", v, e)
	}
	num := func(k string) (float64, bool) { f, ok := sm[k].(float64); return f, ok }
	typ, _ := sm["type"].(string)
	switch typ {
	case "":
		return errs // any JSON value
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("%s where the schema says string", valueKind(v))
			return errs
		}
		if sm["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("%q is not an RFC 3339 date-time", str)
			}
		}
		if p, ok := sm["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			bad("%q does not match %s", str, p)
		}
		if m, ok := num("maxLength"); ok && utf8.RuneCountInString(str) > int(m) {
			bad("%d characters, more than maxLength %v", utf8.RuneCountInString(str), m)
		}
		if m, ok := num("minLength"); ok && utf8.RuneCountInString(str) < int(m) {
			bad("%d characters, fewer than minLength %v", utf8.RuneCountInString(str), m)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			bad("%s where the schema says %s", valueKind(v), typ)
			return errs
		}
		if typ == "integer" && f != math.Trunc(f) {
			bad("%v is not an integer", f)
		}
		if m, ok := num("minimum"); ok && f < m {
			bad("%v is below minimum %v", f, m)
		}
		if m, ok := num("maximum"); ok && f > m {
			bad("%v is above maximum %v", f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("%s where the schema says boolean", valueKind(v))
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			bad("%s where the schema says array", valueKind(v))
			return errs
		}
		if m, ok := num("minItems"); ok && float64(len(a)) < m {
			bad("%d items, fewer than minItems %v", len(a), m)
		}
		for i, x := range a {
			errs = append(errs, c.check(fmt.Sprintf("%s[%d]", at, i), sm["items"], x)...)
		}
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			bad("%s where the schema says object", valueKind(v))
			return errs
		}
		for _, r := range asStrings(sm["required"]) {
			if _, ok := o[r]; !ok {
				bad("required property %q is absent", r)
			}
		}
		props, _ := sm["properties"].(map[string]any)
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k]; ok {
				errs = append(errs, c.check(at+"."+k, ps, o[k])...)
				continue
			}
			switch ap := sm["additionalProperties"].(type) {
			case map[string]any:
				errs = append(errs, c.check(at+"."+k, ap, o[k])...)
			case bool:
				if !ap {
					bad("property %q is not allowed", k)
				}
			default:
				if props != nil {
					bad("property %q is not in the schema", k)
				}
			}
		}
	default:
		bad("the document uses type %q, which this check does not know", typ)
	}
	return errs
}

func valueKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func asStrings(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
