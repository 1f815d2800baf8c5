package wire

import (
	"encoding/binary"
	"fmt"
	"os"
	"reflect"
	"strings"
)

// Message is a pointer to a message struct (see fields.go). Its type
// number and descriptor count are not the struct's own: the [Route] that
// declares it holds them, so a helper's whole protocol is one
// declaration.
type Message any

// kind is one message type as a protocol declares it.
type kind struct {
	t      MsgType
	goT    reflect.Type // the message's pointer type
	name   string       // the Go type's name, for logs and the documentation
	fds    int          // exactly this many descriptors travel with it
	fields []field
}

// kindOf declares type t of struct T carrying fds descriptors.
func kindOf[T any](t MsgType, fds int) kind {
	rt := reflect.TypeFor[T]()
	return kind{t: t, goT: reflect.PointerTo(rt), name: rt.Name(), fds: fds, fields: layoutOf(rt)}
}

// zero is a new message of this kind.
func (k *kind) zero() Message { return reflect.New(k.goT.Elem()).Interface() }

func (k *kind) String() string { return fmt.Sprintf("%s (%#04x)", k.name, uint16(k.t)) }

// route is one request, its reply and its conversation rule.
type route struct {
	req, reply kind
	once       bool
}

// Route declares one request a helper accepts: its type number (the reply
// is the next number), the request and reply structs, the descriptors
// each carries and whether the request may come only once per
// connection. The same value is the supervisor's typed call ([Route.Call])
// and the helper's typed handler ([Route.Handle]).
type Route[Q, R any] struct{ r *route }

// NewRoute declares request type t of struct Q carrying reqFDs
// descriptors, answered by type t+1 of struct R carrying replyFDs.
func NewRoute[Q, R any](t MsgType, reqFDs, replyFDs int, once bool) Route[Q, R] {
	if reqFDs < 0 || reqFDs > MaxFDs || replyFDs < 0 || replyFDs > MaxFDs {
		panic(fmt.Sprintf("wire: route %#04x: descriptor counts %d, %d", uint16(t), reqFDs, replyFDs))
	}
	return Route[Q, R]{r: &route{req: kindOf[Q](t, reqFDs), reply: kindOf[R](t+1, replyFDs), once: once}}
}

// Type is the request's type number.
func (r Route[Q, R]) Type() MsgType { return r.r.req.t }

// decl lets NewProtocol take routes of any message types.
func (r Route[Q, R]) decl() *route { return r.r }

// Call sends req with fds (which the caller still owns) over c and waits
// for the reply, whose descriptors the caller then owns (exactly as many
// as the reply type carries). A helper's *Error reply is the error.
func (r Route[Q, R]) Call(c *Client, req *Q, fds []int) (*R, []*os.File, error) {
	m, files, err := c.call(r.r, req, fds)
	if err != nil {
		return nil, nil, err
	}
	return m.(*R), files, nil
}

// Frame encodes req as a complete request frame with request id reqID,
// for tests that forge variants of a valid frame.
func (r Route[Q, R]) Frame(reqID uint32, req *Q) ([]byte, error) {
	return encodeFrame(reqID, &r.r.req, req)
}

// ReplyFrame encodes rep as a complete reply frame, for tests.
func (r Route[Q, R]) ReplyFrame(reqID uint32, rep *R) ([]byte, error) {
	return encodeFrame(reqID, &r.r.reply, rep)
}

// Replies admits what may answer this route's request (its reply or an
// Error), for tests that read a reply with [Conn.Recv].
func (r Route[Q, R]) Replies() Admits { return replyOf(r) }

// Handle makes fn the handler of this route. fn gets the request decoded
// and its descriptors (closed by the server when fn returns: dup one to
// keep it); the descriptors it returns are sent with the reply and then
// closed. An error from fn becomes the reply as [Server] documents.
func (r Route[Q, R]) Handle(fn func(reqID uint32, req *Q, fds []*os.File) (*R, []int, error)) Handler {
	return Handler{r: r.r, fn: func(id uint32, m Message, fds []*os.File) (Message, []int, error) {
		rep, rfds, err := fn(id, m.(*Q), fds)
		if err != nil || rep == nil {
			// A nil *R in a Message would be a non-nil interface the
			// encoder dereferences.
			return nil, rfds, err
		}
		return rep, rfds, nil
	}}
}

// Handler is one route's handler, made by [Route.Handle].
type Handler struct {
	r  *route
	fn func(reqID uint32, m Message, fds []*os.File) (Message, []int, error)
}

// Type is the type of the request h handles.
func (h Handler) Type() MsgType { return h.r.req.t }

// Protocol is one helper's protocol: its name and every request it
// accepts, Hello first. It is declared once, next to the helper's
// messages (package helpers/wire/NAMEwire); the helper serves it, the
// supervisor calls through its routes, and the documentation's tables
// are generated from it.
type Protocol struct {
	Name   string
	routes []*route
	byReq  map[MsgType]*route
	byGo   map[reflect.Type]*route
	all    map[MsgType]*kind // every request, reply and Error
}

// NewProtocol declares helper name's protocol: Hello (once) and routes.
// Type numbers must be unique and outside the common range; a mistake
// panics at package initialization, before any helper serves.
func NewProtocol(name string, routes ...interface{ decl() *route }) *Protocol {
	p := &Protocol{Name: name, byReq: map[MsgType]*route{}, byGo: map[reflect.Type]*route{},
		all: map[MsgType]*kind{MsgError: &errorKind}}
	all := append([]*route{HelloRoute.r}, make([]*route, 0, len(routes))...)
	for _, r := range routes {
		all = append(all, r.decl())
	}
	seen := map[MsgType]bool{MsgError: true}
	for i, r := range all {
		if (i > 0 && r.req.t < 0x0100) || seen[r.req.t] || seen[r.reply.t] {
			panic(fmt.Sprintf("wire: protocol %s: type %#04x reused or reserved", name, uint16(r.req.t)))
		}
		seen[r.req.t], seen[r.reply.t] = true, true
		p.routes = append(p.routes, r)
		p.byReq[r.req.t] = r
		p.byGo[r.req.goT] = r
		p.all[r.req.t], p.all[r.reply.t] = &r.req, &r.reply
	}
	return p
}

// Call sends req, any request of the protocol, on its route: for tests
// and tools that choose requests at run time (bad-input tables); the
// supervisor calls through the typed routes.
func (p *Protocol) Call(c *Client, req Message, fds []int) (Message, []*os.File, error) {
	r, ok := p.byGo[reflect.TypeOf(req)]
	if !ok {
		return nil, nil, fmt.Errorf("wire: call: %T is not a request of %s: %w", req, p.Name, ErrInvalidMessage)
	}
	return c.call(r, req, fds)
}

// Frame encodes req, any request of the protocol, as a complete frame,
// for tests that forge variants of a valid frame.
func (p *Protocol) Frame(reqID uint32, req Message) ([]byte, error) {
	r, ok := p.byGo[reflect.TypeOf(req)]
	if !ok {
		return nil, fmt.Errorf("wire: frame: %T is not a request of %s: %w", req, p.Name, ErrInvalidMessage)
	}
	return encodeFrame(reqID, &r.req, req)
}

// DecodeRequest decodes a frame as the helper does, given the descriptors
// that came with it: a type the protocol does not accept is refused from
// the header. It is the pure part of [Conn.Recv], for tests and fuzzing.
func (p *Protocol) DecodeRequest(buf []byte, nfds int) (reqID uint32, m Message, err error) {
	return decodeFrame(buf, nfds, p)
}

// DecodeAny decodes a frame of any type of the protocol, request, reply
// or Error, and returns its type: for fuzzing and tests of the decoders
// of both directions.
func (p *Protocol) DecodeAny(buf []byte, nfds int) (reqID uint32, t MsgType, m Message, err error) {
	reqID, m, err = decodeFrame(buf, nfds, anyOf{p})
	if err != nil {
		return 0, 0, nil, err
	}
	return reqID, MsgType(binary.LittleEndian.Uint16(buf[offType:])), m, nil
}

// EncodeAny encodes m as type t of the protocol (request, reply or
// Error): for fuzzing and tests.
func (p *Protocol) EncodeAny(reqID uint32, t MsgType, m Message) ([]byte, error) {
	k, ok := p.all[t]
	if !ok || reflect.TypeOf(m) != k.goT {
		return nil, fmt.Errorf("wire: encode: %T is not type %#04x of %s: %w", m, uint16(t), p.Name, ErrInvalidMessage)
	}
	return encodeFrame(reqID, k, m)
}

// FDs is the number of descriptors type t of the protocol carries, and
// false if the protocol has no type t.
func (p *Protocol) FDs(t MsgType) (int, bool) {
	k, ok := p.all[t]
	if !ok {
		return 0, false
	}
	return k.fds, true
}

// anyOf admits every type of a protocol.
type anyOf struct{ p *Protocol }

func (a anyOf) kind(t MsgType) (*kind, bool) {
	k, ok := a.p.all[t]
	return k, ok
}

// Types lists the request types the protocol accepts, Hello first.
func (p *Protocol) Types() []MsgType {
	out := make([]MsgType, len(p.routes))
	for i, r := range p.routes {
		out[i] = r.req.t
	}
	return out
}

// Accepts names the accepted requests for the documentation, e.g.
// "Hello (once), Bind, Tmpfs".
func (p *Protocol) Accepts() string {
	var out []string
	for _, r := range p.routes {
		n := strings.TrimSuffix(r.req.name, "Request")
		if r.once {
			n += " (once)"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

// Markdown is the protocol's table for docs/protocol.md: one row per
// request and its reply.
func (p *Protocol) Markdown() string {
	var b strings.Builder
	b.WriteString("| type | request | payload | fds | reply | payload | fds | once |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range p.routes {
		once := "no"
		if r.once {
			once = "yes"
		}
		fmt.Fprintf(&b, "| `%#04x` | %s | %s | %d | %s | %s | %d | %s |\n", uint16(r.req.t),
			r.req.name, docOf(r.req.fields), r.req.fds, r.reply.name, docOf(r.reply.fields), r.reply.fds, once)
	}
	return b.String()
}

// Admits is the set of types a receiver decodes; any other is refused
// from the frame's header.
type Admits interface {
	kind(MsgType) (*kind, bool)
}

// A helper Admits the requests of its protocol.
func (p *Protocol) kind(t MsgType) (*kind, bool) {
	if r, ok := p.byReq[t]; ok {
		return &r.req, true
	}
	return nil, false
}

// replyOf Admits what may answer one request: its reply or an Error.
type replyOf struct{ r *route }

func (a replyOf) kind(t MsgType) (*kind, bool) {
	switch t {
	case a.r.reply.t:
		return &a.r.reply, true
	case MsgError:
		return &errorKind, true
	}
	return nil, false
}

// OnlyErrors Admits an Error alone, for tests that read a helper's
// protocol-error reply to a forged frame.
var OnlyErrors Admits = onlyErrors{}

type onlyErrors struct{}

func (onlyErrors) kind(t MsgType) (*kind, bool) {
	if t == MsgError {
		return &errorKind, true
	}
	return nil, false
}
