// SPDX-License-Identifier: Apache-2.0

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
	"runtime"

	"github.com/glove-sandbox/glove/shim"
	// The stages that run in C, before the Go runtime starts (a
	// constructor; see shim/cstage/cstage.c).
	_ "github.com/glove-sandbox/glove/shim/cstage"
)

// init keeps the main goroutine, and so Main, on the main thread, where
// stage 0 ends by executing its waiter. A parent-death signal (gloved
// asks for SIGKILL) belongs to the thread its parent started: an execve
// from any other thread of the Go runtime makes that thread the process
// and drops the signal, and the waiter, with the whole sandbox under it,
// would outlive a killed gloved (threat: a program left running with no
// supervisor; TestGlovedStoreFull found one).
func init() { runtime.LockOSThread() }

func main() { os.Exit(shim.Main(os.Args)) }
