// SPDX-License-Identifier: Apache-2.0

// Package journal is the durable, append-only, hash-chained record file
// under gloved's session store and receipt journal.
//
// A journal is one file with one exclusive writer (flock). Every record is
// checksummed and chained to the one before it, so a record is committed
// by being whole in the file: a durable append is one record write and one
// fdatasync. A pair of alternating header slots commits a prefix of the
// records: fewer than 64 records behind them while a writer runs (an
// append writes a slot only once in 63), and level with them after
// Close. The design goal is crash consistency
// without repair heuristics: a writer killed at any point of Append leaves
// a file that reopens either with the record or without it, and anything a
// crash cannot produce (bit rot, reordering, duplicated or missing
// records, a file truncated or extended by someone else) is rejected on
// Open with an error naming the record and the fault. Open never drops a
// whole record; the only bytes it removes are a torn tail, and it reports
// how many (OpenInfo.TornTailBytes).
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
//	header's     +--------------------------------------------+
//	committed    | records N+1.. (appended since the header    |
//	length       | slot in force was written; found by Open)   |
//	             +--------------------------------------------+
//	             | torn tail (only after a crash; reported and |
//	             | truncated by Open)                          |
//	             +--------------------------------------------+
//
// Header slot (4096 bytes, its own sector-aligned block):
//
//	 0  8  magic "GLVJRNL2" ("GLVJRNL1": the older protocol; see Upgrade)
//	 8  8  kind, NUL-padded ("sessions", "receipts", ...)
//	16  4  format version (1)
//	20  4  slot index (0 or 1): a slot copied into the other place is invalid
//	24  8  generation
//	32  8  committed record count N (the last sequence number it commits)
//	40  8  committed length: file offset of the end of record N
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
//  1. pwrite the record at the end of the last record
//  2. only if this record would be the K-th past the header slot in
//     force (K = 64, slotLag in journal.go): pwrite the older header
//     slot, generation+1, committing the records before this one
//     (count, length and head as they were)
//  3. fdatasync
//
// Append returns success only after step 3, which makes the record, the
// file's new size and the slot (if written) durable at once. The slot
// commits only records an earlier fdatasync made durable, so it may
// reach the disk before or after the record; a torn slot is invalid and
// leaves the other (an earlier commit of the same chain) in force.
//
// So the header commits the records up to the one before the last
// append that wrote a slot: the first append to write one is the 64th
// after a level header (a new file, Close, Compact, Open's checkpoint),
// then one in 63, and between appends the file holds at most K-1
// records past the header, all durable; during an append, at most K,
// the last possibly torn. Why K = 64: the slot is a second block the
// fdatasync must make durable, about a tenth of an fdatasync's cost
// when written on every append; once in 63 it is under 0.2%. Why not
// more: K bounds the records that only the chain commits (below).
//
// Open verifies the records the slot in force commits, exactly (any
// mismatch is corruption), then takes every whole record that follows and
// continues the chain: record N+1 is committed if its length is within
// MaxRecordBytes and the file, its sequence number is N+1, its previous
// hash is record N's, and its hash verifies. The hash binds the journal's
// random id, the sequence number and the predecessor's hash, so bytes of
// an earlier record, of another journal, or of a partial write never pass
// for the next record, and since appends are sequential nothing after the
// first bytes that do not verify can be valid. What remains must be what
// one torn append leaves (at most one record, its header, once there, that
// of record N+1, or zeros); Open truncates it durably and reports it, and
// refuses anything else as externally extended. Records found past the
// header are fdatasynced before Open returns, since a later slot will
// commit them; if there are K or more (a crash lost or tore the slot of
// the append that had to write one), Open then writes a checkpoint, so
// crashes in a row cannot let the records past the header grow past K.
// Open reads and verifies the whole file in any case (bounded by
// MaxBytes); what it walks past the header is at most K records, the
// last possibly torn, and Peek walks the same. Close writes the older
// slot committing every record and syncs it (a checkpoint), so a file
// cut at a record boundary after a clean Close is still reported as
// externally truncated.
//
// The price of committing without a header write per append: up to K
// records past the header are committed by the chain alone, so Open can
// hold them only to the chain. Damage to the last of them reads as a
// torn append and is dropped and reported in TornTailBytes, where the
// header would have named it corrupt, unless only its length field is
// damaged: a record that still verifies under another length (ending at
// the end of the file, or where the next record's header starts) is not
// a torn append, and Open refuses the file (wholeRecordIn), so a damaged
// length field never takes the durable records after it down with it.
// Other damage to an earlier one is refused, as what follows it is more
// than one torn append. And a file cut by someone else at a
// record boundary among them reads as complete. The records a slot
// commits (all of them after Close) are held to it exactly.
//
// After an I/O error the on-disk state is unknown (Linux may drop dirty
// pages after a failed fsync and report success next time), so the
// Journal is poisoned. Since the slot an append may write commits nothing
// new, the next Append first truncates back to the last committed record
// and syncs, and carries on; if that fails too, every later Append returns
// the first error until the caller reopens, which re-verifies (and may
// find the failed append's record whole, and so committed: a failed
// append's outcome is for the reopen to say).
//
// # Upgrade
//
// A file whose header slots carry "GLVJRNL1" was written by the older
// protocol (record fdatasync, then header slot fdatasync; the header exact).
// Its layout is the same, so Open reads it as above; then, before anything
// is appended, it rewrites both slots with "GLVJRNL2", one at a time, each
// synced, so a crash leaves a valid slot. A binary of the older protocol
// knows only "GLVJRNL1" and refuses an upgraded file, rather than taking
// the records past its header for a torn tail and truncating them.
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
// journal like any I/O error; since the header slot an append may write
// commits nothing new, the next Append first truncates back to the
// committed length and, once that is durable, carries on: the journal
// accepts writes again as soon as space returns, without a reopen.
//
// A new journal is written under a temporary name, synced, and renamed into
// place with RENAME_NOREPLACE, so a crash during creation never leaves a
// half-written file under the journal's name.
package journal
