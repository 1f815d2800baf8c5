// Package loopext4 is glove-loopext4: it creates hard-sized ext4 images
// under the materialization root, attaches them to autoclear loop devices
// and hands back detached mount descriptors. It holds CAP_SYS_ADMIN and
// CAP_DAC_OVERRIDE (for the root-only /dev/loop-control). This revision
// serves Hello; Create, Attach and Freeze arrive with their requests.
package loopext4

import "github.com/glove-sandbox/glove/helpers/helperkit"

// Name is the executable and wire name.
const Name = "glove-loopext4"

// ConfigFile is the bounds file under helperkit.ConfigDir.
const ConfigFile = "loopext4.json"

// HardMaxImageBytes is the ceiling no configuration may exceed (1 TiB).
const HardMaxImageBytes = 1 << 40

// Config is glove-loopext4's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// MaterializationRoot is the only directory images are created in.
	MaterializationRoot string `json:"materialization_root"`
	// MaxImageBytes caps each image.
	MaxImageBytes uint64 `json:"max_image_bytes"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckAbsPath("materialization_root", c.MaterializationRoot); err != nil {
		return err
	}
	return helperkit.CheckRange("max_image_bytes", c.MaxImageBytes, HardMaxImageBytes)
}

// Spec is glove-loopext4 for helperkit.Main.
func Spec() helperkit.Spec {
	return helperkit.Spec{Name: Name, ConfigFile: ConfigFile, Config: &Config{}, Syscalls: Syscalls}
}
