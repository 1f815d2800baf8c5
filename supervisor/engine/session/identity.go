// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Identity identifies a started session's processes across a supervisor
// restart: a pid alone may be reused by anything, but not together with
// the boot, its start time and the session's cgroup.
type Identity struct {
	BootID      string
	PID         int    // glove-shim (stage 0)
	StartTicks  uint64 // its start time, clock ticks since boot
	CgroupInode uint64 // the session's v2 cgroup directory
}

// BootID returns this boot's identifier.
func BootID() (string, error) {
	b, err := procRead("/proc/sys/kernel/random/boot_id", make([]byte, 64))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 36 {
		return "", fmt.Errorf("read boot id: %q is not a UUID", id)
	}
	return id, nil
}

// ErrNoProcess is returned by StartTicks for a pid that does not exist.
var ErrNoProcess = errors.New("no such process")

// StartTicks returns when process pid started (/proc/PID/stat field 22,
// clock ticks since boot).
func StartTicks(pid int) (uint64, error) {
	b, err := procRead("/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 512))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return parseStartTicks(string(b))
}

// parseStartTicks reads field 22 of a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStartTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, errors.New("malformed /proc stat: too few fields")
	}
	t, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed /proc stat: start time %q", f[19])
	}
	return t, nil
}
