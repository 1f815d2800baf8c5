// SPDX-License-Identifier: Apache-2.0

// Package loopext4format is glove-loopext4-format, glove-loopext4's
// formatter: it does the file work of glove-loopext4's Create, which
// needs no capability (one executable per privilege and purpose): it
// creates the image in the materialization root, allocates it, runs
// mkfs.ext4 on it and makes it durable, or removes it again, holding no
// capability, under an allowlist of its own.
//
// mkfs.ext4 does not run under glove-loopext4's seccomp allowlist. A
// filter is inherited across fork and execve and filters only stack, so
// a child the helper forked once restricted could never do more than the
// helper's own list allows; that list used to carry mkfs.ext4's ~45
// calls (execve, clone, pidfd_*, waitid, prctl among them) for the whole
// life of the helper. Instead, before it restricts itself, the helper
// starts this executable (found next to its own, root-owned all the way
// up, executed from a descriptor): no file capability, so it starts
// with none, and it drops to its empty row anyway first thing. For each
// Create the helper hands it the materialization root, the image's name,
// size and owner, and the checked mkfs.ext4 over a socket pair
// (helpers/wire/formatwire), and gets the new image back, which it
// checks before it answers the supervisor (image.go). The formatter
// starts itself once more as MkfsName, which installs MkfsSyscalls,
// mkfs.ext4's list alone, and executes mkfs.ext4. SECURITY.md's table
// shows the three lists.
package loopext4format

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
var Name = formatwire.Protocol.Name

// MkfsName is argv[0] of the formatting child, which becomes mkfs.ext4.
const MkfsName = "glove-loopext4-mkfs"

// Main is the formatter (argv[0] Name). It serves the helper that
// started it until that one closes the socket pair.
func Main() int {
	// The socket's checks (getsockopt) come before the allowlist, which
	// does not hold them.
	conn, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: refusing to start: %v\n", Name, err)
		return helperkit.ExitStartup
	}
	srv := &wire.Server{Protocol: formatwire.Protocol, Conn: conn, Handlers: []wire.Handler{
		wire.HelloRoute.Handle(func(uint32, *wire.Hello, []*os.File) (*wire.HelloReply, []int, error) {
			return &wire.HelloReply{Name: Name, Protocol: wire.Version}, nil, nil
		}),
		formatwire.Format.Handle(serveFormat),
	}}
	if err := srv.Serve(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return helperkit.ExitProtocol
	}
	return helperkit.ExitEOF
}

// start closes what it may have inherited above the control socket
// (glove-loopext4 executes it from a descriptor), sets its umask, takes
// the control socket, then drops every capability (its row has none), sets
// no_new_privs and installs its allowlist, on every thread, before
// anything else.
func start() (*wire.Conn, error) {
	if len(os.Args) != 1 || len(os.Environ()) > 1 {
		return nil, errors.New("takes no arguments and an empty environment")
	}
	if os.Getuid() == 0 {
		return nil, errors.New("refusing to run as uid 0")
	}
	if err := closeAbove(helperkit.ControlFD); err != nil {
		return nil, fmt.Errorf("close inherited descriptors: %w", err)
	}
	// Threat: the umask is inherited; a permissive one must not loosen
	// an image's 0600, a hostile one must not make images unusable.
	// Nothing the formatter creates is meant for anyone but the service
	// user.
	umask(0o077)
	conn, err := wire.FromFile(os.NewFile(helperkit.ControlFD, "control"))
	if err != nil {
		return nil, err
	}
	rules := append(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), Syscalls...), MkfsSyscalls...)
	if err := helperkit.Restrict(captable.MustLookup(Name), rules); err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	return conn, nil
}

// MkfsMain is the formatting child (argv[0] MkfsName, the service user's
// uid and gid after it): it installs MkfsSyscalls and executes mkfs.ext4
// (descriptor 4) on the image (descriptor 3). It only ever runs as the
// formatter's child: started any other way (with capabilities, or
// without no_new_privs) it refuses, so it never executes what it is
// handed with a capability in effect.
func MkfsMain() int {
	if err := mkfsExec(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", MkfsName, err)
	}
	return helperkit.ExitStartup
}

func mkfsExec() error {
	if len(os.Args) != 3 {
		return errors.New("wants the uid and gid of the file system's owner")
	}
	uid, err1 := strconv.ParseUint(os.Args[1], 10, 32)
	gid, err2 := strconv.ParseUint(os.Args[2], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	if _, prm, err := helperkit.CurrentCaps(); err != nil || prm != 0 {
		return fmt.Errorf("must run without capabilities (permitted %#x, %v)", prm, err)
	}
	if nnp, err := noNewPrivs(); err != nil || nnp != 1 {
		return fmt.Errorf("must run with no_new_privs (%d, %v)", nnp, err)
	}
	prog, err := bpf.Compile(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), MkfsSyscalls...), bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		return fmt.Errorf("compile the mkfs.ext4 allowlist: %w", err)
	}
	if err := bpf.Install(prog); err != nil {
		return fmt.Errorf("install the mkfs.ext4 allowlist: %w", err)
	}
	exe := "/proc/self/fd/" + strconv.Itoa(mkfsExecFD)
	return fmt.Errorf("execute mkfs.ext4: %w", execEmptyEnv(exe, mkfsArgs(uint32(uid), uint32(gid))))
}
