// SPDX-License-Identifier: Apache-2.0

// Command glove-loopext4 is the ext4 image helper; see package loopext4.
package main

import (
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
)

func main() { helperkit.Main(loopext4.Spec()) }
