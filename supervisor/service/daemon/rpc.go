// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// MaxLine bounds one request line, without its newline.
const MaxLine = 64 << 10

// MaxConns bounds the open connections (threat: a local client
// exhausting descriptors and goroutines). At the bound a new client gets
// room by eviction, or a refusal reply (admit).
const MaxConns = 64

// MaxConnsPerUID is the share of MaxConns one peer uid may hold, so that
// another allowed uid always has room: one misbehaving client (or a
// compromised controller) cannot lock the others out.
const MaxConnsPerUID = MaxConns / 2

// DefaultIdleTimeout closes a connection that has sent no complete
// request, and been written nothing, for that long, unless it is attached
// to a running session (threat: idle connections held forever to
// exhaust MaxConns).
const DefaultIdleTimeout = 60 * time.Second

// DefaultLineTimeout bounds one request line from its first byte to its
// newline (threat: a slow-loris peer dripping a byte at a time to hold a
// slot and a goroutine).
const DefaultLineTimeout = 10 * time.Second

// The bounds of Config.IdleTimeout and Config.LineTimeout: below, a
// healthy client on a loaded host would be cut off; above, the bound no
// longer protects the slots. Zero means the default.
const (
	MinConnTimeout = time.Second
	MaxIdleTimeout = time.Hour
	MaxLineTimeout = time.Minute
)

// writeTimeout bounds one response or notification write: a peer that
// does not read is disconnected rather than allowed to stall gloved.
const writeTimeout = 10 * time.Second

// refusalWriteTimeout bounds the refusal reply written from the accept
// loop: the new socket's buffer is empty, so the short line never waits
// in practice, but a bound keeps the accept loop from stalling anyway.
const refusalWriteTimeout = time.Second

// Error codes: JSON-RPC 2.0's, then gloved's own (docs/protocol.md).
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeNotFound       = -32001 // no such session
	CodeConflict       = -32002 // idempotency conflict, wrong state, replay
	CodeUnauthorized   = -32003 // start authorization rejected
	CodeUnavailable    = -32004 // a bound is reached (queue, capacity, sessions)
	CodeRejected       = -32005 // the plan is not authorized by the policy
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// request is one request line. Unknown members are rejected.
type request struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  string         `json:"method"`
	Params  jsontext.Value `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// call is one request being handled.
type call struct {
	params  jsontext.Value
	session string // for the log
	// after runs once the response is written (attach's stream).
	after func()
}

type handler func(d *Daemon, c *conn, k *call) (any, *Error)

// method makes a handler of fn, which gets the request's params already
// decoded strictly into P: a peer's params reach no handler undecoded,
// and each method's params are declared once, as its P.
func method[P any](fn func(d *Daemon, c *conn, k *call, ps *P) (any, *Error)) handler {
	return func(d *Daemon, c *conn, k *call) (any, *Error) {
		ps := new(P)
		if e := decodeParams(k.params, ps); e != nil {
			return nil, e
		}
		return fn(d, c, k, ps)
	}
}

var handlers = map[string]handler{
	"capabilities":      method((*Daemon).capabilities),
	"supervisor_status": method((*Daemon).supervisorStatus),
	"validate_plan":     method((*Daemon).validatePlan),
	"create_session":    method((*Daemon).createSession),
	"session_status":    method((*Daemon).sessionStatus),
	"start_session":     method((*Daemon).startSession),
	"attach":            method((*Daemon).attach),
	"write_stdin":       method((*Daemon).writeStdin),
	"resize":            method((*Daemon).resize),
	"signal":            method((*Daemon).signal),
	"detach":            method((*Daemon).detach),
	"stop_session":      method((*Daemon).stopSession),
	"cleanup_session":   method((*Daemon).cleanupSession),
	"receipts_page":     method((*Daemon).receiptsPage),
	"receipts_ack":      method((*Daemon).receiptsAck),
}

// decodeParams strictly decodes params (absent means {}) into v.
func decodeParams(raw jsontext.Value, v any) *Error {
	if len(raw) == 0 {
		raw = jsontext.Value("{}")
	}
	if raw.Kind() != '{' {
		return errorf(CodeInvalidParams, "params must be an object")
	}
	if err := strictjson.Unmarshal(raw, v, MaxLine); err != nil {
		return errorf(CodeInvalidParams, "params: %s", oneLine(err.Error()))
	}
	return nil
}

// redact replaces in s the host paths gloved knows (its configured
// directories and files, the policy's alias host paths and template
// paths) with names: the log never holds a raw host path, yet an error
// stays readable ("ALIAS:workspace/sub: permission denied").
func (d *Daemon) redact(s string) string {
	pairs := []string{}
	add := func(path, name string) {
		if path != "" && path != "/" {
			pairs = append(pairs, path, name)
		}
	}
	if d.pol != nil {
		for _, a := range d.pol.PathAliases {
			add(a.HostPath, "ALIAS:"+a.Alias)
		}
		for _, t := range d.pol.RuntimeTemplates {
			add(t.Launch.ExecutablePath, "EXECUTABLE:"+t.RuntimeTemplateID)
			for _, p := range t.Launch.ReadOnlyPaths {
				add(p, "READ-ONLY-PATH:"+t.RuntimeTemplateID)
			}
		}
	}
	for _, p := range [][2]string{
		{d.cfg.PolicyFile, "SESSION-POLICY"}, {d.cfg.StoreDir, "SESSION-STORE"}, {d.cfg.MaterializationRoot, "MATERIALIZATION-ROOT"},
		{d.cfg.RuntimeDir, "RUNTIME-DIR"}, {d.cfg.Socket, "SOCKET"}, {d.cfg.KeyFile, "RECEIPT-KEY"}, {d.cfg.Libexec, "LIBEXEC"},
		{d.cfg.LibraryBundleRoot, "LIBRARY-BUNDLE-ROOT"},
	} {
		add(p[0], p[1])
	}
	// Longest first, so that a path inside another is named by itself.
	type pair struct{ from, to string }
	var ps []pair
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.from) - len(a.from) })
	pairs = pairs[:0]
	for _, p := range ps {
		pairs = append(pairs, p.from, p.to)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

func oneLine(s string) string {
	s = string(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte("; ")))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// conn is one accepted connection.
type conn struct {
	d    *Daemon
	c    *net.UnixConn
	uid  int
	seq  uint64 // accept order: ties between equally idle connections
	wmu  sync.Mutex
	once sync.Once
	mu   sync.Mutex
	// watching: sessions this connection is attached to.
	watching map[*live]bool

	// amu guards the admission state; it is taken last (no other lock
	// is taken while it is held).
	amu sync.Mutex
	// busy: a complete request line is being handled (from its newline
	// until its response is written and attach's stream registered).
	busy bool
	// evicted: admission closed this connection to make room; a request
	// line completed after that is not handled.
	evicted bool
	// active is the later of the last complete request line and the
	// last successful write to the peer: idle time counts from it.
	active time.Time
}

// send writes one JSON object and a newline.
func (c *conn) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("send: encode: %w", err)
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.c.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("send: set the write deadline: %w", err)
	}
	if _, err := c.c.Write(data); err != nil {
		return fmt.Errorf("send: write: %w", err)
	}
	c.touch()
	return nil
}

// touch restarts the connection's idle clock.
func (c *conn) touch() {
	c.amu.Lock()
	c.active = time.Now()
	c.amu.Unlock()
}

// lastActive is when the idle clock last restarted.
func (c *conn) lastActive() time.Time {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.active
}

// begin marks a complete request line as being handled, restarting the
// idle clock; false when admission has already evicted the connection.
func (c *conn) begin() bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	if c.evicted {
		return false
	}
	c.busy = true
	c.active = time.Now()
	return true
}

// done marks the request handled.
func (c *conn) done() {
	c.amu.Lock()
	c.busy = false
	c.amu.Unlock()
}

// evict claims the connection for eviction: only when no request is in
// progress and its idle clock is still the one admission decided on
// (since), so that a request that completed meanwhile (an attach among
// them) is never cut off.
func (c *conn) evict(since time.Time) bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	if c.busy || c.evicted || !c.active.Equal(since) {
		return false
	}
	c.evicted = true
	return true
}

// attached reports whether the connection is attached to a session that
// is still running: a legitimate long-lived stream, neither idle nor
// evictable. An attachment ends when the session ends (finish), when
// the peer detaches, or when the peer cannot keep up (enqueue); its
// last notification then restarts the idle clock (send).
//
// Lock order: c.mu is released before any l.mu is taken (watch takes
// l.mu, then c.mu).
func (c *conn) attached() bool {
	c.mu.Lock()
	ls := make([]*live, 0, len(c.watching))
	for l := range c.watching {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	for _, l := range ls {
		if l.watchedBy(c) {
			return true
		}
	}
	return false
}

// watchedBy reports whether c is among the session's current watchers
// (removed when the session ends or c detaches).
func (l *live) watchedBy(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watchers[c] != nil
}

// snapshot is what admission knows of c at now (d.mu held).
func (c *conn) snapshot(now time.Time) (peerConn, time.Time) {
	c.amu.Lock()
	busy, active := c.busy, c.active
	c.amu.Unlock()
	return peerConn{uid: c.uid, idle: now.Sub(active), pinned: busy || c.attached()}, active
}

func (c *conn) close() {
	c.once.Do(func() {
		// Nothing to do about a failed close of a socket that is being
		// dropped: the descriptor is released either way.
		_ = c.c.Close()
		c.mu.Lock()
		ls := make([]*live, 0, len(c.watching))
		for l := range c.watching {
			ls = append(ls, l)
		}
		c.watching = nil
		c.mu.Unlock()
		for _, l := range ls {
			l.detach(c)
		}
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
}

// Serve accepts connections until the listener is closed.
func (d *Daemon) Serve(ln *net.UnixListener) error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return errors.New("serve: shutting down")
	}
	d.listeners = append(d.listeners, ln)
	d.mu.Unlock()
	if d.pool != nil {
		// The first session's helpers, ahead of its start.
		d.pool.fill()
	}
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			d.log.WithError(err).Error("accept")
			time.Sleep(50 * time.Millisecond)
			continue
		}
		uid, ok := peerUID(uc)
		if !ok || !d.allow[uid] {
			d.log.WithFields(logrus.Fields{"event": "refused", "peer_uid": uid}).Warn("connection refused: peer uid not allowed")
			// A peer that is not allowed gets no reply (nothing is
			// disclosed to it); a failed close of its socket leaves
			// nothing to undo.
			_ = uc.Close()
			continue
		}
		c := &conn{d: d, c: uc, uid: uid, watching: map[*live]bool{}, active: time.Now()}
		if msg := d.admitConn(c); msg != "" {
			d.refuse(uc, uid, msg)
			continue
		}
		go c.serve()
	}
}

// admitConn adds c to the open connections, closing another to make room
// when admit says so; it returns the refusal message when c cannot be
// admitted.
func (d *Daemon) admitConn(c *conn) string {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return "shutting down"
	}
	d.connSeq++
	c.seq = d.connSeq
	// Each pass either admits, refuses, or finds its victim began a
	// request since the snapshot; the bound keeps a peer that keeps
	// racing from holding the accept loop.
	for range MaxConns + 1 {
		open := make([]*conn, 0, len(d.conns))
		for o := range d.conns {
			open = append(open, o)
		}
		slices.SortFunc(open, func(a, b *conn) int { return cmp.Compare(a.seq, b.seq) })
		now := time.Now()
		states := make([]peerConn, len(open))
		since := make([]time.Time, len(open))
		for i, o := range open {
			states[i], since[i] = o.snapshot(now)
		}
		v, reason, refuse := admit(states, c.uid, MaxConns, MaxConnsPerUID)
		if refuse {
			d.mu.Unlock()
			return "too many connections"
		}
		if v < 0 {
			d.conns[c] = true
			d.mu.Unlock()
			return ""
		}
		victim := open[v]
		if !victim.evict(since[v]) {
			continue
		}
		delete(d.conns, victim)
		d.conns[c] = true
		d.mu.Unlock()
		d.log.WithFields(logrus.Fields{"event": "evicted", "peer_uid": victim.uid, "reason": reason,
			"idle_ms": states[v].idle.Milliseconds(), "new_peer_uid": c.uid}).Warn("connection closed to make room for a new client")
		victim.close()
		return ""
	}
	d.mu.Unlock()
	return "too many connections"
}

// refuse answers a connection that cannot be admitted with one JSON-RPC
// error line (-32004, id null), so that the client learns why, then
// closes it.
func (d *Daemon) refuse(uc *net.UnixConn, uid int, msg string) {
	fields := logrus.Fields{"event": "refused", "peer_uid": uid, "reason": msg}
	line, err := json.Marshal(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: errorf(CodeUnavailable, "%s", msg)})
	if err == nil {
		line = append(line, '\n')
		if err = uc.SetWriteDeadline(time.Now().Add(refusalWriteTimeout)); err == nil {
			_, err = uc.Write(line)
		}
	}
	if err != nil {
		fields["error"] = fmt.Errorf("refusal reply: %w", err).Error()
	}
	d.log.WithFields(fields).Warn("connection refused: " + msg)
	if err := uc.Close(); err != nil {
		d.log.WithFields(logrus.Fields{"event": "refused", "peer_uid": uid, "error": err.Error()}).Warn("close a refused connection")
	}
}

// peerConn is what the admission policy knows of one open connection.
type peerConn struct {
	uid  int
	idle time.Duration // since its last complete request or write
	// pinned: attached to a running session, or handling a request;
	// never evicted.
	pinned bool
}

// Eviction reasons, for the log.
const (
	reasonUIDShare = "peer uid at its share of connections"
	reasonTotal    = "connection limit reached"
)

// admit is the admission policy for a new connection of uid, given the
// open ones (in accept order). When uid already holds perUID
// connections, room is made by closing uid's longest-idle unpinned
// connection; otherwise, when maxConns are open, by closing the longest-
// idle unpinned connection of any uid. It returns the index to close and
// why (-1 when the connection fits as it is), or refuse when nothing can
// be closed. Equally idle connections: the earliest accepted goes.
func admit(open []peerConn, uid, maxConns, perUID int) (victim int, reason string, refuse bool) {
	mine := 0
	for _, o := range open {
		if o.uid == uid {
			mine++
		}
	}
	switch {
	case mine >= perUID:
		reason = reasonUIDShare
	case len(open) >= maxConns:
		reason = reasonTotal
	default:
		return -1, "", false
	}
	victim = -1
	for i, o := range open {
		if o.pinned || (reason == reasonUIDShare && o.uid != uid) {
			continue
		}
		if victim < 0 || o.idle > open[victim].idle {
			victim = i
		}
	}
	if victim < 0 {
		return -1, "", true
	}
	return victim, reason, false
}

// peerUID is the connecting process's uid (SO_PEERCRED), -1 if unknown.
func peerUID(uc *net.UnixConn) (int, bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return -1, false
	}
	return int(cred.Uid), true
}

// errIdle: the connection was idle for the idle timeout.
var errIdle = errors.New("idle")

// awaitLine waits for the first byte of the next request line, for as
// long as the connection is not idle: the read deadline is the idle
// clock's end. A connection attached to a running session is never idle
// (its clock restarts at each check).
func (c *conn) awaitLine(r *bufio.Reader) error {
	for r.Buffered() == 0 {
		if err := c.c.SetReadDeadline(c.lastActive().Add(c.d.idleTimeout)); err != nil {
			return fmt.Errorf("set the idle deadline: %w", err)
		}
		_, err := r.Peek(1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if c.attached() {
			c.touch()
			continue
		}
		if time.Since(c.lastActive()) >= c.d.idleTimeout {
			return errIdle
		}
		// A write (a notification) restarted the clock meanwhile.
	}
	return nil
}

func (c *conn) serve() {
	defer c.close()
	log := c.d.log.WithField("peer_uid", c.uid)
	r := bufio.NewReaderSize(c.c, MaxLine+1)
	for {
		if err := c.awaitLine(r); err != nil {
			switch {
			case errors.Is(err, errIdle):
				log.WithFields(logrus.Fields{"event": "idle_timeout", "idle_timeout_ms": c.d.idleTimeout.Milliseconds()}).
					Info("idle connection closed")
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
				// The peer hung up, or gloved closed the connection
				// (eviction, a slow consumer, shutdown): logged there.
			default:
				log.WithFields(logrus.Fields{"event": "read_failed", "error": err.Error()}).Info("connection closed")
			}
			return
		}
		// The whole line must arrive within the line timeout of its first
		// byte (threat: a slow-loris peer holding a slot byte by byte).
		if err := c.c.SetReadDeadline(time.Now().Add(c.d.lineTimeout)); err != nil {
			log.WithFields(logrus.Fields{"event": "read_failed", "error": fmt.Errorf("set the line deadline: %w", err).Error()}).
				Info("connection closed")
			return
		}
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			log.WithFields(logrus.Fields{"outcome": CodeInvalidRequest}).Info("request line too long; connection closed")
			if err := c.send(response{JSONRPC: "2.0", ID: json.RawMessage("null"),
				Error: errorf(CodeInvalidRequest, "request line longer than %d bytes", MaxLine)}); err != nil {
				log.WithFields(logrus.Fields{"event": "write_failed", "error": err.Error()}).Info("reply to a long line not written")
			}
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Only the size of the partial line is logged, never its
			// content.
			log.WithFields(logrus.Fields{"event": "line_timeout", "line_timeout_ms": c.d.lineTimeout.Milliseconds(),
				"partial_bytes": len(line)}).Info("request line not completed in time; connection closed")
			return
		}
		if err != nil {
			return // EOF (an unterminated last line is ignored) or a closed connection
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue // not a request: does not restart the idle clock
		}
		if !c.begin() {
			return // evicted meanwhile: the request is not handled
		}
		resp, after := c.handle(append([]byte(nil), line...))
		if err := c.send(resp); err != nil {
			log.WithFields(logrus.Fields{"event": "write_failed", "error": err.Error()}).Info("response not written; connection closed")
			return
		}
		if after != nil {
			after()
		}
		c.done()
	}
}

// handle answers one request line.
func (c *conn) handle(line []byte) (response, func()) {
	d := c.d
	start := time.Now()
	resp := response{JSONRPC: "2.0", ID: json.RawMessage("null")}
	fields := logrus.Fields{"peer_uid": c.uid}
	defer func() {
		fields["duration_ms"] = time.Since(start).Milliseconds()
		if resp.Error != nil {
			fields["outcome"] = resp.Error.Code
		} else {
			fields["outcome"] = "ok"
		}
		d.log.WithFields(fields).Info("request")
	}()
	req, id, perr := parseRequest(line)
	resp.ID = id
	if perr != nil {
		resp.Error = perr
		return resp, nil
	}
	fields["method"] = safeMethod(req.Method)
	h, known := handlers[req.Method]
	if !known || (req.Method != "capabilities" && req.Method != "supervisor_status" && !d.methods[req.Method]) {
		resp.Error = errorf(CodeMethodNotFound, "method not found")
		return resp, nil
	}
	k := &call{params: req.Params}
	result, rerr := h(d, c, k)
	if k.session != "" {
		fields["session_id"] = k.session
	}
	if rerr != nil {
		resp.Error = rerr
		return resp, nil
	}
	resp.Result = result
	return resp, k.after
}

// parseRequest decodes and checks one request line from a peer: one JSON
// value, a JSON-RPC 2.0 request object with exactly the members jsonrpc,
// id (a number or a string: notifications are not accepted), method (not
// empty) and params (absent or an object). id is the id to answer with
// ("null" when the line has none usable).
func parseRequest(line []byte) (req request, id json.RawMessage, e *Error) {
	id = json.RawMessage("null")
	if !jsontext.Value(line).IsValid() {
		return req, id, errorf(CodeParse, "not one valid JSON value")
	}
	if err := jsonv2.Unmarshal(line, &req, jsonv2.RejectUnknownMembers(true)); err != nil {
		return req, id, errorf(CodeInvalidRequest, "not a JSON-RPC 2.0 request object (members: jsonrpc, id, method, params)")
	}
	if k := req.ID.Kind(); k == '0' || k == '"' {
		id = json.RawMessage(bytes.Clone(req.ID))
	}
	switch {
	case req.JSONRPC != "2.0":
		return req, id, errorf(CodeInvalidRequest, `jsonrpc must be "2.0"`)
	case string(id) == "null":
		return req, id, errorf(CodeInvalidRequest, "id must be a number or a string (notifications are not accepted)")
	case req.Method == "":
		return req, id, errorf(CodeInvalidRequest, "method must be a non-empty string")
	case len(req.Params) != 0 && req.Params.Kind() != '{':
		return req, id, errorf(CodeInvalidRequest, "params must be an object")
	}
	return req, id, nil
}

// safeMethod keeps a method name fit for the log.
func safeMethod(m string) string {
	if _, ok := handlers[m]; ok {
		return m
	}
	return "(unknown)"
}

// Listen creates the control socket at path, mode 0600. An existing path
// is replaced only when it is a stale socket of this user (one nobody
// accepts on); anything else makes Listen fail.
func Listen(path string) (*net.UnixListener, error) {
	if path == "" {
		return nil, errors.New("listen: no socket path (--socket or --runtime-dir)")
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
			return nil, errors.New("listen: the socket path exists and is not a socket of this user")
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			// Only a probe: the refusal below is the answer, whatever
			// closing it reports.
			_ = c.Close()
			return nil, errors.New("listen: another process serves the socket")
		}
		if !errors.Is(err, unix.ECONNREFUSED) {
			return nil, errors.New("listen: the existing socket is not provably stale")
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen: remove the stale socket: %w", err)
		}
	} else if !errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("listen: %w", err)
	}
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		// Failing already: the chmod error is the one to report.
		_ = ln.Close()
		return nil, fmt.Errorf("listen: chmod: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}
