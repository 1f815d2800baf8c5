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
//	96  8  base: sequence number of the previous generation's last record
//	       (format 2; zero in format 1)
//	104 32 base head: that record's hash, which record base+1 chains to
//	       (format 2; zero in format 1)
//	136 ... zero
//	4064 32  SHA-256 of bytes [0, 4064) of the slot
//
// The checksum sits at the end of the slot, so a write torn anywhere inside
// the slot leaves the old checksum over new bytes and the slot invalid.
// Open uses the valid slot with the higher generation; when the other slot
// is valid too it must describe an earlier state of the same journal
// (generation one lower, its count and head a prefix of the chain).
//
// In format 1 the file's records are 1..N and record 1 chains to the
// genesis hash. In format 2 (a file written by Compact) they are
// base+1..N, record base+1 chains to the base head, and the committed
// count in the header is N, the chain's last sequence number; the bounds
// (MaxRecords, MaxBytes) apply to the records in the file, N - base.
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
// # Compaction
//
// Compact replaces the file with a new generation that holds only the
// records the caller carries over (its live state, under a checkpoint
// record of its own): the new file continues the same chain (same
// journal id, sequence numbers from the old last one plus one, the first
// record's previous hash the old head), so whoever kept a record's hash
// can check the new records follow it. Protocol:
//
//  1. write the new file under a temporary name (".NAME.compact-RANDOM"),
//     lock it, preallocate, fsync
//  2. rename it over NAME (atomic: NAME is the old or the new file)
//  3. fsync the directory, so the rename is durable before any record is
//     appended to the new file (or a crash could bring the old file back
//     without those records)
//
// A crash before step 2 leaves the old file in force and a temporary
// file, which the next Open removes once it holds the lock (a temporary
// file another process holds locked is left alone). A failure before
// step 2 leaves the journal as it was; a failed directory fsync poisons
// it (reopen).
//
// # Disk space
//
// Preallocate allocates blocks past the committed length (without
// changing the file size), so appends into them cannot fail for lack of
// space: a caller reserves room for writes that must not fail (a
// session's terminal state) while the disk still has it, and a full disk
// refuses the reservation instead. A record write or its fdatasync that
// fails (ENOSPC on a file system without preallocation) poisons the
// journal like any I/O error; since no header was written, the next
// Append first truncates back to the committed length and, once that is
// durable, carries on: the journal accepts writes again as soon as space
// returns, without a reopen.
//
// A new journal is written under a temporary name, synced, and renamed into
// place with RENAME_NOREPLACE, so a crash during creation never leaves a
// half-written file under the journal's name.
package journal
