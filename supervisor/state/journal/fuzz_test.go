// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// compactedBytes is a journal of 3 records compacted to two carried
// records, with two more appended.
func compactedBytes(t testing.TB) []byte {
	t.Helper()
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	appendRange(t, j, 1, 3)
	if _, err := j.Compact([][]byte{[]byte("checkpoint"), payloadFor(2)}, 0); err != nil {
		t.Fatal(err)
	}
	for i := 6; i <= 7; i++ {
		if _, err := j.Append(payloadFor(i)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	b, err := os.ReadFile(filepath.Join(dir, testName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// journalBytes builds a journal of n records with the real writer and
// returns the file.
func journalBytes(t testing.TB, n int) []byte {
	t.Helper()
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	appendRange(t, j, 1, n)
	j.Close()
	b, err := os.ReadFile(filepath.Join(dir, testName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openBytes is journalBytes read while the writer still holds the
// journal open: no Close has brought the header level with the records.
func openBytes(t testing.TB, n int) []byte {
	t.Helper()
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	defer j.Close()
	appendRange(t, j, 1, n)
	b, err := os.ReadFile(filepath.Join(dir, testName))
	if err != nil {
		t.Fatal(err)
	}
	if s := curSlot(b); s.count != headerAfter(n) {
		t.Fatalf("open journal of %d records: header commits %d, want %d", n, s.count, headerAfter(n))
	}
	return b
}

// The fuzzer works on a compact form of the file: each header slot's 136
// field bytes and 32 checksum bytes without the zero padding between them,
// then the record area. A mutated padding byte can only ever produce a
// checksum failure, which mutating the fields reaches as well, and leaving
// out 7,856 bytes of zeros per input keeps the fuzzer's minimizer (which
// is quadratic in the input length) from spending the whole run on one
// input.
const (
	slotFieldLen = 136
	compactSlot  = slotFieldLen + sha256.Size
)

func compact(file []byte) []byte {
	var c []byte
	for i := range 2 {
		s := file[i*slotSize : (i+1)*slotSize]
		c = append(c, s[:slotFieldLen]...)
		c = append(c, s[slotSumOff:]...)
	}
	return append(c, file[dataStart:]...)
}

// expand turns a compact input back into a file. An input too short for a
// slot ends the file inside that slot.
func expand(c []byte) []byte {
	var file []byte
	for range 2 {
		if len(c) < compactSlot {
			return append(file, c...)
		}
		s := make([]byte, slotSize)
		copy(s, c[:slotFieldLen])
		copy(s[slotSumOff:], c[slotFieldLen:compactSlot])
		file, c = append(file, s...), c[compactSlot:]
	}
	return append(file, c...)
}

// FuzzOpen feeds arbitrary files to Open. Open must never panic, and
// whatever it accepts must be a verifiable chain that a second Open
// returns unchanged.
func FuzzOpen(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		b := journalBytes(f, n)
		if !bytes.Equal(expand(compact(b)), b) {
			f.Fatalf("compact form of a %d-record journal does not round-trip", n)
		}
		f.Add(compact(b))
		if n > 0 {
			// A torn final append, so the tail path is in the corpus.
			f.Add(compact(b[:len(b)-20]))
		}
	}
	// A compacted journal (format 2, based on record 3) with two
	// records appended after the compaction.
	f.Add(compact(compactedBytes(f)))
	// Files read while their writer still had them open: the header
	// lags the records, which Open finds by their hashes; one with the
	// last append torn as well.
	// The slotLag-th append wrote a slot: one record past it.
	for _, n := range []int{1, 3, slotLag} {
		b := openBytes(f, n)
		f.Add(compact(b))
		f.Add(compact(b[:len(b)-20]))
	}
	// Journals of the older protocol (legacy header magic), which Open
	// upgrades in place.
	for _, name := range []string{"format1.jrnl", "format2.jrnl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(compact(b))
	}
	// One directory for the whole run: inputs run one at a time in each
	// fuzzing process, and a fresh tree per input costs more than Open.
	dir := testDir(f)
	path := filepath.Join(dir, testName)
	o := testOpts(dir)
	o.MaxBytes, o.MaxRecords, o.MaxRecordBytes = 1<<20, 1000, 4096
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, expand(data), 0600); err != nil {
			t.Fatal(err)
		}
		j, recs, info, err := Open(o)
		if err != nil {
			return
		}
		head := j.Head()
		start := j.baseHead
		if j.ver == formatVersion {
			start = genesisHash(j.id, j.tag)
		}
		if got := refChainFrom(t, j.id, j.base, start, recs); got != head {
			t.Fatalf("accepted chain ends at %x, head is %x", got, head)
		}
		if j.Count() != len(recs) || info.Created {
			t.Fatalf("count %d with %d records, created %v", j.Count(), len(recs), info.Created)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j2, recs2, info2, err := Open(o)
		if err != nil {
			t.Fatalf("second open of an accepted file: %v", err)
		}
		defer j2.Close()
		if info2.TornTailBytes != 0 || j2.Head() != head || len(recs2) != len(recs) {
			t.Fatalf("second open: torn %d, head %x (want %x), %d records (want %d)",
				info2.TornTailBytes, j2.Head(), head, len(recs2), len(recs))
		}
		for i := range recs {
			if recs[i].Seq != recs2[i].Seq || recs[i].Hash != recs2[i].Hash || !bytes.Equal(recs[i].Payload, recs2[i].Payload) {
				t.Fatalf("record %d differs on second open", i+1)
			}
		}
	})
}
