// SPDX-License-Identifier: Apache-2.0

package usermode

import (
	"errors"
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/helpers/wire/userwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"golang.org/x/sys/unix"
)

// Namespace asks a glove-userns, started by start (ready: it has answered
// Hello), for session's user namespace, and ends the helper: one helper
// process per namespace. The maps asked for are uid and gid inside (the
// sandbox's user: glove-shim requires the bundle's mappings exactly) onto
// the caller's own uid and gid (the service user's, the helper's too). The descriptor is checked
// before it is returned: a user namespace, owned by the caller's uid,
// the one the reply names. The caller closes it.
func Namespace(start func(name string) (*helperproc.Proc, error), session string, uid, gid uint32) (*os.File, error) {
	p, err := start("glove-userns")
	if err != nil {
		return nil, err
	}
	q := &userwire.CreateRequest{Session: session, UIDInside: uid, UIDOutside: uint32(os.Getuid()), UIDCount: 1,
		GIDInside: gid, GIDOutside: uint32(os.Getgid()), GIDCount: 1}
	r, files, err := wirecall.Call(userwire.Create, p.Client, q, nil)
	if cerr := p.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("glove-userns exit: %w", cerr))
	}
	if err == nil {
		err = checkNamespace(files[0], r.Inode)
	}
	if err != nil {
		for _, f := range files {
			// Nothing was handed on: a failed close of a descriptor
			// of this process only is reported with the failure.
			if cerr := f.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		return nil, fmt.Errorf("glove-userns: %w", err)
	}
	return files[0], nil
}

// checkNamespace checks f is a user namespace owned by this process's
// uid, of inode ino. Threat: a helper binary swapped or confused handing
// the shim something else to join (the shim checks too, before it joins).
func checkNamespace(f *os.File, ino uint64) error {
	fd := int(f.Fd())
	if typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE); err != nil || typ != unix.CLONE_NEWUSER {
		return fmt.Errorf("the descriptor is not a user namespace (NS_GET_NSTYPE %#x, %v)", typ, err)
	}
	owner, err := unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID)
	if err != nil {
		return fmt.Errorf("the namespace's owner: %w", err)
	}
	if owner != uint32(os.Getuid()) {
		return fmt.Errorf("the namespace is owned by uid %d, not %d", owner, os.Getuid())
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat the namespace: %w", err)
	}
	if st.Ino != ino {
		return fmt.Errorf("the namespace is inode %d, the reply said %d", st.Ino, ino)
	}
	return nil
}

// Decide is Choose for this host as the calling process's user (gloved,
// glove run: the service user), probing with the glove-shim at shim, with
// start to try glove-userns when the host needs it (a namespace made for
// session "startup-probe" and closed at once).
func Decide(shim string, start func(name string) (*helperproc.Proc, error)) (string, error) {
	return Choose(ReadFacts("/proc/sys"), Probe(shim), func() error {
		ns, err := Namespace(start, "startup-probe", 0, 0)
		if err != nil {
			return err
		}
		return ns.Close()
	})
}
