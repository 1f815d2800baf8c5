// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// egressPort is the fixture's egress endpoint in the sandbox.
const egressPort = 8787

// withEgress adds to the fixture's policy the egress policy
// "model-gateway": 127.0.0.1:egressPort relayed to the unix socket
// upstream, and rewrites policy.json.
func (f *fixture) withEgress(t *testing.T, upstream string) {
	t.Helper()
	f.pol.EgressPolicyIDs = []string{"model-gateway", "no-network"}
	f.pol.EgressPolicies = []policy.EgressPolicy{{EgressPolicyID: "model-gateway", Endpoints: []policy.EgressEndpoint{
		{Address: "127.0.0.1:" + strconv.Itoa(egressPort), AllowPrivate: true, Upstream: policy.EgressUpstream{UnixSocket: upstream}}}}}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), f.e.UID, f.e.GID)
}

// hostService is a TCP service on the host's own loopback, which no
// sandbox may reach: it counts the connections it accepts, and closes
// when the test ends.
func hostService(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepts := new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	return ln, accepts
}

// TestGlovedEgress runs a session whose plan selects an egress policy:
// its program reaches the operator's upstream through 127.0.0.1:8787 of
// its own network namespace, relayed by gloved, and nothing else — judged
// from outside. Another port of the sandbox's loopback is refused; a
// service listening on the host's 127.0.0.1 is not reachable (and saw no
// connection); the upstream accepted exactly one connection; the
// session's egress audit holds that connection's open and close records,
// with byte counts and no payload or host path. A session of the same
// policy whose plan selects no-network gets no endpoint at all.
func TestGlovedEgress(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)

	// A service on the host's own loopback: the sandbox must not reach it.
	hostLn, hostAccepts := hostService(t)
	hostAddr := hostLn.Addr().String()
	_, hostPort, err := net.SplitHostPort(hostAddr)
	if err != nil {
		t.Fatal(err)
	}
	// A datagram service on the host's loopback: nothing may reach it.
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var datagrams atomic.Int32
	go func() {
		b := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(b); err != nil {
				return
			}
			datagrams.Add(1)
		}
	}()
	ep := "127.0.0.1:" + strconv.Itoa(egressPort)
	f := newFixture(t, e, map[string][]string{"egress": {"tcp", ep, "127.0.0.1:8788", "127.0.0.1:" + hostPort, "10.0.0.1:80"},
		"egress-probe": {"netprobe", udp.LocalAddr().String()}})
	sock := startUpstream(t, e, f)
	f.withEgress(t, sock)
	g := f.start()
	logOnFailure(t, g)
	c := dial(t, g.socket)

	pl := f.plan("egress", "tiny")
	pl.EgressPolicyIDs = []string{"model-gateway"}
	tok := f.create(c, "s-egress", pl)
	c.ok("start_session", map[string]any{"session_id": "s-egress", "start_token": tok}, nil)
	end := attach(t, c, "s-egress")
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	if !strings.Contains(out, "tcp "+ep+" reply pong:ping <nil>\n") {
		t.Errorf("the program did not reach the upstream through %s:\n%s", ep, out)
	}
	for _, refused := range []string{"127.0.0.1:8788", "127.0.0.1:" + hostPort, "10.0.0.1:80"} {
		if !strings.Contains(out, "tcp "+refused+" refused") {
			t.Errorf("%s was not refused in the sandbox:\n%s", refused, out)
		}
	}
	if n := hostAccepts.Load(); n != 0 {
		t.Errorf("the host's service on %s accepted %d connections from the sandbox", hostAddr, n)
	}
	if n := accepts(t, sock); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}

	// The audit, read from outside: the one connection, open then close.
	raw, err := os.ReadFile(filepath.Join(f.storeDir, "egress-s-egress.audit"))
	if err != nil {
		t.Fatalf("the session's egress audit: %v", err)
	}
	if strings.Contains(string(raw), "ping") || strings.Contains(string(raw), sock) || strings.Contains(string(raw), f.dir) {
		t.Errorf("the egress audit holds a payload or a host path:\n%s", raw)
	}
	type record struct {
		Seq       uint64 `json:"seq"`
		Session   string `json:"session_id"`
		Policy    string `json:"egress_policy_id"`
		Port      int    `json:"port"`
		Conn      int    `json:"conn"`
		Event     string `json:"event"`
		BytesUp   uint64 `json:"bytes_up"`
		BytesDown uint64 `json:"bytes_down"`
		Status    string `json:"status"`
	}
	var recs []record
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit record %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 || recs[0].Event != "open" || recs[1].Event != "close" || recs[0].Seq != 1 || recs[1].Seq != 2 {
		t.Fatalf("audit records %+v, want open then close", recs)
	}
	cl := recs[1]
	if cl.Session != "s-egress" || cl.Policy != "model-gateway" || cl.Port != egressPort || cl.Status != "ok" ||
		cl.BytesUp != 8 || cl.BytesDown != 13 {
		t.Errorf("close record %+v, want session s-egress, model-gateway, port %d, ok, 8 bytes up, 13 down", cl, egressPort)
	}

	// With the endpoint there, every other way out stays shut: judged in
	// the sandbox by each call's error, and from outside by the host's
	// datagram service, which received nothing.
	pl = f.plan("egress-probe", "tiny")
	pl.EgressPolicyIDs = []string{"model-gateway"}
	tok = f.create(c, "s-probe", pl)
	c.ok("start_session", map[string]any{"session_id": "s-probe", "start_token": tok}, nil)
	end = attach(t, c, "s-probe")
	out = strings.ReplaceAll(end.output, "\r\n", "\n")
	for _, want := range []string{"netprobe udp: dial udp " + udp.LocalAddr().String() + ": socket: operation not permitted\n",
		"netprobe raw: operation not permitted\n", "netprobe inet6: operation not permitted\n",
		"netprobe unix: operation not permitted\n", "netprobe netlink: operation not permitted\n",
		"netprobe packet: operation not permitted\n", "netprobe bind: operation not permitted\n",
		"netprobe sockets held: []\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the probe's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "netprobe dns: <nil>") {
		t.Errorf("a DNS lookup succeeded in the sandbox:\n%s", out)
	}
	if n := datagrams.Load(); n != 0 {
		t.Errorf("the host's datagram service received %d datagrams from the sandbox", n)
	}

	// no-network: the same program, and no endpoint.
	pl = f.plan("egress", "tiny")
	pl.EgressPolicyIDs = []string{"no-network"}
	tok = f.create(c, "s-none", pl)
	c.ok("start_session", map[string]any{"session_id": "s-none", "start_token": tok}, nil)
	end = attach(t, c, "s-none")
	out = strings.ReplaceAll(end.output, "\r\n", "\n")
	if !strings.Contains(out, "tcp "+ep+" refused") {
		t.Errorf("a no-network session reached %s:\n%s", ep, out)
	}
	if n := accepts(t, sock); n != 1 {
		t.Errorf("the upstream accepted %d connections after the no-network session, want still 1", n)
	}
	if _, err := os.Stat(filepath.Join(f.storeDir, "egress-s-none.audit")); !os.IsNotExist(err) {
		t.Errorf("a no-network session has an egress audit: %v", err)
	}
	g.stop(t)
}

// TestGlovedEgressRedirect: the upstream answers the program's request
// through the endpoint with a redirect elsewhere — to a service on the
// host's own loopback, and to an address beyond the host. The program's
// HTTP client follows each, as a harness's does, and each fails in the
// sandbox: its loopback is its own, and it has no other interface.
// Judged from outside: the host's service accepted nothing, and the
// upstream saw exactly the two requests made through the endpoint.
func TestGlovedEgressRedirect(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)

	hostLn, hostAccepts := hostService(t)
	targets := map[string]string{"/host": "http://" + hostLn.Addr().String() + "/stolen", "/far": "http://10.0.0.1/stolen"}
	ep := "http://127.0.0.1:" + strconv.Itoa(egressPort)
	f := newFixture(t, e, map[string][]string{"redirect-host": {"http", ep + "/host"}, "redirect-far": {"http", ep + "/far"}})

	var requests atomic.Int32
	sock := filepath.Join(ownedDir(t, e, filepath.Join(f.dir, "gateway")), "http.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sock, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		to, ok := targets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, to, http.StatusFound)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("the upstream: %v", err)
		}
	}()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the upstream: %v", err)
		}
	})
	f.withEgress(t, sock)
	g := f.start()
	logOnFailure(t, g)
	c := dial(t, g.socket)

	for _, tc := range []struct{ template, path, fails string }{
		{"redirect-host", "/host", "connection refused"},
		{"redirect-far", "/far", "network is unreachable"},
	} {
		id := "s-" + tc.template
		pl := f.plan(tc.template, "tiny")
		pl.EgressPolicyIDs = []string{"model-gateway"}
		tok := f.create(c, id, pl)
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		out := strings.ReplaceAll(attach(t, c, id).output, "\r\n", "\n")
		if !strings.Contains(out, "http redirected to "+targets[tc.path]+"\n") || !strings.Contains(out, "failed: ") ||
			!strings.Contains(out, tc.fails) {
			t.Errorf("%s: the program did not follow the redirect to %s and fail with %q:\n%s", id, targets[tc.path], tc.fails, out)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the upstream saw %d requests, want the 2 made through the endpoint", n)
	}
	if n := hostAccepts.Load(); n != 0 {
		t.Errorf("the host's service accepted %d connections after the redirect", n)
	}
	g.stop(t)
}
