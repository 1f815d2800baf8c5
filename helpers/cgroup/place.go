// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"golang.org/x/sys/unix"
)

// place moves the process of a pidfd into the session. Threat: a
// compromised supervisor names a process that is not its own (root's,
// another user's) to confine or later kill it through cgroup.kill, or
// races a pid's reuse. So the process is named by a pidfd, never a pid;
// the pid is read from the pidfd's fdinfo, the owner from /proc/PID/status
// AFTER that, and the pidfd is checked alive again after reading the
// owner: if the pid had been reused in between, the pidfd (bound to the
// original process) reports it gone. The kernel checks again on write:
// v1 requires the writer's uid to match the process's, v2 write access to
// the common ancestor's cgroup.procs, which only the delegated subtree
// grants.
func (s *server) place(_ uint32, req *cgwire.PlaceRequest, fds []*os.File) (*cgwire.PlaceReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	pid, err := s.pidOf(int(fds[0].Fd()))
	if err != nil {
		return nil, nil, err
	}
	// v2 first: a process in the v2 session can always be killed with
	// it, even if a v1 write below fails. A process already in a
	// session cgroup is not written again: gloved starts the shim in the
	// v2 one (CLONE_INTO_CGROUP), and the shim joins the v1 ones itself
	// (cgwire.JoinRequest). A write that moves nothing still takes the
	// kernel's global cgroup_threadgroup_rwsem for writing, which waits
	// for an RCU grace period (measured: 5 to 19 ms per write, the whole
	// of Place, on the path of every session's start). Membership is read
	// here, by this helper, whatever the shim did: Place stays the check
	// that the process is in every session cgroup before it is released.
	for _, h := range s.all() {
		if err := s.in(h, dir, req.Session, func(d int) error {
			in, err := member(d, pid)
			if err != nil || in {
				return err
			}
			return writeFile(d, "cgroup.procs", pid)
		}); err != nil {
			return nil, nil, fmt.Errorf("cgroup: place %w", err)
		}
	}
	return &cgwire.PlaceReply{}, nil, nil
}

// member reports whether pid is listed in the cgroup.procs of the
// directory dir. Reading it takes no lock a write would.
func member(dir int, pid string) (bool, error) {
	procs, err := readFile(dir, "cgroup.procs")
	if err != nil {
		return false, err
	}
	for _, p := range strings.Fields(procs) {
		if p == pid {
			return true, nil
		}
	}
	return false, nil
}

// pidOf is the pid of a pidfd's process that is the service user's and
// still alive (place's threat).
func (s *server) pidOf(pidfd int) (string, error) {
	notPidfd, gone := refuse(wire.ErrBadRequest, "descriptor is not a pidfd"), refuse(wire.ErrRefused, "process exited")
	fs, err := fsType(pidfd)
	if err != nil {
		return "", fmt.Errorf("cgroup: place: %w", err)
	}
	if fs != pidfsMagic && fs != anonInodeMagic {
		return "", notPidfd
	}
	info, err := readFile(s.fdinfoFD, strconv.Itoa(pidfd))
	if err != nil {
		return "", fmt.Errorf("cgroup: place: %w", err)
	}
	// Before Linux 6.9 a pidfd is one of many anonymous inodes (eventfd,
	// signalfd, epoll ...); of those only a pidfd's fdinfo has a "Pid:"
	// line.
	if fs == anonInodeMagic && !strings.Contains("\n"+info, "\nPid:") {
		return "", notPidfd
	}
	// -1: the process exited; 0: it is in a pid namespace we cannot see
	// into.
	pid, _ := strconv.Atoi(field(info, "Pid:"))
	if pid <= 0 {
		return "", refuse(wire.ErrRefused, "process exited or not visible")
	}
	status, err := readFile(s.procFD, strconv.Itoa(pid)+"/status")
	if isNotExist(err) {
		return "", gone
	}
	if err != nil {
		return "", fmt.Errorf("cgroup: place: %w", err)
	}
	if uids := strings.Fields(field(status, "Uid:")); len(uids) == 0 || uids[0] != strconv.Itoa(s.uid) {
		return "", refuse(wire.ErrRefused, "process does not belong to the service user")
	}
	if st := field(status, "State:"); strings.HasPrefix(st, "Z") || strings.HasPrefix(st, "X") {
		return "", gone
	}
	live, err := alive(pidfd)
	if err != nil {
		return "", refuse(wire.ErrRefused, "process cannot be signalled by the service user")
	}
	if !live {
		return "", gone
	}
	return strconv.Itoa(pid), nil
}

// field is the text after "key" on the first line starting with it.
func field(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
