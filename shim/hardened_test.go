// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The shim's tests on a host that refuses unprivileged user namespaces
// (Debian's kernel.unprivileged_userns_clone=0; the VM lane's hardened
// cell). There the service user's clone(CLONE_NEWUSER) fails with EPERM,
// so glove-shim's default mode cannot start, and gloved runs it with
// --userns-fd and a namespace glove-userns made. The tests do as gloved:
// every run of the shim gets a namespace made as glove-userns makes one
// (makeUserns, mapping the bundle's process.user) unless it passes one
// itself (runShim, usernsCmd), and the default mode is shown once to be
// refused (defaultModeRefused). Assertions that hold only with user
// namespace 2 say what the mode gives instead.

// assumeNoUsernsEnv set to 1 makes the tests take that path on a host
// whose kernel allows unprivileged user namespaces, so that it can be
// run on a developer's machine. What only the kernel decides there, the
// refusal of a new user namespace to the service user's shim and to
// anyone inside a user namespace, is then made by a seccomp filter that
// answers EPERM, as that kernel does, to clone and unshare with
// CLONE_NEWUSER (the test binary as a wrapper, wrapNoUserns).
const assumeNoUsernsEnv = "GLOVE_TEST_ASSUME_NO_UNPRIVILEGED_USERNS"

// usernsHost is what the tests know of this host's user namespaces.
type usernsHost struct {
	// refused: the service user may not create a user namespace
	// (kernel.unprivileged_userns_clone is 0), or assumeNoUsernsEnv
	// says to behave as if: the tests take the hardened path.
	refused bool
	// kernel: the kernel itself refuses (the switch is 0), which makes
	// a user namespace nested in another impossible for anyone;
	// otherwise a refusal the tests assert is the wrapper's.
	kernel bool
	err    error
}

// hostUserns is the one detection of such a host. The table of attack
// cases reads it at package initialisation (a nested user namespace is
// stopped by the kernel alone there).
var hostUserns = detectUsernsHost()

func detectUsernsHost() usernsHost {
	var h usernsHost
	v, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone")
	switch {
	case err == nil:
		h.kernel = strings.TrimSpace(string(v)) == "0"
	case !os.IsNotExist(err):
		// Debian's patch alone adds the file; any other failure to
		// read it leaves the tests unable to choose their path.
		h.err = fmt.Errorf("read kernel.unprivileged_userns_clone: %w", err)
	}
	switch env := os.Getenv(assumeNoUsernsEnv); env {
	case "", "0":
		h.refused = h.kernel
	case "1":
		h.refused = true
	default:
		h.err = fmt.Errorf("%s=%q: want 1 (or 0, or unset)", assumeNoUsernsEnv, env)
	}
	return h
}

// noUserns reports whether the tests take the hardened path, failing t
// when the detection could not decide.
func noUserns(t testing.TB) bool {
	t.Helper()
	if hostUserns.err != nil {
		t.Fatal(hostUserns.err)
	}
	return hostUserns.refused
}

// withUserns adapts a glove-shim command line (args after the
// executable, a wrapper's included) and its descriptors 3, 4, ...
// (extra) to this host: on the hardened path, for a run of a bundle that
// passes no --userns-fd itself, a namespace made as glove-userns makes
// one for that bundle's process.user is added after extra, and
// --userns-fd naming it before the ID (the last argument), as gloved
// starts the shim there. Elsewhere, both are returned unchanged.
func withUserns(t testing.TB, e *testenv.Env, args []string, extra []*os.File) ([]string, []*os.File) {
	t.Helper()
	if !noUserns(t) || slices.Contains(args, "--userns-fd") {
		return args, extra
	}
	i := slices.Index(args, "--bundle")
	if i < 0 || i+2 >= len(args) {
		return args, extra // no run of a bundle: a usage error, left as it is
	}
	data, err := os.ReadFile(filepath.Join(args[i+1], "config.json"))
	if err != nil {
		t.Fatalf("the bundle's process.user, for the namespace of --userns-fd: %v", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil || s.Process == nil {
		t.Fatalf("the bundle's process.user, for the namespace of --userns-fd: %v (process %v)", err, s.Process)
	}
	extra = append(slices.Clip(extra), makeUserns(t, e, usernsFor(e, s.Process.User)))
	n := len(args) - 1
	return append(append(slices.Clip(args[:n]), "--userns-fd", strconv.Itoa(2+len(extra))), args[n]), extra
}

// runShim is e.RunAs for a run of glove-shim, withUserns applied.
func runShim(t testing.TB, e *testenv.Env, r testenv.ShimRun) testenv.ShimResult {
	t.Helper()
	r.Args, r.ExtraFiles = withUserns(t, e, r.Args, r.ExtraFiles)
	return e.RunAs(t, r)
}

// usernsCmd applies withUserns to a glove-shim command not yet started.
func usernsCmd(t testing.TB, e *testenv.Env, cmd *exec.Cmd) {
	t.Helper()
	var args []string
	args, cmd.ExtraFiles = withUserns(t, e, cmd.Args[1:], cmd.ExtraFiles)
	cmd.Args = append([]string{cmd.Args[0]}, args...)
}

// wrapNoUserns is the wrapper mode (wrapExec) that refuses clone and
// unshare with CLONE_NEWUSER (EPERM, the errno of Debian's switch), and
// clone3, whose flags a filter cannot read (ENOSYS: the callers fall
// back to clone).
const wrapNoUserns = "no-userns"

// refusedArgv is argv as run where the kernel refuses its new user
// namespaces: argv itself on a host that does, the test binary as a
// wrapper with wrapNoUserns in front of it when the refusal is assumed;
// env is the wrapper's environment (the wrapper gives the command an
// empty one).
func refusedArgv(t testing.TB, argv []string) (out, env []string) {
	t.Helper()
	if hostUserns.kernel {
		return argv, []string{}
	}
	return append([]string{testenv.CopyTestBinary(t)}, argv...), []string{wrapEnv + "=" + wrapNoUserns}
}

// defaultModeRefused runs the shim on b as the service user without
// --userns-fd, where the host refuses the service user new user
// namespaces: stage 0's waiter cannot clone stage 1 with CLONE_NEWUSER,
// and the shim must exit 125 with the one line naming the refused clone,
// before the program runs. It returns the exit status and the line.
func defaultModeRefused(t *testing.T, e *testenv.Env, shimPath string, b *testenv.Bundle) string {
	t.Helper()
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "echo ran > /workspace/ran"}
	b.Write(t)
	argv, env := refusedArgv(t, []string{shimPath, "run", "--bundle", b.Dir, "t"})
	r := e.RunAs(t, testenv.ShimRun{Shim: argv[0], Args: argv[1:], Env: env})
	const want = "glove-shim: start stage 1: clone: operation not permitted\n"
	if r.Code != 125 || r.Stderr != want || r.Stdout != "" {
		t.Errorf("the default mode (no --userns-fd): exit %d, stdout %q, stderr %q; want 125 and %q", r.Code, r.Stdout, r.Stderr, want)
	}
	if _, err := os.Stat(filepath.Join(b.Workspace, "ran")); err == nil {
		t.Error("the program ran in the default mode")
	}
	return fmt.Sprintf("exit %d: %s", r.Code, strings.TrimSuffix(r.Stderr, "\n"))
}

// nestedUsernsRefused shows what a host that refuses unprivileged user
// namespaces does with a user namespace nested in another: the service
// user, holding CAP_SYS_ADMIN as glove-userns does, makes the first (the
// shell prints "made" in it), and nobody in it can make a second, not
// even its root with every capability there: unshare(CLONE_NEWUSER)
// fails with EPERM (Debian's switch asks for CAP_SYS_ADMIN in the
// initial user namespace; docs/hardened-hosts-measured.md,
// "Consequences", 1). So no namespace that --userns-fd would have to
// refuse as nested can exist there.
func nestedUsernsRefused(t *testing.T, e *testenv.Env) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to make a user namespace: %v", err)
	}
	inner, env := refusedArgv(t, []string{unshare, "--user", "/bin/true"})
	cmd := exec.Command(unshare, append([]string{"--user", "--map-root-user", "/bin/sh", "-c", `echo made; exec "$@"`, "sh"}, inner...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN}}
	out, err := cmd.CombinedOutput()
	code, werr := testenv.ExitStatus(err)
	if werr != nil {
		t.Fatalf("%v: %v", cmd.Args, werr)
	}
	// util-linux names the call and strerror(EPERM).
	const want = "made\nunshare: unshare failed: Operation not permitted\n"
	if code != 1 || string(out) != want {
		t.Errorf("a user namespace nested in one of the service user's: exit %d, output %q; want 1 and %q (EPERM)", code, out, want)
	}
}
