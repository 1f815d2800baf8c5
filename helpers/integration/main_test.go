// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the attacker of attack_test.go, run as
	// the service user against a helper.
	if target := os.Getenv(attackEnv); target != "" {
		os.Exit(attackChild(target))
	}
	// And as the raw echo of the benchmarks' anchor (rawecho_test.go).
	if os.Getenv(rawEchoEnv) != "" {
		os.Exit(rawEchoChild())
	}
	testenv.Main(m)
}
