package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kassahq/kassa/fault"
)

// checkText refuses a body with a string (or key) that is not valid UTF-8
// or holds an unpaired UTF-16 surrogate escape such as "\ud800":
// encoding/json would silently store U+FFFD in its place, changing what the
// merchant sent. Every such field is named.
func checkText(body []byte) error {
	if utf8.Valid(body) && !hasSurrogateEscape(body) {
		return nil // the common case
	}
	if !json.Valid(body) {
		return nil // not JSON (or nested past the decoder's limit): the decoder reports that
	}
	var f fault.Fields
	if err := walkStrings(body, func(path func() string, raw []byte) {
		if !validText(raw) {
			f.Add(pathOr(path()), "must be valid UTF-8 text (no invalid bytes or unpaired surrogates)")
		}
	}); err != nil {
		return nil
	}
	return f.Err()
}

// hasSurrogateEscape reports whether body may hold a \uD800–\uDFFF escape
// (a false positive only costs the slower, exact walk).
func hasSurrogateEscape(body []byte) bool {
	for {
		i := bytes.Index(body, []byte(`\u`))
		if i < 0 || i+3 >= len(body) {
			return false
		}
		if c, n := body[i+2]|0x20, body[i+3]|0x20; c == 'd' && (n >= '8' && n <= '9' || n >= 'a' && n <= 'f') {
			return true
		}
		body = body[i+2:]
	}
}

// validText reports whether raw, a JSON string token with its quotes, is
// valid UTF-8 and pairs every surrogate escape.
func validText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false // a low surrogate with no high one before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// walkStrings calls fn with the raw token of every string in body, object
// keys included, and a function that builds its JSON path (a key's path is
// its object's); the path is built only when asked for. body must be valid
// JSON, which also bounds its depth.
func walkStrings(body []byte, fn func(path func() string, raw []byte)) error {
	type frame struct {
		object bool
		key    string
		index  int
		isKey  bool // in an object: the next token is a key
	}
	var stack []frame
	pathOf := func(n int) string { // the current position within the first n frames
		var b strings.Builder
		for _, f := range stack[:n] {
			if f.object {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	done := func() { // a value of the innermost container was read
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].isKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) && len(stack) == 0 {
				return nil
			}
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{object: t == '{', isKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			raw := body[start:d.InputOffset()]
			raw = raw[bytes.IndexByte(raw, '"'):]
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].isKey {
				fn(func() string { return pathOf(n - 1) }, raw)
				stack[n-1].key, stack[n-1].isKey = t, false
				continue
			}
			n := len(stack)
			fn(func() string { return pathOf(n) }, raw)
			done()
		default:
			done()
		}
	}
}
