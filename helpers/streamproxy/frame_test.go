// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

func checkMax(max int) error {
	if max < 1 || max > HardMaxFrameBytes {
		return fmt.Errorf("%w: max frame %d not in 1..%d", ErrBound, max, HardMaxFrameBytes)
	}
	return nil
}

// AppendFrame appends the frame of payload to dst. The payload must be
// 1..max bytes. Tests and benchmarks use it (and WriteFrame, ReadFrame and
// FromFD) to play the guest and the upstream.
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
// setting deadline (the zero time means none).
func WriteFrame(w Conn, payload []byte, max int, deadline time.Time) error {
	buf, err := AppendFrame(nil, payload, max)
	if err != nil {
		return err
	}
	if err := w.SetDeadline(deadline); err != nil {
		return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	return write(w, buf)
}

// frameBufs are ReadFrame's buffers: a whole-frame buffer per call would
// make the benchmarks' echo servers allocate 16 KiB per frame, and slow
// the direct anchor and the relay runs with garbage collection the relay
// itself does not cause.
var frameBufs = sync.Pool{New: func() any { return new([HeaderSize + HardMaxFrameBytes]byte) }}

// ReadFrame reads one frame from r with the relay's decoder after setting
// deadline (the zero time means none) and returns its payload.
func ReadFrame(r Conn, max int, deadline time.Time) ([]byte, error) {
	if err := checkMax(max); err != nil {
		return nil, err
	}
	if err := r.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	buf := frameBufs.Get().(*[HeaderSize + HardMaxFrameBytes]byte)
	defer frameBufs.Put(buf)
	frame, past, err := readFrame(r, max, buf[:HeaderSize+max], 0)
	if err != nil {
		return nil, err
	}
	if past != 0 {
		return nil, fmt.Errorf("readFrame read %d bytes past a frame it read exactly", past)
	}
	return bytes.Clone(frame[HeaderSize:]), nil
}

// FromFD returns a Conn over fd, an AF_UNIX SOCK_STREAM socket, and takes
// ownership of fd: it is closed before FromFD returns, whether or not it
// succeeds (the Conn holds a duplicate).
func FromFD(fd int) (Conn, error) {
	f := os.NewFile(uintptr(fd), "relay-fd")
	if f == nil {
		return nil, fmt.Errorf("%w: invalid descriptor %d", ErrBound, fd)
	}
	defer f.Close()
	return FromFile(f)
}

// memConn is a Conn over a bytes.Reader; writes are collected.
type memConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func newMemConn(b []byte) *memConn { return &memConn{r: bytes.NewReader(b)} }

func (c *memConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *memConn) SetDeadline(time.Time) error { return nil }
func (c *memConn) Queued() (int, error)        { return c.r.Len(), nil }
func (c *memConn) Close() error                { return nil }
func hdr(n uint32) []byte                      { return binary.BigEndian.AppendUint32(nil, n) }
func frameOf(payload []byte) []byte            { return append(hdr(uint32(len(payload))), payload...) }
func filled(n int, c byte) []byte              { return bytes.Repeat([]byte{c}, n) }
func concat(parts ...[]byte) []byte            { return bytes.Join(parts, nil) }
func mustAppend(t testing.TB, p []byte, max int) []byte {
	t.Helper()
	b, err := AppendFrame(nil, p, max)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadFrameTable(t *testing.T) {
	const max = HardMaxFrameBytes
	cases := []struct {
		name string
		in   []byte
		max  int
		want []byte
		err  error
	}{
		{"zero length", hdr(0), max, nil, ErrFraming},
		{"zero length with trailing", concat(hdr(0), []byte("x")), max, nil, ErrFraming},
		{"over max", concat(hdr(11), filled(11, 'a')), 10, nil, ErrFraming},
		{"16385", concat(hdr(16385), filled(16385, 'a')), max, nil, ErrFraming},
		{"huge length", hdr(0xffffffff), max, nil, ErrFraming},
		{"empty stream", nil, max, nil, io.EOF},
		{"truncated header 1", []byte{0}, max, nil, ErrFraming},
		{"truncated header 3", []byte{0, 0, 0}, max, nil, ErrFraming},
		{"truncated payload", concat(hdr(5), []byte("abcd")), max, nil, ErrFraming},
		{"header only", hdr(5), max, nil, ErrFraming},
		{"one byte", frameOf([]byte("x")), max, []byte("x"), nil},
		{"exactly max", frameOf(filled(max, 'm')), max, filled(max, 'm'), nil},
		{"exactly small max", frameOf(filled(10, 'm')), 10, filled(10, 'm'), nil},
		{"max 0", frameOf([]byte("x")), 0, nil, ErrBound},
		{"max 16385", frameOf([]byte("x")), HardMaxFrameBytes + 1, nil, ErrBound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(newMemConn(tc.in), tc.max, time.Time{})
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != nil {
					t.Fatalf("got %d bytes, %v; want %v", len(got), err, tc.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(tc.want))
			}
		})
	}
}

// TestReadFramePast checks readFrame with bytes already read (the
// request's first read): it counts those past the frame, and its own
// reads take exactly what the frame lacks, never input after it.
func TestReadFramePast(t *testing.T) {
	frame := frameOf([]byte("hello"))
	cases := []struct {
		name     string
		have, in []byte // already in buf; still on the connection
		want     []byte
		past     int
		rest     int // bytes left on the connection
		err      error
	}{
		{"whole frame", frame, []byte("zz"), frame, 0, 2, nil},
		{"frame and more", concat(frame, []byte("zzz")), []byte("y"), frame, 3, 1, nil},
		{"partial header", frame[:2], concat(frame[2:], []byte("zz")), frame, 0, 2, nil},
		{"partial payload", frame[:6], concat(frame[6:], frameOf([]byte("next"))), frame, 0, 8, nil},
		{"bad length with more", concat(hdr(0), []byte("zz")), nil, nil, 0, 0, ErrFraming},
		{"over max with more", concat(hdr(testMax+1), []byte("zz")), nil, nil, 0, 0, ErrFraming},
		{"truncated after", frame[:6], []byte("l"), nil, 0, 0, ErrFraming},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, HeaderSize+testMax)
			n := copy(buf, tc.have)
			c := newMemConn(tc.in)
			got, past, err := readFrame(c, testMax, buf, n)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != nil {
					t.Fatalf("got %d bytes, %v; want %v", len(got), err, tc.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) || past != tc.past || c.r.Len() != tc.rest {
				t.Fatalf("got %q, %d past, %d left, %v; want %q, %d past, %d left", got, past, c.r.Len(), err, tc.want, tc.past, tc.rest)
			}
		})
	}
}

func TestReadFrameSequence(t *testing.T) {
	c := newMemConn(concat(frameOf([]byte("one")), frameOf([]byte("two"))))
	for _, want := range []string{"one", "two"} {
		got, err := ReadFrame(c, 16, time.Time{})
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := ReadFrame(c, 16, time.Time{}); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestAppendWriteFrame(t *testing.T) {
	if _, err := AppendFrame(nil, nil, 10); !errors.Is(err, ErrFraming) {
		t.Fatalf("empty payload: %v", err)
	}
	if _, err := AppendFrame(nil, filled(11, 'a'), 10); !errors.Is(err, ErrFraming) {
		t.Fatalf("over max: %v", err)
	}
	if _, err := AppendFrame(nil, []byte("a"), HardMaxFrameBytes+1); !errors.Is(err, ErrBound) {
		t.Fatalf("bad max: %v", err)
	}
	b := mustAppend(t, []byte("abc"), 10)
	if !bytes.Equal(b, []byte{0, 0, 0, 3, 'a', 'b', 'c'}) {
		t.Fatalf("AppendFrame = %x", b)
	}
	c := newMemConn(nil)
	if err := WriteFrame(c, filled(HardMaxFrameBytes, 'z'), HardMaxFrameBytes, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(newMemConn(c.w.Bytes()), HardMaxFrameBytes, time.Time{})
	if err != nil || !bytes.Equal(got, filled(HardMaxFrameBytes, 'z')) {
		t.Fatalf("round trip: %d bytes, %v", len(got), err)
	}
}

// FuzzReadFrame checks the decoder never panics, never returns a frame
// outside 1..max, and returns only the sentinel errors.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{}, uint16(16))
	f.Add(hdr(0), uint16(16))
	f.Add(frameOf([]byte("hello")), uint16(16))
	f.Add(frameOf([]byte("hello")), uint16(4))
	f.Add(concat(hdr(16385), filled(64, 'a')), uint16(HardMaxFrameBytes))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(HardMaxFrameBytes))
	f.Add([]byte{0, 0, 0}, uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, m uint16) {
		max := int(m)%HardMaxFrameBytes + 1
		c := newMemConn(in)
		for {
			before := c.r.Len()
			got, err := ReadFrame(c, max, time.Time{})
			if err != nil {
				if got != nil {
					t.Fatal("payload returned with an error")
				}
				if err != io.EOF && !errors.Is(err, ErrFraming) {
					t.Fatalf("unexpected error %v", err)
				}
				if err == io.EOF && before != 0 {
					t.Fatal("io.EOF with bytes left")
				}
				return
			}
			if len(got) < 1 || len(got) > max {
				t.Fatalf("frame of %d bytes, max %d", len(got), max)
			}
			if before-c.r.Len() != HeaderSize+len(got) {
				t.Fatal("consumed bytes do not match the frame")
			}
		}
	})
}
