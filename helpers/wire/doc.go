// Package wire is the protocol spoken between the unprivileged glove
// supervisor and the small privileged helper executables (glove-mounter,
// glove-loopext4, glove-cgroup, glove-streamproxy).
//
// # Threat model
//
// Helpers hold privileges the supervisor does not. A supervisor that has been
// compromised (for example through a bug reachable from inside the sandbox)
// must not be able to turn a helper into a confused deputy. Every decoding
// path in this package therefore assumes a hostile peer: lengths are checked
// against what was actually received before anything is sliced or allocated,
// unknown types, unknown flags and trailing bytes are rejected rather than
// ignored, and any descriptor the kernel installs into our table while
// receiving a frame is either handed to the caller wrapped in an *os.File or
// closed before an error is returned, so a malformed frame can never leak a
// descriptor into the helper (or, via exec, into its children).
//
// # Transport
//
// Both sides share one AF_UNIX SOCK_SEQPACKET socket pair. Every message is
// exactly one sendmsg(2)/recvmsg(2): SEQPACKET preserves message boundaries,
// so there is no stream reassembly and no way for a peer to make us read
// half a frame. Descriptors travel in a single SCM_RIGHTS control message of
// the same sendmsg. Any other control message (SCM_CREDENTIALS, SCM_PIDFD,
// ...) is a protocol error: the peer that created the socket pair could have
// enabled SO_PASSCRED/SO_PASSPIDFD on our end before handing it over.
//
// # Frame format
//
// A frame is a fixed 16-byte little-endian header followed by the payload:
//
//	 0               1               2               3
//	 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//	+-------------------------------+-------------------------------+
//	|        version (uint16)       |          type (uint16)        |  0
//	+-------------------------------+-------------------------------+
//	|                      request id (uint32)                      |  4
//	+---------------------------------------------------------------+
//	|                    payload length (uint32)                    |  8
//	+-------------------------------+-------------------------------+
//	|        fd count (uint16)      |         flags (uint16)        | 12
//	+-------------------------------+-------------------------------+
//	|                 payload (payload length bytes)                | 16
//	+---------------------------------------------------------------+
//
// Field rules ([Conn.Recv] checks the frame itself and which types the
// receiver admits; [Server] checks request ids and once-only requests):
//
//   - version must equal [Version].
//   - type is a [MsgType] the receiver admits: on the helper side a
//     request of its [Protocol], on the supervisor's the reply it waits
//     for or an Error.
//   - request id: requests carry strictly increasing non-zero ids; a reply
//     echoes the id of its request. A protocol-error reply uses id 0.
//   - payload length must equal the bytes received minus [HeaderSize] and
//     be at most [MaxPayload]; the whole frame is at most [MaxMessage].
//   - fd count must equal the number of descriptors received and the number
//     the message type carries, and be at most [MaxFDs].
//   - flags are reserved and must be zero.
//
// # Payload encoding
//
// A message is a Go struct and its fields are its payload, encoded back
// to back in declaration order, with no padding and no tags, by one codec
// for every message (fields.go, over [Encoder] and [Decoder]): integers
// are little-endian and fixed width; a bool is one byte, 0 or 1; a
// string or byte field is a uint16 length followed by that many bytes,
// with a per-field maximum from the struct tag `wire:"N"`. A struct with
// any other field, or a string without its maximum, is refused when its
// package is initialized. Strings must be valid UTF-8 without NUL bytes
// (NUL would truncate them once passed to a system call). The encoding
// is canonical: a payload that decodes re-encodes to the identical bytes,
// and leftover bytes are an error rather than ignored "unknown fields".
//
// # Message types
//
// Type numbers are stable and partitioned so that helpers can grow their own
// messages without colliding:
//
//	0x0000          invalid
//	0x0001-0x00ff   common to all helpers
//	0x0100-0x01ff   glove-mounter
//	0x0200-0x02ff   glove-loopext4
//	0x0300-0x03ff   glove-cgroup
//	0x0400-0x04ff   glove-streamproxy
//
// The common types are Hello (1, once per connection), its HelloReply
// (2: Name string(64), Protocol u16, CapEffective u64, CapPermitted
// u64) and Error (3: Code u16, Message string(512)), the negative reply
// to any request.
//
// # Each helper's protocol, declared once
//
// A helper's protocol is one declaration in its own package
// (helpers/wire/mountwire, loopwire, cgwire, streamwire): a [Route] per
// request, holding the request's type number (its reply is the next
// number), the request and reply structs, the descriptors each carries
// and whether the request may come only once per connection, and a
// [Protocol] listing the routes. Everything else is built from it: the
// helper's typed handlers ([Route.Handle]) and the [Server] that checks
// they cover exactly the routes, the supervisor's typed calls
// ([Route.Call]), the frame decoder's admitted types, and the tables of
// docs/helpers.md and SECURITY.md (generated, checked by tests). A helper
// links the wire core and its own protocol package only, so the decoders
// of other helpers' messages are not in its executable.
//
// A helper refuses a type its protocol does not declare, including reply
// types sent by the supervisor, from the frame's header: [Conn.Recv]
// checks the type against what the receiver admits before the payload is
// decoded, so a helper never runs the decoder of a message it does not
// accept. "once" means a second such request on the same connection is a
// protocol error too. The supervisor's [Client] likewise admits only the
// reply of the request it sent, or an Error.
//
// # Error codes
//
// An [Error] reply carries one of these stable codes:
//
//	1  ErrProtocol     malformed frame, wrong fd count, unknown or unpermitted
//	                   message; the helper exits after sending it
//	2  ErrBadRequest   well-formed request with invalid fields
//	3  ErrRefused      request outside the helper's root-owned bounds
//	4  ErrInternal     the helper failed for reasons of its own
//	5  ErrUnsupported  recognised but not supported by this helper build
package wire
