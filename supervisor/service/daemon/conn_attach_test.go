// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/testenv"
)

// TestConnAttachedPinned runs the installed gloved with a 1 s idle
// timeout and one running session, and holds MaxConnsPerUID root
// connections attached to it: they are neither idle-closed nor evicted
// while it runs (a root client beyond the share is refused with a
// -32004 reply line, since nothing of root's can be evicted), another
// uid still has room, and once the session has ended each attached
// connection is closed by the idle timeout.
func TestConnAttachedPinned(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	e.ConfigureForSessions(t)
	const idleTimeout = time.Second
	f := newFixture(t, e, map[string][]string{"sleeper": {"sleep"}})
	f.args = append(f.args, "--idle-timeout", idleTimeout.String())
	g := f.start()

	first := dial(t, g.socket)
	tok := f.create(first, "s-pin", f.plan("sleeper", "tiny"))
	first.ok("start_session", map[string]any{"session_id": "s-pin", "start_token": tok}, nil)
	attached := []*client{first}
	for len(attached) < daemon.MaxConnsPerUID {
		attached = append(attached, dial(t, g.socket))
	}
	for i, c := range attached {
		c.ok("attach", map[string]any{"session_id": "s-pin"}, nil)
		// The program's first line: replayed or live.
		if m, err := c.read(); err != nil || m.Method != "output" {
			t.Fatalf("attached connection %d: %+v %v\nlog: %s", i, m, err, g.log)
		}
	}

	// Idle (no request, nothing written) for more than the timeout.
	time.Sleep(2*idleTimeout + 500*time.Millisecond)

	// Root is at its share and nothing of root's may be closed: refused,
	// with a reply.
	extra := dial(t, g.socket)
	line, err := extra.r.ReadString('\n')
	const refusal = `{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"too many connections"}}` + "\n"
	if err != nil || line != refusal {
		t.Errorf("a client beyond root's share: %q %v, want %q", line, err, refusal)
	}
	if _, err := extra.r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("the refused connection was not closed: %v", err)
	}

	// Another uid still has room.
	oc, err := dialAs(g.socket, e.UID)
	if err != nil {
		t.Fatal(err)
	}
	orc := &rawClient{c: oc, r: bufio.NewReader(oc)}
	if err := orc.call("capabilities", nil, nil); err != nil {
		t.Errorf("uid %d beside root's full share: %v\nlog: %s", e.UID, err, g.log)
	}
	if err := oc.Close(); err != nil {
		t.Error(err)
	}

	// Every attached connection is still open and served.
	for i, c := range attached {
		c.n++
		c.sendLine(`{"jsonrpc":"2.0","id":` + strconv.Itoa(c.n) + `,"method":"session_status","params":{"session_id":"s-pin"}}`)
		for {
			m, err := c.read()
			if err != nil {
				t.Fatalf("attached connection %d after %v idle: %v\nlog: %s", i, 2*idleTimeout, err, g.log)
			}
			if m.Method == "" {
				if m.Error != nil {
					t.Errorf("attached connection %d: %+v", i, m.Error)
				}
				break
			}
		}
	}

	// The session ends: each attachment gets "ended", then is closed
	// by the idle timeout.
	first.n++
	first.sendLine(`{"jsonrpc":"2.0","id":` + strconv.Itoa(first.n) + `,"method":"stop_session","params":{"session_id":"s-pin","grace_ms":100}}`)
	stopped := time.Now()
	deadline := stopped.Add(idleTimeout + 10*time.Second)
	for i, c := range attached {
		sawEnd := false
		for {
			if err := c.c.SetReadDeadline(deadline); err != nil {
				t.Fatal(err)
			}
			l, err := c.r.ReadBytes('\n')
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				break
			}
			if err != nil {
				t.Fatalf("attached connection %d after its session ended: %v\nlog: %s", i, err, g.log)
			}
			var m msg
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			sawEnd = sawEnd || m.Method == "ended"
		}
		if !sawEnd {
			t.Errorf("attached connection %d closed without \"ended\"", i)
		}
	}
	t.Logf("every attached connection closed %v after stop_session (idle timeout %v)", time.Since(stopped).Round(time.Millisecond), idleTimeout)

	// Room again for root.
	c := dial(t, g.socket)
	c.ok("capabilities", nil, nil)
	g.stop(t)
	log := g.log.String()
	if strings.Contains(log, `"event":"evicted"`) || !strings.Contains(log, `"reason":"too many connections"`) ||
		strings.Count(log, `"event":"idle_timeout"`) < len(attached) {
		t.Errorf("log: want no eviction, the refusal, %d idle timeouts: %s", len(attached), log)
	}
}
