// SPDX-License-Identifier: Apache-2.0

// Command glove-streamproxy is the inherited-stream-v1 relay; see package
// streamproxy.
package main

import (
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/streamproxy"
)

func main() { helperkit.Main(streamproxy.Spec()) }
