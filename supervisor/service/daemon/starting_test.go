// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedStartingNotRecorded holds a start inside the session's
// preparation (its cgroups made, its mounts next), where the session is
// starting: the store has no record of that state (its journal holds the
// move to preparing and nothing after it), yet session_status says
// starting, as start_session did; a stop_session sent then waits for the
// program's release, which writes one running record with the runtime,
// and stops it.
func TestGlovedStartingNotRecorded(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"sleeper": {"sleep"}})
	pause := filepath.Join(f.run, "pause") // gloved creates pause.reached: the service user's directory
	g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_PAUSE=mounts:" + pause}, f.args...)
	logOnFailure(t, g)
	c := dial(t, g.socket)
	const id = "st-held"
	tok := f.create(c, id, f.plan("sleeper", "tiny"))
	var started struct {
		State string `json:"state"`
	}
	c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, &started)
	if started.State != string(store.Starting) {
		t.Fatalf("start_session says %q, want starting", started.State)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(pause + ".reached"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the start never reached its mounts point")
		}
	}
	journal := func() []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.storeDir, store.FileName))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	held := journal()
	if !bytes.Contains(held, []byte(`"to":"preparing"`)) || bytes.Contains(held, []byte(`"to":"starting"`)) || bytes.Contains(held, []byte(`"type":"running"`)) {
		t.Fatalf("store journal while starting: want the move to preparing and nothing after it:\n%q", held)
	}
	if st := status(t, c, id); st.State != string(store.Starting) || st.LaunchDigest != "" {
		t.Fatalf("session_status while starting: %s launch digest %q, want starting and none", st, st.LaunchDigest)
	}

	// stop_session on a second connection: it must wait for the release.
	stopper, err := dialRaw(g.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stopper.Close()
	type stopAnswer struct {
		State string `json:"state"`
	}
	stopped := make(chan error, 1)
	var answer stopAnswer
	go func() {
		stopped <- stopper.call("stop_session", map[string]any{"session_id": id, "grace_ms": 200}, &answer)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("stop_session answered while the session was starting: %v %+v", err, answer)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(pause, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil || answer.State != string(store.Stopping) {
			t.Fatalf("stop_session after the release: %v %+v, want stopping", err, answer)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("stop_session did not answer after the release")
	}
	end := attach(t, c, id)
	if end.State != "exited" || end.Termination != "signaled" {
		t.Errorf("ended %+v, want exited (signaled)", end.End)
	}
	ran := journal()
	if n := bytes.Count(ran, []byte(`"type":"running"`)); n != 1 || bytes.Contains(ran, []byte(`"type":"runtime"`)) || bytes.Contains(ran, []byte(`"to":"running"`)) {
		t.Errorf("store journal after the run: %d running records, want one and no separate runtime or transition:\n%q", n, ran)
	}
	if st := status(t, c, id); st.State != "exited" || st.LaunchDigest == "" {
		t.Errorf("session_status after the run: %s launch digest %q", st, st.LaunchDigest)
	}
	c.ok("cleanup_session", map[string]any{"session_id": id}, nil)
	g.stop(t)
}
