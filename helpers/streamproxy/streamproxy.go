// Package streamproxy is glove-streamproxy: the relay of the
// inherited-stream-v1 transport, moving one bounded request and one
// bounded response at a time between a sandbox's descriptor and an
// upstream connection. It holds no capability. This revision serves
// Hello; the relay arrives with its requests.
package streamproxy

import "github.com/glove-sandbox/glove/helpers/helperkit"

// Name is the executable and wire name.
const Name = "glove-streamproxy"

// ConfigFile is the bounds file under helperkit.ConfigDir.
const ConfigFile = "streamproxy.json"

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
	return helperkit.Spec{Name: Name, ConfigFile: ConfigFile, Config: &Config{}, Syscalls: Syscalls}
}
