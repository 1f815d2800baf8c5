// SPDX-License-Identifier: Apache-2.0

package helperkit

import (
	"fmt"
	"os"
	"runtime"
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
//  2. Set permitted to exactly the row, effective to the row without its
//     OnDemand capabilities (raised per call with Raised), inheritable and
//     so ambient (capabilities(7)) to nothing, on every thread at once.
//  3. Mark the process not dumpable: with its capabilities it must not be
//     readable through /proc/PID/mem or ptrace by the same-uid supervisor.
//  4. no_new_privs on every thread: nothing the helper could execute
//     regains a capability through file capabilities or set-id bits. Set on
//     the thread that installs the filter, TSYNC copies it to the others.
//  5. The seccomp allowlist, on every thread (TSYNC), last, since it
//     forbids the calls above.
//
// The bounding set is left as it is: dropping from it needs
// CAP_SETPCAP, and with no_new_privs set it can no longer widen anything.
func Restrict(row captable.Entry, rules []bpf.Rule) error {
	want := row.Mask()
	if _, prm, err := CurrentCaps(); err != nil {
		return err
	} else if missing := want &^ prm; missing != 0 {
		return fmt.Errorf("restrict: missing capabilities %s (the binary needs its file capabilities: make install)",
			capNames(missing))
	}
	if err := allThreadsCapset(want, row.Effective()); err != nil {
		return fmt.Errorf("restrict: set capabilities on all threads: %w", err)
	}
	raisable, served = want&^row.Effective(), row.Effective()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("restrict: clear dumpable: %w", err)
	}
	prog, err := bpf.Compile(rules, bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		return fmt.Errorf("restrict: compile seccomp allowlist: %w", err)
	}
	runtime.LockOSThread() // step 4: no_new_privs where TSYNC runs
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("restrict: set no_new_privs: %w", err)
	}
	if err := bpf.Install(prog); err != nil {
		return fmt.Errorf("restrict: install seccomp allowlist: %w", err)
	}
	return nil
}

// raisable and served are set by Restrict: the capabilities Raised may
// raise, and the effective set every thread otherwise holds.
var raisable, served uint64

// Raised runs fn with the capabilities of mask (of the row's OnDemand)
// effective on the calling thread alone, locked to it, and lowers them
// again before returning: the thread is the only one that ever holds
// them, and only for fn's system calls. A failure to lower them ends the
// process (exit 1 with a line on stderr): the thread would otherwise go
// on serving with them.
func Raised(mask uint64, fn func() error) error {
	if mask&^raisable != 0 {
		return fmt.Errorf("raise capabilities %s: not this helper's to raise (%s)", capNames(mask&^raisable), capNames(raisable))
	}
	runtime.LockOSThread()
	if err := threadCapset(raisable|served, served|mask); err != nil {
		// Nothing was raised: the thread is as it was.
		runtime.UnlockOSThread()
		return fmt.Errorf("raise capabilities %s: %w", capNames(mask), err)
	}
	ferr := fn()
	if err := threadCapset(raisable|served, served); err != nil {
		// A thread that cannot lower a capability must not run anything more.
		fmt.Fprintf(os.Stderr, "glove helper: could not lower a capability raised for one call: %v\n", err)
		os.Exit(ExitStartup)
	}
	runtime.UnlockOSThread()
	return ferr
}

// threadCapset sets the calling thread's permitted and effective sets.
func threadCapset(prm, eff uint64) error {
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &capData(prm, eff)[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// capData is capset(2)'s data for permitted prm, effective eff and
// inheritable nothing.
func capData(prm, eff uint64) *[2]unix.CapUserData {
	return &[2]unix.CapUserData{
		{Effective: uint32(eff), Permitted: uint32(prm)},
		{Effective: uint32(eff >> 32), Permitted: uint32(prm >> 32)},
	}
}

// CurrentCaps returns the calling thread's effective and permitted sets.
func CurrentCaps() (eff, prm uint64, err error) {
	var data [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return 0, 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32, nil
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
