// SPDX-License-Identifier: Apache-2.0

//go:build !glove_testfaults

package daemon

import "time"

// faultHook is nil in every production build: nothing can make gloved
// stop on purpose in the middle of a start. The recovery tests build
// gloved with the glove_testfaults tag (faults_testing.go).
func faultHook() func(string) { return nil }

// testJournalRecords is 0 in every production build: the journals keep
// their own bounds (faults_testing.go shrinks them for the compaction
// crash test).
func testJournalRecords() int { return 0 }

// testStoreNow is nil in every production build: the session store reads
// the real clock (faults_testing.go skews it, so that a test sees the
// retention window pass).
func testStoreNow() func() time.Time { return nil }

// testGCBeforeStatus is false in every production build: supervisor_status
// reads the heap as the last collection left it (faults_testing.go
// collects first, so that the memory test compares live heaps).
func testGCBeforeStatus() bool { return false }

// testUserMode is "" in every production build: the user-namespace mode
// is the host's (package usermode). faults_testing.go lets a test force
// the glove-userns mode on a host that does not need it, to run sessions
// through glove-userns where the lane's hardened cell is not at hand.
func testUserMode() string { return "" }
