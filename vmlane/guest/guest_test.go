// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/testenv"
)

func TestTopLevel(t *testing.T) {
	out := "=== RUN   TestA\n--- FAIL: TestA (0.1s)\n    --- FAIL: TestB/sub (0.0s)\n--- FAIL: TestB (0.2s)\n--- PASS: TestC (0.0s)\n    x.go:1: --- FAIL: TestD\n"
	if got := topLevel(out, "--- FAIL: "); !reflect.DeepEqual(got, []string{"TestA", "TestB"}) {
		t.Errorf("topLevel = %q", got)
	}
}

// The agent names testenv's prebuilt variable without linking testenv.
func TestPrebuiltEnv(t *testing.T) {
	if PrebuiltEnv != testenv.PrebuiltEnv {
		t.Errorf("PrebuiltEnv = %q, testenv.PrebuiltEnv = %q", PrebuiltEnv, testenv.PrebuiltEnv)
	}
}

func TestFormatResult(t *testing.T) {
	got := string(FormatResult([]Outcome{{Name: "install", OK: true}, {Name: "unit-start", Reason: "gloved failed:\n  cgroup\tv2\n\n"}}))
	want := "fail\nok install\nFAIL unit-start: gloved failed: | cgroup v2\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := string(FormatResult([]Outcome{{Name: "a", OK: true}})); got != "pass\nok a\n" {
		t.Errorf("all ok: %q", got)
	}
	if got := string(FormatResult(nil)); got != "fail\n" {
		t.Errorf("no outcome: %q", got)
	}
	if got := (Outcome{Name: "x"}).Line(); got != "FAIL x: (no reason given)" {
		t.Errorf("empty reason: %q", got)
	}
	long := OneLine(strings.Repeat("é", 400), 101)
	if len(long) > 101 || !strings.HasSuffix(long, " …") || !utf8Valid(long) {
		t.Errorf("truncated: %d bytes %q", len(long), long)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestState(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if st, err := LoadState(p); st != nil || err != nil {
		t.Fatalf("missing: %v %v", st, err)
	}
	st := &State{Version: StateVersion, Phase: PhaseRebooting, Boots: 1, StartedAt: time.Unix(1800000000, 0).UTC(), RunTag: "abc123",
		Anchor: strings.Repeat("a", 64), GloveUID: 998, GloveGID: 997,
		Results:     []Outcome{{Name: "install", OK: true}, {Name: "status", Reason: "no"}},
		PreExisting: map[string]bool{"/usr/bin": true, "/usr/bin/glove": false}, DpkgList: []string{"/.", "/usr/bin/glove"},
		AckedSeq: 5, AckedMAC: strings.Repeat("b", 64), Sessions: map[string]string{"hello-abc123": "t-hello"},
		Reboot: &RebootInfo{SessionID: "reboot-abc123", State: "running", Image: "reboot-abc123_retained.img", ShimPIDs: []int{7, 8}}}
	if err := st.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("round trip:\n%+v\n%+v", got, st)
	}
	if o, ok := got.Outcome("status"); !ok || o.OK || o.Reason != "no" {
		t.Errorf("Outcome: %+v %v", o, ok)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := os.WriteFile(p, []byte(`{"version":99}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(p); err == nil {
		t.Error("another version accepted")
	}
}

// fakeGloved answers on the server end of a pipe: each request line is
// passed to handle, which returns the lines to send back.
func fakeGloved(t *testing.T, handle func(req map[string]any) []string) *Client {
	t.Helper()
	// A socketpair, buffered like gloved's socket (net.Pipe is not).
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cli, srv := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { cli.Close(); srv.Close() })
	go func() {
		r := bufio.NewReader(srv)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var req map[string]any
			if err := json.Unmarshal([]byte(line), &req); err != nil {
				t.Errorf("request %q: %v", line, err)
				return
			}
			for _, out := range handle(req) {
				if _, err := srv.Write([]byte(out)); err != nil {
					return
				}
			}
		}
	}()
	return NewClient(cli)
}

func TestRPC(t *testing.T) {
	var seen []map[string]any
	c := fakeGloved(t, func(req map[string]any) []string {
		seen = append(seen, req)
		id := req["id"].(float64)
		switch req["method"] {
		case "capabilities":
			return []string{"\r\n", `{"jsonrpc":"2.0","id":1,"result":{"protocol_version":1,"methods":["capabilities"]}}` + "\r\n"}
		case "attach":
			// The response, then notifications; a notification before
			// the response of the next call is queued.
			return []string{`{"jsonrpc":"2.0","id":2,"result":{"attached":true}}` + "\n",
				`{"jsonrpc":"2.0","method":"output","params":{"session_id":"s","data":"aGkK","offset":0}}` + "\n"}
		case "write_stdin":
			return []string{`{"jsonrpc":"2.0","method":"output","params":{"session_id":"s","data":"eA==","offset":3}}` + "\n",
				`{"jsonrpc":"2.0","id":3,"result":{"written":3}}` + "\n",
				`{"jsonrpc":"2.0","method":"ended","params":{"session_id":"s","state":"exited","termination":"exited","exit_code":0,"signal":0,"status":0}}` + "\n"}
		case "session_status":
			return []string{`{"jsonrpc":"2.0","id":4,"error":{"code":-32001,"message":"no such session"}}` + "\n"}
		case "bad":
			_ = id
			return []string{`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n"}
		}
		return nil
	})
	var caps struct {
		Protocol int      `json:"protocol_version"`
		Methods  []string `json:"methods"`
	}
	if err := c.Call("capabilities", nil, &caps, time.Second); err != nil || caps.Protocol != 1 || len(caps.Methods) != 1 {
		t.Fatalf("capabilities: %v %+v", err, caps)
	}
	if _, ok := seen[0]["params"]; ok || seen[0]["jsonrpc"] != "2.0" || seen[0]["id"] != float64(1) {
		t.Errorf("request without params: %v", seen[0])
	}
	var att struct {
		Attached bool `json:"attached"`
	}
	if err := c.Call("attach", map[string]any{"session_id": "s"}, &att, time.Second); err != nil || !att.Attached {
		t.Fatalf("attach: %v", err)
	}
	var w struct {
		Written int `json:"written"`
	}
	if err := c.Call("write_stdin", map[string]any{"session_id": "s", "data": "eAo="}, &w, time.Second); err != nil || w.Written != 3 {
		t.Fatalf("write_stdin: %v %+v", err, w)
	}
	if p := seen[2]["params"].(map[string]any); p["session_id"] != "s" || p["data"] != "eAo=" {
		t.Errorf("params: %v", p)
	}
	var outs []string
	for range 3 {
		m, err := c.Next(time.Now().Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if m.Method == "output" {
			var o Output
			if err := json.Unmarshal(m.Params, &o); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, string(o.Data))
		} else {
			outs = append(outs, m.Method)
		}
	}
	if strings.Join(outs, "|") != "hi\n|x|ended" {
		t.Errorf("notifications in order: %q", outs)
	}
	err := c.Call("session_status", map[string]any{"session_id": "nobody"}, nil, time.Second)
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeNotFound || !IsCode(err, CodeNotFound) {
		t.Errorf("error response: %v", err)
	}
	if err := c.Call("bad", nil, nil, time.Second); err == nil || !strings.Contains(err.Error(), "response id 99") {
		t.Errorf("mismatched id: %v", err)
	}
	if _, err := c.Next(time.Now().Add(50 * time.Millisecond)); err == nil {
		t.Error("Next without notifications did not time out")
	}
}

func TestDecodeMessage(t *testing.T) {
	for _, bad := range []string{`{"id":1,"result":{}}`, `{"jsonrpc":"2.0"}`, `not json`, `{"jsonrpc":"1.0","id":1}`} {
		if _, err := DecodeMessage([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	line, err := EncodeRequest(7, "receipts_page", map[string]any{"after": 0, "limit": 100})
	if err != nil || string(line) != `{"jsonrpc":"2.0","id":7,"method":"receipts_page","params":{"after":0,"limit":100}}`+"\n" {
		t.Errorf("EncodeRequest: %q %v", line, err)
	}
}

func TestLanePolicy(t *testing.T) {
	ro := []string{"/usr/lib", "/usr/lib64", "/usr/bin/head", "/usr/bin/sleep", "/usr/bin/stty"}
	lp, err := BuildPolicy("/usr/bin/dash", ro, "/var/lib/glove-lane")
	if err != nil {
		t.Fatal(err)
	}
	data := policy.Canonical(lp.Policy)
	back, err := policy.Decode(data)
	if err != nil {
		t.Fatalf("the canonical policy does not decode: %v", err)
	}
	if err := policy.Validate(back); err != nil {
		t.Fatal(err)
	}
	if len(lp.Policy.RuntimeTemplates) != len(Templates) {
		t.Errorf("%d templates", len(lp.Policy.RuntimeTemplates))
	}
	digests := map[string]bool{}
	now := time.Now()
	for _, tm := range Templates {
		for _, pr := range Profiles() {
			pl, err := lp.Plan(tm.ID, pr.ProfileID, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Validate(pl, back, now); err != nil {
				t.Errorf("%s/%s: %v", tm.ID, pr.ProfileID, err)
			}
			obj, err := PlanObject(pl)
			if err != nil || !json.Valid(obj) {
				t.Errorf("plan object: %v", err)
			}
		}
		rt, _ := lp.Policy.Template(tm.ID)
		if digests[rt.AdapterCommandDigest] {
			t.Errorf("%s: the adapter digest of another template", tm.ID)
		}
		digests[rt.AdapterCommandDigest] = true
	}
	if _, err := lp.Plan("t-nope", ProfBasic, now); err == nil {
		t.Error("an unknown template planned")
	}
}

// TestLaneProfilesFitPackageBounds: the lane installs the .deb and keeps
// its bounds (packaging/etc/glove), so every lane profile must launch
// under them, glove-shim's tasks and the derived tmpfs inodes counted,
// judged by the helpers' own checks (packaging's
// TestShippedProfilesFitShippedBounds does the same for the shipped
// profiles).
func TestLaneProfilesFitPackageBounds(t *testing.T) {
	mnt, cg := &mounter.Config{}, &cgroup.Config{}
	for file, cfg := range map[string]helperkit.Config{"mounter.json": mnt, "cgroup.json": cg} {
		data, err := os.ReadFile(filepath.Join("../../packaging/etc/glove", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := helperkit.DecodeStrict(data, cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	for _, p := range Profiles() {
		mem, pids := session.CgroupLimits(p)
		req := session.TmpfsRequest(p.DiskBytes)
		for _, err := range []error{cg.CheckLimits(mem, pids), mnt.CheckTmpfsBounds(req.SizeBytes, req.Inodes)} {
			if err != nil {
				t.Errorf("lane profile %s: %v", p.ProfileID, err)
			}
		}
	}
}

// TestScriptsParse checks every template's script with the host's dash.
// TestLaneLocalServices: the lane's --local-services file is valid,
// selects inherited-stream-v1, forwards its upstream to the lane's
// runtime (every template's) and to no other, and advertises no guest
// channel (it has no binding).
func TestLaneLocalServices(t *testing.T) {
	c, err := localservice.Decode(LocalServices())
	if err != nil {
		t.Fatal(err)
	}
	if err := localservice.Validate(c); err != nil {
		t.Fatal(err)
	}
	s, ok := localservice.ServiceFor(c, RuntimeID)
	if !ok || s.Alias != StreamAlias || s.Socket != UpstreamSocket {
		t.Errorf("the lane's runtime %s gets %+v, %v", RuntimeID, s, ok)
	}
	if _, ok := localservice.ServiceFor(c, "codex"); ok {
		t.Error("codex is allowed the lane's upstream")
	}
	if v := localservice.GuestChannelSchemaVersion(c); v != 0 {
		t.Errorf("guest channel schema version %d, want 0", v)
	}
	lp, err := BuildPolicy("/bin/sh", nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range lp.Policy.RuntimeTemplates {
		if _, ok := localservice.ServiceFor(c, tm.RuntimeID); !ok {
			t.Errorf("template %s (runtime %s) would get no stream", tm.RuntimeTemplateID, tm.RuntimeID)
		}
	}
}

func TestScriptsParse(t *testing.T) {
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("no dash")
	}
	for _, tm := range Templates {
		if out, err := exec.Command(dash, "-n", "-c", tm.Script).CombinedOutput(); err != nil {
			t.Errorf("%s: %v: %s", tm.ID, err, out)
		}
	}
}

// TestStreamScript runs t-stream's script in the host's dash with
// descriptor 3 connected to the lane's upstream.
func TestStreamScript(t *testing.T) {
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("no dash")
	}
	sock := filepath.Join(t.TempDir(), "up.sock")
	log := &syncWriter{}
	go func() { _ = Upstream(sock, "echo ", log) }()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 100 {
			t.Fatal("upstream did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f, err := conn.(*net.UnixConn).File()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var script string
	for _, tm := range Templates {
		if tm.ID == "t-stream" {
			script = tm.Script
		}
	}
	cmd := exec.Command(dash, "-c", script)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = []string{`GLOVE_LOCAL_SERVICE_FDS_V1={"lane":3}`, "GLOVE_LOCAL_SERVICE_ALIAS=lane"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), `fds={"lane":3} alias=lane`) || !strings.Contains(string(out), "echo lane-ping") {
		t.Errorf("output %q", out)
	}
	if !strings.Contains(log.String(), `got "lane-ping"`) {
		t.Errorf("upstream log %q", log.String())
	}
}

type syncWriter struct {
	b strings.Builder
	m chan struct{}
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.lock()
	defer w.unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.lock()
	defer w.unlock()
	return w.b.String()
}

func (w *syncWriter) lock() {
	if w.m == nil {
		w.m = make(chan struct{}, 1)
	}
	w.m <- struct{}{}
}

func (w *syncWriter) unlock() { <-w.m }

func TestExecStart(t *testing.T) {
	unit, err := os.ReadFile("../../packaging/systemd/gloved.service")
	if err != nil {
		t.Fatal(err)
	}
	es, err := ParseExecStart(string(unit))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(es, "/usr/bin/gloved --session-policy /etc/glove/session-policy.json") ||
		!strings.HasSuffix(es, "--receipt-anchor ${GLOVED_RECEIPT_ANCHOR}") || strings.Contains(es, `\`) {
		t.Errorf("ExecStart %q", es)
	}
	d := DropIn(es, []string{"--local-services", LocalServicesFile})
	if !strings.Contains(d, "[Service]\nExecStart=\nExecStart=/usr/bin/gloved ") || !strings.HasSuffix(d, "${GLOVED_RECEIPT_ANCHOR} --local-services "+LocalServicesFile+"\n") {
		t.Errorf("drop-in %q", d)
	}
	got := ExpandEnv(es, map[string]string{"GLOVED_RECEIPT_ANCHOR": "ab"})
	if !strings.HasSuffix(got, "--receipt-anchor ab") {
		t.Errorf("expanded %q", got)
	}
	if _, err := ParseExecStart("[Service]\nExecStart=\n"); err == nil {
		t.Error("an empty ExecStart accepted")
	}
}

func TestParseStatusText(t *testing.T) {
	out := `user-namespaces          ok    created one (uid map of one id)
landlock                 FAIL  unavailable: function not implemented (glove-shim refuses to build a sandbox without it)
cgroups                  FAIL  no memory controller; v2 /sys/fs/cgroup [cpu io]
helper glove-mounter     ok    /usr/libexec/glove/glove-mounter 0750 root:glove caps 0000000000200000
not ready: landlock, cgroups
`
	r := ParseStatusText(out)
	if r.Ready || len(r.Items) != 4 || !r.text {
		t.Fatalf("%+v", r)
	}
	want := []StatusItem{{Name: "user-namespaces", OK: true, Detail: "created one (uid map of one id)"},
		{Name: "landlock", Detail: "unavailable: function not implemented (glove-shim refuses to build a sandbox without it)"},
		{Name: "cgroups", Detail: "no memory controller; v2 /sys/fs/cgroup [cpu io]"},
		{Name: "helper glove-mounter", OK: true, Detail: "/usr/libexec/glove/glove-mounter 0750 root:glove caps 0000000000200000"}}
	if !reflect.DeepEqual(r.Items, want) {
		t.Errorf("%+v", r.Items)
	}
	if !ParseStatusText("a ok b\nready: everything\n").Ready {
		t.Error("ready line")
	}
}

func TestDebPaths(t *testing.T) {
	listing := `drwxr-xr-x root/root         0 2026-11-30 10:00 ./
drwxr-xr-x root/root         0 2026-11-30 10:00 ./usr/
-rwxr-xr-x root/root   9000000 2026-11-30 10:00 ./usr/bin/glove
lrwxrwxrwx root/root         0 2026-11-30 10:00 ./usr/bin/x -> y
`
	got := debPaths(listing)
	if strings.Join(got, " ") != "/usr /usr/bin/glove /usr/bin/x" {
		t.Errorf("%q", got)
	}
}

func TestDecodeFileCaps(t *testing.T) {
	// revision 2, effective, permitted cap_sys_admin (21) and
	// cap_dac_override (1).
	b := []byte{0x01, 0, 0, 0x02, 0x02, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	perm, inh, eff, err := DecodeFileCaps(b)
	if err != nil || perm != 1<<21|1<<1 || inh != 0 || !eff {
		t.Errorf("%x %x %v %v", perm, inh, eff, err)
	}
	if _, _, _, err := DecodeFileCaps(b[:19]); err == nil {
		t.Error("short attribute accepted")
	}
}

func TestParseCgroupMounts(t *testing.T) {
	hybrid := `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 41 0:38 /sub /mnt/elsewhere rw,relatime - cgroup2 cgroup2 rw`
	got := ParseCgroupMounts(hybrid)
	want := []CgroupMount{{Point: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
		{Point: "/sys/fs/cgroup/pids", Controllers: []string{"pids"}},
		{Point: "/sys/fs/cgroup/systemd"},
		{V2: true, Point: "/sys/fs/cgroup/unified"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v", got)
	}
}

func TestImageName(t *testing.T) {
	for _, id := range []string{"reboot-abc123", strings.Repeat("s", 60)} {
		if got, want := ImageName(id, AliasRetained), session.ImageName(id, AliasRetained); got != want {
			t.Errorf("%s: %s, session.ImageName %s", id, got, want)
		}
	}
}

func TestTellingLine(t *testing.T) {
	j := "Started gloved\n{\"level\":\"error\",\"msg\":\"refusing to start: cgroup\"}\nMain process exited, code=exited, status=1/FAILURE\ngloved.service: Failed with result 'exit-code'."
	if got := TellingLine(j); !strings.Contains(got, "refusing to start") {
		t.Errorf("%q", got)
	}
	if got := TellingLine("a\nb"); got != "b" {
		t.Errorf("%q", got)
	}
}

func TestDocCommand(t *testing.T) {
	doc, err := os.ReadFile("../../docs/packaging.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := docCommand(string(doc)); !strings.Contains(got, "systemd-run") || !strings.Contains(got, "glove run") {
		t.Errorf("%q", got)
	}
}

func TestFdinfoFlags(t *testing.T) {
	out := "fds={\"lane\":3} alias=lane\r\nfd3-flags:\t04002\r\nfirst-read-rc=1 reply=\r\nretries=36 reply=\x0fecho lane-ping\r\n"
	out = strings.ReplaceAll(out, "\r\n", "\n")
	fl, ok := fdinfoFlags(out)
	if !ok || fl != 0o4002 || fl&syscall.O_NONBLOCK == 0 {
		t.Errorf("%o %v", fl, ok)
	}
	if got := lineWith(out, "retries="); got != "retries=36 reply=\x0fecho lane-ping" {
		t.Errorf("%q", got)
	}
	if _, ok := fdinfoFlags("nothing"); ok {
		t.Error("flags from nothing")
	}
}

func TestJournalErrors(t *testing.T) {
	lines := []string{
		`{"helper":"glove-mounter","level":"info","msg":"serving","pid":977,"time":"2026-12-01T16:29:11Z"}`,
		`{"err":"bind: open_tree: invalid argument","helper":"glove-mounter","id":2,"level":"info","msg":"handler failed","pid":977}`,
		`{"err":"bind: open_tree: invalid argument","helper":"glove-mounter","id":3,"level":"info","msg":"handler failed","pid":978}`,
		`{"event":"session_error","level":"warning","msg":"the session engine reported an error","session_id":"s"}`,
		`{"level":"error","msg":"refusing to start: x"}`,
		`not json`,
	}
	want := "glove-mounter: handler failed: bind: open_tree: invalid argument; gloved: refusing to start: x"
	if got := JournalErrors(lines); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}

func TestObserverEvent(t *testing.T) {
	o := &observer{last: map[string]string{
		"pids.events":    "max 12\nmax.imposed 0",
		"v1:mem.events":  "oom 3",
		"bad.events":     "max twelve",
		"nothing.events": "",
	}}
	for _, c := range []struct {
		file, key string
		want      int64
	}{
		{"pids.events", "max", 12},
		{"pids.events", "max.imposed", 0},
		{"pids.events", "ma", -1},
		{"mem.events", "oom", 3}, // the v1 reading when there is no v2 one
		{"bad.events", "max", -1},
		{"nothing.events", "max", -1},
		{"absent.events", "max", -1},
	} {
		if got := o.event(c.file, c.key); got != c.want {
			t.Errorf("event(%q, %q) = %d, want %d", c.file, c.key, got, c.want)
		}
	}
}

// TestSetupAnchor: the lane takes its anchor from glove setup service's
// report only when the report prints exactly one, of 64 hex digits.
func TestSetupAnchor(t *testing.T) {
	a := strings.Repeat("0a", 32)
	line := "receipt anchor for the controller (printed this once; it is also in /etc/glove/gloved.env): "
	if got, err := SetupAnchor("wrote x\n" + line + a + "\nnext: ...\n"); err != nil || got != a {
		t.Errorf("SetupAnchor: %q %v, want %s", got, err, a)
	}
	for _, bad := range []string{"nothing changed\n", line + "xyz\n", line + a + "\n" + line + a + "\n"} {
		if got, err := SetupAnchor(bad); err == nil {
			t.Errorf("SetupAnchor(%q) = %q, want an error", bad, got)
		}
	}
}
