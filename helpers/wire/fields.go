package wire

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A message is a struct, and its fields are its payload, encoded in
// order: uint8, uint16, uint32 and uint64 (or types of those kinds),
// bool, and string or []byte with a maximum length in bytes given by
// the tag `wire:"N"`. Nothing else may appear, so a message's struct is
// its whole declaration: one codec (this file) reads and writes every
// message, and no helper has a decoder of its own to get wrong.

// field is how one struct field is encoded.
type field struct {
	index int
	kind  reflect.Kind
	max   int // strings and byte slices
	doc   string
}

// layoutOf checks a message struct and lays out its fields. A struct
// the codec cannot encode is a programming error found when the
// package declaring it is initialized, before any helper serves.
func layoutOf(t reflect.Type) []field {
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("wire: message %s is not a struct", t))
	}
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		c := field{index: i, kind: f.Type.Kind(), doc: f.Name + " " + f.Type.Kind().String()}
		switch {
		case !f.IsExported():
			panic(fmt.Sprintf("wire: message %s: field %s is not exported", t, f.Name))
		case c.kind == reflect.Uint8 || c.kind == reflect.Uint16 || c.kind == reflect.Uint32 || c.kind == reflect.Uint64 || c.kind == reflect.Bool:
		case c.kind == reflect.String || (c.kind == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8):
			n, err := strconv.Atoi(f.Tag.Get("wire"))
			if err != nil || n <= 0 || n > MaxField {
				panic(fmt.Sprintf("wire: message %s: field %s needs a maximum length tag wire:\"N\" (1..%d)", t, f.Name, MaxField))
			}
			c.max = n
			if c.kind == reflect.Slice {
				c.doc = f.Name + " bytes"
			}
			c.doc += "(" + strconv.Itoa(n) + ")"
		default:
			panic(fmt.Sprintf("wire: message %s: field %s has type %s, which the codec does not encode", t, f.Name, f.Type))
		}
		out = append(out, c)
	}
	return out
}

// docOf describes a layout for the documentation, e.g. "Flags uint32",
// or "(empty)".
func docOf(fs []field) string {
	if len(fs) == 0 {
		return "(empty)"
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.doc
	}
	return strings.Join(out, ", ")
}

// encodeFields writes the fields of v, a message struct laid out by fs.
func encodeFields(e *Encoder, v reflect.Value, fs []field) {
	for _, f := range fs {
		x := v.Field(f.index)
		switch f.kind {
		case reflect.Uint8:
			e.U8(uint8(x.Uint()))
		case reflect.Uint16:
			e.U16(uint16(x.Uint()))
		case reflect.Uint32:
			e.U32(uint32(x.Uint()))
		case reflect.Uint64:
			e.U64(x.Uint())
		case reflect.Bool:
			e.Bool(x.Bool())
		case reflect.String:
			e.String(x.String(), f.max)
		case reflect.Slice:
			e.Bytes(x.Bytes(), f.max)
		}
	}
}

// decodeFields reads the fields of v, a message struct laid out by fs.
// The Decoder checks every bound before it slices or allocates.
func decodeFields(d *Decoder, v reflect.Value, fs []field) {
	for _, f := range fs {
		x := v.Field(f.index)
		switch f.kind {
		case reflect.Uint8:
			x.SetUint(uint64(d.U8()))
		case reflect.Uint16:
			x.SetUint(uint64(d.U16()))
		case reflect.Uint32:
			x.SetUint(uint64(d.U32()))
		case reflect.Uint64:
			x.SetUint(d.U64())
		case reflect.Bool:
			x.SetBool(d.Bool())
		case reflect.String:
			x.SetString(d.String(f.max))
		case reflect.Slice:
			x.SetBytes(d.Bytes(f.max))
		}
	}
}

// checker is a message that checks its decoded values beyond their
// types (Error: only the documented codes exist).
type checker interface{ check() error }
