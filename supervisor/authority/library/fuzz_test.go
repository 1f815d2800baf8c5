// SPDX-License-Identifier: Apache-2.0

package library

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode. It must never panic; every
// refusal must wrap ErrFormat or ErrKind and be one line; every accepted
// manifest must encode (Encode) to canonical bytes that decode to an
// equal manifest with the same entry digests, and encode again to the
// same bytes.
func FuzzDecode(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(baseDoc))
	for _, tc := range badDocs() {
		if doc := tc.doc(); len(doc) <= 4096 {
			f.Add([]byte(doc))
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema":"glove.library-bundle-v1","entries":[{"kind":"prompt","name":"p","files":[{"path":"a/b","executable":true,"content":"AA=="}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if m != nil {
				t.Fatal("a manifest returned with an error")
			}
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrKind) {
				t.Fatalf("refusal %v wraps neither ErrFormat nor ErrKind", err)
			}
			if bytes.ContainsAny([]byte(err.Error()), "\n\r") {
				t.Fatalf("refusal is not one line: %q", err)
			}
			return
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("an accepted manifest does not encode: %v", err)
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("the canonical form does not decode: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("the round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
		for i := range m.Entries {
			if m.Entries[i].Digest() != m2.Entries[i].Digest() {
				t.Fatalf("entry %d: digest changed across the round trip", i)
			}
		}
		if enc2, err := Encode(m2); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("the canonical form is not stable: %v", err)
		}
	})
}
