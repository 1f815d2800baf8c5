// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/testenv"
)

// servedHelpers are the helpers that speak the wire protocol.
var servedHelpers = []string{"glove-mounter", "glove-loopext4", "glove-cgroup", "glove-streamproxy", "glove-userns"}

// TestHelperSelfRestriction starts each helper as the service user and
// checks from outside, on every thread, that it holds exactly its table
// row, cannot gain privileges and runs under its seccomp filter; and that
// it exits 0 on EOF.
func TestHelperSelfRestriction(t *testing.T) {
	env := testenv.Get(t)
	for _, name := range servedHelpers {
		t.Run(name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			row, _ := captable.Lookup(name)
			p, log := env.StartHelper(t, name)
			r, err := p.Hello()
			if err != nil {
				p.Close()
				t.Fatalf("hello: %v\nhelper log: %s", err, log)
			}
			if r.Name != name || r.Protocol != wire.Version {
				t.Errorf("hello answered name %q protocol %d, want %q %d", r.Name, r.Protocol, name, wire.Version)
			}
			if r.CapEffective != row.Effective() || r.CapPermitted != row.Mask() {
				t.Errorf("hello reports CapEff %x CapPrm %x, table row %x (effective between requests %x)", r.CapEffective, r.CapPermitted, row.Mask(), row.Effective())
			}
			want := map[string]string{
				"CapEff":     captext.MaskString(row.Effective()),
				"CapPrm":     captext.MaskString(row.Mask()),
				"CapInh":     captext.MaskString(0),
				"CapAmb":     captext.MaskString(0),
				"NoNewPrivs": "1",
				"Seccomp":    "2",
			}
			threads := checkThreads(t, p.Pid(), want)
			if threads < 2 {
				// A Go program always has several threads; seeing one
				// would mean the check looked at the wrong process.
				t.Errorf("saw %d threads of helper %d", threads, p.Pid())
			}
			if err := p.Close(); err != nil {
				t.Errorf("exit after EOF: %v (want status 0)\nhelper log: %s", err, log)
			}
		})
	}
}

// checkThreads compares fields of /proc/PID/task/*/status with want and
// returns how many threads it checked.
func checkThreads(t *testing.T, pid int, want map[string]string) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("list threads of %d: %v", pid, err)
	}
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			t.Fatalf("read %s: %v", task, err)
		}
		got := map[string]string{}
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				got[k] = strings.TrimSpace(v)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s is %q, want %q", task, k, got[k], v)
			}
		}
	}
	return len(tasks)
}

// TestHelperProtocolFaults sends each helper a frame the protocol does not
// allow and checks it exits with the protocol-error status, leaving
// nothing behind.
func TestHelperProtocolFaults(t *testing.T) {
	env := testenv.Get(t)
	hello := func(id uint32) []byte {
		b, err := wire.Encode(id, wire.HelloRoute.Request(), &wire.Hello{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type fault struct {
		name string
		// before are well-formed frames sent first (their replies read).
		before [][]byte
		frame  []byte
		// sendFDs is how many descriptors travel with frame.
		sendFDs int
		// foreign: frame is a well-formed one-descriptor request that
		// another helper accepts and this one must not.
		foreign bool
	}
	faults := []fault{
		{name: "malformed: wrong version", frame: wiretest.EncodeRawHeader(wire.Version+1, uint16(wire.MsgHello), 1, 0, 0, 0)},
		{name: "malformed: short header", frame: hello(1)[:9]},
		{name: "malformed: length past the end", frame: wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHello), 1, 8, 0, 0)},
		{name: "malformed: reserved flags", frame: wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHello), 1, 0, 0, 1)},
		{name: "malformed: trailing payload", frame: append(wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHello), 1, 1, 0, 0), 0)},
		{name: "fd count: declared 1, sent 0", frame: wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHello), 1, 0, 1, 0)},
		{name: "fd count: declared 0, sent 1", frame: hello(1), sendFDs: 1},
		{name: "fd count: declared 1, sent 1, type takes 0", frame: wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHello), 1, 0, 1, 0), sendFDs: 1},
		{name: "unknown message type", frame: wiretest.EncodeRawHeader(wire.Version, 0x7777, 1, 0, 0, 0)},
		{name: "unpermitted: another helper's request", foreign: true, sendFDs: 1},
		{name: "unpermitted: a reply type", frame: wiretest.EncodeRawHeader(wire.Version, uint16(wire.MsgHelloReply), 1, 0, 0, 0)},
		{name: "request id zero", frame: hello(0)},
		{name: "replayed request id", before: [][]byte{hello(5)}, frame: hello(5)},
		{name: "once-only message twice", before: [][]byte{hello(5)}, frame: hello(6)},
	}
	for _, name := range servedHelpers {
		for _, f := range faults {
			t.Run(name+"/"+f.name, func(t *testing.T) {
				testenv.CheckLeaks(t, env.UID)
				p, log := env.StartHelper(t, name)
				conn := p.Conn()
				for _, b := range f.before {
					if err := conn.SendRaw(b, nil); err != nil {
						t.Fatalf("send: %v", err)
					}
					fr, err := conn.Recv(wirecall.Replies(wire.HelloRoute.Decl))
					if err != nil {
						t.Fatalf("reply to the frame before the fault: %v\nhelper log: %s", err, log)
					}
					closeAll(fr.FDs)
				}
				var fds []int
				var files []*os.File
				var err error
				for i := 0; i < f.sendFDs; i++ {
					r, w, err := os.Pipe()
					if err != nil {
						t.Fatal(err)
					}
					files = append(files, r, w)
					fds = append(fds, int(r.Fd()))
				}
				frame := f.frame
				if f.foreign {
					frame, err = wire.Encode(1, loopwire.Freeze.Request(), &loopwire.FreezeRequest{})
					if name == "glove-loopext4" {
						frame, err = wire.Encode(1, mountwire.Bind.Request(), &mountwire.BindRequest{})
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				err = conn.SendRaw(frame, fds)
				closeAll(files)
				if err != nil {
					t.Fatalf("send fault: %v", err)
				}
				// The helper answers a protocol fault with an Error of
				// code ErrProtocol (best effort) and exits.
				if fr, err := conn.Recv(wiretest.OnlyErrors); err == nil {
					closeAll(fr.FDs)
					if e, ok := fr.Msg.(*wire.Error); !ok || e.Code != wire.ErrProtocol {
						t.Errorf("answer to the fault: %#v, want an Error with code %d", fr.Msg, wire.ErrProtocol)
					}
				}
				code, sig := testenv.WaitExit(t, p, 10*time.Second)
				if code != helperkit.ExitProtocol {
					t.Errorf("exit status %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
				}
				if !strings.Contains(log.String(), "protocol error") {
					t.Errorf("helper log does not name the protocol error: %s", log)
				}
			})
		}
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// TestHelperRefusesUnsafeStart checks each way a helper refuses to start:
// it must exit with the start-up status before serving anything.
func TestHelperRefusesUnsafeStart(t *testing.T) {
	env := testenv.Get(t)
	const name = "glove-streamproxy"
	const file = "streamproxy.json"
	good := testenv.DefaultConfigs(env.Base)[file]
	restore := func() {
		if err := env.WriteConfig(file, good); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(env.ConfDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T)
		wantLog string
	}{
		{"configuration missing", func(t *testing.T) {
			if err := os.Remove(filepath.Join(env.ConfDir, file)); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
		{"configuration group-writable", func(t *testing.T) {
			if err := os.Chmod(filepath.Join(env.ConfDir, file), 0o664); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"configuration owned by the service user", func(t *testing.T) {
			if err := os.Chown(filepath.Join(env.ConfDir, file), env.UID, env.GID); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid"},
		{"configuration directory other-writable", func(t *testing.T) {
			if err := os.Chmod(env.ConfDir, 0o757); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"configuration is a symlink", func(t *testing.T) {
			p := filepath.Join(env.ConfDir, file)
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(file+".real", p); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(p + ".real") })
		}, "symbolic link"},
		{"configuration has an unknown field", func(t *testing.T) {
			if err := env.WriteConfig(file, []byte(`{"schema_version":1,"max_frame_bytes":1024,"max_exchange_ms":10,"max_frames":3}`)); err != nil {
				t.Fatal(err)
			}
		}, "unknown field"},
		{"configuration over a hard bound", func(t *testing.T) {
			if err := env.WriteConfig(file, []byte(`{"schema_version":1,"max_frame_bytes":1048576,"max_exchange_ms":10}`)); err != nil {
				t.Fatal(err)
			}
		}, "max_frame_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			t.Cleanup(restore)
			c.prepare(t)
			p, log := env.StartHelper(t, name)
			code, sig := testenv.WaitExit(t, p, 10*time.Second)
			if code != helperkit.ExitStartup {
				t.Errorf("exit status %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitStartup, log)
			}
			if !strings.Contains(log.String(), c.wantLog) {
				t.Errorf("helper log does not say %q: %s", c.wantLog, log)
			}
		})
	}
	t.Run("not started the supervisor's way", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			args    []string
			env     []string
			cred    *syscall.Credential
			wantLog string
		}{
			{"an argument", []string{name, "--config=/tmp/x"}, nil, env.Credential(), "takes no arguments"},
			{"an environment variable", []string{name}, []string{"GODEBUG=x"}, env.Credential(), "environment must be empty"},
			{"as root", []string{name}, nil, nil, "uid 0"},
		} {
			t.Run(c.name, func(t *testing.T) {
				testenv.CheckLeaks(t, env.UID)
				code, out := startRaw(t, env.HelperPath(name), c.args, c.env, c.cred)
				if code != helperkit.ExitStartup || !strings.Contains(out, c.wantLog) {
					t.Errorf("exit status %d, log %q; want %d and %q", code, out, helperkit.ExitStartup, c.wantLog)
				}
			})
		}
	})
	t.Run("without its file capabilities", func(t *testing.T) {
		testenv.CheckLeaks(t, env.UID)
		// A copy of glove-mounter that lacks cap_sys_admin: it must
		// refuse rather than serve in a half-working state.
		// Inside the private tree: the service user can reach it.
		dir, err := os.MkdirTemp(env.Base, "nocaps-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(env.HelperPath("glove-mounter"))
		if err != nil {
			t.Fatal(err)
		}
		copyPath := filepath.Join(dir, "glove-mounter")
		if err := os.WriteFile(copyPath, data, 0o755); err != nil {
			t.Fatal(err)
		}
		code, out := startRaw(t, copyPath, []string{"glove-mounter"}, nil, env.Credential())
		if code != helperkit.ExitStartup || !strings.Contains(out, "missing capabilities cap_sys_admin") {
			t.Errorf("exit status %d, log %q; want %d and a missing cap_sys_admin", code, out, helperkit.ExitStartup)
		}
	})
}

// TestGloveHelpersCommand runs the operator's `glove helpers` as the
// service user against the installed helpers: it must start each one,
// get its Hello, and find its capability sets equal to the table.
func TestGloveHelpersCommand(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	glove := env.HelperPath("glove")
	libexec := filepath.Dir(env.HelperPath("glove-mounter"))
	cmd := exec.Command(glove, "helpers", "--libexec", libexec)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: env.Credential()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("glove helpers: %v\n%s", err, out)
	}
	for _, name := range servedHelpers {
		row, _ := captable.Lookup(name)
		want := fmt.Sprintf("CapEff %s  CapPrm %s  ok", captext.MaskString(row.Effective()), captext.MaskString(row.Mask()))
		found := false
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, name+" ") && strings.HasSuffix(l, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("glove helpers: no line %q for %s in:\n%s", want, name, out)
		}
	}
}

// TestHelpersServeAfterIdle checks every helper survives an idle spell
// longer than the Go runtime's once-a-second GOMAXPROCS refresh, whose
// pread64 the seccomp allowlists would kill (go.mod turns the refresh
// off). A supervisor idles between sessions.
func TestHelpersServeAfterIdle(t *testing.T) {
	env := testenv.Get(t)
	procs := map[string]*helperproc.Proc{}
	logs := map[string]*testenv.SyncBuffer{}
	testenv.CheckLeaks(t, env.UID)
	for _, name := range servedHelpers {
		procs[name], logs[name] = env.StartHelper(t, name)
	}
	time.Sleep(2500 * time.Millisecond)
	for _, name := range servedHelpers {
		if _, err := procs[name].Hello(); err != nil {
			t.Errorf("%s after 2.5 s idle: %v\nhelper log: %s", name, err, logs[name])
		}
		if err := procs[name].Close(); err != nil {
			t.Errorf("%s exit: %v", name, err)
		}
	}
}
