// SPDX-License-Identifier: Apache-2.0

// Package modelserver is a scripted stand-in for the model APIs the real
// harnesses speak: the OpenAI Responses API (codex, POST /v1/responses)
// and the Anthropic Messages API (claude-code, POST /v1/messages), both
// streaming server-sent events. A test gives it a script of turns — a tool
// call for the harness's shell tool, then a final answer — and judges the
// run from outside by its log of every request.
//
// Which turn a request gets is decided by the conversation the harness
// sends, not by a counter: the number of tool results in the request's
// history. A retried request therefore gets the same answer again, and the
// log shows the retry, instead of the script silently moving on.
//
// The server only answers; it never connects anywhere. It serves on any
// listener (httptest, 127.0.0.1:0, a unix socket) so the same server can
// later stand behind Glove's egress relay.
package modelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Turn is one scripted model answer. Exactly one of Command and Text is
// set: Command asks the harness to run a shell command with its own shell
// tool, Text ends the conversation with a final assistant message.
type Turn struct {
	Command string
	Text    string
}

// Config is a server's script and the one API key it accepts.
type Config struct {
	// Key is the API key the harness must send: as "Authorization:
	// Bearer KEY" or as "x-api-key: KEY". Any other key is refused with
	// 401, so a test sees a harness that did not get the key.
	Key string
	// Responses is the script for POST /v1/responses (codex).
	Responses []Turn
	// Messages is the script for POST /v1/messages (claude-code).
	//
	// Only requests that offer the harness's shell tool follow a script;
	// one that does not is a side call (a thread title, a topic check)
	// and gets SideText.
	Messages []Turn
	// SideText answers side calls; "ok" when empty.
	SideText string
	// OnRequest, when set, is called with each log entry as it is
	// written, for a live log (a test's t.Logf, a command's stderr).
	OnRequest func(Request)
}

// Request is the log entry of one request, written after the answer.
type Request struct {
	Seq    int
	Time   time.Time
	Method string
	Path   string
	// Host is the request's Host (for CONNECT, the target asked for).
	// Proxied says the request line had an absolute URL, as a client
	// sends it to an HTTP proxy: the server then stands in for the proxy
	// and the model API behind it at once.
	Host    string
	Proxied bool
	// Kind is "responses", "messages", "responses-side" or
	// "messages-side" (a request that offers no shell tool: a title or
	// check, answered with Config.SideText), "count_tokens" or "other"
	// (answered 404).
	Kind      string
	UserAgent string
	// Headers lists the names of the request's headers, sorted, never
	// their values (one of them carries the key).
	Headers []string
	// CodexKind is codex's own name for the request ("turn", ...), read
	// from its x-codex-turn-metadata header.
	CodexKind string
	// AuthHeader names the header that carried a key ("authorization",
	// "x-api-key", or "" for none); KeyOK says whether it was Config.Key.
	AuthHeader string
	KeyOK      bool
	// KeyElsewhere says the expected key also appeared somewhere it
	// should not: the URL, the body, or a header other than AuthHeader.
	KeyElsewhere bool
	Model        string
	Stream       bool
	// Tools is the number of tools offered; ShellTool whether the
	// harness's shell tool (exec_command or Bash) was among them.
	Tools     int
	ShellTool bool
	// Turn is the index of the scripted turn served, -1 for none.
	Turn int
	// ToolResults holds the text of every tool result in the request's
	// history, oldest first: what the harness sent back from its tool.
	ToolResults []string
	Status      int
	// Answer summarises what was sent: "tool_call: CMD", "text: ...".
	Answer string
	// Err is why the request was refused or failed, if it was.
	Err string
}

// Server is the scripted model server. The zero value is not usable; call
// New.
type Server struct {
	cfg Config

	mu  sync.Mutex
	log []Request
}

// New returns a server for the script cfg.
func New(cfg Config) *Server {
	return &Server{cfg: cfg}
}

// Serve answers on l until l is closed; it returns the http.Server so the
// caller can Close it. It exists so a caller need not know net/http.
func (s *Server) Serve(l net.Listener) *http.Server {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	return hs
}

// Log returns a copy of the requests answered so far, in arrival order.
func (s *Server) Log() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// maxBody bounds a request body; codex's first request is about 40 KB
// and claude-code's about 100 KB, both grow with the conversation.
const maxBody = 16 << 20

// ServeHTTP answers one request and logs it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Request{
		Time:      time.Now(),
		Method:    r.Method,
		Path:      r.URL.Path,
		Host:      r.Host,
		Proxied:   r.URL.IsAbs(),
		CodexKind: codexKind(r.Header.Get("X-Codex-Turn-Metadata")),
		UserAgent: r.Header.Get("User-Agent"),
		Turn:      -1,
	}
	defer func() {
		s.mu.Lock()
		rec.Seq = len(s.log) + 1
		s.log = append(s.log, rec)
		s.mu.Unlock()
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(rec)
		}
	}()

	for name := range r.Header {
		rec.Headers = append(rec.Headers, strings.ToLower(name))
	}
	slices.Sort(rec.Headers)

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = errors.New("body over the bound")
	}
	if err != nil {
		rec.Status, rec.Err = http.StatusBadRequest, fmt.Sprintf("read body: %v", err)
		http.Error(w, rec.Err, rec.Status)
		return
	}
	s.checkKey(r, body, &rec)

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		rec.Kind = "responses"
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		rec.Kind = "messages"
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		rec.Kind = "count_tokens"
	default:
		rec.Kind = "other"
		rec.Status = http.StatusNotFound
		http.Error(w, "not scripted", rec.Status)
		return
	}
	if !rec.KeyOK {
		rec.Status, rec.Err = http.StatusUnauthorized, "wrong or missing API key"
		writeJSONError(w, rec.Status, rec.Kind, rec.Err)
		return
	}

	switch rec.Kind {
	case "responses":
		s.responses(w, body, &rec)
	case "messages":
		s.messages(w, body, &rec)
	case "count_tokens":
		rec.Status = http.StatusOK
		writeJSON(w, map[string]int{"input_tokens": len(body) / 4})
	}
}

// checkKey finds the key the request carries and whether the expected key
// shows up anywhere else in it.
func (s *Server) checkKey(r *http.Request, body []byte, rec *Request) {
	got := ""
	if v := r.Header.Get("Authorization"); v != "" {
		rec.AuthHeader = "authorization"
		got = strings.TrimPrefix(v, "Bearer ")
	} else if v := r.Header.Get("X-Api-Key"); v != "" {
		rec.AuthHeader = "x-api-key"
		got = v
	}
	rec.KeyOK = s.cfg.Key != "" && got == s.cfg.Key
	if s.cfg.Key == "" {
		return
	}
	if strings.Contains(r.URL.String(), s.cfg.Key) || bytes.Contains(body, []byte(s.cfg.Key)) {
		rec.KeyElsewhere = true
	}
	for name, vs := range r.Header {
		if strings.EqualFold(name, rec.AuthHeader) {
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, s.cfg.Key) {
				rec.KeyElsewhere = true
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONError answers in the error shape of the API asked: both
// harnesses print the message, and neither retries a 401.
func writeJSONError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var v any
	if kind == "messages" || kind == "count_tokens" {
		v = map[string]any{"type": "error", "error": map[string]string{"type": "authentication_error", "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "invalid_api_key", "message": msg}}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events and flushes each, so the harness sees the
// stream as a real API would send it.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (*sse, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("response writer cannot flush")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, f: f}, nil
}

func (e *sse) event(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", name, err)
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return fmt.Errorf("write %s event: %w", name, err)
	}
	e.f.Flush()
	return nil
}

// pick returns the scripted turn for a conversation with n tool results.
func pick(script []Turn, n int) (Turn, error) {
	if n >= len(script) {
		return Turn{}, fmt.Errorf("script has %d turns, conversation has %d tool results", len(script), n)
	}
	return script[n], nil
}

func summarise(t Turn) string {
	if t.Command != "" {
		return "tool_call: " + t.Command
	}
	return "text: " + t.Text
}

// event is one server-sent event: its name and its JSON data.
type event struct {
	name string
	data any
}

func (e *sse) send(evs []event) error {
	for _, ev := range evs {
		if err := e.event(ev.name, ev.data); err != nil {
			return err
		}
	}
	return nil
}

// codexKind reads request_kind from codex's x-codex-turn-metadata header,
// a JSON object; "" when absent or unreadable.
func codexKind(meta string) string {
	var m struct {
		RequestKind string `json:"request_kind"`
	}
	if meta == "" || json.Unmarshal([]byte(meta), &m) != nil {
		return ""
	}
	return m.RequestKind
}
