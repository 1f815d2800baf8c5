package loopext4

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// mkfs.ext4 does not run under glove-loopext4's seccomp allowlist. A
// filter is inherited across fork and execve and filters only stack, so
// a child the helper forked once restricted could never do more than the
// helper's own list allows; that list used to carry mkfs.ext4's ~45
// calls (execve, clone, pidfd_*, waitid, prctl among them) for the whole
// life of the helper. Instead, before it restricts itself, the helper
// starts a formatter: itself again, under argv[0] FormatterName, holding
// no capability (dropped first thing), with an allowlist of what it needs
// to start a formatting child and what mkfs.ext4 needs. For each Create
// the helper hands it the image and the checked mkfs.ext4 over a socket
// pair; the formatter starts itself once more as MkfsName, which installs
// MkfsSyscalls, mkfs.ext4's list alone, and executes mkfs.ext4. The
// helper keeps only the calls it makes itself (SECURITY.md's table shows
// the three lists).
const (
	// FormatterName is argv[0] of the formatter.
	FormatterName = "glove-loopext4-format"
	// MkfsName is argv[0] of the formatting child, which becomes
	// mkfs.ext4.
	MkfsName = "glove-loopext4-mkfs"
)

// The formatter's protocol, between the helper and its formatter only:
// one request, carrying the image and mkfs.ext4 (O_PATH).
var (
	formatRoute    = wire.NewRoute[formatRequest, formatReply](0x02f1, 2, 0, false)
	formatProtocol = wire.NewProtocol(FormatterName, formatRoute)
)

// formatRequest asks for one format; UID and GID own the new file
// system's root directory.
type formatRequest struct{ UID, GID uint32 }

// formatReply is mkfs.ext4's outcome: Failed with its diagnostics.
type formatReply struct {
	Failed bool
	Err    string `wire:"512"`
}

// formatter is the helper's side: the formatter process and its client.
type formatter struct {
	cmd    *exec.Cmd
	conn   *wire.Conn
	client *wirecall.Client
}

// startFormatter starts the formatter. It runs before the helper
// restricts itself, the only time a process without the helper's filter
// can still be made.
func startFormatter() (*formatter, error) {
	fds, err := seqpacketPair()
	if err != nil {
		return nil, fmt.Errorf("start the formatter: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "formatter"), os.NewFile(uintptr(fds[1]), "formatter-peer")
	defer theirs.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{FormatterName}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr // its log lines join the helper's
	cmd.ExtraFiles = []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the formatter: %w", err)
	}
	conn, err := wire.FromFile(ours)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start the formatter: %w", err), cmd.Process.Kill())
	}
	return &formatter{cmd: cmd, conn: conn, client: &wirecall.Client{Conn: conn}}, nil
}

// stop ends the formatter (it exits on EOF) and reaps it, so it is
// never left for init to reap (threat: a process of the service user
// outliving the helper it belongs to).
func (f *formatter) stop() error {
	cerr := f.conn.Close()
	if err := f.cmd.Wait(); err != nil {
		return errors.Join(cerr, fmt.Errorf("the formatter: %w", err))
	}
	return cerr
}

// format has the formatter run mkfs.ext4 on img. The formatter bounds
// the run by mkfsTimeout; the helper waits a little longer for its word.
func (f *formatter) format(exe, img *os.File, uid, gid uint32) error {
	if err := f.conn.SetDeadline(time.Now().Add(mkfsTimeout + 30*time.Second)); err != nil {
		return fmt.Errorf("run mkfs.ext4: %w", err)
	}
	rep, _, err := wirecall.Call(formatRoute, f.client, &formatRequest{UID: uid, GID: gid}, []int{int(img.Fd()), int(exe.Fd())})
	if err != nil {
		return fmt.Errorf("run mkfs.ext4: the formatter: %w", err)
	}
	if rep.Failed {
		return fmt.Errorf("run mkfs.ext4: %s", rep.Err)
	}
	return nil
}

// FormatterMain is the formatter (argv[0] FormatterName). It serves the
// helper that started it until that one closes the socket pair.
func FormatterMain() int {
	// The socket's checks (getsockopt) come before the allowlist, which
	// does not hold them.
	conn, err := wire.FromFile(os.NewFile(helperkit.ControlFD, "control"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", FormatterName, err)
		return helperkit.ExitStartup
	}
	if err := formatterStart(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: refusing to start: %v\n", FormatterName, err)
		return helperkit.ExitStartup
	}
	srv := &wire.Server{Protocol: formatProtocol, Conn: conn, Handlers: []wire.Handler{
		wire.HelloRoute.Handle(func(uint32, *wire.Hello, []*os.File) (*wire.HelloReply, []int, error) {
			return &wire.HelloReply{Name: FormatterName, Protocol: wire.Version}, nil, nil
		}),
		formatRoute.Handle(serveFormat),
	}}
	if err := srv.Serve(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", FormatterName, err)
		return helperkit.ExitProtocol
	}
	return helperkit.ExitEOF
}

// formatterStart drops every capability (the formatter was executed from
// the helper's file, with its file capabilities), sets no_new_privs and
// installs the formatter's allowlist, on every thread, before anything
// else.
func formatterStart() error {
	if len(os.Args) != 1 || len(os.Environ()) > 1 {
		return errors.New("takes no arguments and an empty environment")
	}
	if os.Getuid() == 0 {
		return errors.New("refusing to run as uid 0")
	}
	rules := append(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), FormatterSyscalls...), MkfsSyscalls...)
	return helperkit.Restrict(captable.Entry{Binary: FormatterName}, rules)
}

// serveFormat runs one formatting child and waits for it.
func serveFormat(_ uint32, req *formatRequest, fds []*os.File) (*formatReply, []int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mkfsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{MkfsName, strconv.FormatUint(uint64(req.UID), 10), strconv.FormatUint(uint64(req.GID), 10)}
	cmd.Env = []string{}
	cmd.Dir = "/"
	stderr := &boundedBuffer{max: maxMkfsStderr}
	cmd.Stderr = stderr
	cmd.ExtraFiles = fds // the image at 3, mkfs.ext4 at 4
	if err := cmd.Run(); err != nil {
		return &formatReply{Failed: true, Err: sanitize(fmt.Sprintf("%v: %s", err, stderr))}, nil, nil
	}
	return &formatReply{}, nil, nil
}

// MkfsMain is the formatting child (argv[0] MkfsName, the service user's
// uid and gid after it): it installs MkfsSyscalls and executes mkfs.ext4
// (descriptor 4) on the image (descriptor 3). It only ever runs as the
// formatter's child: started any other way (with capabilities, or
// without no_new_privs) it refuses, so it never executes what it is
// handed with a capability in effect.
func MkfsMain() int {
	if err := mkfsExec(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", MkfsName, err)
	}
	return helperkit.ExitStartup
}

func mkfsExec() error {
	if len(os.Args) != 3 {
		return errors.New("wants the uid and gid of the file system's owner")
	}
	uid, err1 := strconv.ParseUint(os.Args[1], 10, 32)
	gid, err2 := strconv.ParseUint(os.Args[2], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	if _, prm, err := helperkit.CurrentCaps(); err != nil || prm != 0 {
		return fmt.Errorf("must run without capabilities (permitted %#x, %v)", prm, err)
	}
	if nnp, err := noNewPrivs(); err != nil || nnp != 1 {
		return fmt.Errorf("must run with no_new_privs (%d, %v)", nnp, err)
	}
	prog, err := bpf.Compile(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), MkfsSyscalls...), bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		return fmt.Errorf("compile the mkfs.ext4 allowlist: %w", err)
	}
	if err := bpf.Install(prog); err != nil {
		return fmt.Errorf("install the mkfs.ext4 allowlist: %w", err)
	}
	exe := "/proc/self/fd/" + strconv.Itoa(mkfsExecFD)
	return fmt.Errorf("execute mkfs.ext4: %w", execEmptyEnv(exe, mkfsArgs(uint32(uid), uint32(gid))))
}

// sanitize makes a diagnostic an encodable string field: valid UTF-8,
// no NUL, short enough to travel in the helper's Error reply too.
func sanitize(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
	for len(s) > wire.MaxErrorLen-128 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
