// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// carryFor is the i-th record a compaction carries over in these tests.
func carryFor(i int) []byte { return []byte(fmt.Sprintf("carried %d;", i)) }

func carry(n int) [][]byte {
	c := make([][]byte, n)
	for i := range c {
		c[i] = carryFor(i + 1)
	}
	return c
}

// checkCompacted asserts recs are the carried records 1..n at sequence
// numbers base+1.. and that they chain to baseHead, recomputed from the
// documented format.
func checkCompacted(t testing.TB, j *Journal, recs []Record, base uint64, baseHead [32]byte, n int) {
	t.Helper()
	if len(recs) < n {
		t.Fatalf("got %d records, want at least %d", len(recs), n)
	}
	for i := range n {
		if !bytes.Equal(recs[i].Payload, carryFor(i+1)) {
			t.Fatalf("record %d payload %q, want %q", base+uint64(i)+1, recs[i].Payload, carryFor(i+1))
		}
	}
	if head := refChainFrom(t, j.id, base, baseHead, recs); head != j.Head() {
		t.Fatalf("head %x, recomputed %x", j.Head(), head)
	}
}

func TestCompact(t *testing.T) {
	dir := testDir(t)
	o := testOpts(dir)
	o.MaxRecords = 8
	j, _, _ := mustOpen(t, o)
	defer j.Close()
	base := uint64(0)
	// Three generations, each filling the 8-record bound: compaction is
	// what lets the journal go on past it.
	for gen := range 3 {
		for i := j.Count(); i < 8; i++ {
			if _, err := j.Append(payloadFor(i)); err != nil {
				t.Fatalf("generation %d: append: %v", gen, err)
			}
		}
		if _, err := j.Append(payloadFor(9)); !errors.Is(err, ErrFull) {
			t.Fatalf("generation %d: append past the bound: %v, want ErrFull", gen, err)
		}
		base = j.Seq()
		oldHead := j.Head()
		recs, err := j.Compact(carry(3), 4096)
		if err != nil {
			t.Fatalf("generation %d: compact: %v", gen, err)
		}
		if recs[0].Seq != base+1 {
			t.Fatalf("generation %d: first carried record is %d, want %d", gen, recs[0].Seq, base+1)
		}
		checkCompacted(t, j, recs, base, oldHead, 3)
		if st := j.Stats(); st.Base != base || st.Records != 3 || st.Seq != base+3 {
			t.Fatalf("generation %d: stats %+v", gen, st)
		}
		// Reopened, the file says the same, and the carried records
		// still chain to the old head.
		j.Close()
		var info OpenInfo
		j, recs, info = mustOpen(t, o)
		checkCompacted(t, j, recs, base, oldHead, 3)
		if info.TornTailBytes != 0 || info.StaleTemps != 0 {
			t.Fatalf("generation %d: reopen: %+v", gen, info)
		}
	}
	// Each generation ended at 8 records in the file.
	if base != 3*8 {
		t.Fatalf("chain reached %d, want 24", base)
	}
}

func TestCompactRefused(t *testing.T) {
	dir := testDir(t)
	o := testOpts(dir)
	o.MaxRecords, o.MaxRecordBytes, o.MaxBytes = 4, 64, dataStart+4*RecordSize(64)
	j, _, _ := mustOpen(t, o)
	defer j.Close()
	appendRange(t, j, 1, 2)
	for _, c := range []struct {
		name  string
		carry [][]byte
		full  bool
	}{
		{"nothing carried", nil, false},
		{"too many records", carry(5), true},
		{"a record over the record bound", [][]byte{bytes.Repeat([]byte{'x'}, 65)}, true},
	} {
		_, err := j.Compact(c.carry, 0)
		if err == nil || errors.Is(err, ErrFull) != c.full {
			t.Fatalf("%s: %v (ErrFull %v)", c.name, err, c.full)
		}
	}
	// Refusals change nothing.
	appendRange(t, j, 3, 3)
	j.Close()
	j2, recs, info := mustOpen(t, o)
	defer j2.Close()
	checkRecords(t, j2, recs, 3)
	if info.StaleTemps != 0 {
		t.Fatalf("stale temporary files after refused compactions: %d", info.StaleTemps)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("directory holds %v", names)
	}
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// compactPoints are every fault point of Compact, in order.
var compactPoints = []string{"compact-begin", "compact-partial", "compact-written", "compact-synced",
	"compact-renamed", "compact-dir-synced"}

// TestCompactCrash kills a writer at every point of a compaction: the
// journal reopens as the old generation or as the new one, never as
// anything else, and goes on.
func TestCompactCrash(t *testing.T) {
	for _, point := range compactPoints {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := testDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCompactCrashChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "GLOVE_JOURNAL_CRASH_DIR="+dir, "GLOVE_JOURNAL_CRASH_POINT="+point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("child was not killed (err %v):\n%s", err, out)
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child ended by %v, want SIGKILL:\n%s", ee, out)
			}
			j, recs, info, err := Open(testOpts(dir))
			if err != nil {
				t.Fatalf("reopen after a crash at %s: %v", point, err)
			}
			defer j.Close()
			// The kill leaves the page cache intact, so each point has
			// one exact outcome: before the rename the old file, from it
			// on the new one.
			renamed := point == "compact-renamed" || point == "compact-dir-synced"
			stale := 1
			switch point {
			case "compact-begin":
				stale = 0
			case "compact-renamed", "compact-dir-synced":
				stale = 0
			}
			if info.StaleTemps != stale {
				t.Fatalf("removed %d stale temporary files, want %d", info.StaleTemps, stale)
			}
			if renamed {
				// The old head is the chain of records 1..5.
				checkCompacted(t, j, recs, 5, chainHead(j.id, j.kind, 5), 2)
			} else {
				checkRecords(t, j, recs, 5)
			}
			if names := dirNames(t, dir); len(names) != 1 {
				t.Fatalf("directory holds %v after the reopen", names)
			}
			if _, err := j.Append(payloadFor(9)); err != nil {
				t.Fatalf("append after recovery: %v", err)
			}
		})
	}
}

// chainHead is the hash of record n of a journal of payloadFor(1..n),
// recomputed from the documented format.
func chainHead(id [16]byte, kind string, n int) [32]byte {
	var tag [8]byte
	copy(tag[:], kind)
	prev := sha256.Sum256(slices("glove-journal-genesis-v1", id[:], tag[:]))
	for i := 1; i <= n; i++ {
		var seq [8]byte
		binary.LittleEndian.PutUint64(seq[:], uint64(i))
		prev = sha256.Sum256(slices("glove-journal-record-v1", id[:], seq[:], prev[:], payloadFor(i)))
	}
	return prev
}

// TestCompactCrashChild is the child side of TestCompactCrash: it appends
// records 1..5, then compacts to two records and SIGKILLs itself at the
// named point.
func TestCompactCrashChild(t *testing.T) {
	dir := os.Getenv("GLOVE_JOURNAL_CRASH_DIR")
	point := os.Getenv("GLOVE_JOURNAL_CRASH_POINT")
	if dir == "" || !strings.HasPrefix(point, "compact-") {
		t.Skip("child process of TestCompactCrash")
	}
	j, _, _ := mustOpen(t, testOpts(dir))
	appendRange(t, j, 1, 5)
	faultHook = func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour) // never return into Compact
		}
	}
	defer func() { faultHook = nil }()
	if _, err := j.Compact(carry(2), 0); err != nil {
		t.Fatalf("compact: %v", err)
	}
	t.Fatalf("compact finished without reaching %s", point)
}

// TestHealAfterNoSpace: a record write that fails for lack of space
// commits nothing, and once there is room again the next append succeeds
// without a reopen.
func TestHealAfterNoSpace(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	defer j.Close()
	appendRange(t, j, 1, 2)
	full, err := unix.Open("/dev/full", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no /dev/full to stand in for a full disk: %v", err)
	}
	defer unix.Close(full)
	saved, err := unix.Dup(j.fd)
	if err != nil {
		t.Fatal(err)
	}
	// Writes to /dev/full fail with ENOSPC: the disk is full from the
	// record's first byte.
	faultHook = func(p string) {
		if p == "record-before" {
			if err := unix.Dup3(full, j.fd, unix.O_CLOEXEC); err != nil {
				t.Error(err)
			}
		}
	}
	_, err = j.Append(payloadFor(3))
	faultHook = nil
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
	}
	if st := j.Stats(); st.Err == nil || st.Seq != 2 {
		t.Fatalf("stats after the failure: %+v", st)
	}
	// Space is back.
	if err := unix.Dup3(saved, j.fd, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	appendRange(t, j, 3, 4)
	if st := j.Stats(); st.Err != nil {
		t.Fatalf("still poisoned: %v", st.Err)
	}
	j.Close()
	// saved shares the writer's open file description, and its lock.
	if err := unix.Close(saved); err != nil {
		t.Fatal(err)
	}
	j2, recs, info := mustOpen(t, testOpts(dir))
	defer j2.Close()
	checkRecords(t, j2, recs, 4)
	if info.TornTailBytes != 0 {
		t.Fatalf("torn tail %d", info.TornTailBytes)
	}
}

// TestPreallocate: preallocated room is on disk, changes neither the
// size nor what Open reads, and appends use it.
func TestPreallocate(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	defer j.Close()
	appendRange(t, j, 1, 2)
	path := filepath.Join(dir, testName)
	before := fileStat(t, path)
	if err := j.Preallocate(1 << 20); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	if st.NoPrealloc {
		t.Skip("the test directory's file system does not preallocate")
	}
	after := fileStat(t, path)
	if after.Size != before.Size || after.Blocks*512 < before.Size+1<<20 {
		t.Fatalf("preallocated: size %d→%d, %d blocks of 512", before.Size, after.Size, after.Blocks)
	}
	appendRange(t, j, 3, 5)
	if st := j.Stats(); st.Preallocated >= 1<<20 || st.Preallocated <= 0 {
		t.Fatalf("preallocated %d after three appends", st.Preallocated)
	}
	j.Close()
	j2, recs, info := mustOpen(t, testOpts(dir))
	defer j2.Close()
	checkRecords(t, j2, recs, 5)
	if info.TornTailBytes != 0 {
		t.Fatalf("torn tail %d", info.TornTailBytes)
	}
}

func fileStat(t testing.TB, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStaleTempLockedKept: a temporary file some process holds locked
// (a creation or compaction in progress) is not removed.
func TestStaleTempLockedKept(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	j.Close()
	held := filepath.Join(dir, "."+testName+".compact-0000000000000001")
	stale := filepath.Join(dir, "."+testName+".new-0000000000000002")
	for _, p := range []string{held, stale} {
		if err := os.WriteFile(p, []byte("x"), 0600); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(held, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	j, _, info := mustOpen(t, testOpts(dir))
	defer j.Close()
	if info.StaleTemps != 1 {
		t.Fatalf("removed %d, want 1", info.StaleTemps)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the locked temporary file: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale temporary file: %v", err)
	}
}

// TestPeek: the header figures, without the lock, match the writer's.
func TestPeek(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	defer j.Close()
	appendRange(t, j, 1, 4)
	if _, err := j.Compact(carry(2), 0); err != nil {
		t.Fatal(err)
	}
	appendRange2 := func(n int) {
		for range n {
			if _, err := j.Append(payloadFor(1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendRange2(3)
	got, err := Peek(dir, testName, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	want := j.Stats()
	if got.Seq != want.Seq || got.Base != want.Base || got.Records != want.Records || got.Bytes != want.Bytes || got.Seq != 9 || got.Base != 4 {
		t.Fatalf("peek %+v, writer %+v", got, want)
	}
	if _, err := Peek(dir, testName, "receipts"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("peek as another kind: %v", err)
	}
}
