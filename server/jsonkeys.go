package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/kassahq/kassa/fault"
)

// checkKeys names the object keys of a valid JSON body that encoding/json
// would read differently from a reader that follows the field names: a key
// given twice (the decoder keeps the last, a proxy or log may show the first
// amount) and a key that matches a field only when case is ignored
// ("TOTALCAPTUREAMOUNT", which the decoder takes for totalCaptureAmount),
// and a key holding NUL.
// Keys of no field at all stay ignored, as design.md says, but no key may be
// given twice anywhere in the body: a duplicate is ambiguous wherever it is.
//
// It also names an array of more than maxArrayElements elements, or an object
// of more keys, and reports whether it found one: the body is then refused before it is decoded (see
// decodeJSON). It records at most maxFindings findings.
//
// It runs on every request body, so it allocates only for what it reports:
// keys stay slices of the body and a path is spelled out only for a finding.
func checkKeys(f *fault.Fields, body []byte, t reflect.Type) (tooLong bool) {
	s := keyScanner{b: body, f: f}
	s.value(t)
	return s.tooLong
}

type keyScanner struct {
	b    []byte
	i    int
	f    *fault.Fields
	path []pathStep // where the walk is, spelled out by at
	// tooLong is set once an array of more than maxArrayElements
	// elements, or an object of more keys, was found.
	tooLong bool
}

// add records a finding at the current path, while there is room for it.
func (s *keyScanner) add(format string, args ...any) {
	if s.f.Len() < maxFindings {
		s.f.Add(pathOr(s.at()), format, args...)
	}
}

// pathStep is an object key or, when key is nil, an array index.
type pathStep struct {
	key   []byte
	index int
}

// at spells out the current path as fault fields name them
// ("orderLines[2].quantity").
func (s *keyScanner) at() string {
	var b strings.Builder
	for _, p := range s.path {
		switch {
		case p.key == nil:
			fmt.Fprintf(&b, "[%d]", p.index)
		case b.Len() > 0:
			b.WriteByte('.')
			b.Write(p.key)
		default:
			b.Write(p.key)
		}
	}
	return b.String()
}

func (s *keyScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value walks one value starting at s.i; t is the Go type it decodes into,
// nil when it decodes into nothing or into an interface.
func (s *keyScanner) value(t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s.space()
	if s.i >= len(s.b) {
		return
	}
	switch s.b[s.i] {
	case '{':
		s.object(t)
	case '[':
		s.i++
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for n := 0; ; n++ {
			s.space()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				return
			}
			if s.b[s.i] == ',' {
				s.i++
			}
			if n == maxArrayElements {
				s.add("must have at most %d elements", maxArrayElements)
				s.tooLong = true
				s.i = len(s.b) // the body is refused: the walk ends here
				return
			}
			s.path = append(s.path, pathStep{index: n})
			s.value(elem)
			s.path = s.path[:len(s.path)-1]
		}
	case '"':
		s.str()
	default: // number, true, false, null
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",}] \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
		if s.i == start {
			s.i++ // not valid JSON (callers pass only valid JSON): move on, never loop
		}
	}
}

func (s *keyScanner) object(t reflect.Type) {
	s.i++
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = fieldsOf(t)
	}
	var seen keySet
	for n := 0; ; n++ {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return
		}
		if s.b[s.i] == ',' {
			s.i++
			s.space()
		}
		if n == maxArrayElements {
			s.add("must have at most %d keys", maxArrayElements)
			s.tooLong = true
			s.i = len(s.b)
			return
		}
		k := s.str()
		s.space()
		s.i++ // ':'
		s.path = append(s.path, pathStep{key: k})
		if !seen.add(k) {
			s.add("is given more than once")
		}
		if (t == nil || t.Kind() != reflect.Map) && bytes.IndexByte(k, 0) >= 0 {
			// A reader that ends text at NUL (C strings) takes
			// "totalCaptureAmount\u0000" for totalCaptureAmount, which
			// kassa ignores as no field. A map's keys are its operation's
			// to check (metadata keys are named there).
			s.add("is not a field: a key must not hold NUL")
		}
		s.space()
		isNull := bytes.HasPrefix(s.b[min(s.i, len(s.b)):], []byte("null"))
		var ft reflect.Type
		switch {
		case t == nil:
		case t.Kind() == reflect.Map:
			ft = t.Elem()
			if isNull && !nullable(ft) {
				// The decoder would store the key with a zero value: a value
				// the client did not send.
				s.add("must be of JSON type %s, not null", jsonKind(ft))
			}
		case fields != nil:
			if x, ok := fields[string(k)]; ok {
				ft = x
				if isNull && refusesNull(t, string(k)) {
					s.add("must not be null: here null is not the field left out")
				}
			} else if name := foldedField(fields, k); name != "" {
				s.add("is not a field: field names are case-sensitive (%s)", name)
				ft = fields[name] // the decoder read it as that field: walk it as one
			}
		}
		s.value(ft)
		s.path = s.path[:len(s.path)-1]
	}
}

// refusesNull reports whether struct t's field with JSON name name is tagged
// kassa:"nonull": a field whose omission means something (a full capture
// without orderLines captures everything) that null, which the decoder
// reads as an omission, must not mean. Asked only of a null value.
func refusesNull(t reflect.Type, name string) bool {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if n, _, _ := strings.Cut(sf.Tag.Get("json"), ","); n == name {
			return slices.Contains(strings.Split(sf.Tag.Get("kassa"), ","), "nonull")
		}
	}
	return false
}

// nullable reports whether null has a value of t to decode into.
func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
		return true
	}
	return false
}

// str reads the string at s.i and returns its text: a slice of the body,
// or the decoded text when it holds escapes.
func (s *keyScanner) str() []byte {
	start, escaped := s.i, false
	j := s.i + 1
	for ; j < len(s.b) && s.b[j] != '"'; j++ {
		if s.b[j] == '\\' {
			escaped = true
			j++
		}
	}
	s.i = j + 1
	if s.i > len(s.b) {
		s.i = len(s.b)
		return []byte{}
	}
	if !escaped {
		return s.b[start+1 : j]
	}
	var out string
	json.Unmarshal(s.b[start:s.i], &out)
	return []byte(out)
}

// keySet holds an object's keys: a slice while the object is small, as
// request objects are, and a map past that, so that a body of a million keys
// costs linear time, not quadratic.
type keySet struct {
	few  [16][]byte
	n    int
	many map[string]bool
}

// add records k and reports whether it was new.
func (ks *keySet) add(k []byte) bool {
	if ks.many == nil {
		for _, v := range ks.few[:ks.n] {
			if bytes.Equal(v, k) {
				return false
			}
		}
		if ks.n < len(ks.few) {
			ks.few[ks.n] = k
			ks.n++
			return true
		}
		ks.many = make(map[string]bool, 64)
		for _, v := range ks.few {
			ks.many[string(v)] = true
		}
	}
	if ks.many[string(k)] {
		return false
	}
	ks.many[string(k)] = true
	return true
}

func foldedField(fields map[string]reflect.Type, k []byte) string {
	for name := range fields {
		if bytes.EqualFold([]byte(name), k) {
			return name
		}
	}
	return ""
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf is jsonFields, computed once per type: every request body is
// walked with it.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if v, ok := fieldCache.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	m := jsonFields(t)
	fieldCache.Store(t, m)
	return m
}
