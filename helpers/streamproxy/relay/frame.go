package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// HeaderSize is the size of a frame header: a big-endian uint32 length.
const HeaderSize = 4

// HardMaxFrame is the largest max any caller may pass: 16 KiB, the same
// ceiling as glove-streamproxy's max_frame_bytes.
const HardMaxFrame = 16 << 10

// Errors. Every error the package returns wraps exactly one of these (or is
// io.EOF for a clean end of stream at a frame boundary).
var (
	ErrFraming       = errors.New("relay: framing error") // zero or over-max length, or end of stream inside a frame
	ErrTimeout       = errors.New("relay: exchange deadline exceeded")
	ErrPipelined     = errors.New("relay: pipelined guest input") // at the request boundary or around a release
	ErrUpstreamDrift = errors.New("relay: upstream identity drift")
	ErrAudit         = errors.New("relay: audit failure")
	ErrTransport     = errors.New("relay: transport failure")  // any other I/O failure on either connection
	ErrCanceled      = errors.New("relay: canceled")           // the context was canceled
	ErrClosed        = errors.New("relay: closed")             // every exchange after the relay closed
	ErrBound         = errors.New("relay: bound out of range") // a max outside 1..HardMaxFrame or a bad Config
)

func checkMax(max int) error {
	if max < 1 || max > HardMaxFrame {
		return fmt.Errorf("%w: max frame %d not in 1..%d", ErrBound, max, HardMaxFrame)
	}
	return nil
}

// readFrame completes a frame of which the first have header bytes are
// already in hdr (the deadline is set) and returns it whole, header
// included. The length is checked against max before the frame is
// allocated: zero, over max, or end of stream inside the frame is
// ErrFraming; end of stream before the first header byte is io.EOF.
func readFrame(r Conn, max int, hdr []byte, have int) ([]byte, error) {
	if err := readFull(r, hdr[have:HeaderSize], have == 0); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n == 0 || n > uint32(max) {
		return nil, fmt.Errorf("%w: length %d not in 1..%d", ErrFraming, n, max)
	}
	frame := make([]byte, HeaderSize+int(n))
	copy(frame, hdr)
	if err := readFull(r, frame[HeaderSize:], false); err != nil {
		return nil, err
	}
	return frame, nil
}

// readFull fills buf. End of stream before any byte is io.EOF when
// boundary is set, else ErrFraming.
func readFull(r Conn, buf []byte, boundary bool) error {
	switch _, err := io.ReadFull(r, buf); {
	case err == nil:
		return nil
	case err == io.EOF && boundary:
		return io.EOF
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: end of stream inside a frame", ErrFraming)
	default:
		return ioError("read", err)
	}
}

// write writes buf with one Write call: like any io.Writer's, a Conn's
// Write fails if it writes less.
func write(w Conn, buf []byte) error {
	if _, err := w.Write(buf); err != nil {
		return ioError("write", err)
	}
	return nil
}

func ioError(op string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s", ErrTimeout, op)
	}
	return fmt.Errorf("%w: %s: %v", ErrTransport, op, err)
}
