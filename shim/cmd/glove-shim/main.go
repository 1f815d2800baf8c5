// Command glove-shim executes an OCI bundle in Glove's sandbox; see package
// shim.
//
// Threat: since Go 1.25 the runtime keeps the host's cgroup CPU limit
// files open for the life of the process, to follow them. In stage 1,
// PID 1 of the sandbox, they would be host descriptors outside the root,
// reachable through /proc/1/fd by a program that gained access to PID 1
// (found by the attack table: proc1-fd-cgroup). The sandbox's GOMAXPROCS
// need not follow the cgroup, so the runtime never opens them.
//
//go:debug containermaxprocs=0
package main

import (
	"os"

	"github.com/glove-sandbox/glove/shim"
	// The stages that run in C, before the Go runtime starts (a
	// constructor; see shim/cstage/cstage.c).
	_ "github.com/glove-sandbox/glove/shim/cstage"
)

func main() { os.Exit(shim.Main(os.Args)) }
