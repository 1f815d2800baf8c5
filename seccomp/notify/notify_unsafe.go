// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrGone: the notification is no longer valid (the target died or the
// call was interrupted): ENOENT from the kernel.
var ErrGone = errors.New("seccomp notification gone")

// Notif is one struct seccomp_notif: the same layout, field for field
// (id, pid, flags, then struct seccomp_data: nr, arch,
// instruction_pointer, args), 80 bytes, so the kernel writes it directly.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

// resp is struct seccomp_notif_resp.
type resp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// addfd is struct seccomp_notif_addfd.
type addfd struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

// notifSizes is struct seccomp_notif_sizes.
type notifSizes struct {
	Notif, Resp, Data uint16
}

// The ioctl requests, from golang.org/x/sys/unix (linux/seccomp.h);
// notify_test.go derives each from the _IOWR/_IOW formula and the
// structure sizes above. ID_VALID is the corrected _IOW number, which
// kernels accept since before ADDFD (5.9) existed, beside the old _IOR
// one; the tests call it on the running kernel.
const (
	ioctlRecv    = unix.SECCOMP_IOCTL_NOTIF_RECV
	ioctlSend    = unix.SECCOMP_IOCTL_NOTIF_SEND
	ioctlIDValid = unix.SECCOMP_IOCTL_NOTIF_ID_VALID
	ioctlAddFD   = unix.SECCOMP_IOCTL_NOTIF_ADDFD
)

// maxErrno is the kernel's MAX_ERRNO: a larger error would be read by
// the program as a valid return value.
const maxErrno = 4095

func ioctl(fd int, req uint, arg unsafe.Pointer) (uintptr, error) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if e != 0 {
		return r, e
	}
	return r, nil
}

// gone wraps ENOENT as ErrGone, keeping the errno for errors.Is.
func gone(op string, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s: %w (%w)", op, ErrGone, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// CheckSizes checks (SECCOMP_GET_NOTIF_SIZES) that the kernel's struct
// seccomp_notif and seccomp_notif_resp are no larger than the ones this
// package passes. A kernel whose structures grew would write past Notif
// (RECV) or read past resp (SEND): the handler refuses to start instead
// (fail closed: no connect is then answered, and the session does not
// start).
func CheckSizes() error {
	var s notifSizes
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return fmt.Errorf("seccomp(SECCOMP_GET_NOTIF_SIZES): %w", e)
	}
	if int(s.Notif) > int(unsafe.Sizeof(Notif{})) || int(s.Resp) > int(unsafe.Sizeof(resp{})) {
		return fmt.Errorf("seccomp notification sizes: the kernel's seccomp_notif is %d bytes and seccomp_notif_resp %d, this build knows %d and %d",
			s.Notif, s.Resp, unsafe.Sizeof(Notif{}), unsafe.Sizeof(resp{}))
	}
	return nil
}

// Recv blocks for the next notification (SECCOMP_IOCTL_NOTIF_RECV). The
// buffer is zeroed first, as the kernel requires (it refuses a non-zero
// one with EINVAL); EINTR is retried. An error wrapping ErrGone means the
// notification vanished between its arrival and this read (the target
// died): the caller reads the next one.
func Recv(listener int) (Notif, error) {
	for {
		var n Notif
		_, err := ioctl(listener, ioctlRecv, unsafe.Pointer(&n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Notif{}, gone("seccomp notification: receive", err)
		}
		return n, nil
	}
}

// IDValid: SECCOMP_IOCTL_NOTIF_ID_VALID; ErrGone if not.
func IDValid(listener int, id uint64) error {
	if _, err := ioctl(listener, ioctlIDValid, unsafe.Pointer(&id)); err != nil {
		return gone("seccomp notification: check id", err)
	}
	return nil
}

func send(listener int, r *resp) error {
	if _, err := ioctl(listener, ioctlSend, unsafe.Pointer(r)); err != nil {
		return gone("seccomp notification: respond", err)
	}
	return nil
}

// RespondError answers the call with -errno (errno > 0).
func RespondError(listener int, id uint64, errno unix.Errno) error {
	// 0 would answer "success" for a call that never ran; above
	// MAX_ERRNO the program would read a valid return value.
	if errno <= 0 || errno > maxErrno {
		return fmt.Errorf("seccomp notification: respond: errno %d outside 1..%d", errno, maxErrno)
	}
	return send(listener, &resp{ID: id, Error: -int32(errno)})
}

// RespondValue answers the call with val and no error.
func RespondValue(listener int, id uint64, val int64) error {
	return send(listener, &resp{ID: id, Val: val})
}

// InstallAt installs a duplicate of src in the target at descriptor
// number dst (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SETFD;
// O_CLOEXEC in newfd_flags when cloexec), replacing whatever dst was, and
// returns the descriptor number the kernel reports.
func InstallAt(listener int, id uint64, src, dst int, cloexec bool) (int, error) {
	if src < 0 || dst < 0 {
		return -1, fmt.Errorf("seccomp notification: install descriptor %d at %d: negative descriptor", src, dst)
	}
	a := addfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, SrcFD: uint32(src), NewFD: uint32(dst)}
	if cloexec {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	r, err := ioctl(listener, ioctlAddFD, unsafe.Pointer(&a))
	if err != nil {
		return -1, gone(fmt.Sprintf("seccomp notification: install descriptor %d at %d", src, dst), err)
	}
	return int(r), nil
}
