// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// checkUserns checks the descriptor --userns-fd names, in stage 0 before
// anything of the sandbox exists: it must be a user namespace (threat: a
// descriptor of another kind handed to setns, or a file the waiter would
// take for one), owned by this process's effective uid (threat: the
// sandbox built in a namespace another user, root included, controls and
// can enter with every capability), and a child of this process's own
// user namespace (threat: a namespace nested in another one, whose
// ancestors someone else may have mapped and can reach from outside).
// The waiter then checks what only the namespace's inside shows: that its
// maps make it process.user's uid and gid there, mapped to the service
// user's ids alone, with setgroups denied (shim/cstage/stage0.c,
// join_userns).
func checkUserns(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return err
	}
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("not a namespace (NS_GET_NSTYPE: %w)", err)
	}
	if typ != unix.CLONE_NEWUSER {
		return fmt.Errorf("a %s namespace, not a user namespace", nsTypeName(typ))
	}
	owner, err := unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID)
	if err != nil {
		return fmt.Errorf("its owner: NS_GET_OWNER_UID: %w", err)
	}
	if euid := os.Geteuid(); owner != uint32(euid) {
		return fmt.Errorf("a user namespace owned by uid %d, not by uid %d", owner, euid)
	}
	// NS_GET_PARENT opens the parent close-on-exec; EPERM means the
	// parent lies outside this process's user namespace (the namespace
	// is this process's own or an ancestor's).
	parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
	if err != nil {
		return fmt.Errorf("not a child of this process's user namespace (NS_GET_PARENT: %w)", err)
	}
	var pst, own unix.Stat_t
	err = unix.Fstat(parent, &pst)
	if cerr := unix.Close(parent); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("its parent: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/user", &own); err != nil {
		return fmt.Errorf("this process's user namespace: %w", err)
	}
	if pst.Dev != own.Dev || pst.Ino != own.Ino {
		return errors.New("a user namespace nested in another one, not a child of this process's user namespace")
	}
	return nil
}

// nsTypeName names a namespace type NS_GET_NSTYPE returns.
func nsTypeName(t int) string {
	switch t {
	case unix.CLONE_NEWNS:
		return "mount"
	case unix.CLONE_NEWPID:
		return "pid"
	case unix.CLONE_NEWNET:
		return "network"
	case unix.CLONE_NEWIPC:
		return "ipc"
	case unix.CLONE_NEWUTS:
		return "uts"
	case unix.CLONE_NEWCGROUP:
		return "cgroup"
	case unix.CLONE_NEWTIME:
		return "time"
	}
	return fmt.Sprintf("type %#x", t)
}
