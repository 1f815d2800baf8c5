// Package streamproxy is glove-streamproxy: the relay of the
// inherited-stream-v1 transport, moving one bounded request and one
// bounded response at a time between a sandbox's descriptor and an
// upstream connection. It holds no capability.
//
// One helper process serves one stream: streamwire Open (once) hands it the
// guest end, the upstream connection and the audit file; the helper
// checks them, runs the relay (package relay) in a goroutine, and keeps
// answering streamwire Status (is it open, how many exchanges were delivered,
// why it closed) and streamwire Close (cancel and wait). Each audit record is
// one JSON line {"seq","session","alias","phase","status","latency_ms"}
// appended with one write(2) and made durable with fdatasync(2) before
// the relay goes on.
//
// The upstream's SO_PEERCRED uid must be the helper's own (the Glove
// service user), at streamwire Open; before and after every exchange its
// pid, uid and gid must still be the ones seen then (upstream drift).
// If the supervisor closes the control connection while the stream is
// open the helper exits at once: a pending exchange keeps its
// conservative delivery_pending record and is never recorded delivered.
package streamproxy

import (
	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-streamproxy"

// ConfigFile is the bounds file under helperkit.ConfigDir, from the
// capability table's row.
var ConfigFile = captable.MustLookup(Name).Bounds

// Hard ceilings no configuration may exceed.
const (
	HardMaxFrameBytes = 16 << 10
	HardMaxExchangeMS = 10 * 60 * 1000
)

// Config is glove-streamproxy's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// MaxFrameBytes caps one request or one response.
	MaxFrameBytes uint64 `json:"max_frame_bytes"`
	// MaxExchangeMS caps the shared deadline of one exchange.
	MaxExchangeMS uint64 `json:"max_exchange_ms"`
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
		Name: Name, Config: cfg, Syscalls: Syscalls,
		Protocol: streamwire.Protocol,
		Handlers: func(_ *unix.Ucred) ([]wire.Handler, error) {
			return newServer(cfg).handlers(), nil
		},
	}
}
