// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"errors"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/glove-sandbox/glove/seccomp/bpf/bpftest"
	"golang.org/x/sys/unix"
)

func codeOf(err error) wire.ErrorCode {
	var e *wire.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestCheckBindFlags is the bad-input table of Bind's flags.
func TestCheckBindFlags(t *testing.T) {
	for _, c := range []struct {
		flags uint32
		want  wire.ErrorCode
	}{
		{0, 0},
		{mountwire.BindReadOnly, 0},
		{mountwire.BindNoExec, 0},
		{mountwire.BindAll, 0},
		{1 << 2, wire.ErrBadRequest},
		{mountwire.BindAll | 1<<31, wire.ErrBadRequest},
		{^uint32(0), wire.ErrBadRequest},
	} {
		if got := codeOf(checkBindFlags(c.flags)); got != c.want {
			t.Errorf("flags %#x: code %v, want %v", c.flags, got, c.want)
		}
	}
}

// TestBindAttr checks nosuid, nodev and private propagation are set
// whatever the flags, and nothing is ever cleared.
func TestBindAttr(t *testing.T) {
	for flags := uint32(0); flags <= mountwire.BindAll; flags++ {
		a := bindAttr(flags)
		if a.Attr_set&alwaysAttrs != alwaysAttrs || a.Attr_clr != 0 || a.Propagation != unix.MS_PRIVATE || a.Userns_fd != 0 {
			t.Errorf("flags %#x: %+v", flags, a)
		}
		if (a.Attr_set&unix.MOUNT_ATTR_RDONLY != 0) != (flags&mountwire.BindReadOnly != 0) ||
			(a.Attr_set&unix.MOUNT_ATTR_NOEXEC != 0) != (flags&mountwire.BindNoExec != 0) {
			t.Errorf("flags %#x: attr_set %#x", flags, a.Attr_set)
		}
	}
}

// TestCheckTmpfs is the bad-input table of Tmpfs's fields.
func TestCheckTmpfs(t *testing.T) {
	cfg := &Config{SchemaVersion: 1, SourceRoots: []string{"/srv"}, MaxTmpfsBytes: 64 << 20, MaxTmpfsInodes: 4096}
	const page = 4096
	ok := mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o700}
	with := func(f func(*mountwire.TmpfsRequest)) mountwire.TmpfsRequest {
		r := ok
		f(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  mountwire.TmpfsRequest
		want wire.ErrorCode
	}{
		{"valid", ok, 0},
		{"noexec", with(func(r *mountwire.TmpfsRequest) { r.Flags = mountwire.TmpfsNoExec }), 0},
		{"exactly the caps", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes, r.Inodes = 64<<20, 4096 }), 0},
		{"one page", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = page }), 0},
		{"sticky world-writable", with(func(r *mountwire.TmpfsRequest) { r.Mode = 0o1777 }), 0},
		{"mode 0", with(func(r *mountwire.TmpfsRequest) { r.Mode = 0 }), 0},
		{"undefined flag", with(func(r *mountwire.TmpfsRequest) { r.Flags = 1 << 1 }), wire.ErrBadRequest},
		{"every flag", with(func(r *mountwire.TmpfsRequest) { r.Flags = ^uint32(0) }), wire.ErrBadRequest},
		{"setuid", with(func(r *mountwire.TmpfsRequest) { r.Mode = 0o4700 }), wire.ErrBadRequest},
		{"setgid", with(func(r *mountwire.TmpfsRequest) { r.Mode = 0o2770 }), wire.ErrBadRequest},
		{"file type bits", with(func(r *mountwire.TmpfsRequest) { r.Mode = unix.S_IFDIR | 0o755 }), wire.ErrBadRequest},
		{"mode overflow", with(func(r *mountwire.TmpfsRequest) { r.Mode = ^uint32(0) }), wire.ErrBadRequest},
		{"size 0", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = 0 }), wire.ErrBadRequest},
		{"size 1", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = 1 }), wire.ErrBadRequest},
		{"size a page minus one", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = page - 1 }), wire.ErrBadRequest},
		{"size unaligned", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = 1<<20 + 512 }), wire.ErrBadRequest},
		{"inodes 0", with(func(r *mountwire.TmpfsRequest) { r.Inodes = 0 }), wire.ErrBadRequest},
		{"size a page over the cap", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = 64<<20 + page }), wire.ErrRefused},
		{"size at the hard ceiling", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = HardMaxTmpfsBytes }), wire.ErrRefused},
		{"size max uint64 rounded to pages", with(func(r *mountwire.TmpfsRequest) { r.SizeBytes = ^uint64(0) &^ (page - 1) }), wire.ErrRefused},
		{"inodes one over the cap", with(func(r *mountwire.TmpfsRequest) { r.Inodes = 4097 }), wire.ErrRefused},
		{"inodes max uint64", with(func(r *mountwire.TmpfsRequest) { r.Inodes = ^uint64(0) }), wire.ErrRefused},
	} {
		if got := codeOf(checkTmpfs(&c.req, cfg, page)); got != c.want {
			t.Errorf("%s: code %v, want %v", c.name, got, c.want)
		}
	}
}

// TestTmpfsBoundMessages: a refusal over the bounds names the one bound
// exceeded, with its value and the request's, and never the other (the
// operator changes that line of mounter.json); the longest one fits the
// wire's error message bound.
func TestTmpfsBoundMessages(t *testing.T) {
	cfg := &Config{SchemaVersion: 1, SourceRoots: []string{"/srv"}, MaxTmpfsBytes: 1 << 30, MaxTmpfsInodes: 65536}
	const page = 4096
	for _, c := range []struct {
		name          string
		size, inodes  uint64
		want, notWant string
	}{
		{"size over", 2 << 30, 65536, "size 2147483648 is over mounter.json's max_tmpfs_bytes 1073741824", "inode"},
		{"inodes over", 1 << 30, 65537, "inode limit 65537 is over mounter.json's max_tmpfs_inodes 65536", "max_tmpfs_bytes"},
		{"both over: the size is named", 2 << 30, 524288, "size 2147483648 is over mounter.json's max_tmpfs_bytes 1073741824", "inode"},
		{"largest numbers", ^uint64(0) &^ (page - 1), ^uint64(0), "max_tmpfs_bytes 1073741824", "inode"},
		{"largest inodes", page, ^uint64(0), "inode limit 18446744073709551615 is over mounter.json's max_tmpfs_inodes 65536", "max_tmpfs_bytes"},
	} {
		err := checkTmpfs(&mountwire.TmpfsRequest{SizeBytes: c.size, Inodes: c.inodes, Mode: 0o755}, cfg, page)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.ErrRefused {
			t.Errorf("%s: %v, want ErrRefused", c.name, err)
			continue
		}
		if !strings.Contains(we.Message, c.want) || strings.Contains(we.Message, c.notWant) || len(we.Message) > wire.MaxErrorLen {
			t.Errorf("%s: message %q, want it to say %q and not %q, within %d bytes", c.name, we.Message, c.want, c.notWant, wire.MaxErrorLen)
		}
	}
	if err := cfg.CheckTmpfsBounds(1<<30, 65536); err != nil {
		t.Errorf("exactly the bounds: %v", err)
	}
}

// FuzzCheckTmpfs checks that whatever checkTmpfs accepts is within the
// bounds and that it only ever refuses with a request-level code.
func FuzzCheckTmpfs(f *testing.F) {
	f.Add(uint64(1<<20), uint64(64), uint32(0o700), uint32(0))
	f.Add(uint64(0), uint64(0), uint32(0o4755), uint32(2))
	f.Add(^uint64(0), ^uint64(0), ^uint32(0), ^uint32(0))
	cfg := &Config{SchemaVersion: 1, SourceRoots: []string{"/srv"}, MaxTmpfsBytes: 64<<20 + 1, MaxTmpfsInodes: 4096}
	const page = 4096
	f.Fuzz(func(t *testing.T, size, inodes uint64, mode, flags uint32) {
		req := &mountwire.TmpfsRequest{SizeBytes: size, Inodes: inodes, Mode: mode, Flags: flags}
		err := checkTmpfs(req, cfg, page)
		if err != nil {
			if c := codeOf(err); c != wire.ErrBadRequest && c != wire.ErrRefused {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		if size == 0 || size%page != 0 || size > cfg.MaxTmpfsBytes || inodes == 0 || inodes > cfg.MaxTmpfsInodes ||
			mode&^0o1777 != 0 || flags&^mountwire.TmpfsAll != 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func TestBeneathPath(t *testing.T) {
	for _, c := range []struct {
		root, dir, rel string
		ok             bool
	}{
		{"/usr", "/usr", ".", true},
		{"/usr", "/usr/lib", "lib", true},
		{"/usr", "/usr/lib/x86_64", "lib/x86_64", true},
		{"/usr", "/usrlocal", "", false},
		{"/usr", "/", "", false},
		{"/usr", "/etc", "", false},
		{"/", "/", ".", true},
		{"/", "/etc", "etc", true},
	} {
		rel, ok := beneathPath(c.root, c.dir)
		if rel != c.rel || ok != c.ok {
			t.Errorf("beneathPath(%q, %q) = %q, %v; want %q, %v", c.root, c.dir, rel, ok, c.rel, c.ok)
		}
	}
}

// TestAllowlist runs the helper's compiled seccomp program on the calls
// it makes and on the ones it must never make: the argument conditions
// are the point, so each is tried with the exact flags and with a flag
// that would widen what the call does.
func TestAllowlist(t *testing.T) {
	compile := func(extra []bpf.Rule) []unix.SockFilter {
		rules := append(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), Syscalls...), extra...)
		prog, err := bpf.Compile(rules, bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
		if err != nil {
			t.Fatal(err)
		}
		return prog
	}
	attrProg, fallbackProg := compile(AttrSyscalls), compile(FallbackSyscalls)
	type call struct {
		name  string
		nr    uintptr
		args  [6]uint64
		allow bool
	}
	attrs := uint64(alwaysAttrs)
	calls := []call{
		{"openat O_PATH directory", unix.SYS_OPENAT, [6]uint64{3, 0, walkOpenFlags}, true},
		{"openat for reading", unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_RDONLY | unix.O_CLOEXEC}, false},
		{"openat for writing", unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC}, false},
		{"openat O_PATH following a symlink", unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC}, false},
		{"statx of a descriptor", unix.SYS_STATX, [6]uint64{3, 0, statFDFlags, statMask}, true},
		{"statx of a name", unix.SYS_STATX, [6]uint64{3, 0, statAtFlags, statMask}, true},
		{"statx following a symlink", unix.SYS_STATX, [6]uint64{3, 0, 0, statMask}, false},
		{"readlinkat", unix.SYS_READLINKAT, [6]uint64{3, 0, 0, 4096}, true},
		{"open_tree_attr clone", unix.SYS_OPEN_TREE_ATTR, [6]uint64{3, 0, openTreeFlags, 0, uint64(mountAttrSize)}, true},
		{"open_tree_attr without OPEN_TREE_CLONE", unix.SYS_OPEN_TREE_ATTR, [6]uint64{3, 0, openTreeFlags &^ unix.OPEN_TREE_CLONE, 0, uint64(mountAttrSize)}, false},
		{"open_tree_attr of a path", unix.SYS_OPEN_TREE_ATTR, [6]uint64{3, 0, openTreeFlags &^ unix.AT_EMPTY_PATH, 0, uint64(mountAttrSize)}, false},
		{"open_tree_attr with a larger mount_attr", unix.SYS_OPEN_TREE_ATTR, [6]uint64{3, 0, openTreeFlags, 0, 64}, false},
		{"fsopen", unix.SYS_FSOPEN, [6]uint64{0, unix.FSOPEN_CLOEXEC}, true},
		{"fsopen without cloexec", unix.SYS_FSOPEN, [6]uint64{0, 0}, false},
		{"fsconfig set string", unix.SYS_FSCONFIG, [6]uint64{3, unix.FSCONFIG_SET_STRING}, true},
		{"fsconfig create", unix.SYS_FSCONFIG, [6]uint64{3, unix.FSCONFIG_CMD_CREATE}, true},
		{"fsconfig set path", unix.SYS_FSCONFIG, [6]uint64{3, unix.FSCONFIG_SET_PATH}, false},
		{"fsconfig set fd", unix.SYS_FSCONFIG, [6]uint64{3, unix.FSCONFIG_SET_FD}, false},
		{"fsconfig reconfigure", unix.SYS_FSCONFIG, [6]uint64{3, unix.FSCONFIG_CMD_RECONFIGURE}, false},
		{"fsmount nosuid,nodev", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC, attrs}, true},
		{"fsmount nosuid,nodev,noexec", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC, attrs | unix.MOUNT_ATTR_NOEXEC}, true},
		{"fsmount without nosuid", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NODEV}, false},
		{"fsmount without nodev", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID}, false},
		{"fsmount with idmap", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC, attrs | unix.MOUNT_ATTR_IDMAP}, false},
		{"fsmount without cloexec", unix.SYS_FSMOUNT, [6]uint64{3, 0, attrs}, false},
		{"fsmount flags in the high word", unix.SYS_FSMOUNT, [6]uint64{3, unix.FSMOUNT_CLOEXEC | 1<<32, attrs}, false},
		{"mount", unix.SYS_MOUNT, [6]uint64{}, false},
		{"umount2", unix.SYS_UMOUNT2, [6]uint64{}, false},
		{"move_mount", unix.SYS_MOVE_MOUNT, [6]uint64{}, false},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uint64{3, 0, setattrFlags, 0, uint64(mountAttrSize)}, false},
		{"open_tree", unix.SYS_OPEN_TREE, [6]uint64{3, 0, openTreeFlags}, false},
		{"fspick", unix.SYS_FSPICK, [6]uint64{}, false},
		{"pivot_root", unix.SYS_PIVOT_ROOT, [6]uint64{}, false},
		{"unshare", unix.SYS_UNSHARE, [6]uint64{unix.CLONE_NEWNS}, false},
		{"setns", unix.SYS_SETNS, [6]uint64{}, false},
		{"openat2", unix.SYS_OPENAT2, [6]uint64{}, false},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, [6]uint64{}, false},
	}
	// Where the two allowlists differ (the open_tree_attr kernel's first,
	// the fallback's second); every other call is allowed or killed alike.
	differ := map[string]bool{
		"open_tree_attr clone": true, "mount_setattr": true, "open_tree": true, "openat O_PATH file": true,
	}
	calls = append(calls,
		call{"openat O_PATH file", unix.SYS_OPENAT, [6]uint64{3, 0, fileOpenFlags}, false},
		call{"open_tree without OPEN_TREE_CLONE", unix.SYS_OPEN_TREE, [6]uint64{3, 0, openTreeFlags &^ unix.OPEN_TREE_CLONE}, false},
		call{"open_tree not recursive", unix.SYS_OPEN_TREE, [6]uint64{3, 0, openTreeFlags &^ unix.AT_RECURSIVE}, false},
		call{"mount_setattr not recursive", unix.SYS_MOUNT_SETATTR, [6]uint64{3, 0, unix.AT_EMPTY_PATH, 0, uint64(mountAttrSize)}, false},
		call{"mount_setattr of a path", unix.SYS_MOUNT_SETATTR, [6]uint64{3, 0, unix.AT_RECURSIVE, 0, uint64(mountAttrSize)}, false},
		call{"mount_setattr with a larger mount_attr", unix.SYS_MOUNT_SETATTR, [6]uint64{3, 0, setattrFlags, 0, 64}, false},
		call{"openat O_PATH file following a symlink", unix.SYS_OPENAT, [6]uint64{3, 0, unix.O_PATH | unix.O_CLOEXEC}, false},
	)
	for _, c := range calls {
		got := runSeccomp(t, attrProg, c.nr, c.args)
		if (got == unix.SECCOMP_RET_ALLOW) != c.allow {
			t.Errorf("open_tree_attr allowlist: %s: action %#x, want allowed %v", c.name, got, c.allow)
		}
		want := c.allow != differ[c.name]
		if got := runSeccomp(t, fallbackProg, c.nr, c.args); (got == unix.SECCOMP_RET_ALLOW) != want {
			t.Errorf("fallback allowlist: %s: action %#x, want allowed %v", c.name, got, want)
		}
	}
}

// runSeccomp evaluates prog on one call for the native architecture.
func runSeccomp(t *testing.T, prog []unix.SockFilter, nr uintptr, args [6]uint64) uint32 {
	t.Helper()
	a, err := bpftest.Evaluate(prog, nr, args)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(a)
}
