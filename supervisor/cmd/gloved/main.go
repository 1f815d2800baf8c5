// Command gloved is the Glove supervisor. The session service (policy,
// plans, the session store, the control socket) is not in this revision:
// it refuses to run instead of pretending to serve.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("gloved dev")
		return
	}
	fmt.Fprintln(os.Stderr, "gloved: the session service is not part of this revision; only --version works")
	os.Exit(2)
}
