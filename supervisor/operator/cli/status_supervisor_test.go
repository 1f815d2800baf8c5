// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// cannedGloved answers every line on a unix socket with reply.
func cannedGloved(t *testing.T, reply string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gloved.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte(reply + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return sock
}

// TestStatusSupervisor: the supervisor item shows supervisor_status's
// figures; no gloved is only reported; a gloved that answers with an
// error or garbage is a fault (not required).
func TestStatusSupervisor(t *testing.T) {
	ok := cannedGloved(t, `{"jsonrpc":"2.0","id":1,"result":{"connections":1,"goroutines":14,"heap_live_bytes":2097152,"heap_objects":8391,"open_descriptors":17,"receipts_held":3,"sessions_running":2,"store_sessions":40,"threads":7,"uptime_ms":3723000}}`)
	bad := cannedGloved(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`)
	junk := cannedGloved(t, `not json`)
	for _, tc := range []struct {
		socket string
		ok     bool
		phrase string
	}{
		{ok, true, "gloved up 1h2m3s: live heap 2.0 MiB (8391 objects), 14 goroutines, 7 threads, 17 descriptors, 1 connections; 2 sessions running, 40 in the store, 3 held by the receipt journal"},
		{filepath.Join(t.TempDir(), "none.sock"), true, "gloved is not running"},
		{bad, false, "method not found"},
		{junk, false, "bad reply"},
	} {
		p := statusProbe{socket: tc.socket}
		it := p.probeSupervisor()
		if it.OK != tc.ok || it.Required || !strings.Contains(it.Detail, tc.phrase) {
			t.Errorf("%s: %+v, want ok %v with %q", tc.socket, it, tc.ok, tc.phrase)
		}
	}
}
