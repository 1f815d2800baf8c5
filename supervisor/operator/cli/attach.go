// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const usageAttach = "usage: glove attach [--socket PATH] SESSION_ID"

// The detach key: Ctrl-] then d (Ctrl-] is telnet's escape, and rarely
// a program's own key). Ctrl-] twice sends one Ctrl-]; Ctrl-] then any
// other byte sends both.
const (
	detachEscape = 0x1d
	detachKey    = 'd'
)

// attachChunk bounds one write_stdin: well under gloved's 64 KiB of
// pending input, so a paste is several requests, each accepted.
const attachChunk = 4 << 10

// attachCommand attaches to a running session interactively: the
// session's output on stdout; on a terminal, raw mode, every key sent
// with write_stdin, the terminal's size sent with resize at once and at
// each SIGWINCH; Ctrl-] d detaches (the session keeps running). It exits
// with the session's status when the session ends, 0 when detached.
func attachCommand(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	var o callFlags
	fs := newFlags("attach")
	o.define(fs)
	socket := &o.socket
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageAttach) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove: attach: %v\n%s\n", err, usageAttach)
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "glove: attach: want SESSION_ID\n%s\n", usageAttach)
		return ExitUsage
	}
	c, err := net.DialTimeout("unix", *socket, 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "glove: attach: %v\n", err)
		return ExitFail
	}
	defer c.Close()
	a := &attacher{c: c, session: fs.Arg(0), methods: map[int]string{}}
	if err := a.send("attach", nil); err != nil {
		fmt.Fprintf(stderr, "glove: attach: %v\n", err)
		return ExitFail
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var m attachLine
	if err := readLine(r, &m); err != nil {
		fmt.Fprintf(stderr, "glove: attach: %v\n", err)
		return ExitFail
	}
	a.method(m.ID)
	if m.Error != nil {
		fmt.Fprintf(stderr, "glove: attach: error %s\n", m.Error)
		return ExitFail
	}
	nl := "\n"
	if isTerminal(stdin) {
		fd := int(stdin.Fd())
		// Raw mode: every key, ^C included, goes to the session's own
		// terminal, which turns it into the program's signals.
		if old, err := makeRaw(fd); err == nil {
			defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
			nl = "\r\n" // no output processing in raw mode
		}
		winch := make(chan os.Signal, 4)
		signal.Notify(winch, unix.SIGWINCH)
		defer signal.Stop(winch)
		resize := func() {
			ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
			if err != nil || ws.Row == 0 || ws.Col == 0 {
				return // no size to say (a serial line): the session keeps its own
			}
			if err := a.send("resize", map[string]any{"rows": ws.Row, "cols": ws.Col}); err != nil {
				fmt.Fprintf(stderr, "glove: attach: resize: %v%s", err, nl)
			}
		}
		resize()
		go func() {
			for range winch {
				resize()
			}
		}()
		fmt.Fprintf(stderr, "glove: attached to %s; Ctrl-] d detaches%s", a.session, nl)
	}
	go a.forward(stdin, stderr, nl)
	for {
		m = attachLine{}
		if err := readLine(r, &m); err != nil {
			fmt.Fprintf(stderr, "glove: attach: %v%s", err, nl)
			return ExitFail
		}
		switch m.Method {
		case "output":
			var o struct {
				Data []byte `json:"data"`
			}
			if err := json.Unmarshal(m.Params, &o); err != nil {
				fmt.Fprintf(stderr, "glove: attach: output: %v%s", err, nl)
				return ExitFail
			}
			// Output nobody can read (the terminal or pipe gone) ends
			// the attachment, said once: the session keeps running and
			// the next attach replays the last 64 KiB of its output.
			if _, err := stdout.Write(o.Data); err != nil {
				fmt.Fprintf(stderr, "glove: attach: write output: %v%s", err, nl)
				return ExitFail
			}
		case "ended":
			var e struct {
				Termination string `json:"termination"`
				Status      int    `json:"status"`
			}
			if err := json.Unmarshal(m.Params, &e); err != nil {
				fmt.Fprintf(stderr, "glove: attach: ended: %v%s", err, nl)
				return ExitFail
			}
			if e.Termination != "exited" {
				fmt.Fprintf(stderr, "glove: attach: session ended: %s%s", e.Termination, nl)
			}
			return e.Status
		case "":
			// A response to one of our requests.
			method := a.method(m.ID)
			if m.Error != nil {
				fmt.Fprintf(stderr, "glove: attach: %s: error %s%s", method, m.Error, nl)
			}
			if method == "detach" {
				fmt.Fprintf(stderr, "glove: detached from %s (it keeps running)%s", a.session, nl)
				return ExitOK
			}
		}
	}
}

// attachLine is one line from gloved: a response or a notification.
type attachLine struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// attacher sends requests for one session on one connection; the input
// and the resizes send concurrently with each other.
type attacher struct {
	c       net.Conn
	session string

	mu      sync.Mutex
	next    int
	methods map[int]string // request id → method, until answered
}

func (a *attacher) send(method string, params map[string]any) error {
	p := map[string]any{"session_id": a.session}
	for k, v := range params {
		p[k] = v
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.next, "method": method, "params": p})
	if err != nil {
		return fmt.Errorf("%s: encode: %w", method, err)
	}
	a.methods[a.next] = method
	if _, err := a.c.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

func (a *attacher) method(id int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.methods[id]
	delete(a.methods, id)
	return m
}

// forward sends stdin to the session with write_stdin until end of file
// (the session keeps running: only the detach key detaches), or until
// the detach key, which sends detach.
func (a *attacher) forward(stdin io.Reader, stderr io.Writer, nl string) {
	buf := make([]byte, attachChunk)
	escaped := false
	for {
		n, err := stdin.Read(buf)
		out := make([]byte, 0, n+1)
		for _, b := range buf[:max(n, 0)] {
			switch {
			case escaped && b == detachKey:
				if len(out) > 0 {
					a.write(out, stderr, nl)
				}
				if err := a.send("detach", nil); err != nil {
					fmt.Fprintf(stderr, "glove: attach: %v%s", err, nl)
				}
				return
			case escaped && b == detachEscape:
				out = append(out, b)
				escaped = false
			case escaped:
				out = append(out, detachEscape, b)
				escaped = false
			case b == detachEscape:
				escaped = true
			default:
				out = append(out, b)
			}
		}
		if len(out) > 0 {
			a.write(out, stderr, nl)
		}
		if err != nil {
			return
		}
	}
}

func (a *attacher) write(data []byte, stderr io.Writer, nl string) {
	if err := a.send("write_stdin", map[string]any{"data": data}); err != nil {
		fmt.Fprintf(stderr, "glove: attach: %v%s", err, nl)
	}
}
