package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// HeaderSize is the size of a frame header: a big-endian uint32 length.
const HeaderSize = 4

// HardMaxFrame is the largest max any caller may pass: 16 KiB, the same
// ceiling as glove-streamproxy's max_frame_bytes.
const HardMaxFrame = 16 << 10

// Errors. Every error the package returns wraps exactly one of these (or is
// io.EOF for a clean end of stream at a frame boundary).
var (
	// ErrFraming is a zero or oversized length, or end of stream inside
	// a frame.
	ErrFraming = errors.New("relay: framing error")
	// ErrTimeout is the exchange deadline passing.
	ErrTimeout = errors.New("relay: exchange deadline exceeded")
	// ErrPipelined is guest input queued at the request boundary or
	// around the release of a response.
	ErrPipelined = errors.New("relay: pipelined guest input")
	// ErrUpstreamDrift is the upstream identity check failing.
	ErrUpstreamDrift = errors.New("relay: upstream identity drift")
	// ErrAudit is an audit append failing.
	ErrAudit = errors.New("relay: audit failure")
	// ErrTransport is any other I/O failure on either connection.
	ErrTransport = errors.New("relay: transport failure")
	// ErrCanceled is the context being canceled.
	ErrCanceled = errors.New("relay: canceled")
	// ErrClosed is returned by every exchange after the relay closed.
	ErrClosed = errors.New("relay: closed")
	// ErrBound is a max outside 1..HardMaxFrame or a bad Config.
	ErrBound = errors.New("relay: bound out of range")
)

func checkMax(max int) error {
	if max < 1 || max > HardMaxFrame {
		return fmt.Errorf("%w: max frame %d not in 1..%d", ErrBound, max, HardMaxFrame)
	}
	return nil
}

// AppendFrame appends the frame of payload to dst. The payload must be
// 1..max bytes.
func AppendFrame(dst, payload []byte, max int) ([]byte, error) {
	if err := checkMax(max); err != nil {
		return dst, err
	}
	if len(payload) < 1 || len(payload) > max {
		return dst, fmt.Errorf("%w: payload of %d bytes not in 1..%d", ErrFraming, len(payload), max)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...), nil
}

// WriteFrame writes the frame of payload to w with one Write call after
// setting deadline (the zero time means none). The payload must be 1..max
// bytes.
func WriteFrame(w Conn, payload []byte, max int, deadline time.Time) error {
	buf, err := AppendFrame(make([]byte, 0, HeaderSize+len(payload)), payload, max)
	if err != nil {
		return err
	}
	if err := w.SetDeadline(deadline); err != nil {
		return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	return writeAll(w, buf)
}

func writeAll(w Conn, buf []byte) error {
	for len(buf) > 0 {
		n, err := w.Write(buf)
		buf = buf[n:]
		if err != nil {
			return ioError("write", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: write: no progress", ErrTransport)
		}
	}
	return nil
}

// ReadFrame reads one frame from r after setting deadline (the zero time
// means none) and returns its payload. The length is checked against max
// before the payload buffer is allocated. A zero or over-max length, or end
// of stream inside the frame, is ErrFraming; the deadline is ErrTimeout;
// end of stream before the first header byte is io.EOF.
func ReadFrame(r Conn, max int, deadline time.Time) ([]byte, error) {
	if err := checkMax(max); err != nil {
		return nil, err
	}
	if err := r.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	var hdr [HeaderSize]byte
	return readFrameRest(r, max, hdr[:], 0)
}

// readFrameRest completes a frame of which the first have header bytes are
// already in hdr. The deadline must already be set.
func readFrameRest(r Conn, max int, hdr []byte, have int) ([]byte, error) {
	if err := readFull(r, hdr[have:HeaderSize], have == 0); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n == 0 || n > uint32(max) {
		return nil, fmt.Errorf("%w: length %d not in 1..%d", ErrFraming, n, max)
	}
	payload := make([]byte, n)
	if err := readFull(r, payload, false); err != nil {
		return nil, err
	}
	return payload, nil
}

// readFull fills buf. End of stream before any byte is io.EOF when
// boundary is set, else ErrFraming.
func readFull(r Conn, buf []byte, boundary bool) error {
	got := 0
	for got < len(buf) {
		n, err := r.Read(buf[got:])
		if n < 0 || n > len(buf)-got {
			return fmt.Errorf("%w: read returned %d", ErrTransport, n)
		}
		got += n
		if got == len(buf) {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if boundary && got == 0 {
					return io.EOF
				}
				return fmt.Errorf("%w: end of stream inside a frame", ErrFraming)
			}
			return ioError("read", err)
		}
	}
	return nil
}

func ioError(op string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s", ErrTimeout, op)
	}
	return fmt.Errorf("%w: %s: %v", ErrTransport, op, err)
}
