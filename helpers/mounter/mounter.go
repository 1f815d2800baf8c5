// SPDX-License-Identifier: Apache-2.0

// Package mounter is glove-mounter: it hands the supervisor, presumed
// compromised, detached bind and tmpfs mounts (open_tree_attr and fsmount
// descriptors) within the root-owned bounds of mounter.json. It holds
// CAP_SYS_ADMIN only and never attaches a mount: its allowlist has no
// mount or move_mount, and mount_setattr only on kernels without
// open_tree_attr, where it lives in private copies of the supervisor's
// mount namespace (syscalls_unsafe.go).
//
//   - Bind: the source descriptor must be a directory or a regular file
//     lying beneath one of source_roots by identity (bind.go); the clone
//     is always nosuid, nodev and private, read-only and noexec on request.
//   - Tmpfs: size and inode limit within max_tmpfs_bytes and
//     max_tmpfs_inodes, permission-only mode, root owned by the peer of
//     the control socket (tmpfs.go).
//
// A refused request gets a wire.Error (ErrBadRequest if malformed,
// ErrRefused if outside the bounds) and the helper keeps serving.
package mounter

import (
	"fmt"
	"os"
	"runtime"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-mounter"

// Hard ceilings no configuration may exceed.
const (
	HardMaxTmpfsBytes  = 1 << 40
	HardMaxTmpfsInodes = 1 << 24
)

// Config is glove-mounter's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// SourceRoots: a bind source must lie beneath one of these by identity.
	SourceRoots []string `json:"source_roots"`
	// MaxTmpfsBytes and MaxTmpfsInodes cap each tmpfs it creates.
	MaxTmpfsBytes  uint64 `json:"max_tmpfs_bytes"`
	MaxTmpfsInodes uint64 `json:"max_tmpfs_inodes"`
}

// Validate checks the bounds and names the first fault.
func (c *Config) Validate() error {
	for _, err := range []error{
		helperkit.CheckSchema(c.SchemaVersion),
		helperkit.CheckPathList("source_roots", c.SourceRoots),
		helperkit.CheckRange("max_tmpfs_bytes", c.MaxTmpfsBytes, HardMaxTmpfsBytes),
		helperkit.CheckRange("max_tmpfs_inodes", c.MaxTmpfsInodes, HardMaxTmpfsInodes),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Spec is glove-mounter for helperkit.Main. The bind clone is made with
// open_tree_attr where the kernel has it (6.15), else with the fallback
// (syscalls_unsafe.go); the allowlist holds the calls of the one chosen.
func Spec() helperkit.Spec {
	cfg := &Config{}
	fallback, clone := forceFallback || !HasOpenTreeAttr(), AttrSyscalls
	if fallback {
		clone = FallbackSyscalls
	}
	return helperkit.Spec{
		Name: Name, Config: cfg, Protocol: mountwire.Protocol, Serial: true,
		Syscalls: append(append([]bpf.Rule{}, Syscalls...), clone...),
		// helperkit has loaded and validated cfg; peer is never nil.
		Handlers: func(peer *unix.Ucred) ([]wire.Handler, error) {
			s, err := newServer(cfg, peer, fallback)
			if err != nil {
				return nil, err
			}
			return []wire.Handler{mountwire.Bind.Handle(s.bind), mountwire.Tmpfs.Handle(s.tmpfs)}, nil
		},
	}
}

// root is one source root, opened at start-up; name is the kernel's name
// of it (canonical, whatever symbolic links the configured path had).
type root struct {
	name string
	fd   int
	id   ident
}

// server holds what the handlers need, all of it opened or read before
// the helper restricts itself: once the seccomp filter is installed it
// can no longer open a path from the file system root.
type server struct {
	cfg    *Config
	roots  []root
	procFD int // /proc/self/fd, to read a source's kernel name (fdName)
	// uid and gid own the root of every tmpfs: the control socket's peer.
	uid, gid uint32
	pageSize uint64
	// fallback: no open_tree_attr (syscalls_unsafe.go).
	fallback bool
}

// newServer opens every source root and /proc/self/fd. A missing or
// unusable root is a start-up error: serving with fewer roots than the
// operator wrote would silently change the bounds.
func newServer(cfg *Config, peer *unix.Ucred, fallback bool) (*server, error) {
	s := &server{cfg: cfg, uid: peer.Uid, gid: peer.Gid, pageSize: uint64(os.Getpagesize()), fallback: fallback}
	if fallback {
		// Never unlocked: helperkit.Run serves every request on this
		// goroutine, so on this thread, in this thread's copy of the mount
		// namespace (enterPrivateMountNS), where the roots are opened next.
		runtime.LockOSThread()
		if err := enterPrivateMountNS(); err != nil {
			return nil, fmt.Errorf("mounter: %w", err)
		}
	}
	var err error
	if s.procFD, err = openDir(unix.AT_FDCWD, "/proc/self/fd"); err != nil {
		return nil, fmt.Errorf("mounter: open /proc/self/fd: %w", err)
	}
	for _, p := range cfg.SourceRoots {
		fd, err := openDir(unix.AT_FDCWD, p)
		if err == nil {
			s.roots = append(s.roots, root{fd: fd})
			r := &s.roots[len(s.roots)-1]
			if r.id, err = identOf(fd); err == nil {
				r.name, err = fdName(s.procFD, fd)
			}
		}
		if err != nil {
			for _, r := range s.roots {
				unix.Close(r.fd)
			}
			unix.Close(s.procFD)
			return nil, fmt.Errorf("mounter: open source root %s: %w", p, err)
		}
	}
	return s, nil
}

// refuse is a request-level refusal: sent as the reply, and the helper
// keeps serving. Its messages hold no path and no peer-controlled bytes.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
