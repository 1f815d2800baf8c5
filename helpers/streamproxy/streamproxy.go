// SPDX-License-Identifier: Apache-2.0

// Package streamproxy is glove-streamproxy: the relay of the
// inherited-stream-v1 transport. It holds no capability. One helper
// process serves one stream: streamwire Open (once) hands it the guest end
// (the proxy's end of the sandbox's socketpair), the upstream connection
// and the audit file; the helper checks them (server.go), relays one
// bounded request and one bounded response at a time in a goroutine
// (relay.go), and answers streamwire Status and Close.
//
// Threats: the guest sends hostile frames (a length is checked before
// anything is allocated) or pipelines requests to get a response out
// unaudited (queued guest input closes the stream); the upstream is
// swapped (its SO_PEERCRED uid must be the helper's own at Open, and its
// pid, uid and gid unchanged around every exchange); a compromised
// supervisor hands over wrong descriptors (refused at Open). A response is
// released only once its delivery_pending record is durable; delivered is
// recorded only after the send and a post-send queue check; any failure
// closes the stream for good. If the supervisor closes the control
// connection the helper exits at once: an exchange in flight keeps its
// delivery_pending record and is never recorded delivered.
package streamproxy

import (
	"os"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-streamproxy"

// Hard ceilings no configuration may exceed (and the relay's frame bound).
const (
	HardMaxFrameBytes = 16 << 10
	HardMaxExchangeMS = 10 * 60 * 1000
)

// Config is glove-streamproxy's bounds.
type Config struct {
	SchemaVersion int    `json:"schema_version"`
	MaxFrameBytes uint64 `json:"max_frame_bytes"` // caps one request or one response
	MaxExchangeMS uint64 `json:"max_exchange_ms"` // caps the shared deadline of one exchange
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckRange("max_frame_bytes", c.MaxFrameBytes, HardMaxFrameBytes); err != nil {
		return err
	}
	return helperkit.CheckRange("max_exchange_ms", c.MaxExchangeMS, HardMaxExchangeMS)
}

// Spec is glove-streamproxy for helperkit.Main.
func Spec() helperkit.Spec {
	cfg := &Config{}
	return helperkit.Spec{
		Name: Name, Config: cfg, Syscalls: Syscalls, Protocol: streamwire.Protocol,
		Handlers: func(_ *unix.Ucred) ([]wire.Handler, error) {
			s := &server{cfg: cfg, uid: uint32(os.Getuid())}
			return []wire.Handler{streamwire.Open.Handle(s.streamOpen), streamwire.Status.Handle(s.streamStatus), streamwire.Close.Handle(s.streamClose)}, nil
		},
	}
}
