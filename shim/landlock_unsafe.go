package shim

// Landlock through x/sys/unix's types and three raw system calls. The
// go-landlock module's syscall package would do the same, but it links
// libcap's psx, which in a cgo binary (the shim links libseccomp) wraps
// pthread_create for the whole process; the shim needs none of that,
// since it restricts only the thread that calls execve.

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock write rights by ABI: what "modify the filesystem" means at each
// version. Reads and execution are not handled: the mounts already decide
// what is visible, and Landlock here is one more wall around writes.
const (
	writeV1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	writeV2  = writeV1 | unix.LANDLOCK_ACCESS_FS_REFER
	writeV3  = writeV2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fileOnly = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
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

// landlock limits writes to the writable mounts and, from ABI 6, scopes
// abstract unix sockets and signals to the sandbox. What it handles
// grows with the kernel's ABI (glove status lists the gaps of older
// ones); a kernel with none fails the sandbox (landlockABI).
func landlock(dirs, files []string) error {
	abi, err := landlockABI()
	if err != nil {
		return err
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: writeV1}
	switch {
	case abi >= 3:
		attr.Handled_access_fs = writeV3
	case abi == 2:
		attr.Handled_access_fs = writeV2
	}
	if abi >= 6 {
		// Threat: reaching a host service on an abstract socket, or
		// signalling a process outside the sandbox.
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	// The attribute's size tells the kernel which members exist; older
	// kernels know only handled_access_fs (ABI 1-3) or also handled_access_net
	// (4-5); the quiet members (ABI 10) are not used.
	size := unsafe.Offsetof(attr.Quiet_access_fs)
	switch {
	case abi < 4:
		size = unsafe.Offsetof(attr.Handled_access_net)
	case abi < 6:
		size = unsafe.Offsetof(attr.Scoped)
	}
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := int(r)
	defer unix.Close(rs)
	add := func(path string, access uint64) error {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("landlock: open %s: %w", path, err)
		}
		defer unix.Close(fd)
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock_add_rule %s: %w", path, errno)
		}
		return nil
	}
	for _, d := range dirs {
		if err := add(d, attr.Handled_access_fs); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := add(f, attr.Handled_access_fs&fileOnly); err != nil {
			return err
		}
	}
	// This thread only: it is the one that calls execve.
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
