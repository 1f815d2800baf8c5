// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// hierarchy is one cgroup hierarchy the helper writes: the v2 unified one
// or a v1 controller's.
type hierarchy struct {
	name   string // "unified", "memory", "pids"
	parent int    // O_PATH descriptor of the delegated parent
}

// mount is where a hierarchy is looked for (systemd's places: cgroup2 at
// /sys/fs/cgroup on a pure v2 host, at /sys/fs/cgroup/unified beside the
// v1 controllers' on a hybrid one), its file system, and a file its
// delegated parent must have: cgroup.kill (Linux 5.14), how a session is
// killed, or the limit file only a v1 hierarchy of that controller has.
type mount struct {
	name   string
	points []string
	magic  int64
	proof  string
}

var (
	v2Mount  = mount{"unified", []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}, unix.CGROUP2_SUPER_MAGIC, "cgroup.kill"}
	v1Mounts = []mount{ // memory, then pids: server.v1's order
		{"memory", []string{"/sys/fs/cgroup/memory"}, unix.CGROUP_SUPER_MAGIC, "memory.limit_in_bytes"},
		{"pids", []string{"/sys/fs/cgroup/pids"}, unix.CGROUP_SUPER_MAGIC, "pids.max"},
	}
)

// openHierarchy opens the delegated parent at the first of m's places
// where it exists (it never mounts, nor reads mountinfo) and checks the
// very descriptor it will serve from: fstatfs shows m's file system (a
// directory of any other, bound or mounted there, is refused), and it
// has m.proof. Threat: a parent owned by anyone else was not delegated,
// and serving from it would either fail later or act on someone else's
// subtree, so it must belong to the service user (us).
func openHierarchy(m mount, parent string) (hierarchy, error) {
	var errs []error
	for _, pt := range m.points {
		p := path.Join(pt, parent)
		fd, err := openParent(p)
		if isNotExist(err) {
			errs = append(errs, err)
			continue
		}
		if err == nil {
			if err = checkParent(fd, m); err == nil {
				return hierarchy{name: m.name, parent: fd}, nil
			}
			unix.Close(fd)
			err = fmt.Errorf("%s: %w", p, err)
		}
		return hierarchy{}, fmt.Errorf("cgroup: %s parent: %w", m.name, err)
	}
	return hierarchy{}, fmt.Errorf("cgroup: %s parent: %w", m.name, errors.Join(errs...))
}

func checkParent(fd int, m mount) error {
	fs, err := fsType(fd)
	if err != nil {
		return err
	}
	st, err := fstat(fd)
	switch {
	case err != nil:
		return fmt.Errorf("fstat: %w", err)
	case fs != m.magic:
		return fmt.Errorf("not on a %s cgroup file system", m.name)
	case st.Uid != uint32(os.Getuid()):
		return fmt.Errorf("owned by uid %d, not delegated to uid %d", st.Uid, os.Getuid())
	}
	if fd, err = openPathAt(fd, m.proof); err != nil {
		return fmt.Errorf("no %s: %w", m.proof, err)
	}
	unix.Close(fd)
	return nil
}

// v2Limits is what the session's v2 limit files receive: the memory
// limit with swap disabled and the OOM killer taking the whole session
// at once, and the pids limit. Optional files (a kernel or host without
// swap accounting, an older kernel) are skipped.
func v2Limits(mem, pids uint64) []limitFile {
	return []limitFile{
		{"memory.max", fmt.Sprint(mem), false},
		{"memory.swap.max", "0", true},
		{"memory.oom.group", "1", true},
		{"pids.max", fmt.Sprint(pids), false},
	}
}

// v1MemoryLimits sets memory.limit_in_bytes, then the memory+swap limit
// to the same value (swap disabled; the kernel requires memsw ≥ limit,
// so this order). Without swap accounting, swappiness 0 is the nearest.
func v1MemoryLimits(mem uint64) []limitFile {
	return []limitFile{
		{"memory.limit_in_bytes", fmt.Sprint(mem), false},
		{"memory.memsw.limit_in_bytes", fmt.Sprint(mem), true},
		{"memory.swappiness", "0", true},
	}
}

func v1PidsLimits(pids uint64) []limitFile {
	return []limitFile{{"pids.max", fmt.Sprint(pids), false}}
}

type limitFile struct {
	name, value string
	optional    bool
}

// writeLimits writes each file in the session directory dir.
func writeLimits(dir int, files []limitFile) error {
	for _, f := range files {
		if err := writeFile(dir, f.name, f.value); err != nil && !(f.optional && isNotExist(err)) {
			return fmt.Errorf("set limit: %w", err)
		}
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }
