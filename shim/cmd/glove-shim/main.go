// Command glove-shim will execute the OCI config.json the supervisor
// writes. This revision has no sandbox yet: it refuses to run rather than
// execute anything unconfined.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("glove-shim dev")
		return
	}
	fmt.Fprintln(os.Stderr, "glove-shim: the sandbox is not part of this revision; refusing to run anything")
	os.Exit(2)
}
