// SPDX-License-Identifier: Apache-2.0

//go:build glove_testfaults

package daemon

import "os"

// testNoExposureVar, set to "1" in the environment of a gloved built with
// the glove_testfaults tag, switches off the guard's exposure check
// (exposedBy), and only that: TestGlovedStreamExposedAttacks grants the
// upstream's directory with it off and shows that seccomp alone still
// keeps the sandbox from connecting to the socket it can then see.
const testNoExposureVar = "GLOVED_TEST_NO_EXPOSURE_CHECK"

func exposureCheckOff() bool { return os.Getenv(testNoExposureVar) == "1" }
