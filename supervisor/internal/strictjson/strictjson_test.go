// SPDX-License-Identifier: Apache-2.0

package strictjson

import (
	"errors"
	"strings"
	"testing"
)

type doc struct {
	Name  string   `json:"name"`
	Count uint64   `json:"count"`
	Level int      `json:"level"`
	List  []string `json:"list"`
	Inner struct {
		Value string `json:"value"`
	} `json:"inner"`
}

func TestUnmarshalFaults(t *testing.T) {
	cases := []struct {
		in, ptr, phrase string
	}{
		{``, "", "empty document"},
		{"  \n", "", "empty document"},
		{`[]`, "", "must be a JSON object, not an array"},
		{`"x"`, "", "must be a JSON object, not a string"},
		{`{"name":"a"} {}`, "", "trailing data"},
		{`{"name":"a"}]`, "", "trailing data"},
		{`{"name":"a","name":"b"}`, "/name", "duplicate member name"},
		{`{"inner":{"value":"a","value":"a"}}`, "/inner/value", "duplicate member name"},
		{`{"Name":"a"}`, "/Name", `unknown member "Name"`},
		{`{"inner":{"a/b~c":1}}`, "/inner/a~1b~0c", `unknown member "a/b~c"`},
		{`{"list":null}`, "/list", "null is not allowed"},
		{`{"list":["a",null]}`, "/list/1", "null is not allowed"},
		{`{"count":-1}`, "/count", "number -1 is not a non-negative integer"},
		{`{"count":1.5}`, "/count", "number 1.5 is not"},
		{`{"count":1e2}`, "/count", "number 1e2 is not"},
		{`{"count":18446744073709551616}`, "/count", "out of range"},
		{`{"level":99999999999999999999}`, "/level", "out of range"},
		{`{"count":"1"}`, "/count", "found a string, want a non-negative integer"},
		{`{"list":"a"}`, "/list", "found a string, want an array"},
		{`{"inner":[]}`, "/inner", "found an array, want an object"},
		{`{"name":"\ud800"}`, "/name", "invalid JSON"},
		{"{\"name\":\"\xff\"}", "/name", "invalid JSON"},
		{`{"name":"a"`, "", "invalid JSON"},
		{`{"count":01}`, "", "invalid JSON"},
	}
	for _, tc := range cases {
		var d doc
		err := Unmarshal([]byte(tc.in), &d, 1<<10)
		var f *Fault
		if !errors.As(err, &f) {
			t.Errorf("%q: %v is not a *Fault", tc.in, err)
			continue
		}
		if f.Pointer != tc.ptr || !strings.Contains(f.Msg, tc.phrase) {
			t.Errorf("%q: fault %q, want pointer %q and %q", tc.in, err, tc.ptr, tc.phrase)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: fault is not one line: %q", tc.in, err)
		}
	}
	if err := Unmarshal([]byte(`{"name":"`+strings.Repeat("a", 100)+`"}`), &doc{}, 50); err == nil || !strings.Contains(err.Error(), "more than the 50 allowed") {
		t.Errorf("oversized document: %v", err)
	}
	var d doc
	if err := Unmarshal([]byte(" {\"name\":\"a\",\"list\":[],\"inner\":{\"value\":\"\\u00e9\"}}\n"), &d, 1<<10); err != nil || d.Inner.Value != "é" {
		t.Errorf("valid document: %v %+v", err, d)
	}
}

func TestFaultError(t *testing.T) {
	if got := Faultf("", "x").Error(); got != "(root): x" {
		t.Errorf("%q", got)
	}
	if got := Faultf(Ptr("a", 0, "b/c~d"), "x %d", 1).Error(); got != "/a/0/b~1c~0d: x 1" {
		t.Errorf("%q", got)
	}
}

// TestFaultIsOneLine: a member name with control characters reaches the
// pointer; the rendered fault must still be one line.
func TestFaultIsOneLine(t *testing.T) {
	f := Faultf(Ptr("a\nb", 0), "bad %s", "x\ty")
	if got := f.Error(); strings.ContainsAny(got, "\n\t") || got != `/a\nb/0: bad x\ty` {
		t.Fatalf("fault %q", got)
	}
}
