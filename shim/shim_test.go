package shim_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// run runs the installed glove-shim on b as the service user.
func run(t *testing.T, e *testenv.Env, b *testenv.Bundle, args ...string) testenv.ShimResult {
	t.Helper()
	b.Spec.Process.Args = args
	b.Write(t)
	return e.RunAs(t, testenv.ShimRun{
		Shim: e.HelperPath("glove-shim"),
		Args: []string{"run", "--bundle", b.Dir, "t"},
	})
}

func TestShimRunsStandardBundle(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	r := run(t, e, b, "/bin/sh", "-c", `id -u; id -g; hostname; pwd; echo made > /workspace/out; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; exit 7`)
	if r.Code != 7 {
		t.Fatalf("exit %d, want 7\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	want := []string{"1000", "1000", "glove-test", "/workspace",
		"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"}
	got := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("inside the sandbox:\n got %q\nwant %q\nstderr: %s", got, want, r.Stderr)
	}
	// Judged from outside: the file exists on the host, owned by the
	// service user (the sandbox user maps to it and nothing else).
	st, err := os.Stat(filepath.Join(b.Workspace, "out"))
	if err != nil {
		t.Fatalf("workspace write not visible on the host: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != uint32(e.UID) {
		t.Errorf("workspace file owned by uid %d on the host, want the service user %d", uid, e.UID)
	}
}
