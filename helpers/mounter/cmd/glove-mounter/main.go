// SPDX-License-Identifier: Apache-2.0

// Command glove-mounter is the detached-mount helper; see package mounter.
package main

import (
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
)

func main() { helperkit.Main(mounter.Spec()) }
