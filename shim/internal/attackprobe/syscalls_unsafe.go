package main

// The attacks that pass a structure to the kernel by pointer.

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func bpfMapCreate() (string, error) {
	// union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size,
	// max_entries.
	attr := [16]uint32{2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1}
	fd, _, e := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr))
	if e != 0 {
		return "", step("bpf(BPF_MAP_CREATE)", e)
	}
	unix.Close(int(fd))
	return "created a BPF map", nil
}

func perfEventOpen() (string, error) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Bits: unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv | unix.PerfBitDisabled}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return "", step("perf_event_open", err)
	}
	unix.Close(fd)
	return "opened a perf event", nil
}

func ioUringSetup() (string, error) {
	var params [120]byte
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	if e != 0 {
		return "", step("io_uring_setup", e)
	}
	unix.Close(int(fd))
	return "set up an io_uring", nil
}

// tiocstiHighBits is TIOCSTI with a bit set in the request's high word:
// the kernel reads the request as a 32-bit unsigned int and ignores it,
// but a 64-bit comparison (libseccomp's) does not match.
func tiocstiHighBits() (string, error) {
	c := byte('x')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	if e != 0 {
		return "", step("ioctl(TIOCSTI|1<<32)", e)
	}
	return fmt.Sprintf("injected %q with high bits in the request", c), nil
}

// aioBudget takes native AIO events from the machine-wide budget
// (fs.aio-max-nr) with io_setup and holds them for hold milliseconds, so
// that the test, polling /proc/sys/fs/aio-nr on the host, sees them
// taken.
func aioBudget() (string, error) {
	var ctx uint64
	nr := atoi(args["nr"])
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, uintptr(nr), uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return "", step(fmt.Sprintf("io_setup(%d)", nr), e)
	}
	time.Sleep(time.Duration(atoi(args["hold"])) * time.Millisecond)
	if _, _, e := unix.Syscall(unix.SYS_IO_DESTROY, uintptr(ctx), 0, 0); e != 0 {
		return "", step("io_destroy", e)
	}
	return fmt.Sprintf("took %d AIO events from the machine-wide budget", nr), nil
}
