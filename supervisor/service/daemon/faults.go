//go:build !glove_testfaults

package daemon

// faultHook is nil in every production build: nothing can make gloved
// stop on purpose in the middle of a start. The recovery tests build
// gloved with the glove_testfaults tag (faults_testing.go).
func faultHook() func(string) { return nil }

// testJournalRecords is 0 in every production build: the journals keep
// their own bounds (faults_testing.go shrinks them for the compaction
// crash test).
func testJournalRecords() int { return 0 }
