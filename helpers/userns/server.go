// SPDX-License-Identifier: Apache-2.0

package userns

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/userwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// noID is (uid_t)-1, which no map may name.
const noID = ^uint32(0)

// server is one helper process's single Create.
type server struct {
	cfg      *Config
	uid, gid uint32 // the service user's: the only ids a map may name
	proc     int    // /proc, O_PATH
}

func refuse(format string, args ...any) error {
	return &wire.Error{Code: wire.ErrRefused, Message: fmt.Sprintf(format, args...)}
}

// create makes the namespace. Order: every check of the request first,
// then the namespace (Clone, with CAP_SYS_ADMIN on one thread), its three
// files written from outside while its holder waits, the holder killed
// and reaped. On any failure the holder is still killed and reaped and
// the namespace's descriptor closed: nothing outlives a refused request.
func (s *server) create(_ uint32, q *userwire.CreateRequest, _ []*os.File) (*userwire.CreateReply, []int, error) {
	if !s.cfg.Enabled {
		return nil, nil, refuse("glove-userns is not enabled: the operator turns it on with \"enabled\": true in %s/userns.json", helperkit.ConfigDir)
	}
	if !names.Name(q.Session) {
		return nil, nil, refuse("session %q is not a session identifier", q.Session)
	}
	// One id, the service user's: the sandbox's user (the bundle's
	// process.user, 1000 in Glove's bundles) is the service user on the
	// host, and nothing else is mapped. -1 is no id (the kernel's
	// "invalid" uid).
	if q.UIDInside == noID || q.UIDOutside != s.uid || q.UIDCount != 1 {
		return nil, nil, refuse("uid map %d %d %d: only \"ID %d 1\" (one id inside, the service user outside) is made", q.UIDInside, q.UIDOutside, q.UIDCount, s.uid)
	}
	if q.GIDInside == noID || q.GIDOutside != s.gid || q.GIDCount != 1 {
		return nil, nil, refuse("gid map %d %d %d: only \"ID %d 1\" is made", q.GIDInside, q.GIDOutside, q.GIDCount, s.gid)
	}
	h, err := s.hold()
	if err != nil {
		return nil, nil, err
	}
	ns, ino, err := s.fill(h.pid, q)
	if err = errors.Join(err, h.end()); err != nil {
		if ns >= 0 {
			err = closeJoin(err, ns)
		}
		return nil, nil, err
	}
	return &userwire.CreateReply{Inode: ino}, []int{ns}, nil
}

// hold makes the namespace: a child, cloned with CLONE_NEWUSER while this
// thread holds CAP_SYS_ADMIN, that makes itself dumpable (its /proc files
// then belong to the service user, not to root: the helper itself stays
// undumpable) and waits, every signal blocked, until it is killed. Its
// readiness is one byte on a pipe.
func (s *server) hold() (*holder, error) {
	var p [2]int
	if err := pipe(&p); err != nil {
		return nil, fmt.Errorf("userns: pipe: %w", err)
	}
	var pid int
	err := helperkit.Raised(sysAdmin, func() (err error) { pid, err = cloneHolder(p[1]); return err })
	err = closeJoin(err, p[1])
	if err != nil {
		return nil, closeJoin(fmt.Errorf("userns: clone(CLONE_NEWUSER): %w", err), p[0])
	}
	h := &holder{pid: pid}
	// The write end is closed here, so a holder that died before its byte
	// is an end of file, not a wait for ever.
	rerr := readReady(p[0])
	if err := closeJoin(rerr, p[0]); err != nil {
		return nil, errors.Join(fmt.Errorf("userns: the namespace's holder did not get ready: %w", err), h.end())
	}
	return h, nil
}

// fill opens the holder's user namespace and writes setgroups "deny" and
// the two maps, then checks the namespace is the service user's.
func (s *server) fill(pid int, q *userwire.CreateRequest) (ns int, ino uint64, err error) {
	dir := strconv.Itoa(pid)
	if ns, err = openAt(s.proc, dir+"/ns/user", unix.O_RDONLY); err != nil {
		return -1, 0, fmt.Errorf("userns: open the namespace: %w", err)
	}
	for _, w := range []struct{ file, text string }{
		{"setgroups", "deny"}, // before gid_map: an unprivileged gid map needs it
		{"uid_map", fmt.Sprintf("%d %d 1\n", q.UIDInside, s.uid)},
		{"gid_map", fmt.Sprintf("%d %d 1\n", q.GIDInside, s.gid)},
	} {
		if err := writeAt(s.proc, dir+"/"+w.file, w.text); err != nil {
			return ns, 0, fmt.Errorf("userns: write %s: %w", w.file, err)
		}
	}
	owner, ino, err := nsIdentity(ns)
	switch {
	case err != nil:
		return ns, 0, fmt.Errorf("userns: the namespace's owner: %w", err)
	case owner != s.uid:
		return ns, 0, fmt.Errorf("userns: the namespace is owned by uid %d, not %d", owner, s.uid)
	}
	return ns, ino, nil
}

// holder is the child that holds a new namespace until the helper has its
// descriptor.
type holder struct{ pid int }

// end kills and reaps the holder. Its namespace lives on in the
// descriptor alone.
func (h *holder) end() error {
	if err := kill(h.pid); err != nil {
		return fmt.Errorf("userns: kill the namespace's holder %d: %w", h.pid, err)
	}
	if err := reap(h.pid); err != nil {
		return fmt.Errorf("userns: reap the namespace's holder %d: %w", h.pid, err)
	}
	return nil
}

// closeJoin closes fd, adding a failure to err.
func closeJoin(err error, fd int) error {
	if cerr := unix.Close(fd); cerr != nil {
		return errors.Join(err, fmt.Errorf("userns: close descriptor %d: %w", fd, cerr))
	}
	return err
}
