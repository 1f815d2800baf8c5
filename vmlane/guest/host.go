// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/mountinfo"
	"golang.org/x/sys/unix"
)

// Host-side probes: what the guest's kernel and file systems say,
// independently of anything Glove reports.

// CgroupMount is one mounted cgroup hierarchy (its root).
type CgroupMount struct {
	V2          bool
	Point       string
	Controllers []string // v1: the mount's controllers
}

// ParseCgroupMounts reads cgroup and cgroup2 mounts of a mountinfo text
// that show their hierarchy's root.
func ParseCgroupMounts(info string) []CgroupMount {
	var out []CgroupMount
	for _, e := range mountinfo.Parse(info) {
		if e.Root != "/" {
			continue
		}
		switch e.FSType {
		case "cgroup2":
			out = append(out, CgroupMount{V2: true, Point: e.Point})
		case "cgroup":
			out = append(out, CgroupMount{Point: e.Point, Controllers: e.CgroupControllers()})
		}
	}
	return out
}

// Cgroups is the host's cgroup layout.
type Cgroups struct {
	V2 string            // the cgroup2 mount point ("" if none)
	V1 map[string]string // v1 controller -> mount point
}

// ReadCgroups reads this mount namespace's cgroup mounts.
func ReadCgroups() (Cgroups, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Cgroups{}, err
	}
	c := Cgroups{V1: map[string]string{}}
	for _, m := range ParseCgroupMounts(string(data)) {
		if m.V2 {
			if c.V2 == "" {
				c.V2 = m.Point
			}
			continue
		}
		for _, ctl := range m.Controllers {
			c.V1[ctl] = m.Point
		}
	}
	return c, nil
}

// Pure reports whether the host has cgroup v2 alone (no v1 controller
// hierarchy).
func (c Cgroups) Pure() bool { return c.V2 != "" && len(c.V1) == 0 }

// UnitCgroupDefault is the unit's cgroup, cgroup.json's parent as
// shipped.
const UnitCgroupDefault = "/system.slice/gloved.service"

// UnitCgroup is glove-cgroup's parent from /etc/glove/cgroup.json (the
// cgroup the sessions are created beneath), or the default.
func UnitCgroup() string {
	data, err := os.ReadFile("/etc/glove/cgroup.json")
	if err != nil {
		return UnitCgroupDefault
	}
	var c struct {
		Parent string `json:"parent"`
	}
	if json.Unmarshal(data, &c) != nil || !strings.HasPrefix(c.Parent, "/") {
		return UnitCgroupDefault
	}
	return c.Parent
}

// ProcCgroupV2 is the v2 cgroup of pid ("0::" line), relative to the
// hierarchy's root.
func ProcCgroupV2(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("pid %d has no cgroup v2 membership: %s", pid, strings.TrimSpace(string(data)))
}

// SubDirs lists the cgroup directories below dir (relative paths, depth
// first, at most depth levels).
func SubDirs(dir string, depth int) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Count(rel, "/") >= depth {
			return fs.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	return out
}

// FindCgroup finds a directory named name below dir (at most three levels
// down), or "".
func FindCgroup(dir, name string) string {
	for _, rel := range SubDirs(dir, 3) {
		if filepath.Base(rel) == name {
			return filepath.Join(dir, rel)
		}
	}
	return ""
}

// ReadTrim reads a small file, trimmed.
func ReadTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

// CgroupProcs lists the pids in a cgroup directory (cgroup.procs).
func CgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Loop is one bound loop device.
type Loop struct {
	Dev     string // /dev/loopN
	Backing string
}

// LoopDevices lists the bound loop devices from sysfs.
func LoopDevices() []Loop {
	m, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []Loop
	for _, p := range m {
		dev := filepath.Base(filepath.Dir(filepath.Dir(p)))
		out = append(out, Loop{Dev: "/dev/" + dev, Backing: ReadTrim(p)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dev < out[j].Dev })
	return out
}

// Mount is one line of a mountinfo file.
type Mount struct {
	Point, FSType, Source, Root, Options string
}

// ReadMountinfo parses /proc/PID/mountinfo (pid 0: self).
func ReadMountinfo(pid int) ([]Mount, error) {
	p := "/proc/self/mountinfo"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/mountinfo", pid)
	}
	es, err := mountinfo.Read(p, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Mount, 0, len(es))
	for _, e := range es {
		out = append(out, Mount{Root: e.Root, Point: e.Point, Options: e.Options, FSType: e.FSType, Source: e.Source})
	}
	return out, nil
}

// Proc is one process.
type Proc struct {
	PID    int
	UID    int
	Comm   string
	Cgroup string
}

func (p Proc) String() string { return fmt.Sprintf("%d(%s uid %d %s)", p.PID, p.Comm, p.UID, p.Cgroup) }

// Processes lists every process with its real uid, name and v2 cgroup.
func Processes() []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		p := Proc{PID: pid, UID: -1}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					p.UID, _ = strconv.Atoi(f[0])
				}
			}
			if v, ok := strings.CutPrefix(l, "Name:"); ok {
				p.Comm = strings.TrimSpace(v)
			}
		}
		p.Cgroup, _ = ProcCgroupV2(pid)
		out = append(out, p)
	}
	return out
}

// ProcessesOf lists the processes of uid.
func ProcessesOf(uid int) []Proc {
	var out []Proc
	for _, p := range Processes() {
		if p.UID == uid {
			out = append(out, p)
		}
	}
	return out
}

// LandlockABI asks the kernel for its Landlock ABI version.
func LandlockABI() (int, error) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(abi), nil
}

// FileCaps reads a file's capability sets (permitted, inheritable,
// effective flag); no attribute is none.
func FileCaps(path string) (perm, inh uint64, eff bool, err error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	return DecodeFileCaps(buf[:n])
}

// DecodeFileCaps decodes vfs_cap_data (revisions 1 to 3).
func DecodeFileCaps(b []byte) (perm, inh uint64, eff bool, err error) {
	if len(b) < 4 {
		return 0, 0, false, fmt.Errorf("capability attribute of %d bytes", len(b))
	}
	le := binary.LittleEndian
	magic := le.Uint32(b)
	want := map[uint32]int{0x01000000: 12, 0x02000000: 20, 0x03000000: 24}[magic&0xff000000]
	if want == 0 || len(b) != want {
		return 0, 0, false, fmt.Errorf("capability attribute: revision %#x, %d bytes", magic>>24, len(b))
	}
	eff = magic&1 != 0
	perm, inh = uint64(le.Uint32(b[4:])), uint64(le.Uint32(b[8:]))
	if want > 12 {
		perm |= uint64(le.Uint32(b[12:])) << 32
		inh |= uint64(le.Uint32(b[16:])) << 32
	}
	return perm, inh, eff, nil
}

// BootID is the kernel's boot id.
func BootID() string { return ReadTrim("/proc/sys/kernel/random/boot_id") }
