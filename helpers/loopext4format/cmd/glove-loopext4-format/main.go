// SPDX-License-Identifier: Apache-2.0

// Command glove-loopext4-format is glove-loopext4's formatter; see
// package loopext4format. Started as loopext4format.MkfsName it is the
// formatting child, which becomes mkfs.ext4.
package main

import (
	"os"

	"github.com/glove-sandbox/glove/helpers/loopext4format"
)

func main() {
	if os.Args[0] == loopext4format.MkfsName {
		os.Exit(loopext4format.MkfsMain())
	}
	os.Exit(loopext4format.Main())
}
