// Command glove-shim executes an OCI bundle in Glove's sandbox; see package
// shim.
package main

import (
	"os"

	"github.com/glove-sandbox/glove/shim"
)

func main() { os.Exit(shim.Main(os.Args)) }
