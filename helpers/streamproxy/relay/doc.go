// Package relay is the data path of glove-streamproxy for the
// inherited-stream-v1 transport: it moves one bounded opaque request from
// the sandbox's end of an AF_UNIX stream socketpair to an upstream
// connection, and one bounded response back, one exchange at a time, and
// gates the release of every response on a durable audit record.
//
// The package holds no capability and knows nothing of what the payloads
// mean. It depends only on the standard library and golang.org/x/sys/unix.
//
// # Frame format
//
// Both directions carry the same framing on a byte stream:
//
//	 0               1               2               3
//	 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//	+---------------------------------------------------------------+
//	|              payload length (uint32, big-endian)              |  0
//	+---------------------------------------------------------------+
//	|                 payload (payload length bytes)                |  4
//	+---------------------------------------------------------------+
//
// The length must satisfy 1 <= length <= max, where max is the caller's
// bound (glove-streamproxy's max_frame_bytes, itself at most
// [HardMaxFrame] = 16 KiB). [ReadFrame] checks the length before it
// allocates anything; a zero or oversized length, or end of stream inside a
// frame (header or payload), is [ErrFraming]. End of stream exactly at a
// frame boundary is [io.EOF].
//
// # One exchange
//
// Time flows downwards. Every step after the first header byte of the
// request shares one absolute deadline, first byte + max_exchange_ms.
// Waiting for a request to begin is idle time, bounded only by the
// context, not part of an exchange.
//
//	guest                relay                       upstream      audit
//	  |  [len|request]     |                             |            |
//	  |------------------->| (1) read request frame       |            |
//	  |                    | (2) guest queue empty?       |            |
//	  |                    | (3) CheckUpstream            |            |
//	  |                    |  [len|request]              |            |
//	  |                    |---------------------------->|            |
//	  |                    |  [len|response]             |            |
//	  |                    |<----------------------------|            |
//	  |                    | (4) read response frame      |            |
//	  |                    | (5) CheckUpstream            |            |
//	  |                    | (6) deadline; Record(delivery_pending)    |
//	  |                    |------------------------------------------>|
//	  |                    |     durable; deadline again  |            |
//	  |                    | (7) guest queue empty?       |            |
//	  |  [len|response]    |     deadline                 |            |
//	  |<-------------------| (8) release: write response  |            |
//	  |                    | (9) guest queue empty? (post-send peek)   |
//	  |                    | (10) deadline; Record(delivered)          |
//	  |                    |------------------------------------------>|
//	  |                    |     deadline again           |            |
//
// # Failure rule
//
// Any failure closes the stream permanently: framing errors on either side
// ([ErrFraming]); input queued from the guest at the request boundary (2),
// before release (7) or at the post-send peek (9) ([ErrPipelined]);
// upstream identity drift ([ErrUpstreamDrift]); the deadline
// ([ErrTimeout]); context cancellation ([ErrCanceled]); an audit append
// that fails ([ErrAudit]); or a transport error ([ErrTransport]). The relay
// then closes both connections, and once a request has been read it makes a
// best-effort delivery_failed record (its own error is ignored) unless
// delivered was already recorded. Every later [Relay.Exchange] returns
// [ErrClosed] without touching the connections.
//
// A response is never released before delivery_pending is durable, and
// never when any failure precedes step (8): it is suppressed and the
// conservative pending record (if written) remains. An audit append checks
// the deadline before and after its synchronous durability work; a
// kernel-blocked fsync cannot be preempted, so the deadline is not a hard
// wall-clock bound, but a pending record that completes late still
// suppresses the response.
//
// # The post-send rule
//
// delivered is recorded only after a successful guest send and an
// immediate post-send queue check that finds nothing queued. If that peek
// finds bytes, the guest had input in flight while its response was being
// released; the response has gone out, but the relay cannot tell whether
// the guest sent its next request before or after seeing it, so it does
// not claim delivered: it fails with [ErrPipelined], records
// delivery_failed (the pending record is the conservative record of the
// release) and closes the stream. Bytes arriving after the final peek are
// serialized as a possible next request and read at the next exchange's
// request boundary. A causal no-pipelining claim would require a future
// credit/ack protocol. Until then a guest that sends its next request the
// moment it has read a response can race the post-send peek and lose its
// stream; nothing in the frame format tells it when the peek is over.
//
// Closing a stream socket that still holds unread guest input makes the
// guest's next read fail with ECONNRESET once it has read whatever was
// already queued to it, rather than return end of stream.
//
// # Audit records
//
// A [Record] carries only the phase, the status and the latency; the
// [Audit] implementation binds the session ID and alias. Nothing of either
// payload, not even its length, is ever passed to the audit.
package relay
