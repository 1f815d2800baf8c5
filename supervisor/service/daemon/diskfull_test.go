// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// TestGlovedDiskFull puts gloved's store on a 4 MiB tmpfs and fills it as
// a runaway log would, with two sessions running. Then: creations are
// refused with "no space left on device" (never -32603, never a session
// left between created and its end); a running session stopped on the
// full disk ends with its receipt (its records were reserved on disk when
// it was created); glove status fails its session-store item saying so;
// gloved killed on the full disk with a session running restarts and
// records that session's failure and receipt; and once space is freed
// the same gloved accepts sessions again without a restart.
func TestGlovedDiskFull(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	becomeReaper(t)
	f := newFixture(t, e, map[string][]string{"load": {"load"}, "sleeper": {"sleep"}})
	if err := unix.Mount("tmpfs", f.storeDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("size=4m,mode=0700,uid=%d,gid=%d", e.UID, e.GID)); err != nil {
		t.Fatalf("mount a small tmpfs for the store: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(f.storeDir, 0); err != nil {
			t.Errorf("unmount the store's tmpfs: %v", err)
		}
	})
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"
	g := f.start()
	c, err := dialRaw(g.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var archive []receipt.Envelope
	n := 0
	session := func() (map[string]any, error) {
		id := fmt.Sprintf("df-%03d", n)
		n++
		plObj, err := planObject(f.plan("load", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		params := createParams(id, plObj)
		return params, runToEnd(c, id, params, want)
	}
	for range 2 {
		if _, err := session(); err != nil {
			t.Fatal(err)
		}
	}
	if archive, err = pageAndAck(c, f.key, archive); err != nil {
		t.Fatal(err)
	}
	// Two sessions running while the disk fills.
	for _, id := range []string{"df-stopped", "df-killed"} {
		plObj, err := planObject(f.plan("sleeper", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		var cr struct {
			Token string `json:"start_token"`
		}
		if err := c.call("create_session", createParams(id, plObj), &cr); err != nil {
			t.Fatal(err)
		}
		if err := c.call("start_session", map[string]any{"session_id": id, "start_token": cr.Token}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Fill the file system, as root (tmpfs keeps nothing back for root).
	filler := filepath.Join(f.storeDir, "filler")
	fill(t, filler)
	start := time.Now()
	refused := ""
	for i := 0; i < 64 && refused == ""; i++ {
		_, err := session()
		switch {
		case err == nil:
			// Room reserved before the disk filled.
		case strings.Contains(err.Error(), "-32004") && strings.Contains(err.Error(), "no space left on device"):
			refused = err.Error()
		default:
			t.Fatalf("session %d on a full disk: %v\nlog: %s", i, err, g.log)
		}
	}
	if refused == "" {
		t.Fatalf("64 sessions on a full disk, none refused\nlog: %s", g.log)
	}
	// The running session stopped on the full disk ends, durably.
	if err := c.call("stop_session", map[string]any{"session_id": "df-stopped", "grace_ms": 100}, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "df-stopped", g)
	t.Logf("full disk: refused after %d sessions in %v: %s", n-2, time.Since(start).Round(time.Millisecond), refused)
	// No session is left between created and its end.
	for i := range n {
		var st struct {
			State string `json:"state"`
		}
		id := fmt.Sprintf("df-%03d", i)
		if err := c.call("session_status", map[string]any{"session_id": id}, &st); err == nil &&
			st.State != "created" && st.State != "exited" && st.State != "failed" {
			t.Errorf("%s is %s on a full disk", id, st.State)
		}
	}
	status := exec.Command(e.HelperPath("glove"), "status", "--json", "--session-store", f.storeDir)
	out, _ := status.Output()
	var rep struct {
		Ready bool `json:"ready"`
		Items []struct {
			Name, Detail string
			OK           bool
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("glove status --json: %v\n%s", err, out)
	}
	for _, it := range rep.Items {
		if it.Name == "session-store" {
			if it.OK || rep.Ready || !strings.Contains(it.Detail, "no space left on device") {
				t.Errorf("glove status on a full disk: %+v (ready %v)", it, rep.Ready)
			}
			t.Logf("glove status: %s", it.Detail)
		}
	}

	// gloved killed on the full disk, a session running: the restart
	// recovers it (its failure and receipt land in reserved room).
	c.Close()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Wait(); err == nil {
		t.Fatal("gloved survived SIGKILL")
	}
	reapOrphans(t)
	g = f.start()
	if c, err = dialRaw(g.socket); err != nil {
		t.Fatal(err)
	}
	var st struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	if err := c.call("session_status", map[string]any{"session_id": "df-killed"}, &st); err != nil || st.State != "failed" {
		t.Fatalf("the session gloved was killed with, after a restart on the full disk: %+v %v\nlog: %s", st, err, g.log)
	}
	if archive, err = pageAndAck(c, f.key, archive); err != nil {
		t.Fatalf("receipts on the full disk: %v", err)
	}
	got := map[string]string{}
	for _, env := range archive {
		got[env.Body.SessionID] = env.Body.Termination
	}
	if got["df-stopped"] == "" || got["df-killed"] != "failed" {
		t.Fatalf("receipts of the sessions that ran on the full disk: stopped %q, killed %q", got["df-stopped"], got["df-killed"])
	}
	// Space returns: the same gloved goes on, no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	params, err := session()
	if err != nil {
		t.Fatalf("a session once space returned: %v\nlog: %s", err, g.log)
	}
	_ = params
	if archive, err = pageAndAck(c, f.key, archive); err != nil {
		t.Fatal(err)
	}
	if err := receipt.Verify(f.key, testAnchor, archive); err != nil {
		t.Fatal(err)
	}
	c.Close()
	g.stop(t)
}

// waitState waits (10 s at most) for the session to end.
func waitState(t *testing.T, c *rawClient, id string, g *gloved) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var st struct {
			State string `json:"state"`
		}
		if err := c.call("session_status", map[string]any{"session_id": id}, &st); err != nil {
			t.Fatal(err)
		}
		if st.State == "exited" || st.State == "failed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s 10 s after stop\nlog: %s", id, st.State, g.log)
		}
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// The last partial blocks too.
	for {
		if _, err := fh.Write(buf[:512]); err != nil {
			break
		}
	}
}
