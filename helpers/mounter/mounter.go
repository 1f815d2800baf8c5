// Package mounter is glove-mounter: it hands the supervisor detached bind
// and tmpfs mounts (open_tree/fsmount descriptors) within root-owned
// bounds. It holds CAP_SYS_ADMIN and nothing else. This revision serves
// Hello; Bind and Tmpfs arrive with their requests.
package mounter

import (
	"github.com/glove-sandbox/glove/helpers/helperkit"
)

// Name is the executable and wire name.
const Name = "glove-mounter"

// ConfigFile is the bounds file under helperkit.ConfigDir.
const ConfigFile = "mounter.json"

// Hard ceilings no configuration may exceed.
const (
	HardMaxTmpfsBytes  = 1 << 40
	HardMaxTmpfsInodes = 1 << 24
)

// Config is glove-mounter's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// SourceRoots: a bind source must lie beneath one of these by identity.
	SourceRoots []string `json:"source_roots"`
	// MaxTmpfsBytes and MaxTmpfsInodes cap each tmpfs it creates.
	MaxTmpfsBytes  uint64 `json:"max_tmpfs_bytes"`
	MaxTmpfsInodes uint64 `json:"max_tmpfs_inodes"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckPathList("source_roots", c.SourceRoots); err != nil {
		return err
	}
	if err := helperkit.CheckRange("max_tmpfs_bytes", c.MaxTmpfsBytes, HardMaxTmpfsBytes); err != nil {
		return err
	}
	return helperkit.CheckRange("max_tmpfs_inodes", c.MaxTmpfsInodes, HardMaxTmpfsInodes)
}

// Spec is glove-mounter for helperkit.Main.
func Spec() helperkit.Spec {
	return helperkit.Spec{Name: Name, ConfigFile: ConfigFile, Config: &Config{}, Syscalls: Syscalls}
}
