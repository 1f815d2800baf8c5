// SPDX-License-Identifier: Apache-2.0

package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func FuzzDecodeStrict(f *testing.F) {
	for _, l := range []Launch{minimal(), everyKind()} {
		s, err := Build(l)
		if err != nil {
			f.Fatal(err)
		}
		data, err := Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		// Compact seeds: the fuzzer minimizes every new interesting input,
		// and minimizing a multi-kilobyte indented document stalls it.
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte(`{"ociVersion":"1.3.0","process":{"noNewPrivilege":true}}`))
	f.Add([]byte(`{"ociVersion":"1.3.0","annotations":{"b":"1","a":"2"},"linux":{"sysctl":{"x":"y"}}}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeStrict(data)
		if err != nil {
			return
		}
		// An accepted document re-marshals to bytes that decode again; from
		// there marshalling is a fixed point and decoding gives equal specs.
		b1, err := Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of accepted input: %v", err)
		}
		s2, err := DecodeStrict(b1)
		if err != nil {
			t.Fatalf("re-marshalled spec refused: %v\n%s", err, b1)
		}
		b2, err := Marshal(s2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("Marshal not a fixed point:\n%s\n%s", b1, b2)
		}
		s3, err := DecodeStrict(b2)
		if err != nil || !reflect.DeepEqual(s2, s3) {
			t.Fatalf("decode not equal after round trip (%v)", err)
		}
	})
}
