// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"encoding/binary"
	"fmt"

	"github.com/glove-sandbox/glove/seccomp"
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

// denyIoctlsProgram is the deniedIoctls filter as stage 2 loads it
// (shim/cstage/stage2.c, under the bundle's filter): the kernel's struct
// sock_filter array, in native byte order. Stage 0 builds it once and the
// plan carries it (ProcessPlan.DenyIoctls), so that no stage builds it
// again.
func denyIoctlsProgram() ([]byte, error) {
	prog, err := seccomp.DenyIoctls(deniedIoctls, unix.EPERM)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	b := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b, nil
}
