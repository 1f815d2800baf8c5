package strictjson

import (
	"strconv"
	"unicode/utf8"
)

// Writer produces canonical JSON: no insignificant whitespace, object
// members in strictly increasing byte order of their names, integers in
// plain decimal, strings with the minimal escaping of RFC 8785 (JCS):
// '"', '\\', \b \f \n \r \t as short escapes, other control characters
// as \u00xx with lowercase hex, everything else as literal UTF-8. For the
// values Glove writes (strings and integers below 2^53) this is exactly
// the JCS encoding, so another implementation can reproduce a digest of
// it without sharing code.
//
// A name written out of order panics: that is a bug in the caller's
// fixed member order, and a silently different order would change a
// content digest.
type Writer struct {
	buf   []byte
	stack []frame
}

type frame struct {
	object  bool
	n       int
	lastKey string
}

// Bytes returns the encoding; every container must be closed.
func (w *Writer) Bytes() []byte {
	if len(w.stack) != 0 {
		panic("strictjson.Writer: unclosed container")
	}
	return w.buf
}

// before writes the separator a new value (or member name) needs.
func (w *Writer) before() {
	if len(w.stack) == 0 {
		return
	}
	top := &w.stack[len(w.stack)-1]
	if top.object {
		return // Key wrote the separator
	}
	if top.n > 0 {
		w.buf = append(w.buf, ',')
	}
	top.n++
}

// BeginObject opens an object.
func (w *Writer) BeginObject() {
	w.before()
	w.buf = append(w.buf, '{')
	w.stack = append(w.stack, frame{object: true})
}

// EndObject closes the innermost object.
func (w *Writer) EndObject() {
	if len(w.stack) == 0 || !w.stack[len(w.stack)-1].object {
		panic("strictjson.Writer: EndObject outside an object")
	}
	w.stack = w.stack[:len(w.stack)-1]
	w.buf = append(w.buf, '}')
}

// BeginArray opens an array.
func (w *Writer) BeginArray() {
	w.before()
	w.buf = append(w.buf, '[')
	w.stack = append(w.stack, frame{})
}

// EndArray closes the innermost array.
func (w *Writer) EndArray() {
	if len(w.stack) == 0 || w.stack[len(w.stack)-1].object {
		panic("strictjson.Writer: EndArray outside an array")
	}
	w.stack = w.stack[:len(w.stack)-1]
	w.buf = append(w.buf, ']')
}

// Key writes a member name; names must arrive in increasing byte order.
func (w *Writer) Key(k string) {
	if len(w.stack) == 0 || !w.stack[len(w.stack)-1].object {
		panic("strictjson.Writer: Key outside an object")
	}
	top := &w.stack[len(w.stack)-1]
	if top.n > 0 {
		if k <= top.lastKey {
			panic("strictjson.Writer: member " + strconv.Quote(k) + " after " + strconv.Quote(top.lastKey))
		}
		w.buf = append(w.buf, ',')
	}
	top.n++
	top.lastKey = k
	w.buf = appendString(w.buf, k)
	w.buf = append(w.buf, ':')
}

// String writes a string value.
func (w *Writer) String(s string) {
	w.before()
	w.buf = appendString(w.buf, s)
}

// Uint writes an unsigned integer.
func (w *Writer) Uint(u uint64) {
	w.before()
	w.buf = strconv.AppendUint(w.buf, u, 10)
}

// Int writes a signed integer.
func (w *Writer) Int(i int64) {
	w.before()
	w.buf = strconv.AppendInt(w.buf, i, 10)
}

// Strings writes an array of strings in the given order.
func (w *Writer) Strings(ss []string) {
	w.BeginArray()
	for _, s := range ss {
		w.String(s)
	}
	w.EndArray()
}

// StringMember writes a member name and a string value.
func (w *Writer) StringMember(k, v string) {
	w.Key(k)
	w.String(v)
}

// UintMember writes a member name and an unsigned integer value.
func (w *Writer) UintMember(k string, v uint64) {
	w.Key(k)
	w.Uint(v)
}

// StringsMember writes a member name and an array of strings.
func (w *Writer) StringsMember(k string, v []string) {
	w.Key(k)
	w.Strings(v)
}

const hexDigits = "0123456789abcdef"

// appendString quotes s. Bytes that are not valid UTF-8 become U+FFFD: a
// decoded document never holds them (the decoder rejects invalid UTF-8),
// and a Go value built by hand must still encode to valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
