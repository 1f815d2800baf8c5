// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"embed"
	"encoding/json"
	"fmt"
	"strings"
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

// ShippedSizeBounds is the size bounds (the max_* members) of a bounds
// file as the package ships it, for the tests that run sessions under
// exactly those bounds.
func ShippedSizeBounds(name string) (map[string]uint64, error) {
	data, err := ShippedBounds(name)
	if err != nil {
		return nil, err
	}
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("shipped bounds %s: %w", name, err)
	}
	out := map[string]uint64{}
	for k, v := range all {
		if n, ok := v.(float64); ok && strings.HasPrefix(k, "max_") {
			out[k] = uint64(n)
		}
	}
	return out, nil
}
