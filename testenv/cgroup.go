// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/mountinfo"
)

// CgroupParent is the delegated parent glove-cgroup's test configuration
// names (relative to each hierarchy's root).
func CgroupParent(base string) string { return "/" + filepath.Base(base) }

// CgroupMounts lists the mount points of every mounted cgroup hierarchy
// (v1 and v2), as the leak check sees them.
func CgroupMounts() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var out []string
	for _, e := range mountinfo.Parse(string(data)) {
		if (e.FSType == "cgroup" || e.FSType == "cgroup2") && e.Root == "/" {
			out = append(out, e.Point)
		}
	}
	return out, nil
}

// delegateCgroups creates the parent in every hierarchy and delegates it
// to the service user as an installer would: the directory and the files
// that moving processes and creating children need (v1: cgroup.procs,
// tasks; v2: cgroup.procs, cgroup.subtree_control, cgroup.threads).
// It runs in setup, before any test's leak snapshot.
func (e *Env) delegateCgroups() error {
	mounts, err := CgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, CgroupParent(e.Base))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		e.cgroupDirs = append(e.cgroupDirs, dir)
		if err := e.delegate(dir); err != nil {
			return err
		}
		// On cgroup v2 a supervisor moves itself into the leaf
		// "supervisor" (supervisor/internal/cgleaf); it is made here, as
		// systemd's DelegateSubgroup= makes it, so that no test's leak
		// check sees it appear.
		if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); err == nil {
			leaf := filepath.Join(dir, "supervisor")
			if err := os.Mkdir(leaf, 0o755); err != nil {
				return fmt.Errorf("create cgroup %s: %w", leaf, err)
			}
			if err := e.delegate(leaf); err != nil {
				return err
			}
		}
	}
	return nil
}

// delegate hands cgroup dir to the service user.
func (e *Env) delegate(dir string) error {
	for _, name := range []string{".", "cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"} {
		err := os.Chown(filepath.Join(dir, name), e.UID, e.GID)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delegate cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// removeCgroups kills whatever is left in the delegated parents and
// removes them with everything below, deepest first.
func (e *Env) removeCgroups() error {
	var errs []string
	for _, dir := range e.cgroupDirs {
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			if err := RmdirKilling(d); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	e.cgroupDirs = nil
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// RmdirKilling removes the cgroup directory dir, killing what is still in
// it first and retrying while it empties (for a test's own cgroups).
func RmdirKilling(dir string) error {
	var err error
	for range 100 {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, perr := strconv.Atoi(f); perr == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}
