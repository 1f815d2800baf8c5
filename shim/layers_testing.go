//go:build glove_testlayers

package shim

import (
	"os"
	"strings"
)

// testLayersVar names the layers to switch off, comma-separated, in a
// glove-shim built with the glove_testlayers tag. Only the attack tests
// build such a binary; it is never installed.
const testLayersVar = "GLOVE_SHIM_TEST_LAYERS_OFF"

func layersFromEnvironment() []string {
	v := os.Getenv(testLayersVar)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func (p *Plan) off(layer string) bool {
	for _, l := range p.Off {
		if l == layer {
			return true
		}
	}
	return false
}
