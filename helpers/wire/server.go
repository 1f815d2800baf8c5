package wire

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// Handler handles one request. fds are the received descriptors; the server
// closes them when the handler returns, so a handler that keeps one must dup
// it. replyFDs are sent with the reply and then closed by the server.
//
// Returning an *Error (possibly wrapped) sends it as the reply: a
// request-level refusal, after which the server keeps serving, except for
// code ErrProtocol, which ends the connection as the code promises. Any
// other error is reported to the peer as ErrInternal with its message.
type Handler func(reqID uint32, m Message, fds []*os.File) (reply Message, replyFDs []int, err error)

// Server runs a helper's side of a connection, one request at a time.
type Server struct {
	Name     string // helper executable name, the key into Accepts
	Conn     *Conn
	Handlers map[MsgType]Handler
	Log      func(msg string, kv ...any) // optional
}

// Serve handles requests until the peer closes the connection (returns nil)
// or breaks the protocol (returns the *ProtocolError after a best-effort
// ErrProtocol reply with request id 0). A helper should exit non-zero on any
// error: after a protocol fault the supervisor is presumed compromised and
// nothing more it sends can be trusted.
func (s *Server) Serve() error {
	accepts, err := s.allowed()
	if err != nil {
		return err
	}
	// Recv refuses an unaccepted type from the header (admit checks it
	// again, with the conversation rules).
	s.Conn.accepts = accepts
	seen := make(map[MsgType]bool)
	var lastID uint32 // request ids start at 1, so 0 is never valid
	for {
		fr, err := s.Conn.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.fatal(err)
		}
		if err := admit(fr, accepts, seen, lastID); err != nil {
			closeFiles(fr.FDs)
			return s.fatal(err)
		}
		lastID = fr.ReqID
		seen[fr.Msg.Type()] = true

		reply, replyFDs, herr := s.Handlers[fr.Msg.Type()](fr.ReqID, fr.Msg, fr.FDs)
		closeFiles(fr.FDs)
		if err := s.reply(fr.ReqID, reply, replyFDs, herr); err != nil {
			return err
		}
	}
}

// allowed builds the accepted set and checks that the handler table covers
// exactly that set, so Accepts (and the documentation generated from it)
// cannot drift from the code: a handler for an unlisted type would be dead
// code today and an unreviewed entry point tomorrow.
func (s *Server) allowed() (map[MsgType]Accept, error) {
	list, ok := Accepts[s.Name]
	if !ok {
		return nil, fmt.Errorf("wire: serve: unknown helper %q (not in Accepts)", s.Name)
	}
	if s.Conn == nil {
		return nil, fmt.Errorf("wire: serve %s: nil Conn", s.Name)
	}
	set := make(map[MsgType]Accept, len(list))
	for _, a := range list {
		set[a.Type] = a
		if h, ok := s.Handlers[a.Type]; !ok || h == nil {
			return nil, fmt.Errorf("wire: serve %s: no handler for accepted type %#04x", s.Name, uint16(a.Type))
		}
	}
	for t := range s.Handlers {
		if _, ok := set[t]; !ok {
			return nil, fmt.Errorf("wire: serve %s: handler for type %#04x not listed in Accepts", s.Name, uint16(t))
		}
	}
	return set, nil
}

// admit applies the conversation rules to an already well-formed frame.
// Strictly increasing ids make a replayed or reordered request detectable.
func admit(fr Frame, accepts map[MsgType]Accept, seen map[MsgType]bool, lastID uint32) error {
	const op = "serve"
	t := fr.Msg.Type()
	a, ok := accepts[t]
	switch {
	case fr.ReqID <= lastID:
		return protoErr(op, ErrRequestID, "id %d after %d", fr.ReqID, lastID)
	case !ok:
		return protoErr(op, ErrNotAccepted, "type %#04x", uint16(t))
	case a.Once && seen[t]:
		return protoErr(op, ErrRepeated, "type %#04x", uint16(t))
	}
	return nil
}

// fatal reports err to the peer if it is a protocol fault and returns it.
func (s *Server) fatal(err error) error {
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		return fmt.Errorf("wire: serve %s: %w", s.Name, err)
	}
	s.log("protocol error, closing", "err", err)
	if serr := s.Conn.Send(0, &Error{Code: ErrProtocol, Message: sanitize(err.Error())}, nil); serr != nil {
		s.log("sending protocol error reply failed", "err", serr)
	}
	return err
}

// reply sends the handler's outcome for request reqID and closes replyFDs.
// It returns a non-nil error only when serving must stop.
func (s *Server) reply(reqID uint32, m Message, replyFDs []int, herr error) error {
	defer closeFDs(replyFDs)
	var e *Error
	switch {
	case herr != nil && errors.As(herr, &e):
		s.log("request refused", "id", reqID, "err", herr)
		m, replyFDs = e, nil
	case herr != nil:
		s.log("handler failed", "id", reqID, "err", herr)
		m, replyFDs = &Error{Code: ErrInternal, Message: sanitize(herr.Error())}, nil
	case m == nil:
		m = &Error{Code: ErrInternal, Message: "handler returned no reply"}
	}
	err := s.Conn.Send(reqID, m, replyFDs)
	if errors.Is(err, ErrInvalidMessage) {
		// A handler bug (wrong descriptor count, oversized field): tell the
		// peer rather than killing the helper or sending nothing.
		s.log("invalid reply", "id", reqID, "err", err)
		err = s.Conn.Send(reqID, &Error{Code: ErrInternal, Message: sanitize(err.Error())}, nil)
	}
	if err != nil {
		return fmt.Errorf("wire: serve %s: reply to %d: %w", s.Name, reqID, err)
	}
	if e != nil && e.Code == ErrProtocol {
		return &ProtocolError{Op: "serve", Err: e}
	}
	return nil
}

func (s *Server) log(msg string, kv ...any) {
	if s.Log != nil {
		s.Log(msg, kv...)
	}
}

// sanitize makes an arbitrary error text fit an Error.Message: error texts
// may embed peer- or filesystem-controlled bytes (paths) that are not valid
// UTF-8, contain NUL, or are long, and the reply must still encode.
func sanitize(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\\0"), "\uFFFD")
	if len(s) <= MaxErrorLen {
		return s
	}
	cut := MaxErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
