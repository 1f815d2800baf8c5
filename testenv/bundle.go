// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SandboxUID and SandboxGID are the program's ids inside test bundles; they
// map to the service user.
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// Bundle is an OCI bundle owned by the service user: rootfs/ (an empty
// root with the usual /bin, /lib links into /usr), config.json, and a
// workspace directory on the host that the sandbox sees, writable, at
// /workspace. Tests judge attacks from outside by looking at Workspace,
// Outside (a host directory the sandbox must not reach) and the host.
type Bundle struct {
	Dir       string
	Spec      *specs.Spec
	Workspace string
	Outside   string
}

// NewBundle creates a bundle with Glove's standard sandbox: read-only root,
// /usr and /etc bound read-only, fresh /proc, a minimal /dev, /tmp and
// /workspace writable, sysfs read-only, runc's masked and read-only
// paths, all seven namespaces, the sandbox user mapped to the service
// user, no capability, no_new_privs, and Glove's default seccomp profile.
func (e *Env) NewBundle(t testing.TB) *Bundle {
	t.Helper()
	dir, err := os.MkdirTemp(e.Base, "bundle-")
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	b := &Bundle{Dir: dir, Workspace: filepath.Join(dir, "workspace"), Outside: filepath.Join(dir, "outside")}
	for _, d := range []string{"rootfs", "workspace", "outside"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("bundle: %v", err)
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"} {
		if err := os.Symlink(target, filepath.Join(dir, "rootfs", link)); err != nil {
			t.Fatalf("bundle: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.Outside, "secret"), []byte("host secret\n"), 0o644); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, e.UID, e.GID)
	}); err != nil {
		t.Fatalf("bundle: chown: %v", err)
	}
	// The bundle directory must be reachable by the service user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	b.Spec = e.StandardSpec(b.Workspace)
	return b
}

// StandardSpec is the spec NewBundle writes, with the workspace bound
// from workspace.
func (e *Env) StandardSpec(workspace string) *specs.Spec {
	ro := []string{"bind", "ro", "nosuid", "nodev"}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "glove-test",
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			User:            specs.User{UID: SandboxUID, GID: SandboxGID},
			Args:            []string{"/bin/true"},
			Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C"},
			Cwd:             "/workspace",
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: ro},
			{Destination: "/etc", Type: "bind", Source: "/etc", Options: ro},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/null", Type: "bind", Source: "/dev/null", Options: []string{"bind", "nosuid", "noexec"}},
			{Destination: "/dev/zero", Type: "bind", Source: "/dev/zero", Options: []string{"bind", "nosuid", "noexec"}},
			{Destination: "/dev/urandom", Type: "bind", Source: "/dev/urandom", Options: []string{"bind", "nosuid", "noexec"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "size=16m"}},
			{Destination: "/workspace", Type: "bind", Source: workspace, Options: []string{"bind", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: SandboxUID, HostID: uint32(e.UID), Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: SandboxGID, HostID: uint32(e.GID), Size: 1}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.UserNamespace}, {Type: specs.MountNamespace}, {Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.CgroupNamespace},
			},
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Seccomp:       seccomp.DefaultProfile(seccomp.ProfileOptions{}),
		},
	}
}

// Write writes config.json from b.Spec.
func (b *Bundle) Write(t testing.TB) {
	t.Helper()
	data, err := json.MarshalIndent(b.Spec, "", "\t")
	if err != nil {
		t.Fatalf("bundle: encode: %v", err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, "config.json"), data, 0o644); err != nil {
		t.Fatalf("bundle: write: %v", err)
	}
}

// ShimRun says how to run a shim on a bundle.
type ShimRun struct {
	Shim       string     // path of the glove-shim (or runc) binary
	Args       []string   // the command line after the binary, e.g. run --bundle DIR ID
	Env        []string   // the runtime's environment
	ExtraFiles []*os.File // become descriptors 3, 4, ...
	Stdin      []byte
	Terminal   *os.File      // if set: stdin, stdout and stderr (a pty's slave); Stdin is then unused
	Timeout    time.Duration // default 30 s
}

// ShimResult is what a run printed and how it ended.
type ShimResult struct {
	Stdout, Stderr string
	Code           int // exit status; 128+N for signal N
}

// RunAs runs r as the service user and returns its output and status. It
// fails the test on a timeout (the process group is killed).
func (e *Env) RunAs(t testing.TB, r ShimRun) ShimResult {
	t.Helper()
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Shim, r.Args...)
	cmd.Env = r.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.ExtraFiles = r.ExtraFiles
	cmd.Stdin = bytes.NewReader(r.Stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if r.Terminal != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Terminal, r.Terminal, r.Terminal
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: still running after %v\nstdout: %s\nstderr: %s", r.Shim, r.Args, timeout, &out, &errb)
	}
	res := ShimResult{Stdout: out.String(), Stderr: errb.String()}
	if res.Code, err = ExitStatus(err); err != nil {
		t.Fatalf("%s %v: %v", r.Shim, r.Args, err)
	}
	return res
}

// LayersShim returns the glove-shim built with the glove_testlayers tag
// (ToolLayersShim): the only build in which GLOVE_SHIM_TEST_LAYERS_OFF
// switches layers off, so that each layer can be shown to stop an attack
// on its own. It is never installed.
func (e *Env) LayersShim(t testing.TB) string {
	t.Helper()
	return e.Tool(t, ToolLayersShim)
}
