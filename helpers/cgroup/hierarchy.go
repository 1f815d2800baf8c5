package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/glove-sandbox/glove/mountinfo"
	"golang.org/x/sys/unix"
)

// hierarchy is one cgroup hierarchy the helper writes: the v2 unified one
// or a v1 controller's.
type hierarchy struct {
	name   string // "unified", "memory", "pids"
	parent int    // O_PATH descriptor of the delegated parent
}

// cgMount is one cgroup mount read from mountinfo.
type cgMount struct {
	v2    bool
	root  string // the hierarchy path the mount shows
	point string
	opts  map[string]bool
}

// parseMountinfo returns the cgroup and cgroup2 mounts of a
// /proc/self/mountinfo text. Mount points with escaped characters are
// skipped: a delegated hierarchy never needs them.
func parseMountinfo(text string) []cgMount {
	var out []cgMount
	for _, e := range mountinfo.Parse(text) {
		if e.FSType != "cgroup" && e.FSType != "cgroup2" {
			continue
		}
		if mountinfo.Escaped(e.Root) || mountinfo.Escaped(e.Point) {
			continue
		}
		m := cgMount{v2: e.FSType == "cgroup2", root: e.Root, point: e.Point, opts: map[string]bool{}}
		for _, o := range strings.Split(e.SuperOptions, ",") {
			if o != "" {
				m.opts[o] = true
			}
		}
		out = append(out, m)
	}
	return out
}

// parentPath is where the delegated parent lies under mount m, or "" when
// the mount does not show it (a mount of another part of the hierarchy).
func parentPath(m cgMount, parent string) string {
	if m.root == "/" {
		return path.Join(m.point, parent)
	}
	if rest, ok := strings.CutPrefix(parent, m.root+"/"); ok {
		return path.Join(m.point, rest)
	}
	return ""
}

// openHierarchy opens the delegated parent under m and checks the
// delegation: the directory must belong to the service user (us).
// Threat: a parent owned by anyone else was not delegated, and serving
// from it would either fail later or act on someone else's subtree.
func openHierarchy(name string, m cgMount, parent string) (hierarchy, error) {
	p := parentPath(m, parent)
	if p == "" {
		return hierarchy{}, fmt.Errorf("cgroup: %s hierarchy mounted at %s does not show %s", name, m.point, parent)
	}
	fd, err := openParent(p)
	if err != nil {
		return hierarchy{}, fmt.Errorf("cgroup: %s parent: %w", name, err)
	}
	st, err := fstat(fd)
	if err != nil {
		unix.Close(fd)
		return hierarchy{}, fmt.Errorf("cgroup: stat %s parent %s: %w", name, p, err)
	}
	if st.Uid != uint32(os.Getuid()) {
		unix.Close(fd)
		return hierarchy{}, fmt.Errorf("cgroup: %s parent %s is owned by uid %d, not delegated to uid %d", name, p, st.Uid, os.Getuid())
	}
	return hierarchy{name: name, parent: fd}, nil
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
		err := writeFile(dir, f.name, f.value)
		if err != nil && f.optional && isNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("set limit: %w", err)
		}
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }
