// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"crypto/sha256"
	"encoding/binary"
)

const (
	// magic marks a slot of the single-fdatasync protocol, whose header
	// may lag the records (doc.go); legacyMagic one written by the
	// two-fdatasync protocol before it, whose header was exact. Open
	// reads both and rewrites legacy slots once (upgrade), so that a
	// binary of the older protocol refuses the file instead of taking
	// the records past the header for a torn tail and truncating them.
	magic       = "GLVJRNL2"
	legacyMagic = "GLVJRNL1"
	// formatVersion is a journal that starts at its genesis; formatBased
	// one that continues a previous generation's chain (Compact): its
	// header also names the base sequence number and hash its first
	// record chains to.
	formatVersion = 1
	formatBased   = 2
	slotSize      = 4096
	dataStart     = 2 * slotSize
	slotSumOff    = slotSize - sha256.Size
	recHeaderLen  = 4 + 8 + 32 // length, seq, prev hash
	recOverhead   = recHeaderLen + sha256.Size
	recordDomain  = "glove-journal-record-v1"
	genesisDomain = "glove-journal-genesis-v1"
)

// RecordSize is the number of bytes a payload of payloadLen bytes takes on
// disk, for callers that reserve capacity against Remaining.
func RecordSize(payloadLen int) int64 {
	return recOverhead + int64(payloadLen)
}

// slot is one decoded header slot: the commit point of the journal.
type slot struct {
	kind   [8]byte
	ver    uint32
	index  uint32
	gen    uint64
	count  uint64
	length uint64
	head   [32]byte
	id     [16]byte
	// base and baseHead (format 2 only): the sequence number and hash
	// of the last record of the previous generation, which this file's
	// first record chains to. Zero in format 1.
	base     uint64
	baseHead [32]byte
	// legacy: the slot carries legacyMagic.
	legacy bool
}

func (s *slot) encode() []byte {
	b := make([]byte, slotSize)
	copy(b[0:8], magic)
	if s.legacy {
		copy(b[0:8], legacyMagic)
	}
	copy(b[8:16], s.kind[:])
	binary.LittleEndian.PutUint32(b[16:], s.ver)
	binary.LittleEndian.PutUint32(b[20:], s.index)
	binary.LittleEndian.PutUint64(b[24:], s.gen)
	binary.LittleEndian.PutUint64(b[32:], s.count)
	binary.LittleEndian.PutUint64(b[40:], s.length)
	copy(b[48:80], s.head[:])
	copy(b[80:96], s.id[:])
	binary.LittleEndian.PutUint64(b[96:], s.base)
	copy(b[104:136], s.baseHead[:])
	sum := sha256.Sum256(b[:slotSumOff])
	copy(b[slotSumOff:], sum[:])
	return b
}

// decodeSlot reads slot index from the start of the file. ok is false for a
// slot that is missing, torn or not a journal header; such a slot is simply
// not a commit point. Field values are judged by the caller, so that a
// well-formed header for the wrong kind gets a clear error rather than
// "no valid header".
func decodeSlot(file []byte, index int) (s slot, ok bool) {
	if len(file) < (index+1)*slotSize {
		return s, false
	}
	b := file[index*slotSize : (index+1)*slotSize]
	sum := sha256.Sum256(b[:slotSumOff])
	if (string(b[0:8]) != magic && string(b[0:8]) != legacyMagic) || string(sum[:]) != string(b[slotSumOff:]) {
		return s, false
	}
	s.legacy = string(b[0:8]) == legacyMagic
	copy(s.kind[:], b[8:16])
	s.ver = binary.LittleEndian.Uint32(b[16:])
	s.index = binary.LittleEndian.Uint32(b[20:])
	s.gen = binary.LittleEndian.Uint64(b[24:])
	s.count = binary.LittleEndian.Uint64(b[32:])
	s.length = binary.LittleEndian.Uint64(b[40:])
	copy(s.head[:], b[48:80])
	copy(s.id[:], b[80:96])
	s.base = binary.LittleEndian.Uint64(b[96:])
	copy(s.baseHead[:], b[104:136])
	// A slot found at the other position (copied, or the file spliced)
	// is not this position's commit point.
	return s, s.index == uint32(index)
}

func genesisHash(id [16]byte, kind [8]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(genesisDomain))
	h.Write(id[:])
	h.Write(kind[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func recordHash(id [16]byte, seq uint64, prev *[32]byte, payload []byte) [32]byte {
	h := sha256.New()
	var seqb [8]byte
	binary.LittleEndian.PutUint64(seqb[:], seq)
	h.Write([]byte(recordDomain))
	h.Write(id[:])
	h.Write(seqb[:])
	h.Write(prev[:])
	h.Write(payload)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// encodeRecord lays out one record; the returned slice is exactly
// RecordSize(len(payload)) bytes.
func encodeRecord(seq uint64, prev *[32]byte, payload []byte, hash *[32]byte) []byte {
	b := make([]byte, RecordSize(len(payload)))
	binary.LittleEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b[4:], seq)
	copy(b[12:44], prev[:])
	copy(b[recHeaderLen:], payload)
	copy(b[recHeaderLen+len(payload):], hash[:])
	return b
}
