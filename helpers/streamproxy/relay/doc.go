// Package relay is the data path of glove-streamproxy for the
// inherited-stream-v1 transport: it moves one bounded opaque request from
// the sandbox's end of an AF_UNIX stream socketpair to an upstream
// connection, and one bounded response back, one exchange at a time, and
// gates the release of every response on a durable audit record.
//
// Threats: the sandboxed guest sends hostile frames (zero, oversized or
// truncated lengths are refused before any allocation) or pipelines
// requests to get a response out unaudited (queued guest input closes the
// stream); the upstream may be replaced (CheckUpstream, before the
// request goes out and after the response comes in). A response is never
// released before its delivery_pending record is durable, delivered is
// recorded only after the send and a post-send queue check, and any
// failure closes the stream for good. Records carry no payload byte nor
// length. The frame format, the order of one exchange and the failure
// rule are in docs/helpers.md ("The relay: frames and one exchange").
//
// The package holds no capability, knows nothing of what the payloads
// mean, and depends only on the standard library and golang.org/x/sys/unix.
package relay
