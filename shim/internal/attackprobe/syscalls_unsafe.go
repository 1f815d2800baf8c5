// SPDX-License-Identifier: Apache-2.0

package main

// The attacks that pass a structure to the kernel by pointer.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
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

// mqAttr is the kernel's struct mq_attr.
type mqAttr struct {
	flags, maxmsg, msgsize, curmsgs int64
	_                               [4]int64
}

// mqCreate creates (read-only: Landlock checks only a queue opened for
// writing, but the creation is charged all the same) the POSIX message
// queue name (without the leading
// slash, as the system call takes it) of 10 messages of 8 KiB: about
// 80 KiB charged to the user's RLIMIT_MSGQUEUE budget.
func mqCreate(name string) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	attr := mqAttr{maxmsg: 10, msgsize: 8192}
	fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC,
		0o600, uintptr(unsafe.Pointer(&attr)), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func mqUnlink(name string) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0); e != 0 {
		return e
	}
	return nil
}

// mqBudget creates message queues until the kernel refuses one, holds
// them, then removes them: every byte of them is charged to the service
// user's budget on the host as well (ucounts), which gloved and every
// other session share.
func mqBudget() (string, error) {
	var names []string
	for i := range 64 {
		name := fmt.Sprintf("glove-attack-%d", i)
		fd, err := mqCreate(name)
		if err != nil {
			if i == 0 {
				return "", step("mq_open(O_CREAT)", err)
			}
			break
		}
		unix.Close(fd)
		names = append(names, name)
	}
	time.Sleep(time.Duration(atoi(args["hold"])) * time.Millisecond)
	for _, n := range names {
		if err := mqUnlink(n); err != nil {
			return "", step("mq_unlink", err)
		}
	}
	return fmt.Sprintf("held %d message queues (about %d KiB of the user's budget)", len(names), len(names)*80), nil
}

// hostWatch runs on the host as the service user, not in a sandbox: it
// takes and gives back one unit of a per-user budget (kind "mq": a
// message queue; "inotify": an inotify instance) again and again until
// its standard input closes, then prints how many attempts the kernel
// refused.
func hostWatch(kind string) {
	stop := make(chan struct{})
	go func() {
		var b [1]byte
		// The test closes the pipe to stop the watch: EOF. Anything else
		// is said, and makes the watch's line one the test refuses.
		if _, err := os.Stdin.Read(b[:]); err != nil && !errors.Is(err, io.EOF) {
			fmt.Printf("WATCH-ERROR stdin: %v\n", err)
		}
		close(stop)
	}()
	name := fmt.Sprintf("glove-watch-%d", os.Getpid())
	take := map[string]func() error{
		"mq": func() error {
			fd, err := mqCreate(name)
			if err != nil {
				return err
			}
			unix.Close(fd)
			return mqUnlink(name)
		},
		"sigpending": func() error {
			if err := queueOwn(); err != nil {
				return err
			}
			return takeQueued()
		},
		"inotify": func() error {
			fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		},
	}[kind]
	if take == nil {
		fmt.Printf("WATCH unknown kind %q\n", kind)
		return
	}
	if kind == "sigpending" {
		// The signal is queued to, and taken back by, this thread alone.
		runtime.LockOSThread()
		if err := blockQueued(); err != nil {
			fmt.Printf("WATCH-ERROR block: %v\n", err)
			return
		}
	}
	tries, refused := 0, 0
	var last error
	for {
		select {
		case <-stop:
			fmt.Printf("WATCH tries=%d refused=%d last=%v\n", tries, refused, last)
			return
		default:
		}
		tries++
		if err := take(); err != nil {
			refused++
			last = err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// inotifyBudget takes inotify instances until the kernel refuses one and
// holds them: each is charged to the service user on the host as well.
func inotifyBudget() (string, error) {
	var fds []int
	for range 512 {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			if len(fds) == 0 {
				return "", step("inotify_init1", err)
			}
			break
		}
		fds = append(fds, fd)
	}
	time.Sleep(time.Duration(atoi(args["hold"])) * time.Millisecond)
	for _, fd := range fds {
		unix.Close(fd)
	}
	return fmt.Sprintf("held %d inotify instances", len(fds)), nil
}

// queuedSignal is a real-time signal the Go runtime does not use; it is
// kept blocked on the thread it is queued to, so each one stays pending
// and is charged to the user's RLIMIT_SIGPENDING budget (ucounts, counted
// in every user namespace up to the host's).
const queuedSignal = 40

func queuedSet() unix.Sigset_t {
	var set unix.Sigset_t
	set.Val[(queuedSignal-1)/64] |= 1 << ((queuedSignal - 1) % 64)
	return set
}

func blockQueued() error {
	set := queuedSet()
	return step("pthread_sigmask", unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil))
}

// queueOwn queues queuedSignal to the calling (locked) thread with a
// sigqueue-style siginfo (SI_QUEUE), which the kernel counts against the
// budget; EAGAIN once the budget is used up.
func queueOwn() error {
	var info struct {
		signo, errno, code int32
		_                  [29]int32
	}
	info.signo, info.code = queuedSignal, -1 // SI_QUEUE
	_, _, e := unix.RawSyscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(unix.Getpid()), uintptr(unix.Gettid()), queuedSignal, uintptr(unsafe.Pointer(&info)), 0, 0)
	if e != 0 {
		return step("rt_tgsigqueueinfo", e)
	}
	return nil
}

// takeQueued takes one pending queuedSignal back without waiting.
func takeQueued() error {
	set := queuedSet()
	var ts unix.Timespec
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGTIMEDWAIT, uintptr(unsafe.Pointer(&set)), 0, uintptr(unsafe.Pointer(&ts)), 8 /* the kernel's sigset_t */, 0, 0)
	if e != 0 {
		return step("rt_sigtimedwait", e)
	}
	return nil
}

// sigpendingBudget queues signals to its own thread until the kernel
// refuses one, and holds them pending: each is charged to the service
// user on the host as well.
func sigpendingBudget() (string, error) {
	runtime.LockOSThread()
	if err := blockQueued(); err != nil {
		return "", err
	}
	n := 0
	var last error
	for n < 1<<20 {
		if last = queueOwn(); last != nil {
			break
		}
		n++
	}
	if n == 0 {
		return "", last
	}
	time.Sleep(time.Duration(atoi(args["hold"])) * time.Millisecond)
	return fmt.Sprintf("held %d pending signals (then %v)", n, last), nil
}
