// SPDX-License-Identifier: Apache-2.0

//go:build glove_testfaults

package journal

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// testFaultVar is KIND:POINT: a program built with the glove_testfaults
// tag (never installed) kills itself with SIGKILL when a journal of that
// kind reaches that point (an Append or Compact fault point), as a crash
// would: gloved's compaction crash test restarts it.
const testFaultVar = "GLOVED_TEST_JOURNAL_FAULT"

func init() {
	kind, point, ok := strings.Cut(os.Getenv(testFaultVar), ":")
	if !ok {
		return
	}
	kindFaultHook = func(k, p string) {
		if k == kind && p == point {
			_ = unix.Kill(os.Getpid(), unix.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
