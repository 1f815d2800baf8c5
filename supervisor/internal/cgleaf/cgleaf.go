// SPDX-License-Identifier: Apache-2.0

// Package cgleaf moves a supervisor (gloved, or glove run) into the leaf
// cgroup "supervisor" of the cgroup v2 subtree delegated to it, before it
// starts any helper.
//
// Why: on cgroup v2 a cgroup whose subtree_control enables controllers
// may hold no process of its own (the no-internal-processes rule), so
// glove-cgroup can enable memory and pids for the sessions below the
// delegated cgroup only once the supervisor has left it. systemd 254 and
// later do this move themselves (DelegateSubgroup=supervisor, in the
// shipped unit); systemd 252 (Debian 12) does not, and neither does
// anything else that hands a process a delegated cgroup. A session's
// cgroup and the supervisor's leaf are then siblings, and their common
// ancestor, the delegated cgroup, is writable by the service user, as
// moving the shim into its session (CLONE_INTO_CGROUP) requires.
//
// The move needs no privilege: the delegated cgroup and its cgroup.procs
// belong to the service user. A cgroup not owned by the caller was not
// delegated to it and is left alone (an interactive login's scope, say);
// so is everything when the caller is root, which is never the service
// user.
package cgleaf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/glove-sandbox/glove/mountinfo"
	"golang.org/x/sys/unix"
)

// Leaf is the name of the supervisor's cgroup below the delegated one.
// The shipped unit's DelegateSubgroup= names the same leaf.
const Leaf = "supervisor"

// Paths are the files Enter reads; tests point them elsewhere.
type Paths struct {
	// SelfCgroup is /proc/self/cgroup, Mountinfo /proc/self/mountinfo.
	SelfCgroup, Mountinfo string
}

// System is the running process's view.
var System = Paths{SelfCgroup: "/proc/self/cgroup", Mountinfo: "/proc/self/mountinfo"}

// Result says what Enter found and did.
type Result struct {
	// Cgroup is the v2 cgroup the process lives in afterwards ("" when
	// there is no cgroup v2 hierarchy).
	Cgroup string
	// Moved is true when Enter moved the process into the leaf.
	Moved bool
	// Why explains a decision not to move, for the log.
	Why string
}

// Enter moves the calling process into Leaf below its current cgroup v2
// cgroup when that cgroup is delegated to the caller (owned by its uid)
// and is not a Leaf already. It is called before any helper starts, so
// that every helper and session starts from the leaf.
func Enter(p Paths) (Result, error) {
	cg, err := v2Cgroup(p.SelfCgroup)
	if err != nil {
		return Result{}, err
	}
	if cg == "" {
		return Result{Why: "no cgroup v2 membership"}, nil
	}
	res := Result{Cgroup: cg}
	if os.Geteuid() == 0 {
		res.Why = "running as root: no cgroup is delegated to root"
		return res, nil
	}
	if path.Base(cg) == Leaf {
		res.Why = "already in the supervisor leaf"
		return res, nil
	}
	mnt, err := v2Mount(p.Mountinfo)
	if err != nil {
		return res, err
	}
	if mnt == "" {
		res.Why = "no cgroup2 file system mounted at its root"
		return res, nil
	}
	dir := path.Join(mnt, cg)
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return res, fmt.Errorf("cgroup leaf: stat own cgroup %s: %w", cg, err)
	}
	if int(st.Uid) != os.Geteuid() {
		res.Why = fmt.Sprintf("own cgroup %s is owned by uid %d: not delegated", cg, st.Uid)
		return res, nil
	}
	leaf := path.Join(dir, Leaf)
	if err := unix.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return res, fmt.Errorf("cgroup leaf: create %s/%s: %w", cg, Leaf, err)
	}
	// The leaf must be a directory of ours (cgroupfs has no symbolic
	// links, but the check costs nothing and states the rule).
	if err := unix.Lstat(leaf, &st); err != nil {
		return res, fmt.Errorf("cgroup leaf: stat %s/%s: %w", cg, Leaf, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
		return res, fmt.Errorf("cgroup leaf: %s/%s is not a cgroup of uid %d", cg, Leaf, os.Geteuid())
	}
	// Writing "0" moves the writer's whole thread group.
	if err := writeOnce(path.Join(leaf, "cgroup.procs"), "0"); err != nil {
		return res, fmt.Errorf("cgroup leaf: move into %s/%s: %w", cg, Leaf, err)
	}
	after, err := v2Cgroup(p.SelfCgroup)
	if err != nil {
		return res, err
	}
	if after != path.Join(cg, Leaf) {
		return res, fmt.Errorf("cgroup leaf: moved into %s/%s but the process is in %s", cg, Leaf, after)
	}
	return Result{Cgroup: after, Moved: true}, nil
}

func writeOnce(name, data string) error {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, werr := unix.Write(fd, []byte(data))
	cerr := unix.Close(fd)
	if werr != nil {
		return werr
	}
	return cerr
}

// v2Cgroup is the cgroup v2 path in a /proc/PID/cgroup text ("0::/x"),
// or "" when the process has none. A path the kernel marks as outside
// the reader's cgroup namespace root (" (deleted)" or unreachable) is
// returned as written and fails later checks.
func v2Cgroup(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cgroup leaf: read %s: %w", file, err)
	}
	return ParseSelfCgroup(data), nil
}

// ParseSelfCgroup returns the cgroup v2 line's path of a /proc/PID/cgroup
// text, or "".
func ParseSelfCgroup(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return rest
		}
	}
	return ""
}

// v2Mount is the mount point of a cgroup2 file system that shows its
// hierarchy's root, from a mountinfo text.
func v2Mount(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cgroup leaf: read %s: %w", file, err)
	}
	return ParseV2Mount(data), nil
}

// ParseV2Mount returns the first cgroup2 mount point whose root is "/" in
// a mountinfo text, or "". Mount points with escaped characters are
// skipped: the cgroup file system is never mounted at such a name.
func ParseV2Mount(data []byte) string {
	for _, e := range mountinfo.Parse(string(data)) {
		if e.FSType == "cgroup2" && e.Root == "/" && !mountinfo.Escaped(e.Point) {
			return e.Point
		}
	}
	return ""
}
