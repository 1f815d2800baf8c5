// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Message is a pointer to a message struct, whose fields are its payload
// in order: uint8, uint16, uint32, uint64 (or types of those kinds),
// bool, and string or []byte with a maximum length tag `wire:"N"`.
// Nothing else may appear, so one codec (this file) reads and writes
// every message and no helper has a decoder of its own to get wrong.
type Message any

// Kind is one message type as a protocol declares it.
type Kind struct {
	t      MsgType
	goT    reflect.Type // the message's pointer type
	fds    int          // exactly this many descriptors travel with it
	fields []field
}

// Decl is one request, its reply and its conversation rule.
type Decl struct {
	req, reply Kind
	once       bool
}

// The read-only view of the declarations, for the calling side
// (wirecall), the tests' tools (wiretest) and the documentation (wiredoc).
func (k *Kind) Type() MsgType       { return k.t }
func (k *Kind) FDs() int            { return k.fds }
func (k *Kind) Go() reflect.Type    { return k.goT }
func (d *Decl) Request() *Kind      { return &d.req }
func (d *Decl) Reply() *Kind        { return &d.reply }
func (d *Decl) Once() bool          { return d.once }
func (d *Decl) Type() MsgType       { return d.req.t }
func (p *Protocol) Routes() []*Decl { return append([]*Decl(nil), p.routes...) }
func ErrorKind() *Kind              { return &errorKind }
func (k *Kind) String() string      { return fmt.Sprintf("%s (%#04x)", k.goT.Elem().Name(), uint16(k.t)) }
func (d *Decl) decl() *Decl         { return d }

func kindOf[T any](t MsgType, fds int) Kind {
	rt := reflect.TypeFor[T]()
	return Kind{t: t, goT: reflect.PointerTo(rt), fds: fds, fields: layoutOf(rt)}
}

// Route declares one request a helper accepts: its type number (the reply
// is the next), the request and reply structs, the descriptors each
// carries and whether it may come only once per connection. The helper
// handles it ([Route.Handle]); the supervisor calls it (package wirecall).
type Route[Q, R any] struct{ *Decl }

// NewRoute declares request type t of struct Q carrying reqFDs
// descriptors, answered by type t+1 of struct R carrying replyFDs.
func NewRoute[Q, R any](t MsgType, reqFDs, replyFDs int, once bool) Route[Q, R] {
	if reqFDs < 0 || reqFDs > MaxFDs || replyFDs < 0 || replyFDs > MaxFDs {
		panic(fmt.Sprintf("wire: route %#04x: descriptor counts %d, %d", uint16(t), reqFDs, replyFDs))
	}
	return Route[Q, R]{&Decl{req: kindOf[Q](t, reqFDs), reply: kindOf[R](t+1, replyFDs), once: once}}
}

// Handle makes fn the route's handler. fn gets the decoded request and
// its descriptors (closed when fn returns: dup one to keep it); the
// descriptors it returns go with the reply and are then closed. Its
// error becomes the reply as [Server] says.
func (r Route[Q, R]) Handle(fn func(reqID uint32, req *Q, fds []*os.File) (*R, []int, error)) Handler {
	return Handler{r.Decl, func(id uint32, m Message, fds []*os.File) (Message, []int, error) {
		rep, rfds, err := fn(id, m.(*Q), fds)
		if err != nil || rep == nil {
			return nil, rfds, err // a nil *R would be a non-nil Message
		}
		return rep, rfds, nil
	}}
}

// Handler is one route's handler, made by [Route.Handle].
type Handler struct {
	d  *Decl
	fn func(reqID uint32, m Message, fds []*os.File) (Message, []int, error)
}

// Type is the type of the request h handles.
func (h Handler) Type() MsgType { return h.d.req.t }

// Protocol is one helper's protocol, declared once in its package
// helpers/wire/NAMEwire: the helper serves it, the supervisor calls its
// routes, and docs/helpers.md's tables are generated from it.
type Protocol struct {
	Name   string
	routes []*Decl
}

// NewProtocol declares helper name's protocol: Hello (once) and routes.
// Type numbers must be unique and outside the common range; a mistake
// panics at package initialization, before any helper serves.
func NewProtocol(name string, routes ...interface{ decl() *Decl }) *Protocol {
	p := &Protocol{Name: name, routes: []*Decl{HelloRoute.Decl}}
	seen := map[MsgType]bool{MsgHello: true, MsgHelloReply: true, MsgError: true}
	for _, r := range routes {
		d := r.decl()
		if d.req.t < 0x0100 || seen[d.req.t] || seen[d.reply.t] {
			panic(fmt.Sprintf("wire: protocol %s: type %#04x reused or reserved", name, uint16(d.req.t)))
		}
		seen[d.req.t], seen[d.reply.t] = true, true
		p.routes = append(p.routes, d)
	}
	return p
}

// Admits returns the kind of a type the receiver decodes, nil for any
// other, which is then refused from the frame's header.
type Admits func(MsgType) *Kind

// request Admits a request of the protocol: the helper's side.
func (p *Protocol) request(t MsgType) *Kind {
	for _, d := range p.routes {
		if d.req.t == t {
			return &d.req
		}
	}
	return nil
}

// field is how one struct field is encoded: size bytes of little-endian
// integer; a bool is 0 or 1; a string or []byte is a uint16 length
// prefix and at most max bytes.
type field struct {
	index, size, max int
	kind             reflect.Kind
}

// layoutOf checks a message struct and lays out its fields. A struct the
// codec cannot encode panics when its package is initialized.
func layoutOf(t reflect.Type) []field {
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("wire: message %s is not a struct", t))
	}
	out := make([]field, t.NumField())
	for i := range out {
		f, k := t.Field(i), t.Field(i).Type.Kind()
		out[i] = field{index: i, size: int(f.Type.Size()), kind: k}
		switch {
		case !f.IsExported():
			panic(fmt.Sprintf("wire: message %s: field %s is not exported", t, f.Name))
		case k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 || k == reflect.Uint64 || k == reflect.Bool:
		case k == reflect.String || (k == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8):
			n, err := strconv.Atoi(f.Tag.Get("wire"))
			if err != nil || n <= 0 || n > 1<<16-1 {
				panic(fmt.Sprintf("wire: message %s: field %s needs a maximum length tag wire:\"N\" (1..65535)", t, f.Name))
			}
			out[i].size, out[i].max = 2, n
		default:
			panic(fmt.Sprintf("wire: message %s: field %s has type %s, which the codec does not encode", t, f.Name, f.Type))
		}
	}
	return out
}

// encodeFields appends v's fields to b, unchecked: [Encode] decodes what
// it wrote, so it refuses exactly what the peer's decoder would.
func encodeFields(b []byte, v reflect.Value, fs []field) []byte {
	for _, f := range fs {
		x, u, data := v.Field(f.index), uint64(0), []byte(nil)
		switch f.kind {
		case reflect.Bool:
			if x.Bool() {
				u = 1
			}
		case reflect.String:
			data = []byte(x.String())
		case reflect.Slice:
			data = x.Bytes()
		default:
			u = x.Uint()
		}
		if f.max > 0 {
			u = uint64(len(data))
		}
		b = append(binary.LittleEndian.AppendUint64(b, u)[:len(b)+f.size], data...)
	}
	return b
}

// decodeMsg decodes payload p as a message of kind k. The fields must
// fill p exactly: trailing bytes would be fields this side does not know.
// A declared length is checked against the field's maximum and the bytes
// present before anything is sliced or allocated (a 2-byte prefix must
// not make us allocate 64 KiB); strings and bytes are copied, so a
// message never pins the receive buffer.
func decodeMsg(p []byte, k *Kind) (Message, error) {
	m, off := reflect.New(k.goT.Elem()), 0
	fail := func(err error, format string, args ...any) (Message, error) {
		return nil, fmt.Errorf("decode payload at offset %d: %w: "+format, append([]any{off, err}, args...)...)
	}
	for _, f := range k.fields {
		if f.size > len(p)-off {
			return fail(ErrShortPayload, "need %d bytes, have %d", f.size, len(p)-off)
		}
		var u uint64
		for i, c := range p[off : off+f.size] {
			u |= uint64(c) << (8 * i)
		}
		off += f.size
		x := m.Elem().Field(f.index)
		switch {
		case f.max > 0 && u > uint64(f.max):
			return fail(ErrFieldTooLong, "%d bytes, max %d", u, f.max)
		case f.max > 0 && int(u) > len(p)-off:
			return fail(ErrShortPayload, "need %d bytes, have %d", u, len(p)-off)
		case f.kind == reflect.Slice:
			x.SetBytes(append([]byte{}, p[off:off+int(u)]...))
		case f.kind == reflect.String:
			// Invalid UTF-8, because helpers log and compare strings; NUL,
			// because a system call would cut the string there, and the
			// helper check one path and act on another.
			s := string(p[off : off+int(u)])
			if !utf8.ValidString(s) {
				return fail(ErrInvalidUTF8, "string field")
			} else if i := strings.IndexByte(s, 0); i >= 0 {
				return fail(ErrNUL, "at byte %d", i)
			}
			x.SetString(s)
		case f.kind == reflect.Bool && u > 1:
			return fail(ErrBool, "byte %#x", u) // one value, one encoding
		case f.kind == reflect.Bool:
			x.SetBool(u == 1)
		default:
			x.SetUint(u)
		}
		if f.max > 0 {
			off += int(u)
		}
	}
	if off != len(p) {
		return fail(ErrTrailing, "%d bytes", len(p)-off)
	}
	if e, ok := m.Interface().(*Error); ok {
		return e, e.check()
	}
	return m.Interface(), nil
}
