// Package mounter is glove-mounter: it hands the supervisor detached bind
// and tmpfs mounts (open_tree_attr/fsmount descriptors) within root-owned
// bounds. It holds CAP_SYS_ADMIN and nothing else, and never attaches a
// mount to any mount table: it has no mount or move_mount in its
// allowlist, and mount_setattr only on kernels without open_tree_attr,
// where it lives in private copies of the supervisor's mount namespace.
//
// The supervisor is presumed compromised. Every request is checked
// against the bounds in mounter.json:
//
//   - Bind: the source descriptor must be a directory or a regular file
//     lying beneath one of source_roots by identity (bind.go); the clone
//     is always nosuid, nodev and private, read-only and noexec on request.
//   - Tmpfs: size and inode limit within max_tmpfs_bytes and
//     max_tmpfs_inodes, permission-only mode, root owned by the peer of
//     the control socket (tmpfs.go).
//
// A refused request is answered with a wire.Error (ErrBadRequest for a
// malformed request, ErrRefused for one outside the bounds) and the
// helper keeps serving.
package mounter

import (
	"fmt"
	"os"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-mounter"

// ConfigFile is the bounds file under helperkit.ConfigDir, from the
// capability table's row.
var ConfigFile = captable.MustLookup(Name).Bounds

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

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckPathList("source_roots", c.SourceRoots); err != nil {
		return err
	}
	if err := helperkit.CheckRange("max_tmpfs_bytes", c.MaxTmpfsBytes, HardMaxTmpfsBytes); err != nil {
		return err
	}
	return helperkit.CheckRange("max_tmpfs_inodes", c.MaxTmpfsInodes, HardMaxTmpfsInodes)
}

// Spec is glove-mounter for helperkit.Main.
//
// The bind clone is made with open_tree_attr where the kernel has it
// (6.15) and with open_tree + mount_setattr, from private copies of the
// supervisor's mount namespace, where it does not (syscalls_unsafe.go
// says why that keeps mount_setattr off every mount that matters). The
// allowlist holds the calls of the one chosen.
func Spec() helperkit.Spec {
	cfg := &Config{}
	fallback := forceFallback || !HasOpenTreeAttr()
	rules := append(append([]bpf.Rule{}, Syscalls...), AttrSyscalls...)
	if fallback {
		rules = append(append([]bpf.Rule{}, Syscalls...), FallbackSyscalls...)
	}
	return helperkit.Spec{
		Name: Name, Config: cfg, Syscalls: rules,
		Protocol: mountwire.Protocol,
		Handlers: func(peer *unix.Ucred) ([]wire.Handler, error) {
			s, err := newServer(cfg, peer, fallback)
			if err != nil {
				return nil, err
			}
			return []wire.Handler{mountwire.Bind.Handle(s.bind), mountwire.Tmpfs.Handle(s.tmpfs)}, nil
		},
	}
}

// root is one source root, opened at start-up.
type root struct {
	// name is the kernel's name of the opened root (canonical, whatever
	// symbolic links the configured path went through); parentOf matches
	// a regular file's kernel name against it.
	name string
	fd   int
	id   ident
}

// server holds what the handlers need, all of it opened or read before
// the helper restricts itself: once the seccomp filter is installed it
// can no longer open a path from the file system root.
type server struct {
	cfg   *Config
	roots []root
	// procFD is this process's /proc/self/fd: the kernel's name of a
	// regular-file source is read from it (bind.go).
	procFD int
	// uid and gid own the root of every tmpfs: the control socket's peer.
	uid, gid uint32
	pageSize uint64
	// fallback: no open_tree_attr; the helper lives in private copies of
	// the supervisor's mount namespace and clones with open_tree +
	// mount_setattr.
	fallback bool
}

// newServer opens every source root and /proc/self/fd. A missing or
// unusable root is a start-up error: serving with fewer roots than the
// operator wrote would silently change the bounds.
func newServer(cfg *Config, peer *unix.Ucred, fallback bool) (*server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mounter: configuration not loaded: %w", err)
	}
	if peer == nil {
		return nil, fmt.Errorf("mounter: no peer credentials")
	}
	s := &server{cfg: cfg, procFD: -1, uid: peer.Uid, gid: peer.Gid, pageSize: uint64(os.Getpagesize()), fallback: fallback}
	if fallback {
		// Before the roots are opened: they must be mounts of the copy.
		if err := enterPrivateMountNS(); err != nil {
			return nil, fmt.Errorf("mounter: %w", err)
		}
	}
	if err := s.open(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *server) open() error {
	var err error
	if s.procFD, err = openDir(unix.AT_FDCWD, "/proc/self/fd"); err != nil {
		return fmt.Errorf("mounter: open /proc/self/fd: %w", err)
	}
	for _, p := range s.cfg.SourceRoots {
		fd, err := openDir(unix.AT_FDCWD, p)
		if err != nil {
			return fmt.Errorf("mounter: open source root %s: %w", p, err)
		}
		s.roots = append(s.roots, root{fd: fd})
		r := &s.roots[len(s.roots)-1]
		if r.id, err = identOf(fd); err != nil {
			return fmt.Errorf("mounter: source root %s: %w", p, err)
		}
		if r.name, err = fdName(s.procFD, fd); err != nil {
			return fmt.Errorf("mounter: source root %s: %w", p, err)
		}
	}
	return nil
}

func (s *server) close() {
	for _, r := range s.roots {
		unix.Close(r.fd)
	}
	s.roots = nil
	if s.procFD >= 0 {
		unix.Close(s.procFD)
		s.procFD = -1
	}
}

// refuse is a request-level refusal: the server sends it as the reply and
// keeps serving.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	// The messages name no path and no peer-controlled bytes; the cut is
	// only a guard so an overlong text cannot turn a refusal into an
	// encoding failure.
	msg := fmt.Sprintf(format, args...)
	if len(msg) > wire.MaxErrorLen {
		msg = strings.ToValidUTF8(msg[:wire.MaxErrorLen], "")
	}
	return &wire.Error{Code: code, Message: msg}
}
