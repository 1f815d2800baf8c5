// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Server runs a helper's side of a connection, one request at a time.
// A handler's error is the reply: an *Error (possibly wrapped) is sent as
// it is and serving goes on, except after code ErrProtocol, which ends
// the connection as the code promises; any other error is sent as
// ErrInternal with its message.
type Server struct {
	Protocol *Protocol
	Conn     *Conn
	Handlers []Handler                   // one per route of Protocol, Hello included
	Log      func(msg string, kv ...any) // optional
}

// Serve handles requests until the peer closes the connection (nil) or
// breaks the protocol: then it returns the *ProtocolError after a best
// effort ErrProtocol reply with request id 0. A helper exits non-zero on
// any error: after a protocol fault nothing the peer sends can be trusted.
func (s *Server) Serve() error {
	handlers, err := s.table()
	if err != nil {
		return err
	} else if err := s.Conn.block(); err != nil {
		return fmt.Errorf("wire: serve %s: set blocking: %w", s.Protocol.Name, err)
	}
	seen, lastID := map[MsgType]bool{}, uint32(0) // ids start at 1
	for {
		// Recv refuses a type the protocol does not accept from the
		// header, before decoding the payload.
		fr, err := s.Conn.Recv(s.Protocol.request)
		if errors.Is(err, io.EOF) {
			return nil
		}
		h := handlers[fr.Type]
		switch { // strictly increasing ids expose a replayed or reordered request
		case err != nil:
		case fr.ReqID <= lastID:
			err = protoErr("serve", ErrRequestID, "id %d after %d", fr.ReqID, lastID)
		case h.d.once && seen[fr.Type]:
			err = protoErr("serve", ErrRepeated, "%s", &h.d.req)
		}
		if err != nil {
			closeFiles(fr.FDs)
			return s.fatal(err)
		}
		lastID, seen[fr.Type] = fr.ReqID, true
		reply, replyFDs, herr := h.fn(fr.ReqID, fr.Msg, fr.FDs)
		closeFiles(fr.FDs)
		if err := s.reply(fr.ReqID, &h.d.reply, reply, replyFDs, herr); err != nil {
			return err
		}
	}
}

// table indexes the handlers by request type, checking they cover exactly
// the protocol's routes: the declaration (and the documentation made
// from it) cannot drift from the code, and a handler of an undeclared
// type, dead code today, cannot become an unreviewed entry point.
func (s *Server) table() (map[MsgType]Handler, error) {
	if s.Protocol == nil || s.Conn == nil {
		return nil, fmt.Errorf("wire: serve: nil Protocol or Conn")
	}
	set := map[MsgType]Handler{}
	for _, h := range s.Handlers {
		if h.fn == nil || s.Protocol.request(h.d.req.t) != &h.d.req || set[h.d.req.t].fn != nil {
			return nil, fmt.Errorf("wire: serve %s: a handler not made by Route.Handle, undeclared or twice", s.Protocol.Name)
		}
		set[h.d.req.t] = h
	}
	if len(set) != len(s.Protocol.routes) {
		return nil, fmt.Errorf("wire: serve %s: %d handlers for %d routes", s.Protocol.Name, len(set), len(s.Protocol.routes))
	}
	return set, nil
}

// fatal reports err to the peer if it is a protocol fault and returns it.
func (s *Server) fatal(err error) error {
	if !errors.As(err, new(*ProtocolError)) {
		return fmt.Errorf("wire: serve %s: %w", s.Protocol.Name, err)
	}
	s.log("protocol error, closing", "err", err)
	if serr := s.Conn.Send(0, &errorKind, &Error{Code: ErrProtocol, Message: sanitize(err.Error())}, nil); serr != nil {
		s.log("sending protocol error reply failed", "err", serr)
	}
	return err
}

// reply sends the handler's outcome for request reqID, a reply of kind k
// or an Error, and closes replyFDs. Its error means serving must stop.
func (s *Server) reply(reqID uint32, k *Kind, m Message, replyFDs []int, herr error) error {
	defer closeFDs(replyFDs)
	var e *Error
	switch {
	case errors.As(herr, &e):
		s.log("request refused", "id", reqID, "err", herr)
		k, m, replyFDs = &errorKind, e, nil
	case herr != nil:
		s.log("handler failed", "id", reqID, "err", herr)
		k, m, replyFDs = &errorKind, &Error{Code: ErrInternal, Message: sanitize(herr.Error())}, nil
	case m == nil:
		k, m = &errorKind, &Error{Code: ErrInternal, Message: "handler returned no reply"}
	}
	err := s.Conn.Send(reqID, k, m, replyFDs)
	if errors.Is(err, ErrInvalidMessage) {
		// A handler's bug (descriptor count, oversized field): tell the
		// peer rather than kill the helper or send nothing.
		s.log("invalid reply", "id", reqID, "err", err)
		err = s.Conn.Send(reqID, &errorKind, &Error{Code: ErrInternal, Message: sanitize(err.Error())}, nil)
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

// sanitize fits an error text into Error.Message: texts may hold peer- or
// filesystem-controlled bytes (paths) that are long, not UTF-8 or NUL.
func sanitize(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\\0"), "\uFFFD")
	for len(s) > MaxErrorLen {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
