package helperkit

import (
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// Restrict confines the calling helper before it serves a request. The
// order matters; rerun TestHelperSelfRestriction in helpers/integration
// after changing it.
//
//  1. Check the process holds every capability of its row (it came from
//     the file capabilities at exec); refuse to start without them rather
//     than fail later in a half-working state.
//  2. Clear the ambient set and set permitted, effective and inheritable
//     to exactly the row, on every thread at once.
//  3. Mark the process not dumpable: with its capabilities it must not be
//     readable through /proc/PID/mem or ptrace by the same-uid supervisor.
//  4. no_new_privs on every thread: nothing the helper could execute
//     regains a capability through file capabilities or set-id bits.
//  5. The seccomp allowlist, on every thread (TSYNC), last, since it
//     forbids the calls above.
//
// The bounding set is left as it is: dropping from it needs
// CAP_SETPCAP, and with no_new_privs set it can no longer widen anything.
func Restrict(row captable.Entry, rules []bpf.Rule) error {
	want := row.Mask()
	_, prm, err := CurrentCaps()
	if err != nil {
		return err
	}
	if missing := want &^ prm; missing != 0 {
		return fmt.Errorf("restrict: missing capabilities %s (the binary needs its file capabilities: make install)",
			capNames(missing))
	}
	if err := allThreadsClearAmbient(); err != nil {
		return fmt.Errorf("restrict: clear ambient capabilities: %w", err)
	}
	if err := allThreadsCapset(want); err != nil {
		return fmt.Errorf("restrict: set capabilities on all threads: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("restrict: clear dumpable: %w", err)
	}
	if err := allThreadsNoNewPrivs(); err != nil {
		return fmt.Errorf("restrict: set no_new_privs on all threads: %w", err)
	}
	prog, err := bpf.Compile(rules, bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		return fmt.Errorf("restrict: compile seccomp allowlist: %w", err)
	}
	if err := bpf.Install(prog); err != nil {
		return fmt.Errorf("restrict: install seccomp allowlist: %w", err)
	}
	return nil
}

// CurrentCaps returns the calling thread's effective and permitted sets.
func CurrentCaps() (eff, prm uint64, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, 0, fmt.Errorf("capget: %w", err)
	}
	eff = uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	prm = uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32
	return eff, prm, nil
}

func capNames(mask uint64) string {
	var names []string
	for bit := uint(0); bit < 64; bit++ {
		if mask&(1<<bit) != 0 {
			names = append(names, fmt.Sprintf("cap_%d", bit))
			for _, e := range captable.Table {
				for _, c := range e.Caps {
					if c.Bit == bit {
						names[len(names)-1] = c.Name
					}
				}
			}
		}
	}
	return strings.Join(names, ",")
}
