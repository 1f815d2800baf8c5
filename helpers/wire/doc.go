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
// Field rules ([DecodeFrame] checks the frame itself; [Server] checks request
// ids and which types a helper accepts):
//
//   - version must equal [Version].
//   - type is a [MsgType]; it must be known and, on the helper side,
//     accepted by that helper (see [Accepts]).
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
// Payload fields are encoded back to back, with no padding and no tags, by
// [Encoder] and decoded by [Decoder]. Integers are little-endian and fixed
// width; a bool is one byte, 0 or 1; a string or byte field is a uint16
// length followed by that many bytes, and every such field has a per-field
// maximum. Strings must be valid UTF-8 without NUL bytes (NUL would truncate
// them once passed to a system call). The encoding is canonical: a payload
// that decodes re-encodes to the identical bytes, and leftover bytes are an
// error rather than ignored "unknown fields".
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
// Currently defined:
//
//	type  name        direction            fds  payload
//	1     Hello       supervisor -> helper  0   (empty)
//	2     HelloReply  helper -> supervisor  0   Name string(64), Protocol u16,
//	                                            CapEffective u64, CapPermitted u64
//	3     Error       helper -> supervisor  0   Code u16, Message string(512)
//	0x0101 Bind        supervisor -> mounter  1   Flags u32 (1 read-only, 2 noexec); fd: source
//	0x0102 BindReply   mounter -> supervisor  1   (empty); fd: detached mount
//	0x0103 Tmpfs       supervisor -> mounter  0   SizeBytes u64, Inodes u64, Mode u32, Flags u32 (1 noexec)
//	0x0104 TmpfsReply  mounter -> supervisor  1   (empty); fd: detached tmpfs
//	0x0201 Create      supervisor -> loopext4 1   Name string(64), SizeBytes u64; fd: materialization root
//	0x0202 CreateReply loopext4 -> supervisor 0   (empty)
//	0x0203 Attach      supervisor -> loopext4 1   Name string(64), ReadOnly bool; fd: materialization root
//	0x0204 AttachReply loopext4 -> supervisor 1   (empty); fd: detached ext4 mount
//	0x0205 Freeze      supervisor -> loopext4 1   (empty); fd: the image mount
//	0x0206 FreezeReply loopext4 -> supervisor 0   (empty)
//	0x0301 CgCreate      supervisor -> cgroup 0   Session string(64), MemoryBytes u64, Pids u64
//	0x0302 CgCreateReply cgroup -> supervisor 4   Inode u64; fds: v2 session directory, cgroup.events,
//	                                              memory events, cpu.stat
//	0x0303 CgPlace       supervisor -> cgroup 1   Session string(64); fd: pidfd of the process
//	0x0304 CgPlaceReply  cgroup -> supervisor 0   (empty)
//	0x0305 CgKill        supervisor -> cgroup 0   Session string(64)
//	0x0306 CgKillReply   cgroup -> supervisor 0   Empty bool
//	0x0307 CgRemove      supervisor -> cgroup 0   Session string(64)
//	0x0308 CgRemoveReply cgroup -> supervisor 0   (empty)
//	0x0309 CgStat        supervisor -> cgroup 0   Session string(64)
//	0x030a CgStatReply   cgroup -> supervisor 0   MemoryPeakBytes u64, OOMKills u64, PidsCurrent u64,
//	                                              PidsPeak u64, CPUTimeNS u64
//	0x030b CgFreeze      supervisor -> cgroup 0   Session string(64), Frozen bool
//	0x030c CgFreezeReply cgroup -> supervisor 0   Settled bool
//	0x030d CgRemoveEmpty      supervisor -> cgroup 0   Session string(64)
//	0x030e CgRemoveEmptyReply cgroup -> supervisor 0   (empty)
//	0x0401 StreamOpen        supervisor -> streamproxy 3  Session string(64), Alias string(64);
//	                                                      fds: guest end, upstream, audit file
//	0x0402 StreamOpenReply   streamproxy -> supervisor 0  (empty)
//	0x0403 StreamStatus      supervisor -> streamproxy 0  (empty)
//	0x0404 StreamStatusReply streamproxy -> supervisor 0  Open bool, Exchanges u64, Err string(32)
//	0x0405 StreamClose       supervisor -> streamproxy 0  (empty)
//	0x0406 StreamCloseReply  streamproxy -> supervisor 0  (empty)
//
// # Which helper accepts which message
//
// A helper only dispatches the request types listed for it in [Accepts];
// anything else, including reply types sent by the supervisor, is a protocol
// error, found from the frame's header: [Server] has its [Conn] refuse the
// type before the payload is decoded, so a helper never runs the decoder
// of a message it does not accept. "once" means a second such request on the same connection is a
// protocol error too.
//
//	helper              accepts
//	glove-mounter       Hello (once), Bind, Tmpfs
//	glove-loopext4      Hello (once), Create, Attach, Freeze
//	glove-cgroup        Hello (once), CgCreate, CgPlace, CgKill, CgRemove, CgStat, CgFreeze,
//	                    CgRemoveEmpty
//	glove-streamproxy   Hello (once), StreamOpen (once), StreamStatus, StreamClose
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
