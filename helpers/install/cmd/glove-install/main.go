// SPDX-License-Identifier: Apache-2.0

// Command glove-install installs the built executables with the modes,
// group and file capabilities of the capability table; `make install`
// runs it as root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/helpers/install"
)

func main() {
	var o install.Options
	flag.StringVar(&o.BinDir, "bindir", "bin", "directory of the built executables")
	flag.StringVar(&o.Prefix, "prefix", "/usr/local", "installation prefix")
	flag.StringVar(&o.DestDir, "destdir", "", "staging directory prepended to every path")
	flag.StringVar(&o.Group, "group", "glove", "service group allowed to execute the helpers")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "glove-install: unexpected arguments:", flag.Args())
		os.Exit(2)
	}
	if err := install.Install(o); err != nil {
		fmt.Fprintln(os.Stderr, "glove-install:", err)
		os.Exit(1)
	}
}
