// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// rawClient is one connection to the control socket that reports errors
// instead of failing a test: goroutines other than the test's (and
// benchmarks) use it.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
	n int
}

func dialRaw(path string) (*rawClient, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &rawClient{c: c, r: bufio.NewReaderSize(c, 1<<20)}, nil
}

func (c *rawClient) Close() error { return c.c.Close() }

// send writes a request and returns its id.
func (c *rawClient) send(method string, params any) (int, error) {
	c.n++
	req := map[string]any{"jsonrpc": "2.0", "id": c.n, "method": method}
	if params != nil {
		req["params"] = params
	}
	line, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("%s: write: %w", method, err)
	}
	return c.n, nil
}

func (c *rawClient) read() (msg, error) { return readMsg(c.c, c.r) }

// call sends a request and decodes its result into out (when not nil);
// an error response is an error.
func (c *rawClient) call(method string, params any, out any) error {
	id, err := c.send(method, params)
	if err != nil {
		return err
	}
	m, err := c.read()
	if err != nil {
		return fmt.Errorf("%s: read: %w", method, err)
	}
	if string(m.ID) != strconv.Itoa(id) {
		return fmt.Errorf("%s: response id %s, want %d (line %+v)", method, m.ID, id, m)
	}
	if m.Error != nil {
		return fmt.Errorf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: result %s: %w", method, m.Result, err)
		}
	}
	return nil
}

// attach attaches to the session and collects its output until
// "ended". first, when not nil, is called when the first output byte
// arrives. Output must arrive without a gap.
func (c *rawClient) attach(id string, first func()) (ended, error) {
	var a struct {
		Attached bool `json:"attached"`
	}
	if err := c.call("attach", map[string]any{"session_id": id}, &a); err != nil {
		return ended{}, err
	}
	if !a.Attached {
		return ended{}, fmt.Errorf("attach %s: not attached", id)
	}
	var out strings.Builder
	next := uint64(0)
	for {
		m, err := c.read()
		if err != nil {
			return ended{}, fmt.Errorf("attach %s: %w (output so far %q)", id, err, out.String())
		}
		switch m.Method {
		case "output":
			var o daemon.Output
			if err := json.Unmarshal(m.Params, &o); err != nil || o.SessionID != id {
				return ended{}, fmt.Errorf("output %s: %v", m.Params, err)
			}
			if o.Offset != next {
				return ended{}, fmt.Errorf("attach %s: output at offset %d, want %d", id, o.Offset, next)
			}
			if next == 0 && len(o.Data) > 0 && first != nil {
				first()
			}
			next = o.Offset + uint64(len(o.Data))
			out.Write(o.Data)
		case "ended":
			var e daemon.End
			if err := json.Unmarshal(m.Params, &e); err != nil {
				return ended{}, err
			}
			return ended{End: e, output: out.String()}, nil
		default:
			return ended{}, fmt.Errorf("attach %s: unexpected line %+v", id, m)
		}
	}
}

// loadSessions is how many sessions TestGlovedLoad runs at once.
const loadSessions = 20

// TestGlovedLoad runs loadSessions sessions at once in one gloved, each
// created and started from its own goroutine and connection, and checks
// every one ends exited with status 7 and its whole output, that the
// receipts form one chain, and reports gloved's peak RSS (VmHWM), also
// to the file named by GLOVE_LOAD_REPORT when set.
func TestGlovedLoad(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	e.ConfigureForSessions(t)
	f := newFixture(t, e, map[string][]string{"load": {"load"}})
	g := f.start()
	// The harness on a terminal (ONLCR): each line ends "\r\n".
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"

	type result struct {
		end ended
		err error
	}
	results := make([]result, loadSessions)
	ids := make([]string, loadSessions)
	var created, done sync.WaitGroup
	release := make(chan struct{})
	began := time.Now()
	for i := range loadSessions {
		ids[i] = fmt.Sprintf("load-%02d", i)
		pl := f.plan("load", "tiny")
		plObj, err := planObject(pl)
		if err != nil {
			t.Fatal(err)
		}
		created.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			res := &results[i]
			c, err := dialRaw(g.socket)
			if err != nil {
				res.err = err
				created.Done()
				return
			}
			defer c.Close()
			var cr struct {
				Token string `json:"start_token"`
			}
			res.err = c.call("create_session", createParams(ids[i], plObj), &cr)
			created.Done()
			if res.err != nil {
				return
			}
			<-release // every session is created: start them at once
			var st struct {
				State string `json:"state"`
			}
			if res.err = c.call("start_session", map[string]any{"session_id": ids[i], "start_token": cr.Token}, &st); res.err != nil {
				return
			}
			if st.State != "starting" {
				res.err = fmt.Errorf("start: %+v", st)
				return
			}
			res.end, res.err = c.attach(ids[i], nil)
		}()
	}
	created.Wait()
	close(release)
	done.Wait()
	elapsed := time.Since(began)

	c := dial(t, g.socket)
	for i, r := range results {
		if r.err != nil {
			t.Errorf("%s: %v", ids[i], r.err)
			continue
		}
		if r.end.State != "exited" || r.end.Termination != "exited" || r.end.ExitCode != 7 || r.end.Status != 7 {
			t.Errorf("%s: ended %+v", ids[i], r.end.End)
		}
		if r.end.output != want {
			t.Errorf("%s: output %q, want %q", ids[i], r.end.output, want)
		}
		var status daemon.Status
		c.ok("session_status", map[string]any{"session_id": ids[i]}, &status)
		if status.State != "exited" || status.Termination != "exited" || status.ExitCode == nil || *status.ExitCode != 7 {
			t.Errorf("%s: status %+v", ids[i], status)
		}
	}
	if t.Failed() {
		t.Fatalf("log: %s", g.log)
	}

	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
		HeadSeq   uint64             `json:"head_seq"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	if len(page.Envelopes) != loadSessions || page.HeadSeq != loadSessions {
		t.Fatalf("page: %d envelopes, head %d, want %d", len(page.Envelopes), page.HeadSeq, loadSessions)
	}
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts do not verify: %v", err)
	}
	seen := map[string]bool{}
	for _, env := range page.Envelopes {
		b := env.Body
		if !strings.HasPrefix(b.SessionID, "load-") || seen[b.SessionID] || b.Termination != "exited" || b.ExitCode != 7 ||
			b.Usage.TerminalOutputBytes != uint64(len(want)) {
			t.Errorf("receipt %d: %+v", env.Seq, b)
		}
		seen[b.SessionID] = true
	}

	hwm, err := vmHWM(g.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	g.stop(t)
	report := fmt.Sprintf("sessions=%d elapsed_ms=%d gloved_peak_rss_kib=%d\n", loadSessions, elapsed.Milliseconds(), hwm)
	t.Logf("%d sessions at once in %v; gloved's peak RSS (VmHWM) %d KiB", loadSessions, elapsed.Round(time.Millisecond), hwm)
	if path := os.Getenv("GLOVE_LOAD_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("GLOVE_LOAD_REPORT: %v", err)
		}
	}
}

// vmHWM is the process's peak resident set size in KiB.
func vmHWM(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
