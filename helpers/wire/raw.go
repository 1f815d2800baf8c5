package wire

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// SendRaw sends b as one datagram with fds attached, without any check.
// It exists so tests can play a hostile peer (malformed frames, wrong
// descriptor counts) against real helpers; production code uses Send.
func (c *Conn) SendRaw(b []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.uc.WriteMsgUnix(b, oob, nil)
	if err != nil {
		return fmt.Errorf("wire: send raw: %w", err)
	}
	if n != len(b) || oobn != len(oob) {
		return fmt.Errorf("wire: send raw: %w", io.ErrShortWrite)
	}
	return nil
}
