// SPDX-License-Identifier: Apache-2.0

package shim

// Stage 0's Landlock probe. The ruleset itself is stage 2's, in C
// (shim/cstage/stage2.c), which refuses a kernel without Landlock in the
// same words.

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// landlockABI is the kernel's Landlock ABI version. A kernel without
// Landlock (not built, or not in the boot's LSM list) is an error: the
// sandbox is never built without one of its layers, silently weaker than
// the attack table shows it (glove status names the fix).
func landlockABI() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("landlock: not available on this kernel (landlock_create_ruleset: %w): refusing to build a sandbox without it; boot with landlock in the LSM list", errno)
	}
	if int(r) < 1 {
		return 0, fmt.Errorf("landlock: ABI %d reported: refusing to build a sandbox without it", int(r))
	}
	return int(r), nil
}
