// SPDX-License-Identifier: Apache-2.0

// Command glove is the operator's command line; see package cli.
package main

import (
	"os"

	"github.com/glove-sandbox/glove/supervisor/operator/cli"
)

func main() { os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr)) }
