//go:build glove_testfaults

package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// testFaultVar names the start-path point (session.Env.Fault) at which a
// gloved built with the glove_testfaults tag kills itself with SIGKILL,
// as a crash would: the recovery tests then restart it.
const testFaultVar = "GLOVED_TEST_FAULT"

func faultHook() func(string) {
	point := os.Getenv(testFaultVar)
	if point == "" {
		return nil
	}
	return func(p string) {
		if p == point {
			_ = unix.Kill(os.Getpid(), unix.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
