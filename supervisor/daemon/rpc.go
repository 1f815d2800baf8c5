package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
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

// MaxConns bounds the open connections; more are closed at accept.
const MaxConns = 64

// writeTimeout bounds one response or notification write: a peer that
// does not read is disconnected rather than allowed to stall gloved.
const writeTimeout = 10 * time.Second

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

var handlers = map[string]handler{
	"capabilities":    (*Daemon).capabilities,
	"validate_plan":   (*Daemon).validatePlan,
	"create_session":  (*Daemon).createSession,
	"session_status":  (*Daemon).sessionStatus,
	"start_session":   (*Daemon).startSession,
	"attach":          (*Daemon).attach,
	"write_stdin":     (*Daemon).writeStdin,
	"resize":          (*Daemon).resize,
	"signal":          (*Daemon).signal,
	"detach":          (*Daemon).detach,
	"stop_session":    (*Daemon).stopSession,
	"cleanup_session": (*Daemon).cleanupSession,
	"receipts_page":   (*Daemon).receiptsPage,
	"receipts_ack":    (*Daemon).receiptsAck,
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
	wmu  sync.Mutex
	once sync.Once
	mu   sync.Mutex
	// watching: sessions this connection is attached to.
	watching map[*live]bool
}

// send writes one JSON object and a newline.
func (c *conn) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.c.Write(data)
	return err
}

func (c *conn) close() {
	c.once.Do(func() {
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
			_ = uc.Close()
			continue
		}
		c := &conn{d: d, c: uc, uid: uid, watching: map[*live]bool{}}
		d.mu.Lock()
		if d.closing || len(d.conns) >= MaxConns {
			d.mu.Unlock()
			d.log.WithFields(logrus.Fields{"event": "refused", "peer_uid": uid}).Warn("connection refused: too many connections")
			_ = uc.Close()
			continue
		}
		d.conns[c] = true
		d.mu.Unlock()
		go c.serve()
	}
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

func (c *conn) serve() {
	defer c.close()
	r := bufio.NewReaderSize(c.c, MaxLine+1)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.d.log.WithFields(logrus.Fields{"peer_uid": c.uid, "outcome": CodeInvalidRequest}).Info("request line too long; connection closed")
			_ = c.send(response{JSONRPC: "2.0", ID: json.RawMessage("null"),
				Error: errorf(CodeInvalidRequest, "request line longer than %d bytes", MaxLine)})
			return
		}
		if err != nil {
			return // EOF (an unterminated last line is ignored) or a closed connection
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		resp, after := c.handle(append([]byte(nil), line...))
		if err := c.send(resp); err != nil {
			return
		}
		if after != nil {
			after()
		}
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
	if !known || (req.Method != "capabilities" && !d.methods[req.Method]) {
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
			c.Close()
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
		ln.Close()
		return nil, fmt.Errorf("listen: chmod: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}
