// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/packaging"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/docscript"
	"github.com/glove-sandbox/glove/testenv/harnesses"
	"github.com/glove-sandbox/glove/testenv/modelserver"
)

// shippedSizeBounds is the package's bounds file name's max_* members.
func shippedSizeBounds(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	b, err := packaging.ShippedSizeBounds(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docTerminal is a terminal a document's interactive command runs on, as
// the person reading it would: a pty of its own (the command's
// controlling terminal), whose output the test reads and answers the
// cursor position query of as a terminal would.
type docTerminal struct {
	master *os.File
	cmd    *exec.Cmd
	done   chan error

	mu  sync.Mutex
	buf bytes.Buffer
}

// terminalAnswers are a terminal's answers to the queries the harnesses
// send: the cursor's position, and the primary device attributes (a
// VT100 with advanced video).
var terminalAnswers = map[string]string{"\x1b[6n": "\x1b[1;1R", "\x1b[c": "\x1b[?1;2c"}

// startOnTerminal runs bash -c line in dir on a new pty of rows×cols.
func startOnTerminal(t *testing.T, dir string, env []string, line string, rows, cols uint16) *docTerminal {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	term := &docTerminal{master: os.NewFile(uintptr(m), "ptmx"), done: make(chan error, 1)}
	t.Cleanup(func() { term.master.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.Fatal(errno)
	}
	slave := os.NewFile(sfd, "pts")
	defer slave.Close()
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
	term.cmd = exec.Command("bash", "-euo", "pipefail", "-c", line)
	term.cmd.Dir, term.cmd.Env = dir, env
	term.cmd.Stdin, term.cmd.Stdout, term.cmd.Stderr = slave, slave, slave
	term.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := term.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { term.done <- term.cmd.Wait() }()
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, err := term.master.Read(b)
			if n > 0 {
				term.mu.Lock()
				term.buf.Write(b[:n])
				term.mu.Unlock()
				// What a terminal answers: codex asks where the cursor
				// is, claude-code what the terminal is (DA1).
				for q, a := range terminalAnswers {
					for range bytes.Count(b[:n], []byte(q)) {
						if _, err := term.master.Write([]byte(a)); err != nil {
							return
						}
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return term
}

// escape is a terminal control sequence (CSI, OSC, a charset choice or
// a two-byte escape), and blanks a run of spaces.
var escape, blanks = regexp.MustCompile("\x1b(\\[[0-?]*[ -/]*[@-~]|\\][^\a\x1b]*(\a|\x1b\\\\)|[()][0-9A-Za-z]|.)"), regexp.MustCompile(`\s+`)

// plain is terminal output as the text it shows, roughly: every control
// sequence a space (claude-code moves the cursor between words rather
// than write spaces), runs of spaces one.
func plain(b []byte) string {
	return blanks.ReplaceAllString(escape.ReplaceAllString(string(b), " "), " ")
}

// waitFor waits until want appears in the text shown after offset from
// and returns the output's length then.
func (d *docTerminal) waitFor(from int, want string, timeout time.Duration) (int, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		d.mu.Lock()
		n := d.buf.Len()
		found := from <= n && (want == "" && n > from || want != "" && strings.Contains(plain(d.buf.Bytes()[from:]), want))
		d.mu.Unlock()
		if found {
			return n, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, false
}

// quiet waits until the terminal has had no output for d, at most max.
func (d *docTerminal) quiet(q, max time.Duration) {
	deadline := time.Now().Add(max)
	last, at := -1, time.Now()
	for time.Now().Before(deadline) {
		d.mu.Lock()
		n := d.buf.Len()
		d.mu.Unlock()
		if n != last {
			last, at = n, time.Now()
		} else if time.Since(at) >= q {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typeKeys types s a key at a time, as a person does.
func (d *docTerminal) typeKeys(t *testing.T, s ...string) {
	t.Helper()
	for _, k := range s {
		if _, err := d.master.Write([]byte(k)); err != nil {
			t.Fatalf("type %q: %v", k, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *docTerminal) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.String()
}

// chars is s as keys.
func chars(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// The cursor keys, as a terminal in its normal mode sends them.
const keyUp, keyDown = "\x1b[A", "\x1b[B"

// TestGlovedHarnessesDocument runs docs/harnesses.md as a root operator
// would: every command of its shell blocks, as written and in order —
// npm installs the pinned harnesses, glove policy stage stages them,
// glove policy generate writes the templates, install puts the keys and
// the policy in place, glove policy validate, jq makes the plans, glove
// call creates and starts the sessions, glove attach attaches to them on
// a terminal, glove call stops them. The host's paths are the test's
// (the npm prefix is in the harness cache, the runtime directory beneath
// the test's source root, /etc/glove, the workspace and the gateway's
// socket in the test's tree, the glove user the test's service user),
// the policy is the document's with the templates generate wrote, the
// gateway is the scripted model server, and gloved is started where the
// document restarts it.
//
// At each glove attach the test is the person at the terminal: for
// codex it types a request at the prompt, sees the scripted final
// answer, resizes the terminal and sees codex redraw; for claude-code it
// answers the two first-run questions the document names, types the
// request, sees the answer. Each then detaches with Ctrl-] d. Judged
// from outside: the model server saw exactly the scripted requests of
// each harness, with the key, and the tool result of each held the
// workspace file's unguessable content; session_status reports the
// stopped sessions.
func TestGlovedHarnessesDocument(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the document stages the linux-x64 platform packages")
	}
	for _, tool := range []string{"jq", "tput", "runuser", "sha256sum", "npm"} {
		if _, err := exec.LookPath(tool); err != nil && tool != "npm" {
			t.Fatalf("the document runs %s: %v (scripts/install-deps.sh installs it)", tool, err)
		}
	}
	e := testenv.Get(t)
	e.ConfigureForSessionsBounds(t, shippedSizeBounds(t, "mounter.json"), shippedSizeBounds(t, "cgroup.json"))
	testenv.CheckLeaks(t, e.UID)
	raw, err := os.ReadFile("../../../docs/harnesses.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	cache, err := harnesses.DefaultCache()
	if err != nil {
		t.Fatal(err)
	}

	f := newFixture(t, e, map[string][]string{"line": {"line"}})
	input := "glove-input-" + randomHex(t)
	if err := os.WriteFile(filepath.Join(f.ws, "input.txt"), []byte(input+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(f.ws, "input.txt"), e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	key := "sk-glove-test-" + randomHex(t)
	final := map[string]string{"codex-1": "GLOVE-FINAL-CODEX-" + randomHex(t), "claude-1": "GLOVE-FINAL-CLAUDE-" + randomHex(t)}
	const command = "cat input.txt > out.txt; cat out.txt"
	srv, sock := modelGateway(t, e, f, modelserver.Config{Key: key,
		Responses: []modelserver.Turn{{Command: command}, {Text: final["codex-1"]}},
		Messages:  []modelserver.Turn{{Command: command}, {Text: final["claude-1"]}}})

	// The operator's working directory, where the document's files are
	// made; the service user runs glove call there.
	cwd, err := os.MkdirTemp(e.Base, "doc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(cwd); err != nil {
			t.Error(err)
		}
	})
	etc := filepath.Join(cwd, "etc-glove")
	runtimes := filepath.Join(e.Base, "sources", "doc-runtimes-"+randomHex(t))
	t.Cleanup(func() { removeStage(t, runtimes) })
	for _, d := range []string{cwd, etc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"codex.key", "claude-code.key"} {
		if err := os.WriteFile(filepath.Join(cwd, k), []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// glove as the document runs it, on the test gloved's socket.
	bin := filepath.Join(cwd, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	glove := filepath.Join(e.Install.BinDir, "glove")
	wrapper := "#!/bin/sh\ncase \"$1\" in call|attach) c=$1; shift; exec " + glove + " \"$c\" --socket " + f.run + "/gloved.sock \"$@\";; esac\nexec " + glove + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "glove"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "TERM=xterm", "HOME=" + cwd, "LANG=C.UTF-8"}
	sub := strings.NewReplacer(
		"/var/tmp/glove-harnesses", filepath.Join(cache, "harnesses-doc"),
		"/usr/local/lib/glove-runtimes", runtimes,
		"/etc/glove/", etc+"/",
		"/srv/work/demo", f.ws,
		"/run/glove-gateway/model.sock", sock,
		"-o glove -g glove", "-o "+e.User+" -g "+e.Group,
		"runuser -u glove ", "runuser -u "+e.User+" ")

	policyFile := filepath.Join(etc, "session-policy.json")
	var g *gloved
	started := map[string]bool{}
	var ran []string
	for _, block := range docscript.Blocks(doc, "sh") {
		for _, docLine := range docscript.ShellLines(block) {
			line := sub.Replace(docLine)
			fields := strings.Fields(line)
			ran = append(ran, strings.Join(fields[:min(len(fields), 2)], " "))
			switch {
			case strings.HasPrefix(line, "npm install "):
				harnesses.EnsureCommand(t, "harnesses-doc", strings.Split(strings.TrimSuffix(bashIn(t, cwd, env, `npm() { printf '%s\0' npm "$@"; }; `+line), "\x00"), "\x00"))
			case line == "systemctl restart gloved":
				args := slices.Clone(f.args)
				args[slices.Index(args, "--session-policy")+1] = policyFile
				g = startGloved(t, e, args...)
				logOnFailure(t, g)
				t.Cleanup(func() {
					// A check that failed on the way: nothing of a
					// session may outlive the test (the leak check).
					if g.cmd.ProcessState != nil {
						return
					}
					c := dial(t, g.socket)
					for id := range started {
						if _, err := c.call("stop_session", map[string]any{"session_id": id, "grace_ms": 200}); err != nil {
							t.Logf("stop %s at the end: %v", id, err)
						}
					}
					g.stop(t)
				})
			case strings.Contains(line, " glove attach "):
				id := fields[len(fields)-1]
				started[id] = true
				attachAsDocumented(t, cwd, env, line, id, final[id])
			default:
				if strings.Contains(line, "session-policy.json") {
					if _, err := os.Stat(filepath.Join(cwd, "session-policy.json")); err != nil {
						writeDocPolicy(t, doc, cwd, sub)
					}
				}
				out := bashIn(t, cwd, env, line)
				if strings.Contains(line, "glove policy stage") {
					checkStagedAsDocumented(t, doc, out, sub)
				}
			}
		}
	}
	for _, want := range []string{"npm install", "install -d", "glove policy", "runuser -u", "jq -n", "systemctl restart"} {
		if !slices.Contains(ran, want) {
			t.Errorf("the document ran no %q (it ran %q)", want, ran)
		}
	}
	if len(started) != 2 {
		t.Fatalf("the document attached to %v, want codex-1 and claude-1", started)
	}

	// Judged from outside: each harness made exactly the scripted
	// requests, with the key, and sent back the tool's output.
	for kind, id := range map[string]string{"responses": "codex-1", "messages": "claude-1"} {
		var log []modelserver.Request
		for _, r := range srv.Log() {
			if r.Kind == kind && r.Turn >= 0 {
				log = append(log, r)
			}
		}
		if len(log) != 2 || !log[0].KeyOK || !log[1].KeyOK {
			t.Errorf("%s: the model server saw %d scripted requests (%+v), want 2 with the key", id, len(log), log)
			continue
		}
		if res := log[1].ToolResults; len(res) != 1 || !strings.Contains(res[0], input) {
			t.Errorf("%s: the tool result sent back %q, want one holding %q", id, res, input)
		}
	}
	for id := range started {
		out := bashIn(t, cwd, env, "glove call session_status "+"'"+`{"session_id": "`+id+`"}`+"'")
		var st struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.State == "running" || st.State == "" {
			t.Errorf("%s after stop_session: %v %s", id, err, out)
		}
	}
	g.stop(t)
}

// bashIn runs a document's line with bash in dir and returns its stdout;
// the test fails on a failure.
func bashIn(t *testing.T, dir string, env []string, line string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", line, err, out.String(), errb.String())
	}
	return out.String()
}

// writeDocPolicy writes the document's policy into dir as
// session-policy.json: its two templates are the files glove policy
// generate wrote there, its host paths the test's.
func writeDocPolicy(t *testing.T, doc, dir string, sub *strings.Replacer) {
	t.Helper()
	pols := docscript.Blocks(doc, "json harness-policy")
	if len(pols) != 1 {
		t.Fatalf("%d policy blocks, want 1", len(pols))
	}
	var tmpls []string
	for _, name := range []string{"claude-code.json", "codex.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("the document's generate did not write %s: %v", name, err)
		}
		tmpls = append(tmpls, string(b))
	}
	text := strings.Replace(sub.Replace(pols[0]), "[CLAUDE, CODEX]", "["+strings.Join(tmpls, ",")+"]", 1)
	if err := os.WriteFile(filepath.Join(dir, "session-policy.json"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// docSearchPath is a staged search path as the document writes it.
var docSearchPath = regexp.MustCompile("/usr/local/lib/glove-runtimes/[0-9a-f]{64}[^ `\n]*")

// checkStagedAsDocumented: glove policy stage printed a search path the
// document names (moved to the test's runtime directory).
func checkStagedAsDocumented(t *testing.T, doc, out string, sub *strings.Replacer) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "search_path: "); ok {
			for _, docPath := range docSearchPath.FindAllString(doc, -1) {
				if sub.Replace(docPath) == p {
					return
				}
			}
			t.Fatalf("glove policy stage printed the search path %s, which the document does not name", p)
		}
	}
	t.Fatalf("glove policy stage printed no search_path:\n%s", out)
}

// attachAsDocumented runs the document's glove attach line on a terminal
// and is the person at it (see TestGlovedHarnessesDocument).
func attachAsDocumented(t *testing.T, dir string, env []string, line, id, final string) {
	t.Helper()
	term := startOnTerminal(t, dir, env, line, 30, 100)
	exited := false
	defer func() {
		if exited {
			return
		}
		select {
		case <-term.done:
		default:
			t.Errorf("%s: glove attach still running; its terminal:\n%q", id, term.String())
			// Its process group: runuser's child, glove, too.
			if err := unix.Kill(-term.cmd.Process.Pid, unix.SIGKILL); err != nil {
				t.Error(err)
			}
			<-term.done
		}
	}()
	step := func(from int, want string, d time.Duration) int {
		t.Helper()
		n, ok := term.waitFor(from, want, d)
		if !ok {
			t.Fatalf("%s: no %q on the terminal:\n%q", id, want, term.String())
		}
		return n
	}
	n := 0
	if strings.HasPrefix(id, "codex") {
		n = step(n, "Ask Codex to do anything", 90*time.Second)
	} else {
		// A person reads a question before answering it.
		n = step(n, "trust this folder", 90*time.Second)
		time.Sleep(time.Second)
		term.typeKeys(t, keyDown)
		time.Sleep(300 * time.Millisecond)
		term.typeKeys(t, "\r")
		n = step(n, "Do you want to use this API key", 30*time.Second)
		time.Sleep(time.Second)
		term.typeKeys(t, keyUp)
		time.Sleep(300 * time.Millisecond)
		term.typeKeys(t, "\r")
		n = step(n, "shift+tab to cycle", 30*time.Second)
	}
	time.Sleep(500 * time.Millisecond)
	term.typeKeys(t, chars("Run the command.")...)
	time.Sleep(300 * time.Millisecond)
	term.typeKeys(t, "\r")
	n = step(n, final, 120*time.Second)
	// The terminal's size changes: glove attach sends the new one, and
	// the harness draws again.
	if err := unix.IoctlSetWinsize(int(term.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	step(n+1, "", 10*time.Second)
	// The detach key once the harness has drawn: the terminal's answer
	// to a query it sends while redrawing must not come between Ctrl-]
	// and d, which then would be input (as it would from a person typing
	// while the terminal answers).
	term.quiet(time.Second, 20*time.Second)
	term.typeKeys(t, "\x1dd")
	select {
	case err := <-term.done:
		exited = true
		if err != nil {
			t.Fatalf("%s: glove attach after Ctrl-] d: %v\n%q", id, err, term.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: glove attach did not detach on Ctrl-] d", id)
	}
	if !strings.Contains(term.String(), "detached from "+id) {
		t.Errorf("%s: no detach message:\n%q", id, term.String())
	}
}
