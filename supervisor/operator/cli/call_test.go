// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGloved answers each connection's one request with the lines the
// test gives, after checking the request.
func fakeGloved(t *testing.T, check func(req map[string]any), lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gloved.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, err := bufio.NewReader(c).ReadBytes('\n')
			var req map[string]any
			if err == nil && json.Unmarshal(line, &req) == nil {
				check(req)
			}
			for _, l := range lines {
				_, _ = c.Write([]byte(l + "\n"))
			}
			c.Close()
		}
	}()
	return path
}

func TestCallPrintsResult(t *testing.T) {
	var got map[string]any
	sock := fakeGloved(t, func(req map[string]any) { got = req },
		`{"jsonrpc":"2.0","id":1,"result":{"plan_content_digest":"ab"}}`)
	code, out, errs := run("call", "--socket", sock, "validate_plan", `{"plan":{}}`)
	if code != 0 || !strings.Contains(out, `"plan_content_digest": "ab"`) || errs != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	if got["method"] != "validate_plan" || got["jsonrpc"] != "2.0" || got["params"] == nil {
		t.Errorf("request %v", got)
	}
}

func TestCallError(t *testing.T) {
	sock := fakeGloved(t, func(map[string]any) {}, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`)
	if code, _, errs := run("call", "--socket", sock, "nope"); code != ExitFail || !strings.Contains(errs, "-32601") {
		t.Errorf("exit %d stderr %q", code, errs)
	}
	if code, _, _ := run("call", "--socket", sock, "x", `[1]`); code != ExitUsage {
		t.Errorf("params not an object: exit %d", code)
	}
	if code, _, _ := run("call", "--socket", sock); code != ExitUsage {
		t.Errorf("no method: exit %d", code)
	}
}

func TestCallAttach(t *testing.T) {
	sock := fakeGloved(t, func(map[string]any) {},
		`{"jsonrpc":"2.0","id":1,"result":{"attached":true}}`,
		`{"jsonrpc":"2.0","method":"output","params":{"session_id":"s1","data":"aGVsbG8g","offset":0}}`,
		`{"jsonrpc":"2.0","method":"output","params":{"session_id":"s1","data":"d29ybGQK","offset":6}}`,
		`{"jsonrpc":"2.0","method":"ended","params":{"session_id":"s1","state":"exited","termination":"exited","exit_code":7,"signal":0,"status":7}}`)
	code, out, errs := run("call", "--socket", sock, "attach", `{"session_id":"s1"}`)
	if code != 7 || out != "hello world\n" || errs != "" {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errs)
	}
}
