package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kassahq/kassa/fault"
	"github.com/kassahq/kassa/order"
)

// decodeBody reads a JSON request body into dst. optional allows an empty
// body (dst is then left as it is). Failures are problems the client can act
// on: 415 for a wrong content type, 413 past the body limit, 408 for a body
// that did not arrive in time, 400 naming every field whose JSON type is wrong.
// Once the body is read, and before it is decoded, it takes its share of the
// server's body budget (holdBody), 503 server_busy when none frees in time.
// w is the request's statusRecorder, which holds the share until the
// request ends.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, dst any, optional bool) error {
	// Passed already, before the body is read (the merchant's read when
	// the request authenticated was slow), the store timeout is the
	// store's: the operation answers store_unavailable.
	storeLate := context.Cause(r.Context()) == errStoreTimeout
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyReadError(err)
	}
	// The store timeout counts from the start of the request: a body that
	// was still arriving when it passed leaves no time for the store. That
	// is the client's slowness, not the store's, and is answered as a body
	// cut by the read timeout is, rather than as store_unavailable, which
	// blames a lock or a busy connection and warns the operator.
	if !storeLate && context.Cause(r.Context()) == errStoreTimeout {
		return errBodyLate()
	}
	// Checked after the one above: a wait for the budget that ends at the
	// store timeout is the server's, server_busy, not the client's. A
	// request the store timeout passed before its body was read waits for
	// nothing: its operation answers store_unavailable at once.
	if !storeLate {
		if err := s.holdBody(w, r, int64(len(body))); err != nil {
			return err
		}
	}
	if len(bytes.Trim(body, jsonSpace)) == 0 {
		if optional {
			return nil
		}
		return fault.New(fault.Invalid, "body_required", "a JSON request body is required")
	}
	ct := r.Header.Get("Content-Type")
	mt, params, perr := mime.ParseMediaType(ct)
	if ct == "" || perr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fault.New(fault.Unsupported, "unsupported_media_type", "send the body as application/json")
	}
	// JSON is UTF-8 (RFC 8259); a body said to be in another charset or
	// encoding would be misread, not converted.
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return fault.New(fault.Unsupported, "unsupported_media_type", "send the body as UTF-8 (charset=%s is not supported)", cs)
	}
	if ce := bodyEncoding(r); ce != "" {
		return fault.New(fault.Unsupported, "unsupported_media_type", "send the body without Content-Encoding (%s is not supported)", ce)
	}
	// A UTF-8 byte order mark is ignored, as RFC 8259 §8.1 allows: it
	// changes nothing the body says, and editors save files with one
	// (Java's Files.readString keeps it), where the decoder refused the
	// body at a byte the sender cannot see. It is taken off after the
	// check for a body left out, so a body of the mark alone is
	// malformed, never read as no body (a full capture of every line).
	// It is overwritten by JSON whitespace rather than cut off, so that
	// the byte a malformed body is refused at counts the sender's bytes.
	if bytes.HasPrefix(body, utf8BOM) {
		copy(body, "   ")
	}
	if err := checkText(body); err != nil {
		return err
	}
	return decodeJSON(body, dst)
}

// utf8BOM is U+FEFF in UTF-8, the byte order mark.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// bodyReadError classifies a failure to read the request body.
func bodyReadError(err error) *fault.Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errBodyTooLarge(mbe.Limit)
	}
	// The server's read deadline (http.Server.ReadTimeout) passed while
	// the body was still coming: the client was too slow, the body is not
	// malformed, and the same request may be sent again.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errBodyLate()
	}
	return fault.New(fault.Invalid, "malformed_body", "the request body could not be read")
}

// errBodyLate refuses a body that did not arrive in time; nothing was done.
func errBodyLate() *fault.Error {
	return fault.New(fault.TimedOut, "request_timeout", "the request body did not arrive in time")
}

// errBodyTooLarge refuses a body past limit bytes, read or declared.
func errBodyTooLarge(limit int64) *fault.Error {
	return fault.New(fault.TooLarge, "body_too_large", "the request body exceeds %d bytes", limit)
}

// bodyEncoding is the request body's Content-Encoding other than identity,
// or "": no endpoint decodes one, and an encoded body read as it is would be
// misread, not refused.
func bodyEncoding(r *http.Request) string {
	if ce := r.Header.Get("Content-Encoding"); !strings.EqualFold(ce, "identity") {
		return ce
	}
	return ""
}

// jsonSpace is the whitespace JSON allows around a value (RFC 8259).
const jsonSpace = " \t\r\n"

// decodeJSON decodes body into dst. Unknown fields are ignored. When a value
// has the wrong type, the body is checked against dst's shape so that every
// offending field is named at once, not just the first.
func decodeJSON(body []byte, dst any) error {
	if bytes.Equal(bytes.Trim(body, jsonSpace), []byte("null")) {
		// Every body is an object, and null is none, as [] is not: decoded
		// it would leave dst as it is, the body read as left out, which on
		// a full capture captures every remaining line.
		return fault.Invalidf("body", "must be an object")
	}
	// In a body that could hold an array or object too long for any
	// request, the keys are checked before anything is decoded, so that it
	// is refused before the decoder makes a value of each element: 1 MiB of
	// `{}` made 349 000 order lines (190 MB) for the 1 000-line limit to
	// refuse. checkKeys walks valid JSON only; for any other body the
	// decoder says where it fails. A smaller body (every order of 50 lines
	// and most of 1 000) is decoded first and its keys checked after, as
	// the extra pass of json.Valid was a sixth of its decoding.
	var f fault.Fields
	keysChecked := false
	if len(body) > minTooLongBody && json.Valid(body) {
		keysChecked = true
		if checkKeys(&f, body, reflect.TypeOf(dst)) {
			return invalidFields(f.List())
		}
	}
	err := json.Unmarshal(body, dst)
	var syn *json.SyntaxError
	if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fault.New(fault.Invalid, "malformed_json", "the body is not valid JSON (at byte %d)", offsetOf(syn))
	}
	if !keysChecked {
		checkKeys(&f, body, reflect.TypeOf(dst)) // valid JSON: the decoder read it to the end
	}
	if err == nil {
		if f.Len() == 0 {
			return nil
		}
		return withOwnChecks(f.List(), dst)
	}
	checkShape(&f, "", bytes.Trim(body, jsonSpace), reflect.TypeOf(dst))
	if f.Len() == 0 {
		// The shape check found nothing: report what the decoder said.
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			f.Add(ute.Field, "must be of JSON type %s", jsonKind(ute.Type))
		} else {
			f.Add("", "%s", err.Error())
		}
		return f.Err()
	}
	return withOwnChecks(f.List(), dst)
}

// minTooLongBody is the size up to which no body can hold an array of more
// than maxArrayElements elements ("[0,0,…]" is two bytes an element) or an
// object of more keys.
const minTooLongBody = 2 * maxArrayElements

// maxFindings bounds the findings the body checks (checkKeys, checkShape)
// record, and maxArrayElements the elements of any array and the keys of any
// object in a body (no request has a list of more than order.MaxLines, or a
// map of more than order.MaxMetadataKeys), so that the work and the
// answer of a refusal stay bounded whatever the body limit: one finding per
// element of 350 000 in a 700 KB body was a 21 MB answer after 330 MB of
// allocations, and 1 MiB of metadata keys was decoded into a map of 100 000
// (24 MB) for the 50-key limit to refuse. A client fixing its body sees the
// rest on its next try.
const (
	maxFindings      = 1000
	maxArrayElements = 10 * order.MaxLines
)

// invalidFields is the validation_failed error naming findings, saying so
// when the body has more than maxFindings.
func invalidFields(findings []fault.FieldError) *fault.Error {
	msg := "the request has invalid fields"
	if len(findings) >= maxFindings {
		msg = fmt.Sprintf("the request has invalid fields; the first %d are named", maxFindings)
	}
	return &fault.Error{Kind: fault.Invalid, Code: "validation_failed", Message: msg, Fields: findings}
}

// selfChecking is a request body that can check its fields on its own,
// without the order or token it is for.
type selfChecking interface{ Validate() error }

// crossChecking is a self-checking body whose checks also compare fields
// with one another (sums, modes): DependsOn reports whether a finding on
// finding may stem from the zero standing in for the wrong-typed field.
type crossChecking interface {
	DependsOn(finding, wrongTyped string) bool
}

// withOwnChecks returns the wrong-typed fields of dst together with what
// dst's own checks find in the rest of it, so that every offending field is
// named at once. The decoder has filled every field of a fitting type (it
// skips only the others), so those checks see what was sent; a finding on
// or under a wrong-typed field is left out, since it only describes the
// zero value standing in for it.
func withOwnChecks(typeErrs []fault.FieldError, dst any) error {
	all := invalidFields(typeErrs)
	sc, ok := dst.(selfChecking)
	if !ok || len(typeErrs) >= maxFindings {
		return all
	}
	for _, te := range typeErrs {
		if te.Field == "body" {
			return all // nothing was decoded
		}
	}
	var own *fault.Error
	if !errors.As(sc.Validate(), &own) {
		return all
	}
	cc, _ := dst.(crossChecking)
	for _, fe := range own.Fields {
		if !coveredBy(fe.Field, typeErrs, cc) {
			all.Fields = append(all.Fields, fe)
		}
	}
	return all
}

// coveredBy reports whether a finding on path may only describe the zero
// value standing in for a wrong-typed field, and so is left out: path is a
// wrong-typed field or lies under one, or in the same array element as one
// (an element's fields are checked against each other; order lines name
// those that are not, order.LineFindingStandsAlone), or the body says it
// depends on one (cc, may be nil).
func coveredBy(path string, typeErrs []fault.FieldError, cc crossChecking) bool {
	for _, te := range typeErrs {
		if under(path, te.Field) || (cc != nil && cc.DependsOn(path, te.Field)) {
			return true
		}
		if el := arrayElementOf(te.Field); under(path, el) {
			field, ok1 := fieldOf(path, el)
			wrong, ok2 := fieldOf(te.Field, el)
			if !ok1 || !ok2 || !order.LineFindingStandsAlone(field, wrong) {
				return true
			}
		}
	}
	return false
}

// fieldOf names the field of element el that path is ("quantity" for
// "orderLines[2].quantity" in "orderLines[2]"); ok is false for a path
// deeper in the element, or the element itself.
func fieldOf(path, el string) (string, bool) {
	rest, ok := strings.CutPrefix(path, el+".")
	return rest, ok && !strings.ContainsAny(rest, ".[")
}

// under reports whether path is prefix or lies under it.
func under(path, prefix string) bool {
	return prefix != "" && (path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"["))
}

// arrayElementOf returns the innermost array element a path lies in
// ("orderLines[2]" for "orderLines[2].quantity"), or "".
func arrayElementOf(path string) string {
	i := strings.LastIndexByte(path, ']')
	if i < 0 {
		return ""
	}
	return path[:i+1]
}

func offsetOf(e *json.SyntaxError) int64 {
	if e == nil {
		return 0
	}
	return e.Offset
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkShape walks a JSON value (valid, without surrounding space) against
// the Go type it should decode into and records every value of the wrong
// JSON type or out of the integer range. It splits the value only where the
// type has fields: what it ignores stays bytes, where a value decoded whole
// (into interfaces) made an object of every element of an ignored array, 48
// times the body's size.
func checkShape(f *fault.Fields, path string, raw []byte, t reflect.Type) {
	if f.Len() >= maxFindings {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(raw) == 0 || raw[0] == 'n' {
		return // null leaves the field unset
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			f.Add(pathOr(path), "must be an object")
			return
		}
		fields := fieldsOf(t)
		for k, val := range m {
			if ft, ok := fields[k]; ok {
				checkShape(f, join(path, k), val, ft)
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			f.Add(pathOr(path), "must be an object")
			return
		}
		for k, val := range m {
			checkShape(f, join(path, k), val, t.Elem())
		}
	case reflect.Slice:
		var a []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
			f.Add(pathOr(path), "must be an array")
			return
		}
		for i, val := range a {
			checkShape(f, fmt.Sprintf("%s[%d]", path, i), val, t.Elem())
		}
	case reflect.String:
		if raw[0] != '"' {
			f.Add(pathOr(path), "must be a string")
		}
	case reflect.Bool:
		if raw[0] != 't' && raw[0] != 'f' {
			f.Add(pathOr(path), "must be a boolean")
		}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
		if !isNumber(raw) {
			f.Add(pathOr(path), "must be an integer")
		} else if _, err := strconv.ParseInt(string(raw), 10, t.Bits()); err != nil {
			// The field's own bounds are checked once it decodes; int64's
			// would only mislead here.
			f.Add(pathOr(path), "must be a whole number within the field's bounds, written without a fraction or exponent")
		}
	case reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		if !isNumber(raw) {
			f.Add(pathOr(path), "must be an integer")
		} else if _, err := strconv.ParseUint(string(raw), 10, t.Bits()); err != nil {
			f.Add(pathOr(path), "must be a whole number within the field's bounds, written without a fraction or exponent")
		}
	case reflect.Interface:
	}
}

// isNumber reports whether a valid JSON value is a number.
func isNumber(raw []byte) bool {
	return raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'
}

func pathOr(p string) string {
	if p == "" {
		return "body"
	}
	return p
}

// jsonFields maps JSON names to field types, following embedded structs as
// encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			for k, v := range jsonFields(et) {
				out[k] = v
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = sf.Type
	}
	return out
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64:
		return "integer"
	case reflect.Slice:
		return "array"
	default:
		return "object"
	}
}

// queryValue is the value of a query parameter that takes one. url.Values
// keeps every repetition and Get answers the first, so
// "createdFrom=a&createdFrom=b" would filter by a alone while the client, a
// proxy or a log shows b as well; as with a header given twice, differing
// values are refused, naming the parameter (the same value twice is one).
func queryValue(f *fault.Fields, v url.Values, name string) string {
	vs := v[name]
	if len(vs) == 0 {
		return ""
	}
	if differ(vs) {
		f.Add(name, "is given more than once")
	}
	return vs[0]
}

// differ reports whether a parameter or header that takes one value was
// given several that are not all the same: the rule for query parameters
// (queryValue) and for single headers (checkHeaders) alike.
func differ(vs []string) bool {
	return len(vs) > 1 && slices.ContainsFunc(vs[1:], func(v string) bool { return v != vs[0] })
}

// queryList splits a csv query parameter; repeated parameters are joined.
func queryList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func parseIntParam(f *fault.Fields, name, v string, lo, hi int) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		f.Add(name, "must be an integer between %d and %d", lo, hi)
		return 0
	}
	return n
}
