package wire

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Server runs a helper's side of a connection, one request at a time.
//
// A handler's error is the reply: an *Error (possibly wrapped) is sent
// as it is, a request-level refusal after which the server keeps
// serving, except for code ErrProtocol, which ends the connection as the
// code promises. Any other error is reported to the peer as ErrInternal
// with its message.
type Server struct {
	Protocol *Protocol
	Conn     *Conn
	Handlers []Handler                   // one per route of Protocol, Hello included
	Log      func(msg string, kv ...any) // optional
}

// Serve handles requests until the peer closes the connection (returns nil)
// or breaks the protocol (returns the *ProtocolError after a best-effort
// ErrProtocol reply with request id 0). A helper should exit non-zero on any
// error: after a protocol fault the supervisor is presumed compromised and
// nothing more it sends can be trusted.
func (s *Server) Serve() error {
	handlers, err := s.table()
	if err != nil {
		return err
	}
	seen := make(map[MsgType]bool)
	var lastID uint32 // request ids start at 1, so 0 is never valid
	for {
		// Recv refuses a type the protocol does not accept from the
		// frame's header, before its payload is decoded.
		fr, err := s.Conn.Recv(s.Protocol)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.fatal(err)
		}
		h := handlers[fr.Type]
		if err := admit(fr, h.r, seen, lastID); err != nil {
			closeFiles(fr.FDs)
			return s.fatal(err)
		}
		lastID = fr.ReqID
		seen[fr.Type] = true

		reply, replyFDs, herr := h.fn(fr.ReqID, fr.Msg, fr.FDs)
		closeFiles(fr.FDs)
		if err := s.reply(fr.ReqID, &h.r.reply, reply, replyFDs, herr); err != nil {
			return err
		}
	}
}

// table indexes the handlers by request type and checks that they cover
// exactly the protocol's routes, so the declaration (and the
// documentation generated from it) cannot drift from the code: a handler
// for an undeclared type would be dead code today and an unreviewed entry
// point tomorrow.
func (s *Server) table() (map[MsgType]Handler, error) {
	if s.Protocol == nil || s.Conn == nil {
		return nil, fmt.Errorf("wire: serve: nil Protocol or Conn")
	}
	set := make(map[MsgType]Handler, len(s.Handlers))
	for _, h := range s.Handlers {
		if h.fn == nil {
			return nil, fmt.Errorf("wire: serve %s: a handler made without Route.Handle", s.Protocol.Name)
		}
		t := h.r.req.t
		if r, ok := s.Protocol.byReq[t]; !ok || r != h.r {
			return nil, fmt.Errorf("wire: serve %s: handler for %s, which the protocol does not declare", s.Protocol.Name, &h.r.req)
		}
		if _, dup := set[t]; dup {
			return nil, fmt.Errorf("wire: serve %s: two handlers for %s", s.Protocol.Name, &h.r.req)
		}
		set[t] = h
	}
	for _, r := range s.Protocol.routes {
		if _, ok := set[r.req.t]; !ok {
			return nil, fmt.Errorf("wire: serve %s: no handler for %s", s.Protocol.Name, &r.req)
		}
	}
	return set, nil
}

// admit applies the conversation rules to an already well-formed request
// of route r. Strictly increasing ids make a replayed or reordered
// request detectable.
func admit(fr Frame, r *route, seen map[MsgType]bool, lastID uint32) error {
	const op = "serve"
	switch {
	case fr.ReqID <= lastID:
		return protoErr(op, ErrRequestID, "id %d after %d", fr.ReqID, lastID)
	case r.once && seen[fr.Type]:
		return protoErr(op, ErrRepeated, "%s", &r.req)
	}
	return nil
}

// fatal reports err to the peer if it is a protocol fault and returns it.
func (s *Server) fatal(err error) error {
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		return fmt.Errorf("wire: serve %s: %w", s.Protocol.Name, err)
	}
	s.log("protocol error, closing", "err", err)
	if serr := s.Conn.send(0, &errorKind, &Error{Code: ErrProtocol, Message: sanitize(err.Error())}, nil); serr != nil {
		s.log("sending protocol error reply failed", "err", serr)
	}
	return err
}

// reply sends the handler's outcome for request reqID, a reply of kind k
// or an Error, and closes replyFDs. It returns a non-nil error only when
// serving must stop.
func (s *Server) reply(reqID uint32, k *kind, m Message, replyFDs []int, herr error) error {
	defer closeFDs(replyFDs)
	var e *Error
	switch {
	case herr != nil && errors.As(herr, &e):
		s.log("request refused", "id", reqID, "err", herr)
		k, m, replyFDs = &errorKind, e, nil
	case herr != nil:
		s.log("handler failed", "id", reqID, "err", herr)
		k, m, replyFDs = &errorKind, &Error{Code: ErrInternal, Message: sanitize(herr.Error())}, nil
	case m == nil:
		k, m = &errorKind, &Error{Code: ErrInternal, Message: "handler returned no reply"}
	}
	err := s.Conn.send(reqID, k, m, replyFDs)
	if errors.Is(err, ErrInvalidMessage) {
		// A handler bug (wrong descriptor count, oversized field): tell the
		// peer rather than killing the helper or sending nothing.
		s.log("invalid reply", "id", reqID, "err", err)
		err = s.Conn.send(reqID, &errorKind, &Error{Code: ErrInternal, Message: sanitize(err.Error())}, nil)
	}
	if err != nil {
		return fmt.Errorf("wire: serve %s: reply to %d: %w", s.Protocol.Name, reqID, err)
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
