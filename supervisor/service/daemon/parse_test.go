// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"strings"
	"testing"
)

// TestParseRequest is the table of request lines a peer may send.
func TestParseRequest(t *testing.T) {
	cases := []struct {
		line string
		code int // 0: accepted
		id   string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"capabilities"}`, 0, "1"},
		{`{"jsonrpc":"2.0","id":"a","method":"m","params":{}}`, 0, `"a"`},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`, CodeInvalidRequest, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, CodeInvalidRequest, "1"},
		{`{"jsonrpc":"2.0","method":"m"}`, CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"m"}`, CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":{},"method":"m"}`, CodeInvalidRequest, "null"},
		{`{"jsonrpc":"1.0","id":1,"method":"m"}`, CodeInvalidRequest, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":""}`, CodeInvalidRequest, "1"},
		{`{"jsonrpc":"2.0","id":1,"method":"m","extra":1}`, CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}`, CodeParse, "null"}, // duplicate names are not valid JSON here
		{`{"jsonrpc":"2.0","id":1,"Method":"m"}`, CodeInvalidRequest, "null"},
		{`[{"jsonrpc":"2.0","id":1,"method":"m"}]`, CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":"m"} {}`, CodeParse, "null"},
		{`{"jsonrpc":"2.0",`, CodeParse, "null"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", CodeParse, "null"},
		{``, CodeParse, "null"},
	}
	for _, c := range cases {
		_, id, e := parseRequest([]byte(c.line))
		code := 0
		if e != nil {
			code = e.Code
		}
		if code != c.code || string(id) != c.id {
			t.Errorf("%q: code %d id %s, want %d %s (%v)", c.line, code, id, c.code, c.id, e)
		}
	}
}

// FuzzParseRequest: no line makes the parser panic, and an accepted line
// always has what dispatch relies on.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"capabilities"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"attach","params":{"session_id":"s1"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		req, id, e := parseRequest(line)
		if e != nil {
			return
		}
		if req.Method == "" || req.JSONRPC != "2.0" || string(id) == "null" || len(id) == 0 {
			t.Fatalf("accepted %q: %+v id %s", line, req, id)
		}
		if len(req.Params) != 0 && req.Params.Kind() != '{' {
			t.Fatalf("accepted params %s", req.Params)
		}
		if strings.ContainsRune(string(id), '\n') {
			t.Fatalf("id %q", id)
		}
	})
}
