package shim

import (
	"fmt"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// deniedIoctls are refused by glove-shim whatever the bundle's profile
// says, in a small filter stacked under it and compared on the low 32 bits
// the kernel uses (libseccomp 2.5 cannot express that; see
// seccomp.DenyIoctls):
//   - TIOCSTI pushes bytes into a terminal's input queue: a program given
//     a terminal could type commands into the shell that reads it
//     (CVE-2016-7545, CVE-2017-5226 in other sandboxes);
//   - TIOCLINUX's selection and paste subcommands do the same on a
//     virtual console;
//   - TIOCSETD, TIOCEXCL, TIOCNXCL, TIOCCONS change a terminal's state
//     for everyone who uses it after the program: its line discipline
//     (N_NULL drops all input and output), its exclusive mode (nobody
//     but root may open it again), where console output goes. The
//     terminal a sandbox is given may be the operator's (glove run's
//     standard input), which must be as it was when the program is gone;
//     the kernel lets any holder of a terminal descriptor make these
//     changes, and a program has no need of them on its own terminal.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD, unix.TIOCEXCL, unix.TIOCNXCL, unix.TIOCCONS}

// loadDeniedIoctls installs the deniedIoctls filter on every thread.
// no_new_privs must be set.
func loadDeniedIoctls() error {
	prog, err := seccomp.DenyIoctls(deniedIoctls, unix.EPERM)
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := bpf.Install(prog); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
