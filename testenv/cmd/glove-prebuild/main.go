// SPDX-License-Identifier: Apache-2.0

// Command glove-prebuild fills a directory with the executables a
// prebuilt test run uses (testenv.Prebuild): what `make build` makes,
// configured for testenv.PrebuiltBase, and every test-only tool. The VM
// lane's guests have no Go toolchain; `make lane-tests` runs this and
// builds the test binaries that run in them with testenv.PrebuiltEnv.
//
// Usage: glove-prebuild DIR (inside the module; DIR must not exist).
package main

import (
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/testenv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: glove-prebuild DIR")
		os.Exit(2)
	}
	if err := testenv.Prebuild(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "glove-prebuild:", err)
		os.Exit(1)
	}
}
