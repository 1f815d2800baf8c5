// SPDX-License-Identifier: Apache-2.0

//go:build glove_testfaults

package daemon

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// testFaultVar names the start-path point (session.Env.Fault) at which a
// gloved built with the glove_testfaults tag kills itself with SIGKILL,
// as a crash would: the recovery tests then restart it.
const testFaultVar = "GLOVED_TEST_FAULT"

// testPauseVar is POINT:FILE: at that point the start path creates
// FILE.reached and waits (at most 60 s) until FILE exists, so that a test
// can act between two steps of a start, as an attacker racing it would
// (the launch-source tests swap a pinned executable or a verified bundle
// there).
const testPauseVar = "GLOVED_TEST_PAUSE"

func faultHook() func(string) {
	fault := killOrPause()
	if os.Getenv(testTraceVar) == "" {
		return fault
	}
	// A trace line per point, on gloved's log (stderr), for the start
	// path's stage breakdown (BenchmarkStartStages): the point and the
	// wall clock in microseconds, which the benchmark lines up with its
	// own clock (same host).
	return func(p string) {
		fmt.Fprintf(os.Stderr, "{\"trace\":%q,\"at_us\":%d}\n", p, time.Now().UnixMicro())
		if fault != nil {
			fault(p)
		}
	}
}

// testTraceVar, when set, makes a gloved built with the glove_testfaults
// tag log each start-path point it passes (faultHook).
const testTraceVar = "GLOVED_TEST_TRACE"

// killOrPause is the GLOVED_TEST_FAULT and GLOVED_TEST_PAUSE hook, or nil.
func killOrPause() func(string) {
	point := os.Getenv(testFaultVar)
	pausePoint, pauseFile, _ := strings.Cut(os.Getenv(testPauseVar), ":")
	if point == "" && pauseFile == "" {
		return nil
	}
	return func(p string) {
		if p == point {
			// The test asked for a crash at this point: a kill that
			// fails must not leave gloved waiting below for ever.
			if err := unix.Kill(os.Getpid(), unix.SIGKILL); err != nil {
				panic(fmt.Sprintf("test fault %s: kill: %v", p, err))
			}
			select {} // the signal is on its way
		}
		if pauseFile != "" && p == pausePoint {
			if f, err := os.Create(pauseFile + ".reached"); err == nil {
				f.Close()
			}
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(pauseFile); err == nil {
					return
				}
			}
		}
	}
}

// testRecordsVar bounds both journals to that many records in a gloved
// built with the glove_testfaults tag, so that a test reaches their
// compactions in a few sessions.
const testRecordsVar = "GLOVED_TEST_JOURNAL_RECORDS"

func testJournalRecords() int {
	n, err := strconv.Atoi(os.Getenv(testRecordsVar))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// testStoreSkewVar is a duration by which the session store's clock runs
// ahead in a gloved built with the glove_testfaults tag: a restart with a
// skew past the retention window sees cleaned-up sessions leave the store.
const testStoreSkewVar = "GLOVED_TEST_STORE_CLOCK_SKEW"

// testStoreRateVar is how many times faster than the real one the
// session store's clock runs in a gloved built with the glove_testfaults
// tag: the memory test sees the retention window pass every second.
const testStoreRateVar = "GLOVED_TEST_STORE_CLOCK_RATE"

func testStoreNow() func() time.Time {
	skew, err := time.ParseDuration(os.Getenv(testStoreSkewVar))
	if err != nil {
		skew = 0
	}
	rate, err := strconv.Atoi(os.Getenv(testStoreRateVar))
	if err != nil || rate < 1 {
		rate = 1
	}
	if skew == 0 && rate == 1 {
		return nil
	}
	start := time.Now()
	return func() time.Time { return start.Add(skew + time.Since(start)*time.Duration(rate)) }
}

// testGCVar, when set, makes supervisor_status of a gloved built with the
// glove_testfaults tag collect garbage first: the memory test compares
// live heaps, not what the last collection happened to leave.
const testGCVar = "GLOVED_TEST_GC_ON_STATUS"

func testGCBeforeStatus() bool {
	if os.Getenv(testGCVar) == "" {
		return false
	}
	// With a directory in GLOVED_TEST_HEAP_PROFILES, each answer also
	// leaves a heap profile there (heap-N.pprof), for finding what grows.
	if dir := os.Getenv("GLOVED_TEST_HEAP_PROFILES"); dir != "" {
		runtime.GC()
		profiles++
		f, err := os.Create(fmt.Sprintf("%s/heap-%d.pprof", dir, profiles))
		if err == nil {
			if err := pprof.WriteHeapProfile(f); err != nil {
				fmt.Fprintln(os.Stderr, "heap profile:", err)
			}
			f.Close()
		}
	}
	return true
}

var profiles int

// Every allocation is sampled when heap profiles are asked for: the
// memory test looks for a few hundred bytes a session.
func init() {
	if os.Getenv("GLOVED_TEST_HEAP_PROFILES") != "" {
		runtime.MemProfileRate = 1
	}
}

// testUserModeVar, when set, is the user-namespace mode a gloved built
// with the glove_testfaults tag uses, whatever the host allows
// (usermode.Helper: sessions through glove-userns on any host).
const testUserModeVar = "GLOVED_TEST_USERNS_MODE"

func testUserMode() string { return os.Getenv(testUserModeVar) }
