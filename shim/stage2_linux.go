package shim

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stage2 runs in user namespace 2, where the mounts are locked. Every
// restriction below applies to this thread, which is the one that calls
// execve: the program inherits exactly its credentials, filters and
// Landlock domain. The order matters; rerun shim's TestAttack* after any
// change to it.
func stage2() int {
	runtime.LockOSThread()
	p, ctl, err := readPlan()
	if err != nil {
		return fail(ctl, "stage 2", err)
	}
	path, err := prepare(p)
	if err != nil {
		return fail(ctl, "stage 2", err)
	}
	err = syscall.Exec(path, p.Process.Args, p.Process.Env)
	return fail(ctl, "stage 2", fmt.Errorf("execve %s: %w", path, err))
}

// prepare applies every restriction but seccomp's last step and returns
// the program's path.
func prepare(p *Plan) (string, error) {
	pp := &p.Process
	if err := enterCwd(pp.Cwd); err != nil {
		return "", err
	}
	for _, r := range pp.Rlimits {
		// syscall.Setrlimit, not unix: the Go runtime restores the
		// RLIMIT_NOFILE it found at start-up before execve unless the
		// program changed it through package syscall.
		if err := syscall.Setrlimit(r.Resource, &syscall.Rlimit{Cur: r.Soft, Max: r.Hard}); err != nil {
			return "", fmt.Errorf("process.rlimits: setrlimit %d %d/%d: %w", r.Resource, r.Soft, r.Hard, err)
		}
	}
	if pp.Umask != nil {
		unix.Umask(int(*pp.Umask))
	}
	path, err := lookPath(pp.Args[0], pp.Env)
	if err != nil {
		return "", err
	}
	if !p.off(LayerCaps) {
		if err := setCapabilities(pp.Caps); err != nil {
			return "", err
		}
	}
	// Threat: a setuid or file-capability binary (one the program wrote,
	// or the host's) raising privileges at execve.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	// Every descriptor the program is not meant to have closes at execve:
	// the plan's socket, the Go runtime's own, and anything inherited by
	// mistake (threat: a leaked host directory descriptor as a way out of
	// the root, as in CVE-2024-21626).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return "", fmt.Errorf("close_range: %w", err)
	}
	for _, fd := range pp.PassFDs {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return "", fmt.Errorf("pass descriptor %d: %w", fd, err)
		}
	}
	if !p.off(LayerLandlock) {
		if err := landlock(pp.Writable, pp.WritableFile); err != nil {
			return "", err
		}
	}
	if !p.off(LayerSeccomp) {
		if err := loadDeniedIoctls(); err != nil {
			return "", err
		}
		// The bundle's filter last: after it, nothing but execve is called.
		if pp.Seccomp != nil {
			if err := loadSeccomp(pp.Seccomp, pp.SeccompFlags); err != nil {
				return "", err
			}
		}
	}
	return path, nil
}

// enterCwd changes to the working directory, resolved inside the root,
// and checks that the kernel agrees it is inside: a working directory
// outside the root reads back as "(unreachable)/...".
func enterCwd(cwd string) error {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("process.cwd: open /: %w", err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, cwd, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("process.cwd %s: %w", cwd, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchdir(fd); err != nil {
		return fmt.Errorf("process.cwd %s: fchdir: %w", cwd, err)
	}
	wd, err := unix.Getwd()
	if err != nil {
		return fmt.Errorf("process.cwd %s: getcwd: %w", cwd, err)
	}
	if !strings.HasPrefix(wd, "/") {
		return fmt.Errorf("process.cwd %s: outside the root (%q)", cwd, wd)
	}
	return nil
}

// lookPath finds the program: a name with a slash is taken as it is,
// anything else is searched in the sandbox's own PATH (never the host's).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if !strings.HasPrefix(dir, "/") {
			continue // a relative PATH entry would depend on the cwd
		}
		cand := dir + "/" + name
		var st unix.Stat_t
		if err := unix.Stat(cand, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("process.args[0] %q: not found in PATH %q", name, path)
}

// setCapabilities leaves this thread, and so the program, with exactly
// the bundle's capabilities, which for Glove's own bundles is none at all.
// Emptying the bounding set and setting SECBIT_NOROOT matter when the
// program's uid is 0 in its namespace: execve would otherwise grant it
// every capability again. A bundle that asks for capabilities gets runc's
// semantics instead (root's execve grants the bounding set; others keep
// the ambient set), limited to what it listed.
func setCapabilities(cs CapSets) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			if cs.Bounding&(1<<c) != 0 {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
			}
		}
		if cs == (CapSets{}) {
			// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and their locks, and
			// SECBIT_KEEP_CAPS_LOCKED (linux/securebits.h).
			const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5
			if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
				return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
			}
		}
	} else if cs.Bounding != 0 {
		return errors.New("process.capabilities: no CAP_SETPCAP to set the bounding set")
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	data = [2]unix.CapUserData{
		{Effective: uint32(cs.Effective), Permitted: uint32(cs.Permitted), Inheritable: uint32(cs.Inheritable)},
		{Effective: uint32(cs.Effective >> 32), Permitted: uint32(cs.Permitted >> 32), Inheritable: uint32(cs.Inheritable >> 32)},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if cs.Ambient&(1<<c) != 0 {
			if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
				return fmt.Errorf("prctl(PR_CAP_AMBIENT_RAISE, %s): %w", capNames[c], err)
			}
		}
	}
	return nil
}
