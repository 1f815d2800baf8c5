// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Snapshot is what a test could leave behind: mounts, attached loop
// devices, cgroups, processes of the service user, and the test process's
// open descriptors. Each entry is one line of text so a difference can be
// printed as it is.
type Snapshot map[string][]string

// Take records a snapshot; uid is the service user whose processes count
// (-1 for none).
func Take(uid int) (Snapshot, error) {
	s := Snapshot{}
	var err error
	if s["mount"], err = mounts(); err != nil {
		return nil, err
	}
	if s["loop"], err = loops(); err != nil {
		return nil, err
	}
	if s["cgroup"], err = cgroups(); err != nil {
		return nil, err
	}
	if s["process"], err = processes(uid); err != nil {
		return nil, err
	}
	if s["fd"], err = descriptors(); err != nil {
		return nil, err
	}
	return s, nil
}

// Diff lists what is in after and not in before ("+") and the reverse
// ("-"): a test must neither leave things behind nor remove what it found.
// The one exception is a cgroup that went away: the host's own service
// manager creates and removes cgroups for its own processes while a test
// runs (a long test on this kind of machine saw its tool runner's
// process_api cgroups come and go), and a cgroup that is gone is not a
// leak; Glove's helpers can remove only beneath their delegated parent,
// which their own tests check.
func Diff(before, after Snapshot) []string {
	var out []string
	kinds := make([]string, 0, len(after))
	for k := range after {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		b := set(before[k])
		a := set(after[k])
		for _, x := range after[k] {
			if !b[x] {
				out = append(out, fmt.Sprintf("+%s %s", k, x))
			}
		}
		for _, x := range before[k] {
			if !a[x] && k != "cgroup" {
				out = append(out, fmt.Sprintf("-%s %s", k, x))
			}
		}
	}
	return out
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// CheckLeaks snapshots now and fails the test if the snapshot taken when
// the test ends differs. Call it before the test starts anything: cleanups
// run last-in first-out, so this check runs after every later cleanup.
func CheckLeaks(t testing.TB, uid int) {
	t.Helper()
	before, err := Take(uid)
	if err != nil {
		t.Fatalf("leak snapshot: %v", err)
	}
	t.Cleanup(func() {
		after, err := settled(before, uid)
		if err != nil {
			t.Errorf("leak snapshot: %v", err)
			return
		}
		for _, d := range Diff(before, after) {
			t.Errorf("leak: %s%s", d, describeProcess(d))
		}
	})
}

// processGrace bounds the wait for processes that are still going away
// when a test ends: a helper's formatter exits once the helper is gone
// (killed, in the helper-loss tests) and is then reaped by init, which
// here (process_api as PID 1) takes up to about a second and a half.
const processGrace = 5 * time.Second

// settled takes the after snapshot, again while the only differences are
// new processes and processGrace has not passed: a process that
// disappears within it is not a leak, one that stays is.
func settled(before map[string][]string, uid int) (map[string][]string, error) {
	deadline := time.Now().Add(processGrace)
	for {
		after, err := Take(uid)
		if err != nil || time.Now().After(deadline) {
			return after, err
		}
		onlyProcesses := true
		diff := Diff(before, after)
		for _, d := range diff {
			if !strings.HasPrefix(d, "+process ") && !strings.HasPrefix(d, "-process ") {
				onlyProcesses = false
			}
		}
		if len(diff) == 0 || !onlyProcesses {
			return after, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mounts() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var out []string
	for _, l := range lines(string(data)) {
		if !hostServiceMount(l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// hostServiceMount reports a mount systemd makes for a unit of its own
// whenever the unit starts: a service's credentials under
// /run/credentials (systemd 254 and later; seen on Debian 13 when
// getty@tty1 started during a test). Glove attaches nothing to the host's
// mount table, let alone there, so such a mount is the host's, not a
// leak.
func hostServiceMount(line string) bool {
	f := strings.Fields(line)
	return len(f) > 4 && strings.HasPrefix(f[4], "/run/credentials/")
}

// loops lists attached loop devices with their backing files.
func loops() ([]string, error) {
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, fmt.Errorf("list loop devices: %w", err)
	}
	var out []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // detached between the listing and the read
		}
		dev := filepath.Base(filepath.Dir(filepath.Dir(p)))
		out = append(out, dev+" "+strings.TrimSpace(string(data)))
	}
	return out, nil
}

// cgroups lists every cgroup directory of every mounted hierarchy.
func cgroups() ([]string, error) {
	mounts, err := CgroupMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, root := range mounts {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // removed during the walk
			}
			if d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk cgroups under %s: %w", root, err)
		}
	}
	return out, nil
}

func processes(uid int) ([]string, error) {
	if uid < 0 {
		return nil, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // exited
		}
		var name, uidLine string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l := sc.Text()
			if v, ok := strings.CutPrefix(l, "Name:"); ok {
				name = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				uidLine = v
			}
		}
		f.Close()
		fs := strings.Fields(uidLine)
		if len(fs) > 0 && fs[0] == strconv.Itoa(uid) {
			out = append(out, e.Name()+" "+name)
		}
	}
	return out, nil
}

// descriptors lists the test process's open descriptors and what they
// refer to, leaving out the one used to list them.
func descriptors() ([]string, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("list descriptors: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list descriptors: %w", err)
	}
	self := strconv.Itoa(int(d.Fd()))
	var out []string
	for _, n := range names {
		if n == self {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		if err != nil {
			continue // closed by another goroutine meanwhile
		}
		out = append(out, n+" "+target)
	}
	return out, nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// describeProcess says, for a "+process PID NAME" leak, what the process
// is now: its state, its parent and its cgroup, so that a leak seen once
// under load says where it came from.
func describeProcess(leak string) string {
	f := strings.Fields(strings.TrimPrefix(leak, "+process "))
	if !strings.HasPrefix(leak, "+process ") || len(f) == 0 {
		return ""
	}
	status, err := os.ReadFile("/proc/" + f[0] + "/status")
	if err != nil {
		return " (gone by the report)"
	}
	var state, ppid string
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "State:"); ok {
			state = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			ppid = strings.TrimSpace(v)
		}
	}
	parent, _ := os.ReadFile("/proc/" + ppid + "/comm")
	cg, _ := os.ReadFile("/proc/" + f[0] + "/cgroup")
	cmd, _ := os.ReadFile("/proc/" + f[0] + "/cmdline")
	return fmt.Sprintf(" (state %s, parent %s %s, cmdline %q, cgroup %q)", state, ppid, strings.TrimSpace(string(parent)),
		strings.ReplaceAll(string(cmd), "\x00", " "), strings.TrimSpace(string(cg)))
}
