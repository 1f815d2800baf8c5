// SPDX-License-Identifier: Apache-2.0

// Command glove-userns makes one user namespace for one session on hosts
// that refuse unprivileged ones; see package userns.
package main

import (
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/userns"
)

func main() { helperkit.Main(userns.Spec()) }
