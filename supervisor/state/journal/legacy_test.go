// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures in testdata were written by the two-fdatasync protocol
// (header slots "GLVJRNL1", the header exact), as journals on hosts that
// ran a release before this one hold them: format1.jrnl is records
// payloadFor(1..5); format2.jrnl is compactedBytes (records 1..3
// compacted to "checkpoint" and payloadFor(2), then payloadFor(6) and
// payloadFor(7) appended).

// legacyDir copies a fixture under the journal's name into a fresh
// directory, with the mode Open demands, and returns the directory.
func legacyDir(t *testing.T, fixture string, edit func(b []byte) []byte) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:8]) != legacyMagic || string(b[slotSize:slotSize+8]) != legacyMagic {
		t.Fatalf("fixture %s is not of the legacy format", fixture)
	}
	if edit != nil {
		b = edit(b)
	}
	dir := testDir(t)
	if err := os.WriteFile(filepath.Join(dir, testName), b, 0600); err != nil {
		t.Fatal(err)
	}
	return dir, b
}

// checkUpgraded asserts no slot of the older protocol is left, so a binary
// of that protocol refuses the file (it knows only legacyMagic) rather than
// truncating records past the header. A slot torn by a crash in the
// upgrade's second write is valid for neither and is rewritten by the
// next append.
func checkUpgraded(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, testName))
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for i := range 2 {
		s, ok := decodeSlot(b, i)
		if ok && (s.legacy || string(b[i*slotSize:i*slotSize+8]) != magic) {
			t.Fatalf("slot %d after the upgrade: magic %q", i, b[i*slotSize:i*slotSize+8])
		}
		if ok {
			valid++
		}
	}
	if valid == 0 {
		t.Fatal("no valid slot after the upgrade")
	}
}

func TestLegacyFormat1(t *testing.T) {
	dir, _ := legacyDir(t, "format1.jrnl", nil)
	j, recs, info := mustOpen(t, testOpts(dir))
	checkRecords(t, j, recs, 5)
	if info.Created || info.TornTailBytes != 0 {
		t.Fatalf("open info %+v", info)
	}
	checkUpgraded(t, dir)
	appendRange(t, j, 6, 7)
	j.Close()
	j, recs, _ = mustOpen(t, testOpts(dir))
	defer j.Close()
	checkRecords(t, j, recs, 7)
}

func TestLegacyFormat2(t *testing.T) {
	dir, _ := legacyDir(t, "format2.jrnl", nil)
	check := func(j *Journal, recs []Record, n int) {
		t.Helper()
		want := [][]byte{[]byte("checkpoint"), payloadFor(2), payloadFor(6), payloadFor(7), payloadFor(8)}[:n]
		if len(recs) != n || j.Stats().Base != 3 {
			t.Fatalf("%d records, base %d", len(recs), j.Stats().Base)
		}
		for i := range recs {
			if !bytes.Equal(recs[i].Payload, want[i]) {
				t.Fatalf("record %d payload %q, want %q", i+4, recs[i].Payload, want[i])
			}
		}
		if head := refChainFrom(t, j.id, 3, chainHead(j.id, j.kind, 3), recs); head != j.Head() {
			t.Fatalf("head %x, recomputed %x", j.Head(), head)
		}
	}
	j, recs, _ := mustOpen(t, testOpts(dir))
	check(j, recs, 4)
	checkUpgraded(t, dir)
	if _, err := j.Append(payloadFor(8)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, recs, _ = mustOpen(t, testOpts(dir))
	defer j.Close()
	check(j, recs, 5)
}

// TestLegacyTails: what a crash of the older protocol leaves past its
// header. A partial record is a torn tail; a whole one (the older
// protocol's crash between the record's fdatasync and the header's) is
// committed, as a whole record past the header is in this protocol:
// its append never returned, so either outcome is one its caller allows.
func TestLegacyTails(t *testing.T) {
	next := func(b []byte) []byte {
		s := curSlot(b)
		p := payloadFor(6)
		h := recordHash(s.id, 6, &s.head, p)
		return encodeRecord(6, &s.head, p, &h)
	}
	for _, c := range []struct {
		name    string
		edit    func(b []byte) []byte
		records int
		torn    int64
	}{
		{"half a record", func(b []byte) []byte { r := next(b); return append(b, r[:len(r)/2]...) }, 5, RecordSize(len(payloadFor(6))) / 2},
		{"a whole record", func(b []byte) []byte { return append(b, next(b)...) }, 6, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := legacyDir(t, "format1.jrnl", c.edit)
			j, recs, info := mustOpen(t, testOpts(dir))
			defer j.Close()
			checkRecords(t, j, recs, c.records)
			if info.TornTailBytes != c.torn {
				t.Fatalf("torn tail %d, want %d", info.TornTailBytes, c.torn)
			}
			checkUpgraded(t, dir)
			appendRange(t, j, c.records+1, c.records+1)
		})
	}
}

// TestLegacyCorruptUntouched: a legacy file Open refuses is neither
// upgraded nor changed.
func TestLegacyCorruptUntouched(t *testing.T) {
	dir, b := legacyDir(t, "format1.jrnl", func(b []byte) []byte {
		b[dataStart+recHeaderLen+3] ^= 1
		return b
	})
	_, _, _, err := Open(testOpts(dir))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 1: hash mismatch") {
		t.Fatalf("open: %v, want record 1's hash mismatch", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, testName)); !bytes.Equal(after, b) {
		t.Fatal("rejected open changed the file")
	}
}

// TestUpgradeCrash kills the upgrade at each point of each of its two
// slot writes: the reopen finds every record, finishes the upgrade and
// goes on.
func TestUpgradeCrash(t *testing.T) {
	for _, point := range closePoints {
		for _, n := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/slot=%d", point, n), func(t *testing.T) {
				t.Parallel()
				dir, _ := legacyDir(t, "format1.jrnl", nil)
				runCrashChild(t, "^TestUpgradeCrashChild$", dir, point, n)
				j, recs, info, err := Open(testOpts(dir))
				if err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				defer j.Close()
				checkRecords(t, j, recs, 5)
				if info.TornTailBytes != 0 {
					t.Fatalf("torn tail %d", info.TornTailBytes)
				}
				checkUpgraded(t, dir)
				appendRange(t, j, 6, 6)
			})
		}
	}
}

// TestUpgradeCrashChild is the child side of TestUpgradeCrash: it opens
// the legacy journal and SIGKILLs itself the k-th time the upgrade
// reaches the named point.
func TestUpgradeCrashChild(t *testing.T) {
	dir := os.Getenv("GLOVE_JOURNAL_CRASH_DIR")
	point := os.Getenv("GLOVE_JOURNAL_CRASH_POINT")
	if dir == "" || !strings.HasPrefix(point, "checkpoint-") {
		t.Skip("child process of TestUpgradeCrash")
	}
	var k int
	fmt.Sscan(os.Getenv("GLOVE_JOURNAL_CRASH_K"), &k)
	crashAt(point, k)
	defer func() { faultHook = nil }()
	Open(testOpts(dir))
	t.Fatalf("open finished without reaching %s %d times", point, k)
}
