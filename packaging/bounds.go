package packaging

import (
	"embed"
	"fmt"
)

// etcGlove is the helpers' bounds the package installs as conffiles in
// /etc/glove (docs/packaging.md, "The example bounds").
//
//go:embed etc/glove/*.json
var etcGlove embed.FS

// ShippedBounds is the bounds file name (mounter.json, loopext4.json,
// cgroup.json, streamproxy.json) as the package ships it, built in so
// that a test binary run away from the source tree (the VM lane's
// prebuilt tests) judges the same bytes.
func ShippedBounds(name string) ([]byte, error) {
	b, err := etcGlove.ReadFile("etc/glove/" + name)
	if err != nil {
		return nil, fmt.Errorf("shipped bounds %s: %w", name, err)
	}
	return b, nil
}
