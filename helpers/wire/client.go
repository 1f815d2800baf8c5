package wire

import (
	"errors"
	"fmt"
	"os"
)

// Client is the supervisor's side of a connection: one outstanding request
// at a time, with request ids 1, 2, 3, ... Requests are made through a
// route of the helper's protocol ([Route.Call]).
type Client struct {
	Conn *Conn
	next uint32
}

// call sends req on route r and waits for its reply, which must be r's
// reply type or an Error (returned as the error); any other type is
// refused from the frame's header.
func (c *Client) call(r *route, req Message, fds []int) (Message, []*os.File, error) {
	if c.next == ^uint32(0) {
		// Wrapping to 0 would break the strictly-increasing id rule.
		return nil, nil, fmt.Errorf("wire: call: request ids exhausted")
	}
	c.next++
	id := c.next
	if err := c.Conn.send(id, &r.req, req, fds); err != nil {
		return nil, nil, fmt.Errorf("wire: call %d: %w", id, err)
	}
	fr, err := c.Conn.Recv(replyOf{r})
	if err != nil {
		return nil, nil, fmt.Errorf("wire: call %d: %w", id, err)
	}
	e, isErr := fr.Msg.(*Error)
	if fr.ReqID != id {
		closeFiles(fr.FDs)
		if isErr && fr.ReqID == 0 {
			// The helper rejected our frame as a protocol error and is
			// exiting; surface its explanation.
			return nil, nil, &ProtocolError{Op: fmt.Sprintf("call %d", id), Err: errors.Join(ErrRequestID, e)}
		}
		return nil, nil, protoErr(fmt.Sprintf("call %d", id), ErrRequestID, "reply has id %d", fr.ReqID)
	}
	if isErr {
		closeFiles(fr.FDs)
		return nil, nil, e
	}
	return fr.Msg, fr.FDs, nil
}
