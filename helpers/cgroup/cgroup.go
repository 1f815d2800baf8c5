// Package cgroup is glove-cgroup: it owns every cgroup write of a
// session (create with limits, place, kill, remove, stat) inside the
// subtree delegated to the service user. It holds no capability. This
// revision serves Hello; its operations arrive with their requests.
package cgroup

import "github.com/glove-sandbox/glove/helpers/helperkit"

// Name is the executable and wire name.
const Name = "glove-cgroup"

// ConfigFile is the bounds file under helperkit.ConfigDir.
const ConfigFile = "cgroup.json"

// Hard ceilings no configuration may exceed.
const (
	HardMaxMemoryBytes = 1 << 50
	HardMaxPids        = 1 << 22
)

// Config is glove-cgroup's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// Parent is the delegated cgroup, relative to each hierarchy's
	// mount point (for example "/glove"); sessions are created below it.
	Parent string `json:"parent"`
	// MaxMemoryBytes and MaxPids cap each session's limits.
	MaxMemoryBytes uint64 `json:"max_memory_bytes"`
	MaxPids        uint64 `json:"max_pids"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckAbsPath("parent", c.Parent); err != nil {
		return err
	}
	if c.Parent == "/" {
		return helperkit.Fault("parent", "the root cgroup is never delegated")
	}
	if err := helperkit.CheckRange("max_memory_bytes", c.MaxMemoryBytes, HardMaxMemoryBytes); err != nil {
		return err
	}
	return helperkit.CheckRange("max_pids", c.MaxPids, HardMaxPids)
}

// Spec is glove-cgroup for helperkit.Main.
func Spec() helperkit.Spec {
	return helperkit.Spec{Name: Name, ConfigFile: ConfigFile, Config: &Config{}, Syscalls: Syscalls}
}
