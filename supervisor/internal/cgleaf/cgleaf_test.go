// SPDX-License-Identifier: Apache-2.0

package cgleaf

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

func TestParseSelfCgroup(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"pure v2", "0::/system.slice/gloved.service\n", "/system.slice/gloved.service"},
		{"hybrid", "12:pids:/glove\n11:memory:/glove\n1:name=systemd:/x\n0::/glove\n", "/glove"},
		{"pure v1", "12:pids:/glove\n11:memory:/glove\n", ""},
		{"empty", "", ""},
		{"v2 root", "0::/\n", "/"},
		{"a v1 line that looks alike", "10::/not-v2\n", ""},
	} {
		if got := ParseSelfCgroup([]byte(c.in)); got != c.want {
			t.Errorf("%s: ParseSelfCgroup = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestParseV2Mount(t *testing.T) {
	const (
		v2     = "40 30 0:37 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
		hybrid = "41 30 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
		v1     = "34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
		bind   = "42 30 0:37 /sub /mnt/sub rw - cgroup2 cgroup2 rw\n"
		esc    = "43 30 0:37 / /mnt/a\\040b rw - cgroup2 cgroup2 rw\n"
		short  = "43 30 - cgroup2\n"
	)
	for _, c := range []struct{ name, in, want string }{
		{"pure v2", v2, "/sys/fs/cgroup"},
		{"hybrid", v1 + hybrid, "/sys/fs/cgroup/unified"},
		{"pure v1", v1, ""},
		{"only a bind of a subtree", bind, ""},
		{"escaped mount point", esc, ""},
		{"a short line", short, ""},
		{"bind then root", bind + v2, "/sys/fs/cgroup"},
	} {
		if got := ParseV2Mount([]byte(c.in)); got != c.want {
			t.Errorf("%s: ParseV2Mount = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestEnterNoV2(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "cgroup")
	if err := os.WriteFile(self, []byte("11:memory:/glove\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Enter(Paths{SelfCgroup: self, Mountinfo: filepath.Join(dir, "absent")})
	if err != nil || res.Moved || res.Cgroup != "" {
		t.Fatalf("Enter on a v1-only process = %+v, %v; want nothing done", res, err)
	}
	if _, err := Enter(Paths{SelfCgroup: filepath.Join(dir, "absent")}); err == nil {
		t.Fatal("Enter with an unreadable /proc/self/cgroup succeeded")
	}
}

// The child half of TestEnter: run Enter on the real process and print
// its result.
func TestMain(m *testing.M) {
	if os.Getenv("GLOVE_CGLEAF_CHILD") == "1" {
		res, err := Enter(System)
		out := map[string]any{"result": res}
		if err != nil {
			out["error"] = err.Error()
		}
		if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestEnter runs Enter as an unprivileged user placed in a real cgroup v2
// cgroup: delegated (moved into the leaf, twice idempotent), and not
// delegated (left alone).
func TestEnter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create and delegate a cgroup (CI runs as root)")
	}
	mnt, err := v2Mount(System.Mountinfo)
	if err != nil || mnt == "" {
		t.Skipf("skipped: no cgroup2 hierarchy mounted (%v)", err)
	}
	const nobody = 65534
	bin := testenv.CopyTestBinary(t)

	run := func(t *testing.T, cg string) (Result, string) {
		t.Helper()
		fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{"GLOVE_CGLEAF_CHILD=1"}
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: nobody, Gid: nobody},
			UseCgroupFD: true, CgroupFD: fd,
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v (%s)", err, out)
		}
		var got struct {
			Result Result
			Error  string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("child output %q: %v", out, err)
		}
		return got.Result, got.Error
	}

	t.Run("delegated", func(t *testing.T) {
		cg := makeCgroup(t, mnt, nobody)
		res, errText := run(t, cg)
		rel := strings.TrimPrefix(cg, mnt)
		if errText != "" || !res.Moved || res.Cgroup != rel+"/"+Leaf {
			t.Fatalf("Enter in a delegated cgroup = %+v, %q; want moved into %s/%s", res, errText, rel, Leaf)
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(cg, Leaf), &st); err != nil || st.Uid != nobody {
			t.Fatalf("leaf %s/%s: %v, owner %d", cg, Leaf, err, st.Uid)
		}
		// Started again in the delegated cgroup: the existing leaf is used.
		res, errText = run(t, cg)
		if errText != "" || !res.Moved {
			t.Fatalf("second Enter = %+v, %q; want moved into the existing leaf", res, errText)
		}
		// Started in the leaf: nothing to do.
		res, errText = run(t, filepath.Join(cg, Leaf))
		if errText != "" || res.Moved || res.Cgroup != rel+"/"+Leaf {
			t.Fatalf("Enter in the leaf = %+v, %q; want left alone", res, errText)
		}
	})
	t.Run("not delegated", func(t *testing.T) {
		cg := makeCgroup(t, mnt, 0)
		res, errText := run(t, cg)
		if errText != "" || res.Moved {
			t.Fatalf("Enter in a root-owned cgroup = %+v, %q; want left alone", res, errText)
		}
		if _, err := os.Stat(filepath.Join(cg, Leaf)); err == nil {
			t.Fatal("a leaf was created in a cgroup not delegated to the caller")
		}
	})
}

// makeCgroup creates a cgroup below the v2 root, owned (with the files
// a delegation hands over) by uid, removed with its leaf at the end.
func makeCgroup(t *testing.T, mnt string, uid int) string {
	t.Helper()
	cg := filepath.Join(mnt, fmt.Sprintf("glove-cgleaf-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(cg, Leaf), cg} {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	for _, name := range []string{".", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(cg, name), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	return cg
}
