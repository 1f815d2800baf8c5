// SPDX-License-Identifier: Apache-2.0

package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	// Why JSON v2 (the Go team's encoding/json/v2, as a module until the
	// standard library ships it) rather than encoding/json: with
	// RejectUnknownMembers it rejects unknown members, it always rejects
	// duplicate member names and invalid UTF-8, it matches member names
	// case-sensitively, and every error carries the JSON Pointer of the
	// fault. encoding/json silently keeps the last of two duplicate keys
	// and matches "Revision" to "revision": a reviewer reading one spelling
	// and gloved obeying another is exactly the ambiguity an attacker
	// (or a typo) exploits.
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Unmarshal decodes data, which must be exactly one JSON object of at
// most max bytes, into v (a pointer to a struct whose fields carry json
// tags). It rejects, with a *Fault naming the JSON Pointer:
//   - input larger than max (before parsing anything);
//   - syntax errors, invalid UTF-8, duplicate member names;
//   - anything after the top-level value;
//   - a top-level value that is not an object;
//   - the literal null anywhere: JSON v2 would quietly decode it as the
//     zero value, so "revision": null would read like an absent field;
//     a document must say what it means;
//   - unknown member names (case-sensitive);
//   - a value of the wrong JSON kind, and numbers that are not plain
//     integers in range for their field (no fraction, exponent or sign
//     where the field is unsigned).
func Unmarshal(data []byte, v any, max int) error {
	if len(data) > max {
		return Faultf("", "document is %d bytes, more than the %d allowed", len(data), max)
	}
	if err := prescan(data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v, json.RejectUnknownMembers(true)); err != nil {
		return translate(err)
	}
	return nil
}

// prescan walks every token once: it finds syntax errors, duplicate
// names, nulls and trailing data with their pointers before any Go value
// is filled in.
func prescan(data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return Faultf("", "empty document")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if k := dec.PeekKind(); k != '{' && k != 0 {
		return Faultf("", "the document must be a JSON object, not %s", kindName(k))
	}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return translate(err)
		}
		if tok.Kind() == 'n' {
			return Faultf(string(dec.StackPointer()), "null is not allowed; omit the member or give a value")
		}
		if dec.StackDepth() == 0 {
			// The top-level object is complete; only whitespace may follow.
			if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
				return Faultf("", "trailing data after the top-level object")
			}
			return nil
		}
	}
}

// translate turns a JSON v2 error into a one-line Fault.
func translate(err error) error {
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		ptr := string(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			return Faultf(ptr, "unknown member %q", sem.JSONPointer.LastToken())
		case sem.JSONKind == '0' && sem.JSONValue != nil && errors.Is(sem.Err, strconv.ErrRange):
			return Faultf(ptr, "number %s is out of range", sem.JSONValue)
		case sem.JSONKind == '0' && sem.JSONValue != nil:
			return Faultf(ptr, "number %s is not %s", sem.JSONValue, goTypeName(sem.GoType))
		case sem.JSONKind != 0:
			return Faultf(ptr, "found %s, want %s", kindName(sem.JSONKind), goTypeName(sem.GoType))
		}
		return Faultf(ptr, "cannot decode: %v", sem.Err)
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return Faultf(string(syn.JSONPointer), "duplicate member name")
		}
		return Faultf(string(syn.JSONPointer), "invalid JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return Faultf("", "truncated JSON")
	}
	return Faultf("", "cannot decode: %v", err)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 0:
		return "nothing"
	}
	return fmt.Sprintf("JSON kind %v", k)
}

func goTypeName(t reflect.Type) string {
	if t == nil {
		return "a different kind of value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer without sign, fraction or exponent"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer without fraction or exponent"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "a boolean"
	}
	return "a " + t.Kind().String()
}
