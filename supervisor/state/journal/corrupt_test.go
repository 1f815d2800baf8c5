// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Corruption cases work on a journal of three records with 100-byte
// payloads, so records can be swapped in place.
const cPayload = 100

func cRecOff(i int) int { return dataStart + (i-1)*int(RecordSize(cPayload)) }

func cRecEnd(i int) int { return cRecOff(i + 1) }

// curSlot is the slot in force, chosen the way Open chooses.
func curSlot(b []byte) slot {
	s0, ok0 := decodeSlot(b, 0)
	s1, ok1 := decodeSlot(b, 1)
	if !ok0 || (ok1 && s1.gen > s0.gen) {
		return s1
	}
	return s0
}

func putSlot(b []byte, s slot) { copy(b[int(s.index)*slotSize:], s.encode()) }

// forgeCommit writes a well-formed next commit, as Append would, with edit
// applied: the forgeries below are consistent headers, not bit rot, so
// they test the record checks rather than the slot checksum.
func forgeCommit(b []byte, edit func(s *slot)) {
	s := curSlot(b)
	s.index, s.gen = 1-s.index, s.gen+1
	edit(&s)
	putSlot(b, s)
}

func TestCorruptionRejected(t *testing.T) {
	rs := int(RecordSize(cPayload))
	cases := []struct {
		name   string
		opts   func(o *Options)
		mutate func(b []byte) []byte
		want   string
	}{
		{"flip payload byte", nil, func(b []byte) []byte {
			b[cRecOff(2)+recHeaderLen+7] ^= 0x01
			return b
		}, "record 2: hash mismatch (corrupt)"},
		{"flip hash byte", nil, func(b []byte) []byte {
			b[cRecEnd(2)-1] ^= 0x80
			return b
		}, "record 2: hash mismatch (corrupt)"},
		{"flip high length byte", nil, func(b []byte) []byte {
			b[cRecOff(2)+3] ^= 0x40
			return b
		}, "record 2: length 1073741924 exceeds the 1048576-byte record bound"},
		{"flip low length byte", nil, func(b []byte) []byte {
			b[cRecOff(3)] ^= 0x01
			return b
		}, "record 3: length 101 crosses the committed length"},
		{"flip sequence byte", nil, func(b []byte) []byte {
			b[cRecOff(2)+4] ^= 0x04
			return b
		}, "record 2: sequence 6, want 2 (reordered or duplicated)"},
		{"flip previous-hash byte", nil, func(b []byte) []byte {
			b[cRecOff(3)+20] ^= 0x01
			return b
		}, "record 3: previous hash mismatch"},
		{"swap records 2 and 3", nil, func(b []byte) []byte {
			r2 := bytes.Clone(b[cRecOff(2):cRecEnd(2)])
			copy(b[cRecOff(2):], b[cRecOff(3):cRecEnd(3)])
			copy(b[cRecOff(3):], r2)
			return b
		}, "record 2: sequence 3, want 2 (reordered or duplicated)"},
		{"forged duplicate of record 3", nil, func(b []byte) []byte {
			r3 := bytes.Clone(b[cRecOff(3):cRecEnd(3)])
			forgeCommit(b, func(s *slot) {
				s.count++
				s.length += uint64(rs)
				copy(s.head[:], r3[rs-32:])
			})
			return append(b, r3...)
		}, "record 4: sequence 3, want 4 (reordered or duplicated)"},
		{"truncated at a record boundary", nil, func(b []byte) []byte {
			return b[:cRecOff(3)]
		}, "shorter than the committed 8720 (externally truncated)"},
		{"truncated mid-record", nil, func(b []byte) []byte {
			return b[:cRecOff(2)+50]
		}, "file is 8418 bytes, shorter than the committed 8720 (externally truncated)"},
		{"truncated into the header", nil, func(b []byte) []byte {
			return b[:slotSize+100]
		}, "externally truncated"},
		{"both header slots corrupt", nil, func(b []byte) []byte {
			b[30] ^= 1
			b[slotSize+30] ^= 1
			return b
		}, "no valid header slot"},
		{"header claims more records", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.count++ })
			return b
		}, "record 4: missing, header claims 4 records (count mismatch)"},
		{"header claims fewer records", nil, func(b []byte) []byte {
			// In place: the older slot (count 2) stays a valid prefix.
			s := curSlot(b)
			s.count--
			putSlot(b, s)
			return b
		}, "leaves 176 bytes after record 2 (count mismatch)"},
		{"header claims absurd record count", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.count = 1 << 60 })
			return b
		}, "header claims 1152921504606846976 records"},
		{"record crosses committed length", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.length -= 10 })
			return b
		}, "record 3: length 100 crosses the committed length 8710"},
		{"committed length inside header", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.length = 100 })
			return b
		}, "committed length 100 is inside the header"},
		{"head hash forged", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.head[0] ^= 1 })
			return b
		}, "head hash does not match record 3"},
		{"kind changed", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { copy(s.kind[:], "receipts") })
			return b
		}, `file holds kind "receipts" (wrong kind)`},
		{"format version changed", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.ver = 3 })
			return b
		}, "format version 3, want 1 or 2"},
		{"format 2 without a base", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.ver = 2 })
			return b
		}, "format 2 header without a base"},
		{"format 1 with a base", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.base = 1 })
			return b
		}, "format 1 header with a base"},
		{"journal id changed", nil, func(b []byte) []byte {
			forgeCommit(b, func(s *slot) { s.id[0] ^= 1 })
			return b
		}, "header slots disagree"},
		{"older slot off the chain", nil, func(b []byte) []byte {
			// The older slot as an append that writes one leaves it
			// at record 3: committing record 2. (Three appends write
			// no slot, fewer than slotLag: the writer's own older
			// slot here is the empty file's, the case below.)
			s := curSlot(b)
			o := s
			o.index, o.gen, o.count, o.length = 1-s.index, s.gen-1, 2, uint64(cRecEnd(2))
			copy(o.head[:], b[cRecEnd(2)-32:cRecEnd(2)])
			o.head[5] ^= 1
			putSlot(b, o)
			return b
		}, "older header slot does not match record 2 (header slots disagree)"},
		{"older slot of the empty file off the chain", nil, func(b []byte) []byte {
			s := curSlot(b)
			o, _ := decodeSlot(b, 1-int(s.index))
			if o.count != 0 {
				panic("setup: the older slot is not the empty file's")
			}
			o.head[5] ^= 1
			putSlot(b, o)
			return b
		}, "older header slot does not match record 0 (header slots disagree)"},
		{"both slots same generation", nil, func(b []byte) []byte {
			s := curSlot(b)
			s.index = 1 - s.index
			putSlot(b, s)
			return b
		}, "header slots disagree"},
		{"record length beyond MaxRecordBytes", func(o *Options) { o.MaxRecordBytes = 64 }, func(b []byte) []byte {
			return b
		}, "record 1: length 100 exceeds the 64-byte record bound"},
		{"more records than MaxRecords", func(o *Options) { o.MaxRecords = 2 }, func(b []byte) []byte {
			return b
		}, "header claims 3 records, more than the bound 2"},
		{"sequence starting at 0", nil, func(b []byte) []byte {
			// A well-formed one-record journal whose record is numbered 0.
			s := curSlot(b)
			gen := genesisHash(s.id, s.kind)
			p := bytes.Repeat([]byte{'z'}, cPayload)
			h := recordHash(s.id, 0, &gen, p)
			rec := encodeRecord(0, &gen, p, &h)
			b = append(b[:dataStart], rec...)
			forgeCommit(b, func(s *slot) { s.count, s.length, s.head = 1, uint64(len(b)), h })
			// The older slot would pin record 2; make it the empty state.
			old := slot{kind: s.kind, ver: 1, index: 1 - curSlot(b).index, gen: curSlot(b).gen - 1,
				length: dataStart, head: gen, id: s.id}
			putSlot(b, old)
			return b
		}, "record 1: sequence 0, want 1 (reordered or duplicated)"},
		{"garbage appended past the commit", nil, func(b []byte) []byte {
			return append(b, bytes.Repeat([]byte{0xaa}, 200)...)
		}, "200 bytes past the committed length are not a torn record 4 (externally extended)"},
		{"more than one record appended", func(o *Options) { o.MaxRecordBytes = 200 }, func(b []byte) []byte {
			return append(b, make([]byte, 1000)...)
		}, "1000 bytes past the committed length, more than one append leaves (externally extended)"},
		{"stale record appended past the commit", nil, func(b []byte) []byte {
			return append(b, b[cRecOff(3):cRecEnd(3)]...)
		}, "not a torn record 4 (externally extended)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testDir(t)
			o := testOpts(dir)
			j, _, _ := mustOpen(t, o)
			for i := 1; i <= 3; i++ {
				if _, err := j.Append(bytes.Repeat([]byte{byte('a' + i)}, cPayload)); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			path := filepath.Join(dir, testName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != cRecEnd(3) {
				t.Fatalf("setup: file is %d bytes, want %d", len(b), cRecEnd(3))
			}
			b = c.mutate(b)
			if err := os.WriteFile(path, b, 0600); err != nil {
				t.Fatal(err)
			}
			if c.opts != nil {
				c.opts(&o)
			}
			j, _, _, err = Open(o)
			if err == nil {
				j.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant ErrCorrupt naming %q", err, c.want)
			}
			// Rejection must leave the evidence alone.
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, b) {
				t.Fatal("rejected open changed the file")
			}
		})
	}
}

// TestCorruptionRejectedCompacted: forgeries of a compacted journal's base
// (its link to the previous generation) are refused like any other.
func TestCorruptionRejectedCompacted(t *testing.T) {
	both := func(b []byte, edit func(s *slot)) {
		for i := range 2 {
			s, ok := decodeSlot(b, i)
			if !ok {
				panic("setup: slot does not decode")
			}
			edit(&s)
			putSlot(b, s)
		}
	}
	cases := []struct {
		name   string
		mutate func(b []byte)
		want   string
	}{
		// Both slots agree on the forged base (the older one, the file
		// with no records, names it as its head and count too), so only
		// the records can tell.
		{"base head changed", func(b []byte) {
			both(b, func(s *slot) {
				s.baseHead[0] ^= 1
				if s.count == s.base {
					s.head = s.baseHead
				}
			})
		}, "record 4: previous hash mismatch"},
		{"base moved", func(b []byte) {
			both(b, func(s *slot) {
				if s.count == s.base {
					s.count++
				}
				s.base++
			})
		}, "record 5: sequence 4, want 5"},
		{"count below the base", func(b []byte) { forgeCommit(b, func(s *slot) { s.count = 2 }) },
			"fewer than its base 3"},
		{"older slot on another base", func(b []byte) {
			s := curSlot(b)
			o, _ := decodeSlot(b, 1-int(s.index))
			o.base++
			putSlot(b, o)
		}, "header slots disagree"},
		{"based slot made format 1", func(b []byte) { forgeCommit(b, func(s *slot) { s.ver = 1 }) },
			"format 1 header with a base"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := testDir(t)
			o := testOpts(dir)
			j, _, _ := mustOpen(t, o)
			appendRange(t, j, 1, 3)
			p := bytes.Repeat([]byte{'c'}, cPayload)
			if _, err := j.Compact([][]byte{p, p, p}, 0); err != nil {
				t.Fatal(err)
			}
			j.Close()
			path := filepath.Join(dir, testName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != cRecEnd(3) {
				t.Fatalf("setup: file is %d bytes, want %d", len(b), cRecEnd(3))
			}
			c.mutate(b)
			if err := os.WriteFile(path, b, 0600); err != nil {
				t.Fatal(err)
			}
			j, _, _, err = Open(o)
			if err == nil {
				j.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant ErrCorrupt naming %q", err, c.want)
			}
		})
	}
}
