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

const testName = "test.jrnl"

// testDir is a fresh private directory, as gloved's state directory is.
func testDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(d, 0700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0700); err != nil {
		t.Fatal(err)
	}
	return d
}

func testOpts(dir string) Options { return Options{Dir: dir, Name: testName, Kind: "sessions"} }

// payloadFor is record i's payload in most tests: distinct and of varying
// size, so a record read back from the wrong place cannot pass.
func payloadFor(i int) []byte {
	return []byte(strings.Repeat(fmt.Sprintf("payload %d;", i), 1+i%7))
}

func mustOpen(t testing.TB, o Options) (*Journal, []Record, OpenInfo) {
	t.Helper()
	j, recs, info, err := Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return j, recs, info
}

func appendRange(t testing.TB, j *Journal, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		r, err := j.Append(payloadFor(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if r.Seq != uint64(i) || !bytes.Equal(r.Payload, payloadFor(i)) {
			t.Fatalf("append %d returned seq %d payload %q", i, r.Seq, r.Payload)
		}
	}
}

// checkRecords asserts recs are exactly records 1..n of payloadFor and that
// their hashes form the chain the format documents, recomputed here
// independently of the package's own hashing.
func checkRecords(t testing.TB, j *Journal, recs []Record, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("got %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if !bytes.Equal(r.Payload, payloadFor(i+1)) {
			t.Fatalf("record %d payload %q, want %q", i+1, r.Payload, payloadFor(i+1))
		}
	}
	if head := refChain(t, j.id, j.kind, recs); head != j.Head() {
		t.Fatalf("head %x, recomputed %x", j.Head(), head)
	}
}

// refChain recomputes the hash chain from the documented format and returns
// the head.
func refChain(t testing.TB, id [16]byte, kind string, recs []Record) [32]byte {
	t.Helper()
	var tag [8]byte
	copy(tag[:], kind)
	return refChainFrom(t, id, 0, sha256.Sum256(slices("glove-journal-genesis-v1", id[:], tag[:])), recs)
}

// refChainFrom recomputes a chain whose first record is base+1 and
// chains to prev (a compacted journal's base head).
func refChainFrom(t testing.TB, id [16]byte, base uint64, prev [32]byte, recs []Record) [32]byte {
	t.Helper()
	for i, r := range recs {
		if r.Seq != base+uint64(i+1) {
			t.Fatalf("record %d has seq %d", base+uint64(i+1), r.Seq)
		}
		var seq [8]byte
		binary.LittleEndian.PutUint64(seq[:], r.Seq)
		h := sha256.Sum256(slices("glove-journal-record-v1", id[:], seq[:], prev[:], r.Payload))
		if h != r.Hash {
			t.Fatalf("record %d hash %x, recomputed %x", i+1, r.Hash, h)
		}
		prev = h
	}
	return prev
}

func slices(domain string, parts ...[]byte) []byte {
	b := []byte(domain)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	dir := testDir(t)
	o := testOpts(dir)
	j, recs, info := mustOpen(t, o)
	if !info.Created || len(recs) != 0 || j.Count() != 0 || j.Size() != dataStart {
		t.Fatalf("new journal: created %v, %d records, count %d, size %d", info.Created, len(recs), j.Count(), j.Size())
	}
	const n = 25
	appendRange(t, j, 1, n)
	wantSize := int64(dataStart)
	for i := 1; i <= n; i++ {
		wantSize += RecordSize(len(payloadFor(i)))
	}
	head := j.Head()
	if j.Count() != n || j.Size() != wantSize {
		t.Fatalf("count %d size %d, want %d %d", j.Count(), j.Size(), n, wantSize)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, testName))
	if err != nil || st.Size() != wantSize || st.Mode().Perm() != 0600 {
		t.Fatalf("file after close: %v %v", st, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the journal", len(entries))
	}

	j, recs, info = mustOpen(t, o)
	if info.Created || info.TornTailBytes != 0 {
		t.Fatalf("reopen info %+v", info)
	}
	checkRecords(t, j, recs, n)
	if j.Head() != head || j.Count() != n || j.Size() != wantSize {
		t.Fatalf("reopened: head %x count %d size %d, want %x %d %d", j.Head(), j.Count(), j.Size(), head, n, wantSize)
	}
	appendRange(t, j, n+1, n+3)
	j.Close()
	j, recs, _ = mustOpen(t, o)
	checkRecords(t, j, recs, n+3)
	j.Close()

	o.Kind = "receipts"
	if _, _, _, err := Open(o); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `kind "sessions" (wrong kind)`) {
		t.Fatalf("open as another kind: %v", err)
	}
}

func TestLockedSameProcess(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	// flock locks belong to the open file description, so a second open()
	// in this same process must conflict.
	_, _, _, err := Open(testOpts(dir))
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "in use by another writer") {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, _, _ = mustOpen(t, testOpts(dir))
	j.Close()
}

func TestLockedOtherProcess(t *testing.T) {
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	if got := runLockChild(t, dir); got != "locked" {
		t.Fatalf("child open while held: %s, want locked", got)
	}
	j.Close()
	if got := runLockChild(t, dir); got != "opened" {
		t.Fatalf("child open after close: %s, want opened", got)
	}
}

func runLockChild(t *testing.T, dir string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GLOVE_JOURNAL_LOCK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lock child: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "result=")
	if !ok {
		t.Fatalf("lock child printed no result:\n%s", out)
	}
	return strings.Fields(after)[0]
}

// TestLockChild is the child side of TestLockedOtherProcess.
func TestLockChild(t *testing.T) {
	dir := os.Getenv("GLOVE_JOURNAL_LOCK_DIR")
	if dir == "" {
		t.Skip("child process of TestLockedOtherProcess")
	}
	j, _, _, err := Open(testOpts(dir))
	switch {
	case errors.Is(err, ErrLocked):
		fmt.Println("result=locked")
	case err == nil:
		fmt.Println("result=opened")
		j.Close()
	default:
		t.Fatal(err)
	}
}

func TestOptionsRejected(t *testing.T) {
	dir := testDir(t)
	for _, o := range []Options{
		{Dir: dir, Name: "a/b", Kind: "sessions"},
		{Dir: dir, Name: "..", Kind: "sessions"},
		{Dir: dir, Name: "", Kind: "sessions"},
		{Dir: dir, Name: "x", Kind: ""},
		{Dir: dir, Name: "x", Kind: "Sessions"},
		{Dir: dir, Name: "x", Kind: "sessions1"},
		{Dir: dir, Name: "x", Kind: "a b"},
		{Dir: "", Name: "x", Kind: "sessions"},
		{Dir: dir, Name: "x", Kind: "sessions", MaxBytes: 100},
		{Dir: dir, Name: "x", Kind: "sessions", MaxRecords: -1},
	} {
		if _, _, _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("rejected options left %d files", len(entries))
	}
}

func TestUnsafeFile(t *testing.T) {
	makeJournal := func(t *testing.T, dir string) {
		j, _, _ := mustOpen(t, testOpts(dir))
		appendRange(t, j, 1, 3)
		j.Close()
	}
	root := os.Geteuid() == 0
	cases := []struct {
		name     string
		rootOnly bool
		setup    func(t *testing.T, dir string) Options
		want     string
	}{
		{"dir mode 0755", false, func(t *testing.T, dir string) Options {
			os.Chmod(dir, 0755)
			return testOpts(dir)
		}, "mode 0755, want 0700"},
		{"dir is a symlink", false, func(t *testing.T, dir string) Options {
			link := dir + "-link"
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return testOpts(link)
		}, "open dir"},
		{"dir owned by another uid", true, func(t *testing.T, dir string) Options {
			os.Chown(dir, 12345, 12345)
			return testOpts(dir)
		}, "owned by uid 12345"},
		{"file mode 0644", false, func(t *testing.T, dir string) Options {
			makeJournal(t, dir)
			os.Chmod(filepath.Join(dir, testName), 0644)
			return testOpts(dir)
		}, "mode 0644, want 0600"},
		{"file is a symlink", false, func(t *testing.T, dir string) Options {
			o := testOpts(dir)
			o.Name = "real.jrnl"
			j, _, _ := mustOpen(t, o)
			j.Close()
			os.Symlink("real.jrnl", filepath.Join(dir, testName))
			return testOpts(dir)
		}, "symbolic links"},
		{"two hard links", false, func(t *testing.T, dir string) Options {
			makeJournal(t, dir)
			os.Link(filepath.Join(dir, testName), filepath.Join(dir, "alias"))
			return testOpts(dir)
		}, "2 hard links, want 1"},
		{"file is a directory", false, func(t *testing.T, dir string) Options {
			os.Mkdir(filepath.Join(dir, testName), 0700)
			return testOpts(dir)
		}, "is a directory"},
		{"file is a fifo", false, func(t *testing.T, dir string) Options {
			unix.Mkfifo(filepath.Join(dir, testName), 0600)
			return testOpts(dir)
		}, "file type 010000, want 0100000"},
		{"file owned by another uid", true, func(t *testing.T, dir string) Options {
			makeJournal(t, dir)
			os.Chown(filepath.Join(dir, testName), 12345, 12345)
			return testOpts(dir)
		}, "owned by uid 12345"},
		{"file over MaxBytes", false, func(t *testing.T, dir string) Options {
			makeJournal(t, dir)
			o := testOpts(dir)
			o.MaxBytes = dataStart + 10
			return o
		}, "over the 8202-byte bound"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.rootOnly && !root {
				t.Skip("needs root to chown")
			}
			dir := testDir(t)
			o := c.setup(t, dir)
			j, _, _, err := Open(o)
			if err == nil {
				j.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrUnsafeFile naming %q", err, c.want)
			}
		})
	}
}

func TestFull(t *testing.T) {
	dir := testDir(t)
	o := testOpts(dir)
	o.MaxRecords, o.MaxRecordBytes = 3, 100
	o.MaxBytes = dataStart + 2*RecordSize(100) + RecordSize(50)
	j, _, _ := mustOpen(t, o)
	defer j.Close()
	if r, b := j.Remaining(); r != 3 || b != o.MaxBytes-dataStart {
		t.Fatalf("remaining %d %d", r, b)
	}
	if _, err := j.Append(make([]byte, 101)); !errors.Is(err, ErrFull) {
		t.Fatalf("oversized payload: %v, want ErrFull", err)
	}
	// ErrFull writes nothing and does not poison.
	for i := 0; i < 2; i++ {
		if _, err := j.Append(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if r, b := j.Remaining(); r != 1 || b != RecordSize(50) {
		t.Fatalf("remaining %d %d", r, b)
	}
	if _, err := j.Append(make([]byte, 51)); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "byte bound") {
		t.Fatalf("over MaxBytes: %v, want ErrFull", err)
	}
	if _, err := j.Append(make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(nil); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "3-record bound") {
		t.Fatalf("over MaxRecords: %v, want ErrFull", err)
	}
	if r, b := j.Remaining(); r != 0 || b != 0 {
		t.Fatalf("remaining %d %d", r, b)
	}
	j.Close()
	if _, err := j.Append(nil); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

// headerAfter is the last sequence number the header slot in force
// commits after appends 1..n to a new journal, as doc.go describes it:
// an append writes the older slot, committing the records before its
// own, when its record would be the slotLag-th past the header.
// Worked out here from that description, not from Append's rule.
func headerAfter(n int) uint64 {
	var hdr uint64
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if seq-hdr >= slotLag {
			hdr = seq - 1
		}
	}
	return hdr
}

// writesSlotAt says whether append k to a new journal writes a slot.
func writesSlotAt(k int) bool { return k > 0 && headerAfter(k) != headerAfter(k-1) }

func TestPoison(t *testing.T) {
	// record-before: the record's write fails, nothing of it is in the
	// file; in an append without a slot write and in one with.
	// record-written: the record is whole in the file and the header
	// write that follows fails (so the append is one that writes a
	// slot: the slotLag-th past a header at the empty file); with one
	// commit per append the whole record is committed (a failed
	// append's outcome is for a reopen to say), so the reopen finds it
	// and no torn tail. (An append without a slot write has no write
	// after the record's to fail here: its fdatasync on the read-only
	// descriptor succeeds, as it should.)
	for _, c := range []struct {
		point  string
		before int // records appended before the failing one
	}{
		{"record-before", 1},
		{"record-before", slotLag - 1},
		{"record-written", slotLag - 1},
	} {
		point := c.point
		t.Run(fmt.Sprintf("%s/append=%d", point, c.before+1), func(t *testing.T) {
			if point == "record-written" && !writesSlotAt(c.before+1) {
				t.Fatalf("append %d writes no header slot", c.before+1)
			}
			dir := testDir(t)
			j, _, _ := mustOpen(t, testOpts(dir))
			defer j.Close()
			appendRange(t, j, 1, c.before)
			ro, err := unix.Open(filepath.Join(dir, testName), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(ro)
			// Put a read-only descriptor under the writer's descriptor
			// number: every write from here fails, as after an I/O error.
			faultHook = func(p string) {
				if p == point {
					if err := unix.Dup3(ro, j.fd, unix.O_CLOEXEC); err != nil {
						t.Error(err)
					}
				}
			}
			_, err1 := j.Append(payloadFor(c.before + 1))
			faultHook = nil
			if !errors.Is(err1, unix.EBADF) {
				t.Fatalf("append with a broken descriptor: %v, want EBADF", err1)
			}
			if _, err2 := j.Append(payloadFor(c.before + 1)); err2 != err1 {
				t.Fatalf("append after a failed append: %v, want the first error %v", err2, err1)
			}
			if j.Count() != c.before {
				t.Fatalf("count %d after failed append", j.Count())
			}
			j.Close()
			j2, recs, info := mustOpen(t, testOpts(dir))
			defer j2.Close()
			want := c.before
			if point == "record-written" {
				want = c.before + 1
			}
			checkRecords(t, j2, recs, want)
			if info.TornTailBytes != 0 {
				t.Fatalf("torn tail %d, want 0", info.TornTailBytes)
			}
			appendRange(t, j2, want+1, c.before+2)
		})
	}
}

func TestTornTailAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		tail func(next []byte) []byte
	}{
		{"half record", func(next []byte) []byte { return next[:len(next)/2] }},
		{"whole uncommitted record", func(next []byte) []byte { return next }},
		{"record header only", func(next []byte) []byte { return next[:recHeaderLen] }},
		{"a few bytes", func(next []byte) []byte { return next[:3] }},
		{"zero block", func(next []byte) []byte { return make([]byte, len(next)-5) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := testDir(t)
			j, _, _ := mustOpen(t, testOpts(dir))
			appendRange(t, j, 1, 2)
			h := j.Head()
			next := encodeRecord(3, &h, payloadFor(3), &[32]byte{1})
			j.Close()
			tail := c.tail(next)
			f, _ := os.OpenFile(filepath.Join(dir, testName), os.O_WRONLY|os.O_APPEND, 0)
			f.Write(tail)
			f.Close()
			j, recs, info := mustOpen(t, testOpts(dir))
			checkRecords(t, j, recs, 2)
			if info.TornTailBytes != int64(len(tail)) {
				t.Fatalf("torn tail %d, want %d", info.TornTailBytes, len(tail))
			}
			appendRange(t, j, 3, 3)
			j.Close()
			j, recs, info = mustOpen(t, testOpts(dir))
			defer j.Close()
			checkRecords(t, j, recs, 3)
			if info.TornTailBytes != 0 {
				t.Fatalf("second reopen torn tail %d", info.TornTailBytes)
			}
		})
	}
}

// crashPoints are every fault point of Append, in order.
var crashPoints = []string{"record-before", "record-partial", "record-written",
	"header-partial", "header-written", "record-synced"}

// crashAppends are the appends (to a new journal) TestCrash kills a
// writer in at point: early ones, and those around the first two that
// write a header slot, so that the record's points are met in appends
// with and without a slot write. The header's points are only in
// appends that write one.
func crashAppends(point string) []int {
	var ks []int
	for _, k := range []int{1, 2, 5, slotLag - 1, slotLag, slotLag + 1, 2*slotLag - 1} {
		if !strings.HasPrefix(point, "header-") || writesSlotAt(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func TestCrash(t *testing.T) {
	if !writesSlotAt(slotLag) || !writesSlotAt(2*slotLag-1) || writesSlotAt(slotLag+1) {
		t.Fatal("crashAppends: the appends chosen do not write header slots where expected")
	}
	for _, point := range crashPoints {
		for _, k := range crashAppends(point) {
			t.Run(fmt.Sprintf("%s/k=%d", point, k), func(t *testing.T) {
				t.Parallel()
				dir := testDir(t)
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), "GLOVE_JOURNAL_CRASH_DIR="+dir,
					"GLOVE_JOURNAL_CRASH_POINT="+point, fmt.Sprintf("GLOVE_JOURNAL_CRASH_K=%d", k))
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
					t.Fatalf("reopen after crash: %v", err)
				}
				if len(recs) != k-1 && len(recs) != k {
					t.Fatalf("%d records after a crash in append %d", len(recs), k)
				}
				// The kill leaves the page cache intact, so each point
				// has one exact outcome: once the record is whole in the
				// file it is committed, whatever became of the header
				// slot written after it (a torn slot leaves the other).
				want, torn := k-1, int64(0)
				size := RecordSize(len(payloadFor(k)))
				switch point {
				case "record-partial":
					torn = size / 2
				case "record-written", "header-partial", "header-written", "record-synced":
					want = k
				}
				checkRecords(t, j, recs, want)
				if info.TornTailBytes != torn {
					t.Fatalf("torn tail %d, want %d", info.TornTailBytes, torn)
				}
				// Whatever the crash left, the reopened file holds
				// fewer than slotLag records past its header, so the
				// next append's slot keeps the bound even if it tears.
				b, err := os.ReadFile(filepath.Join(dir, testName))
				if err != nil {
					t.Fatal(err)
				}
				if s := curSlot(b); uint64(want)-s.count >= slotLag {
					t.Fatalf("reopened file: header commits %d of %d records", s.count, want)
				}
				appendRange(t, j, want+1, want+1)
				j.Close()
				j, recs, info = mustOpen(t, testOpts(dir))
				defer j.Close()
				checkRecords(t, j, recs, want+1)
				if info.TornTailBytes != 0 {
					t.Fatalf("second reopen torn tail %d", info.TornTailBytes)
				}
			})
		}
	}
}

// TestCrashChild is the child side of TestCrash: it appends records 1..k
// and SIGKILLs itself at the named point of append k.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("GLOVE_JOURNAL_CRASH_DIR")
	if dir == "" {
		t.Skip("child process of TestCrash")
	}
	point := os.Getenv("GLOVE_JOURNAL_CRASH_POINT")
	var k int
	fmt.Sscan(os.Getenv("GLOVE_JOURNAL_CRASH_K"), &k)
	j, _, _ := mustOpen(t, testOpts(dir))
	n := 0
	faultHook = func(p string) {
		if p == point && n == k {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour) // never return into Append
		}
	}
	defer func() { faultHook = nil }()
	for n = 1; n <= k; n++ {
		if _, err := j.Append(payloadFor(n)); err != nil {
			t.Fatalf("append %d: %v", n, err)
		}
	}
	t.Fatalf("append %d finished without reaching %s", k, point)
}

// TestReopenWhileForking closes and reopens while another goroutine keeps
// starting processes. Each child shares the journal's open file description
// from fork until exec, so without Open's brief retry a reopen right after
// Close is spuriously refused with ErrLocked.
func TestReopenWhileForking(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := testDir(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Any child will do: it holds the descriptors from fork
			// until its execve closes them.
			_ = exec.Command(self, "-test.run=^$").Run()
		}
	}()
	defer func() { close(stop); <-done }()
	for i := range 500 {
		j, _, _, err := Open(testOpts(dir))
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		j.Close()
	}
}
