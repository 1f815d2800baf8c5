// Package journal is the durable, append-only, hash-chained record file
// under gloved's session store and receipt journal.
//
// A journal is one file with one exclusive writer (flock). Every record is
// checksummed and chained to the one before it, and a pair of alternating
// header slots says how much of the file is committed. The design goal is
// crash consistency without repair heuristics: a writer killed at any point
// of Append leaves a file that reopens either with the record or without
// it, and anything a crash cannot produce (bit rot, reordering, duplicated
// or missing records, a file truncated or extended by someone else) is
// rejected on Open with an error naming the record and the fault. Open
// never drops committed data; the only bytes it removes are an uncommitted
// tail, and it reports how many (OpenInfo.TornTailBytes).
//
// # File layout
//
// All integers are little-endian.
//
//	offset 0     +--------------------------------------------+
//	             | header slot 0 (4096 bytes)                  |
//	offset 4096  +--------------------------------------------+
//	             | header slot 1 (4096 bytes)                  |
//	offset 8192  +--------------------------------------------+
//	             | record 1                                    |
//	             | record 2                                    |
//	             | ...                                         |
//	             | record N                                    |
//	committed    +--------------------------------------------+
//	length       | uncommitted tail (only after a crash;       |
//	             | reported and truncated by Open)             |
//	             +--------------------------------------------+
//
// Header slot (4096 bytes, its own sector-aligned block):
//
//	 0  8  magic "GLVJRNL1"
//	 8  8  kind, NUL-padded ("sessions", "receipts", ...)
//	16  4  format version (1)
//	20  4  slot index (0 or 1): a slot copied into the other place is invalid
//	24  8  generation
//	32  8  committed record count
//	40  8  committed length: file offset of the end of the last record
//	48 32  head hash: hash of record N, or the genesis hash when N = 0
//	80 16  journal id, random, chosen at creation
//	96 ... zero
//	4064 32  SHA-256 of bytes [0, 4064) of the slot
//
// The checksum sits at the end of the slot, so a write torn anywhere inside
// the slot leaves the old checksum over new bytes and the slot invalid.
// Open uses the valid slot with the higher generation; when the other slot
// is valid too it must describe an earlier state of the same journal
// (generation one lower, its count and head a prefix of the chain).
//
// Record (RecordSize(n) = 76 + n bytes):
//
//	 0  4  payload length n
//	 4  8  sequence number (1, 2, 3, ...)
//	12 32  previous hash (record seq-1's hash, or the genesis hash)
//	44  n  payload
//	44+n 32 hash = SHA-256("glove-journal-record-v1" || id || seq || prev || payload)
//
// genesis = SHA-256("glove-journal-genesis-v1" || id || kind padded to 8)
//
// The id in every hash binds records to one journal, so records spliced in
// from another journal of the same kind do not verify.
//
// # Append protocol
//
//  1. pwrite the record at the committed length
//  2. fdatasync
//  3. pwrite the older header slot: generation+1, count+1, new length, new head
//  4. fdatasync
//
// Append returns success only after step 4. A crash before step 3 lands
// leaves the record as an uncommitted tail and the old header in force; a
// torn step 3 invalidates only the slot being written, so the other slot
// (the previous commit) is still in force. After an I/O error the on-disk
// state is unknown (Linux may drop dirty pages after a failed fsync and
// report success next time), so the Journal is poisoned: every later Append
// returns the first error until the caller reopens, which re-verifies.
//
// A new journal is written under a temporary name, synced, and renamed into
// place with RENAME_NOREPLACE, so a crash during creation never leaves a
// half-written file under the journal's name.
package journal
