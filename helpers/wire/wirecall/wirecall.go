// SPDX-License-Identifier: Apache-2.0

// Package wirecall is the calling side of helpers/wire: the supervisor's
// typed calls through a helper protocol's routes (and glove-loopext4's,
// to its formatter). A helper serving its protocol does not link it.
package wirecall

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/glove-sandbox/glove/helpers/wire"
)

// Client is the calling side of a connection: one outstanding request at
// a time, with request ids 1, 2, 3, ...
type Client struct {
	Conn *wire.Conn
	next uint32
}

// Call sends req with fds (still the caller's) on route r and waits for
// the reply, whose descriptors the caller then owns (exactly as many as
// the reply type carries). A helper's *wire.Error reply is the error.
func Call[Q, R any](r wire.Route[Q, R], c *Client, req *Q, fds []int) (*R, []*os.File, error) {
	m, files, err := c.call(r.Decl, req, fds)
	if err != nil {
		return nil, nil, err
	}
	return m.(*R), files, nil
}

// CallAny sends req, any request of p, on its route: for tests and tools
// that choose requests at run time (bad-input tables).
func CallAny(p *wire.Protocol, c *Client, req wire.Message, fds []int) (wire.Message, []*os.File, error) {
	for _, d := range p.Routes() {
		if d.Request().Go() == reflect.TypeOf(req) {
			return c.call(d, req, fds)
		}
	}
	return nil, nil, fmt.Errorf("wire: call: %T is not a request of %s: %w", req, p.Name, wire.ErrInvalidMessage)
}

// Replies admits what may answer d's request: its reply or an Error.
func Replies(d *wire.Decl) wire.Admits {
	return func(t wire.MsgType) *wire.Kind {
		switch t {
		case d.Reply().Type():
			return d.Reply()
		case wire.MsgError:
			return wire.ErrorKind()
		}
		return nil
	}
}

// call sends req on route d and waits for its reply, which must be d's
// reply type or an Error (returned as the error); any other type is
// refused from the frame's header.
func (c *Client) call(d *wire.Decl, req wire.Message, fds []int) (wire.Message, []*os.File, error) {
	if c.next == ^uint32(0) {
		// Wrapping to 0 would break the strictly-increasing id rule.
		return nil, nil, fmt.Errorf("wire: call: request ids exhausted")
	}
	c.next++
	id := c.next
	if err := c.Conn.Send(id, d.Request(), req, fds); err != nil {
		return nil, nil, fmt.Errorf("wire: call %d: %w", id, err)
	}
	fr, err := c.Conn.Recv(Replies(d))
	if err != nil {
		return nil, nil, fmt.Errorf("wire: call %d: %w", id, err)
	}
	e, isErr := fr.Msg.(*wire.Error)
	if fr.ReqID == id && !isErr {
		return fr.Msg, fr.FDs, nil
	}
	for _, f := range fr.FDs {
		f.Close()
	}
	switch {
	case fr.ReqID == id:
		return nil, nil, e
	case isErr && fr.ReqID == 0:
		// The helper rejected our frame as a protocol error and is
		// exiting; surface its explanation.
		err = errors.Join(wire.ErrRequestID, e)
	default:
		err = fmt.Errorf("%w: reply has id %d", wire.ErrRequestID, fr.ReqID)
	}
	return nil, nil, &wire.ProtocolError{Op: fmt.Sprintf("call %d", id), Err: err}
}
