package wire

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxField is the largest length a uint16 length prefix can express; it caps
// every per-field maximum.
const MaxField = 1<<16 - 1

// Encoder appends payload fields to a byte slice. Like [Decoder] it records
// the first error and ignores later calls, so a message's encode method can
// write every field and let the caller check once. The encoder enforces the
// same limits as the decoder: refusing to send what the peer must reject
// keeps both sides honest and the encoding canonical.
type Encoder struct {
	buf []byte
	err error
}

// NewEncoder returns an encoder that appends to buf (which may be nil).
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf} }

// Encoded returns buf with every field appended so far.
func (e *Encoder) Encoded() []byte { return e.buf }

// Err returns the first error recorded, if any.
func (e *Encoder) Err() error { return e.err }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) {
	if e.err == nil {
		e.buf = append(e.buf, v)
	}
}

// U16 appends a little-endian uint16.
func (e *Encoder) U16(v uint16) {
	if e.err == nil {
		e.buf = binary.LittleEndian.AppendUint16(e.buf, v)
	}
}

// U32 appends a little-endian uint32.
func (e *Encoder) U32(v uint32) {
	if e.err == nil {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, v)
	}
}

// U64 appends a little-endian uint64.
func (e *Encoder) U64(v uint64) {
	if e.err == nil {
		e.buf = binary.LittleEndian.AppendUint64(e.buf, v)
	}
}

// Bool appends 1 for true and 0 for false.
func (e *Encoder) Bool(v bool) {
	var b uint8
	if v {
		b = 1
	}
	e.U8(b)
}

// String appends a length-prefixed string of at most max bytes. The string
// must be valid UTF-8 without NUL bytes.
func (e *Encoder) String(s string, max int) {
	if e.err != nil {
		return
	}
	if err := checkString(s); err != nil {
		e.err = fmt.Errorf("wire: encode string: %w", err)
		return
	}
	if e.prefix(len(s), max) {
		e.buf = append(e.buf, s...)
	}
}

// Bytes appends a length-prefixed byte field of at most max bytes.
func (e *Encoder) Bytes(b []byte, max int) {
	if e.err == nil && e.prefix(len(b), max) {
		e.buf = append(e.buf, b...)
	}
}

// prefix checks a field length and appends it, reporting whether the field
// data may follow.
func (e *Encoder) prefix(n, max int) bool {
	if n > max || n > MaxField {
		e.err = fmt.Errorf("wire: encode: %w: %d bytes, max %d", ErrFieldTooLong, n, min(max, MaxField))
		return false
	}
	e.buf = binary.LittleEndian.AppendUint16(e.buf, uint16(n))
	return true
}

// Decoder reads payload fields from a byte slice. It records the first
// error and turns every later call into a no-op returning the zero value, so
// a message's decode method reads all fields straight through and the caller
// checks a single error. It never panics and never slices or allocates based
// on a declared length before checking that length against both the field
// maximum and the bytes actually present: a hostile peer must not be able
// to make us allocate 64 KiB per field on the strength of a 2-byte prefix.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder returns a decoder over b. Strings and byte fields are copied
// out, so decoded messages never alias (or pin) the receive buffer.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err returns the first error recorded, if any.
func (d *Decoder) Err() error { return d.err }

// Fail records err (wrapped) unless an error was already recorded. Message
// decoders use it for semantic checks such as an unknown enum value.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("decode payload at offset %d: %w", d.off, err)
	}
}

// Finish reports the first error, or [ErrTrailing] if bytes are left over:
// trailing data would be fields this side does not know about, and silently
// ignoring them would let the two sides disagree about a request.
func (d *Decoder) Finish() error {
	if d.err == nil && d.off != len(d.buf) {
		d.Fail(fmt.Errorf("%w: %d bytes", ErrTrailing, len(d.buf)-d.off))
	}
	return d.err
}

// take returns the next n bytes, or nil after recording an error.
func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf)-d.off {
		d.Fail(fmt.Errorf("%w: need %d bytes, have %d", ErrShortPayload, n, len(d.buf)-d.off))
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// fixed returns the next n bytes, or n zero bytes once an error has been
// recorded, so the fixed-width readers need no error branch of their own.
func (d *Decoder) fixed(n int) []byte {
	if b := d.take(n); b != nil {
		return b
	}
	return make([]byte, n)
}

// U8 reads one byte.
func (d *Decoder) U8() uint8 { return d.fixed(1)[0] }

// U16 reads a little-endian uint16.
func (d *Decoder) U16() uint16 { return binary.LittleEndian.Uint16(d.fixed(2)) }

// U32 reads a little-endian uint32.
func (d *Decoder) U32() uint32 { return binary.LittleEndian.Uint32(d.fixed(4)) }

// U64 reads a little-endian uint64.
func (d *Decoder) U64() uint64 { return binary.LittleEndian.Uint64(d.fixed(8)) }

// Bool reads one byte that must be 0 or 1. Accepting any non-zero byte
// would give one value two encodings, which breaks canonical encoding and
// lets a peer smuggle data in "true".
func (d *Decoder) Bool() bool {
	b := d.U8()
	if b > 1 {
		d.Fail(fmt.Errorf("%w: byte %#x", ErrBool, b))
	}
	return b == 1
}

// field reads a length prefix and returns the field bytes (aliasing the
// input), checking the declared length against max and against the bytes
// remaining before slicing.
func (d *Decoder) field(max int) []byte {
	n := int(d.U16())
	if d.err != nil {
		return nil
	}
	if n > max {
		d.Fail(fmt.Errorf("%w: %d bytes, max %d", ErrFieldTooLong, n, max))
		return nil
	}
	return d.take(n)
}

// String reads a length-prefixed string of at most max bytes that must be
// valid UTF-8 without NUL bytes. Invalid UTF-8 is rejected because helpers
// log and compare these strings; NUL is rejected because a string that
// reaches a system call would be silently truncated at it, so the helper
// would check one path and act on another.
func (d *Decoder) String(max int) string {
	b := d.field(max)
	if d.err != nil {
		return ""
	}
	s := string(b)
	if err := checkString(s); err != nil {
		d.Fail(err)
		return ""
	}
	return s
}

// Bytes reads a length-prefixed byte field of at most max bytes. The result
// is a copy, never nil on success, so it does not pin the receive buffer.
func (d *Decoder) Bytes(max int) []byte {
	b := d.field(max)
	if d.err != nil {
		return nil
	}
	return append([]byte{}, b...)
}

func checkString(s string) error {
	if !utf8.ValidString(s) {
		return ErrInvalidUTF8
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("%w at byte %d", ErrNUL, i)
	}
	return nil
}
