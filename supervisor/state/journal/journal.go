// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrFull: the record would exceed MaxBytes, MaxRecords or
	// MaxRecordBytes. Nothing was written and the journal stays usable.
	ErrFull = errors.New("journal full")
	// ErrLocked: another open file description holds the writer lock.
	ErrLocked = errors.New("journal in use by another writer")
	// ErrCorrupt: the file's contents fail verification; Open refuses it.
	ErrCorrupt = errors.New("journal corrupt")
	// ErrUnsafeFile: the directory or file could be read or replaced by
	// someone other than the owner, or is not a plain single-link file.
	ErrUnsafeFile = errors.New("unsafe journal file")
	// ErrNoSpace: the file system has no room (ENOSPC or EDQUOT).
	// Matches alongside the system error.
	ErrNoSpace = errors.New("no space left on device")
)

// spaceError marks an ENOSPC/EDQUOT so callers can say the disk is full.
func spaceError(err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// corruptError carries the exact fault text and matches ErrCorrupt.
type corruptError string

func (e corruptError) Error() string { return string(e) }
func (e corruptError) Unwrap() error { return ErrCorrupt }

// faultHook is nil in production. Tests set it to stop the process at a
// named point of Append, to prove the file reopens consistently from there.
var faultHook func(point string)

func fault(point string) {
	if faultHook != nil {
		faultHook(point)
	}
}

// kindFaultHook is nil in production; a gloved built with the
// glove_testfaults tag sets it (faults_testing.go) to die at a named
// point of one kind of journal, for the daemon's crash tests.
var kindFaultHook func(kind, point string)

// fault calls the test hooks at a named point of this journal.
func (j *Journal) fault(point string) {
	fault(point)
	if kindFaultHook != nil {
		kindFaultHook(j.kind, point)
	}
}

// Options names a journal and bounds it.
type Options struct {
	// Dir is the parent directory: owned by the current uid, mode exactly
	// 0700, not a symlink.
	Dir string
	// Name is the file name within Dir: a plain name, no '/'.
	Name string
	// Kind is 1..8 bytes of [a-z0-9-], recorded in the header so one kind
	// of journal cannot be opened as another.
	Kind string
	// MaxBytes bounds the file size; 64 MiB if 0.
	MaxBytes int64
	// MaxRecords bounds the record count; 10000 if 0.
	MaxRecords int
	// MaxRecordBytes bounds one payload; 1 MiB if 0.
	MaxRecordBytes int
}

// Record is one committed record.
type Record struct {
	Seq     uint64
	Payload []byte
	Hash    [32]byte
	// Prev is the hash this record chains to: record Seq-1's, the
	// genesis hash, or (first record of a compacted file) the previous
	// generation's last record's.
	Prev [32]byte
}

// OpenInfo says what Open found.
type OpenInfo struct {
	// Created: the file did not exist and Open created it.
	Created bool
	// TornTailBytes is how many bytes past the last whole record (a
	// record torn by a crash during Append) Open truncated.
	TornTailBytes int64
	// StaleTemps is how many temporary files of an interrupted creation
	// or compaction Open removed.
	StaleTemps int
}

// Journal is an open journal holding the writer lock. Its methods are safe
// for concurrent use.
type Journal struct {
	mu       sync.Mutex
	fd       int
	dirfd    int // O_PATH descriptor of Dir, for compaction
	kind     string
	o        Options
	tag      [8]byte
	id       [16]byte
	ver      uint32
	cur      uint32 // index of the slot holding the committed state
	gen      uint64
	base     uint64 // sequence number before this file's first record
	baseHead [32]byte
	count    int // records in this file: the last sequence number is base+count
	length   int64
	head     [32]byte
	// hdrSeq is the last sequence number the slot in force commits: the
	// header lags the records (an append writes a slot only when its
	// record would be the slotLag-th past it, committing the records
	// before its own), and Close brings it level.
	hdrSeq   uint64
	prealloc int64 // bytes preallocated past length (best known)
	written  int64 // bytes written by appends and compactions since Open
	noAlloc  bool  // the file system does not preallocate
	err      error // first Append I/O error; poisons the journal
	// healable: err came from an append, whose header slot commits
	// only records already durable, so truncating to the committed
	// length undoes it.
	healable bool
}

func (o *Options) check() error {
	if o.Kind == "" || len(o.Kind) > 8 || strings.Trim(o.Kind, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("journal: open: kind %q: want 1..8 bytes of [a-z0-9-]", o.Kind)
	}
	// The temporary name at creation adds 22 bytes; stay under NAME_MAX.
	if o.Name == "" || o.Name == "." || o.Name == ".." || len(o.Name) > 200 || strings.ContainsAny(o.Name, "/\x00") {
		return fmt.Errorf("journal %s: open: name %q: want a plain file name", o.Kind, o.Name)
	}
	if o.Dir == "" {
		return fmt.Errorf("journal %s: open: empty directory", o.Kind)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 64 << 20
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = 10000
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = 1 << 20
	}
	if o.MaxBytes < dataStart || o.MaxRecords < 0 || o.MaxRecordBytes < 0 || o.MaxRecordBytes > math.MaxUint32 {
		return fmt.Errorf("journal %s: open: bounds out of range (MaxBytes %d, MaxRecords %d, MaxRecordBytes %d)",
			o.Kind, o.MaxBytes, o.MaxRecords, o.MaxRecordBytes)
	}
	return nil
}

// Open opens or creates the journal, takes the writer lock, verifies every
// record, and returns them. Bytes past the committed length are truncated
// and reported in OpenInfo; any other inconsistency is an error.
func Open(o Options) (*Journal, []Record, OpenInfo, error) {
	var info OpenInfo
	if err := o.check(); err != nil {
		return nil, nil, info, err
	}
	j := &Journal{fd: -1, dirfd: -1, kind: o.Kind, o: o, ver: formatVersion}
	copy(j.tag[:], o.Kind)
	dirfd, err := j.openDir()
	if err != nil {
		return nil, nil, info, err
	}
	j.dirfd = dirfd

	j.fd, err = unix.Openat(dirfd, o.Name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		info.Created = true
		if err := j.create(dirfd); err != nil {
			j.closeFd()
			return nil, nil, info, err
		}
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENXIO):
		// Threat: a symlink planted under Name would redirect our
		// writes; a directory or socket is not our file.
		j.closeFd()
		return nil, nil, info, fmt.Errorf("journal %s: open %s: %w: %w", o.Kind, o.Name, ErrUnsafeFile, err)
	case err != nil:
		j.closeFd()
		return nil, nil, info, fmt.Errorf("journal %s: open %s: %w", o.Kind, o.Name, err)
	}
	size, err := j.checkFile()
	if err == nil {
		err = j.lock()
	}
	var recs []Record
	legacy := false
	if err == nil {
		recs, info.TornTailBytes, legacy, err = j.load(size)
	}
	if err == nil {
		info.StaleTemps, err = j.removeStaleTemps()
	}
	if err == nil && legacy {
		err = j.upgrade()
	}
	if err == nil && !legacy && j.seq()-j.hdrSeq >= slotLag {
		// A crash tore (or lost) the slot of an append that had to
		// write one, and its record was whole: the next append's slot
		// could tear too, and crashes in a row would let the records
		// past the header grow past slotLag. The records are durable
		// (load synced them), so a checkpoint may commit them.
		err = j.checkpoint("open: bring the header level")
	}
	if err != nil {
		j.closeFd()
		return nil, nil, info, err
	}
	return j, recs, info, nil
}

// removeStaleTemps removes the temporary files a creation or compaction
// of this journal left when it was interrupted. Called with the writer
// lock held; a temporary file that some process still holds locked (a
// creation in progress) is left alone. Threat to liveness, not safety:
// each interrupted compaction would otherwise leave a copy of the live
// state behind and the directory would fill.
func (j *Journal) removeStaleTemps() (int, error) {
	dfd, err := unix.Openat(j.dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("journal %s: open dir to list temporary files: %w", j.kind, err)
	}
	d := os.NewFile(uintptr(dfd), j.o.Dir)
	names, err := d.Readdirnames(-1)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("journal %s: list temporary files: %w", j.kind, err)
	}
	n := 0
	for _, name := range names {
		if !strings.HasPrefix(name, "."+j.o.Name+".new-") && !strings.HasPrefix(name, "."+j.o.Name+".compact-") {
			continue
		}
		fd, err := unix.Openat(j.dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return n, fmt.Errorf("journal %s: open temporary file %s: %w", j.kind, name, err)
		}
		lerr := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if lerr == nil {
			// Unlinked while locked: no creator can be renaming it.
			if err := unix.Unlinkat(j.dirfd, name, 0); err != nil {
				unix.Close(fd)
				return n, fmt.Errorf("journal %s: remove temporary file %s: %w", j.kind, name, err)
			}
			n++
		}
		if err := unix.Close(fd); err != nil {
			return n, fmt.Errorf("journal %s: close temporary file %s: %w", j.kind, name, err)
		}
		if lerr != nil && !errors.Is(lerr, unix.EWOULDBLOCK) {
			return n, fmt.Errorf("journal %s: lock temporary file %s: %w", j.kind, name, lerr)
		}
	}
	return n, nil
}

// openDir opens Dir without following a final symlink and checks it is a
// directory only the current uid can enter. Threat: in a directory others
// can write, the journal could be renamed away or replaced between runs.
func (j *Journal) openDir() (int, error) {
	fd, err := unix.Open(j.o.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, fmt.Errorf("journal %s: open dir %s: %w: %w", j.kind, j.o.Dir, ErrUnsafeFile, err)
	}
	if err != nil {
		return -1, fmt.Errorf("journal %s: open dir %s: %w", j.kind, j.o.Dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("journal %s: stat dir %s: %w", j.kind, j.o.Dir, err)
	}
	if bad := statProblem(&st, unix.S_IFDIR, 0700); bad != "" {
		unix.Close(fd)
		return -1, fmt.Errorf("journal %s: dir %s: %s: %w", j.kind, j.o.Dir, bad, ErrUnsafeFile)
	}
	return fd, nil
}

// create writes an empty journal under a temporary name and renames it into
// place without replacing anything, so a crash mid-creation never leaves a
// headerless file under Name that every later Open would have to reject.
// On success j.fd is the new file, already locked.
func (j *Journal) create(dirfd int) error {
	var rnd [8]byte
	if _, err := rand.Read(j.id[:]); err != nil {
		return fmt.Errorf("journal %s: create: random id: %w", j.kind, err)
	}
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("journal %s: create: random name: %w", j.kind, err)
	}
	tmp := "." + j.o.Name + ".new-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0600)
	if err != nil {
		return fmt.Errorf("journal %s: create %s: %w", j.kind, tmp, err)
	}
	j.fd = fd
	renamed := false
	defer func() {
		if !renamed {
			_ = unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	// The umask may have narrowed the mode; checkFile demands exactly 0600.
	if err := unix.Fchmod(fd, 0600); err != nil {
		return fmt.Errorf("journal %s: create: fchmod: %w", j.kind, err)
	}
	// Lock before the name is visible, so no other writer can slip in
	// between the rename and our flock.
	if err := j.lock(); err != nil {
		return err
	}
	gen := genesisHash(j.id, j.tag)
	s := slot{kind: j.tag, ver: formatVersion, length: dataStart, head: gen, id: j.id}
	hdr := s.encode()
	s.index, s.gen = 1, 1
	hdr = append(hdr, s.encode()...)
	if err := pwriteFull(fd, hdr, 0); err != nil {
		return fmt.Errorf("journal %s: create: write header: %w", j.kind, err)
	}
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("journal %s: create: fsync: %w", j.kind, err)
	}
	if err := unix.Renameat2(dirfd, tmp, dirfd, j.o.Name, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("journal %s: create %s: created concurrently: %w", j.kind, j.o.Name, ErrLocked)
		}
		return fmt.Errorf("journal %s: create: rename into place: %w", j.kind, err)
	}
	renamed = true
	// The O_PATH descriptor cannot be fsynced; open the directory itself.
	dfd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("journal %s: create: open dir for fsync: %w", j.kind, err)
	}
	defer unix.Close(dfd)
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("journal %s: create: fsync dir: %w", j.kind, err)
	}
	return nil
}

// checkFile rejects anything but a private, single-link regular file within
// the size bound. Threats: a second hard link lets another path (perhaps
// in a directory others control) alias the journal; a looser mode lets
// others read session data or forge records; an oversized file would make
// Open allocate without bound.
func (j *Journal) checkFile() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(j.fd, &st); err != nil {
		return 0, fmt.Errorf("journal %s: stat %s: %w", j.kind, j.o.Name, err)
	}
	bad := statProblem(&st, unix.S_IFREG, 0600)
	switch {
	case bad != "":
	case st.Nlink != 1:
		bad = fmt.Sprintf("%d hard links, want 1", st.Nlink)
	case st.Size > j.o.MaxBytes:
		bad = fmt.Sprintf("size %d over the %d-byte bound", st.Size, j.o.MaxBytes)
	}
	if bad != "" {
		return 0, fmt.Errorf("journal %s: %s: %s: %w", j.kind, j.o.Name, bad, ErrUnsafeFile)
	}
	return st.Size, nil
}

// lockWait bounds how long Open retries a held lock. Threat to liveness,
// not safety: a child forked by any goroutine of this process while an
// earlier Journal was open shares that open file description, and so the
// flock, until its exec closes the close-on-exec descriptor (Linux wakes a
// vfork parent before the child's close-on-exec pass). A reopen right after
// Close would otherwise be refused for that window; a real second writer
// still gets ErrLocked.
const lockWait = 200 * time.Millisecond

func (j *Journal) lock() error {
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(j.fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EWOULDBLOCK) && time.Now().After(deadline):
			return fmt.Errorf("journal %s: lock %s: %w", j.kind, j.o.Name, ErrLocked)
		case errors.Is(err, unix.EWOULDBLOCK), errors.Is(err, unix.EINTR):
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("journal %s: lock %s: %w", j.kind, j.o.Name, err)
		}
	}
}

func (j *Journal) corrupt(format string, a ...any) error {
	return corruptError("journal " + j.kind + ": " + fmt.Sprintf(format, a...))
}

// load reads the whole file (size is already bounded by MaxBytes), picks the
// commit point, verifies every record it commits, takes the whole records
// that follow it in the chain (appended since the header was last
// written), and removes a torn tail. legacy says a slot of the older
// protocol is still in the file.
func (j *Journal) load(size int64) ([]Record, int64, bool, error) {
	buf := make([]byte, size)
	if err := preadFull(j.fd, buf, 0); err != nil {
		return nil, 0, false, fmt.Errorf("journal %s: read %s: %w", j.kind, j.o.Name, err)
	}
	s0, ok0 := decodeSlot(buf, 0)
	s1, ok1 := decodeSlot(buf, 1)
	cur, old, hasOld := s0, s1, ok1
	if !ok0 || (ok1 && s1.gen > s0.gen) {
		cur, old, hasOld = s1, s0, ok0
	}
	if !ok0 && !ok1 {
		return nil, 0, false, j.corrupt("no valid header slot (both torn or overwritten)")
	}
	if cur.kind != j.tag {
		return nil, 0, false, j.corrupt("file holds kind %q (wrong kind)", strings.TrimRight(string(cur.kind[:]), "\x00"))
	}
	switch {
	case cur.ver != formatVersion && cur.ver != formatBased:
		return nil, 0, false, j.corrupt("format version %d, want %d or %d", cur.ver, formatVersion, formatBased)
	case cur.ver == formatVersion && (cur.base != 0 || cur.baseHead != [32]byte{}):
		return nil, 0, false, j.corrupt("format %d header with a base", cur.ver)
	case cur.ver == formatBased && cur.base == 0:
		return nil, 0, false, j.corrupt("format %d header without a base", cur.ver)
	case cur.count < cur.base:
		return nil, 0, false, j.corrupt("header claims %d records, fewer than its base %d", cur.count, cur.base)
	}
	if hasOld && (old.kind != cur.kind || old.ver != cur.ver || old.id != cur.id || old.gen+1 != cur.gen ||
		old.base != cur.base || old.baseHead != cur.baseHead || old.count < old.base || old.count > cur.count) {
		return nil, 0, false, j.corrupt("header slots disagree (generations %d and %d)", old.gen, cur.gen)
	}
	if cur.length > uint64(size) {
		return nil, 0, false, j.corrupt("file is %d bytes, shorter than the committed %d (externally truncated)", size, cur.length)
	}
	if cur.length < dataStart {
		return nil, 0, false, j.corrupt("committed length %d is inside the header", cur.length)
	}
	length := int64(cur.length)
	// Bound the count before allocating for it: every record takes at
	// least recOverhead bytes of the committed length.
	inFile := cur.count - cur.base
	if inFile > uint64(j.o.MaxRecords) || inFile > uint64((length-dataStart)/recOverhead) {
		return nil, 0, false, j.corrupt("header claims %d records, more than the bound %d or the committed length holds", inFile, j.o.MaxRecords)
	}
	j.id, j.cur, j.gen, j.ver = cur.id, cur.index, cur.gen, cur.ver
	j.base, j.baseHead, j.head = cur.base, cur.baseHead, cur.baseHead
	if cur.ver == formatVersion {
		j.head = genesisHash(cur.id, j.tag)
	}
	recs := make([]Record, 0, inFile)
	off := int64(dataStart)
	for i := cur.base + 1; ; i++ {
		// The older slot must be an earlier commit of this same chain.
		if hasOld && i-1 == old.count && (old.length != uint64(off) || old.head != j.head) {
			return nil, 0, false, j.corrupt("older header slot does not match record %d (header slots disagree)", i-1)
		}
		if i > cur.count {
			break
		}
		if off == length {
			return nil, 0, false, j.corrupt("record %d: missing, header claims %d records (count mismatch)", i, cur.count)
		}
		if length-off < recOverhead {
			return nil, 0, false, j.corrupt("record %d: crosses the committed length %d", i, length)
		}
		n := binary.LittleEndian.Uint32(buf[off:])
		if uint64(n) > uint64(j.o.MaxRecordBytes) {
			return nil, 0, false, j.corrupt("record %d: length %d exceeds the %d-byte record bound", i, n, j.o.MaxRecordBytes)
		}
		end := off + RecordSize(int(n))
		if end > length {
			return nil, 0, false, j.corrupt("record %d: length %d crosses the committed length %d", i, n, length)
		}
		if seq := binary.LittleEndian.Uint64(buf[off+4:]); seq != i {
			return nil, 0, false, j.corrupt("record %d: sequence %d, want %d (reordered or duplicated)", i, seq, i)
		}
		if string(buf[off+12:off+recHeaderLen]) != string(j.head[:]) {
			return nil, 0, false, j.corrupt("record %d: previous hash mismatch (reordered, duplicated or spliced)", i)
		}
		p := off + recHeaderLen
		payload := buf[p : p+int64(n) : p+int64(n)]
		h := recordHash(j.id, i, &j.head, payload)
		if string(buf[end-32:end]) != string(h[:]) {
			return nil, 0, false, j.corrupt("record %d: hash mismatch (corrupt)", i)
		}
		recs = append(recs, Record{Seq: i, Payload: payload, Hash: h, Prev: j.head})
		j.head, off = h, end
	}
	if off != length {
		return nil, 0, false, j.corrupt("committed length %d leaves %d bytes after record %d (count mismatch)", length, length-off, cur.count)
	}
	if j.head != cur.head {
		return nil, 0, false, j.corrupt("head hash does not match record %d (corrupt)", cur.count)
	}
	j.count, j.length, j.hdrSeq = int(inFile), length, cur.count
	// Records past the committed length: the header lags the records
	// by design, so every whole record that continues the chain is
	// committed. Threat: stale or foreign bytes taken for a record.
	// Each record's hash binds the journal's random id, its sequence
	// number and its predecessor's hash, so only the next record of
	// this very chain verifies here; a partial record (a torn append)
	// never does, and it ends the scan, since appends are sequential
	// and nothing written after it can be valid.
	for {
		r, end, ok := j.nextRecord(buf, length)
		if !ok {
			break
		}
		if j.count >= j.o.MaxRecords {
			return nil, 0, false, j.corrupt("record %d past the header would pass the %d-record bound", r.Seq, j.o.MaxRecords)
		}
		recs = append(recs, r)
		j.count, j.length, j.head = j.count+1, end, r.Hash
		length = end
	}
	torn, err := j.dropTail(buf[length:])
	if err != nil {
		return nil, 0, false, err
	}
	// A record found past the header may still be only in the page
	// cache (its writer was killed before its fdatasync); a later
	// header slot (an append's, Open's checkpoint or Close's) will
	// commit it, so it must be on disk first, or a crash could leave a
	// header over missing bytes.
	if uint64(j.count) > cur.count-cur.base && torn == 0 {
		if err := unix.Fdatasync(j.fd); err != nil {
			return nil, 0, false, fmt.Errorf("journal %s: sync the records past the header: %w", j.kind, err)
		}
	}
	return recs, torn, (ok0 && s0.legacy) || (ok1 && s1.legacy), nil
}

// nextRecord decodes and verifies the record at off as the next record of
// the chain (sequence number seq()+1, chained to head). ok is false for
// anything else: a partial record, zeros, or bytes of any other record.
func (j *Journal) nextRecord(buf []byte, off int64) (Record, int64, bool) {
	return nextRecord(buf, off, j.id, j.seq()+1, &j.head, j.o.MaxRecordBytes)
}

func nextRecord(buf []byte, off int64, id [16]byte, seq uint64, head *[32]byte, maxPayload int) (r Record, end int64, ok bool) {
	rest := int64(len(buf)) - off
	if rest < recOverhead {
		return r, 0, false
	}
	n := binary.LittleEndian.Uint32(buf[off:])
	if uint64(n) > uint64(maxPayload) || RecordSize(int(n)) > rest {
		return r, 0, false
	}
	end = off + RecordSize(int(n))
	if binary.LittleEndian.Uint64(buf[off+4:]) != seq || string(buf[off+12:off+recHeaderLen]) != string(head[:]) {
		return r, 0, false
	}
	p := off + recHeaderLen
	payload := buf[p : p+int64(n) : p+int64(n)]
	h := recordHash(id, seq, head, payload)
	if string(buf[end-32:end]) != string(h[:]) {
		return r, 0, false
	}
	return Record{Seq: seq, Payload: payload, Hash: h, Prev: *head}, end, true
}

// dropTail removes bytes past the last whole record, but only if they could
// be what a crashed Append leaves: at most one record, and, once its header
// is there, the header of exactly the next record (an all-zero header is a
// block the crash kept from reaching disk). Anything else was put there by
// someone else and Open refuses rather than destroy it.
func (j *Journal) dropTail(tail []byte) (int64, error) {
	n := int64(len(tail))
	if n == 0 {
		return 0, nil
	}
	if n > RecordSize(j.o.MaxRecordBytes) {
		return 0, j.corrupt("%d bytes past the committed length, more than one append leaves (externally extended)", n)
	}
	if n >= recHeaderLen && strings.Trim(string(tail[:recHeaderLen]), "\x00") != "" {
		plen := binary.LittleEndian.Uint32(tail)
		seq := binary.LittleEndian.Uint64(tail[4:])
		if uint64(plen) > uint64(j.o.MaxRecordBytes) || RecordSize(int(plen)) < n ||
			seq != j.seq()+1 || string(tail[12:recHeaderLen]) != string(j.head[:]) {
			return 0, j.corrupt("%d bytes past the committed length are not a torn record %d (externally extended)", n, j.seq()+1)
		}
		if e, ok := j.wholeRecordIn(tail); ok {
			return 0, j.corrupt("record %d is whole in %d bytes but its length field says %d (damaged length)", j.seq()+1, e, plen)
		}
	}
	if err := unix.Ftruncate(j.fd, j.length); err != nil {
		return 0, fmt.Errorf("journal %s: truncate torn tail: %w", j.kind, err)
	}
	if err := unix.Fsync(j.fd); err != nil {
		return 0, fmt.Errorf("journal %s: truncate torn tail: fsync: %w", j.kind, err)
	}
	return n, nil
}

// wholeRecordIn reports whether tail, which looks like a torn record (its
// header is that of the next record, its length field reaches past the
// end), holds that record whole under another length: ending at the end
// of the file, or where a header of the record after it starts. A torn
// append never does (a whole record would have verified), so such a tail
// is a damaged length field. Threat: one flipped length bit in a record
// the header does not commit yet turning it and the durable records after
// it into a "torn tail" that Open silently drops.
func (j *Journal) wholeRecordIn(tail []byte) (end int64, ok bool) {
	seq := j.seq() + 1
	verifies := func(e int) bool {
		if e < recOverhead || e-recOverhead > j.o.MaxRecordBytes || e > len(tail) {
			return false
		}
		h := recordHash(j.id, seq, &j.head, tail[recHeaderLen:e-32])
		return string(tail[e-32:e]) == string(h[:])
	}
	if verifies(len(tail)) {
		return int64(len(tail)), true
	}
	var next [8]byte
	binary.LittleEndian.PutUint64(next[:], seq+1)
	for off := recOverhead; off+12 <= len(tail); off++ {
		i := bytes.Index(tail[off+4:], next[:])
		if i < 0 {
			break
		}
		off += i // tail[off+4:off+12] is a sequence number seq+1
		if verifies(off) {
			return int64(off), true
		}
	}
	return 0, false
}

// seq is the last committed sequence number.
func (j *Journal) seq() uint64 { return j.base + uint64(j.count) }

// heal undoes a failed append (nothing of it is committed: the slot it
// may have written commits only earlier records) by truncating to the
// committed length, durably.
// Called with mu held on a poisoned journal; on success it is usable again.
func (j *Journal) heal() error {
	if !j.healable {
		return j.err
	}
	// If the truncation or its sync fails too, the first error stands:
	// it is the one that says what went wrong.
	if unix.Ftruncate(j.fd, j.length) != nil || unix.Fdatasync(j.fd) != nil {
		return j.err
	}
	// The truncation freed any preallocated blocks past the length.
	j.err, j.healable, j.prealloc = nil, false, 0
	return nil
}

// slotLag is K, the most records the file holds past the commit point
// of the header slot in force, the append in flight (whole or torn)
// included. Append writes the older slot only when the record it
// appends would be the slotLag-th past the header: once in 63 appends
// (the slot it writes commits the records before its own), not on
// every append. Why: the slot is a second dirty block for the append's
// fdatasync, a second write the disk must make durable; written on
// every append it cost about a tenth of an fdatasync (issue 19: ratio
// 1.125 to one write + fdatasync, 1.03 without it). Amortised over 63
// appends it is under 0.2% of one, and appends without it are one
// record write and one fdatasync.
//
// Why not larger: the records past the header are committed by the
// chain alone, so after a crash a file cut at a record boundary among
// them (by someone else) reads as complete, and damage to the last of
// them reads as a torn append; K bounds that window. It also bounds
// the walk past the header in Open (which reads and verifies the whole
// file anyway, so its cost does not grow with K) and in Peek.
const slotLag = 64

// writesSlot says whether the append of record seq writes the header
// slot, given that the slot in force commits records up to hdrSeq: when
// seq would otherwise be the slotLag-th record past the header. The
// rule counts from the header in force (not seq modulo K), so the bound
// holds whatever brought the header where it is: a checkpoint, a
// compaction, or an Open that found records past it.
func writesSlot(seq, hdrSeq uint64) bool { return seq-hdrSeq >= slotLag }

// Append writes payload as the next record and returns once it is durable.
func (j *Journal) Append(payload []byte) (Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	seq := j.seq() + 1
	size := RecordSize(len(payload))
	if j.fd >= 0 && j.err != nil {
		if err := j.heal(); err != nil {
			return Record{}, err
		}
	}
	switch {
	case j.fd < 0:
		return Record{}, fmt.Errorf("journal %s: append: %w", j.kind, os.ErrClosed)
	case len(payload) > j.o.MaxRecordBytes:
		return Record{}, fmt.Errorf("journal %s: append record %d: payload of %d bytes over the %d-byte record bound: %w", j.kind, seq, len(payload), j.o.MaxRecordBytes, ErrFull)
	case j.count >= j.o.MaxRecords:
		return Record{}, fmt.Errorf("journal %s: append record %d: at the %d-record bound: %w", j.kind, seq, j.o.MaxRecords, ErrFull)
	case j.length+size > j.o.MaxBytes:
		return Record{}, fmt.Errorf("journal %s: append record %d: %d bytes would pass the %d-byte bound: %w", j.kind, seq, size, j.o.MaxBytes, ErrFull)
	}
	prev := j.head
	hash := recordHash(j.id, seq, &j.head, payload)
	rec := encodeRecord(seq, &j.head, payload, &hash)
	// The older slot, when this append writes one, commits the records
	// before this one, which earlier appends (or Open) made durable; so
	// it may reach the disk before or after the record, and the one
	// fdatasync below covers both. A torn slot leaves the other, an
	// earlier commit of the same chain, in force; Open finds the
	// records past it by their hashes.
	writeSlot := writesSlot(seq, j.hdrSeq)
	next := slot{kind: j.tag, ver: j.ver, index: 1 - j.cur, gen: j.gen + 1,
		count: j.seq(), length: uint64(j.length), head: j.head, id: j.id, base: j.base, baseHead: j.baseHead}

	// Every failure below is healable: the slot commits nothing new,
	// so truncating back to the committed length undoes the append.
	j.fault("record-before")
	if err := writeAt(j.fd, rec, j.length, "record-partial", j.fault); err != nil {
		j.healable = true
		return Record{}, j.poison(seq, "write record", err)
	}
	j.fault("record-written")
	if writeSlot {
		if err := writeAt(j.fd, next.encode(), int64(next.index)*slotSize, "header-partial", j.fault); err != nil {
			j.healable = true
			return Record{}, j.poison(seq, "write header", err)
		}
		j.fault("header-written")
	}
	// One fdatasync makes the record, the file's new size and the slot
	// (if written) durable: the record is committed from here.
	if err := unix.Fdatasync(j.fd); err != nil {
		j.healable = true
		return Record{}, j.poison(seq, "sync", err)
	}
	j.fault("record-synced")
	if writeSlot {
		j.cur, j.gen, j.hdrSeq = next.index, next.gen, next.count
	}
	j.count, j.length, j.head = j.count+1, j.length+size, hash
	j.prealloc = max(j.prealloc-size, 0)
	j.written += size
	return Record{Seq: seq, Payload: rec[recHeaderLen : recHeaderLen+len(payload) : recHeaderLen+len(payload)], Hash: hash, Prev: prev}, nil
}

// checkpoint brings the header level with the records: it writes the older
// slot committing every record, and syncs it. Every record it names is
// already durable (an append returns only after its fdatasync; Open syncs
// the records it finds past the header), so the slot may land in any
// order with respect to them. Called by Close and by the upgrade of a
// legacy file; appends do not need it.
func (j *Journal) checkpoint(op string) error {
	next := slot{kind: j.tag, ver: j.ver, index: 1 - j.cur, gen: j.gen + 1,
		count: j.seq(), length: uint64(j.length), head: j.head, id: j.id, base: j.base, baseHead: j.baseHead}
	j.fault("checkpoint-before")
	if err := writeAt(j.fd, next.encode(), int64(next.index)*slotSize, "checkpoint-partial", j.fault); err != nil {
		return fmt.Errorf("journal %s: %s: write header: %w", j.kind, op, spaceError(err))
	}
	if err := unix.Fdatasync(j.fd); err != nil {
		return fmt.Errorf("journal %s: %s: sync header: %w", j.kind, op, spaceError(err))
	}
	j.cur, j.gen, j.hdrSeq = next.index, next.gen, next.count
	return nil
}

// upgrade rewrites both header slots of a file of the older protocol
// (legacyMagic) in this one's, one slot at a time, each synced before the
// next, so a crash leaves at least one valid slot. Until both are
// rewritten nothing is appended: a binary of the older protocol, finding
// a legacy slot, would take records past its header for a torn tail and
// truncate them. Threat: a downgrade silently dropping committed records.
func (j *Journal) upgrade() error {
	for range 2 {
		if err := j.checkpoint("upgrade from the format of " + legacyMagic); err != nil {
			return err
		}
	}
	return nil
}

// poison records the first I/O error. After a failed write or fdatasync
// the file may hold anything from nothing to everything, and a later
// fdatasync may report success for pages the kernel already dropped, so
// only a reopen, which re-verifies, can say what is committed.
func (j *Journal) poison(seq uint64, op string, err error) error {
	err = spaceError(err)
	if j.healable {
		j.err = fmt.Errorf("journal %s: append record %d: %s (nothing committed; the next append retries): %w", j.kind, seq, op, err)
	} else {
		j.err = fmt.Errorf("journal %s: append record %d: %s (journal unusable until reopened): %w", j.kind, seq, op, err)
	}
	return j.err
}

// Count is the number of committed records in the file (since the last
// compaction).
func (j *Journal) Count() int { j.mu.Lock(); defer j.mu.Unlock(); return j.count }

// Seq is the last committed sequence number of the chain (0 for none).
func (j *Journal) Seq() uint64 { j.mu.Lock(); defer j.mu.Unlock(); return j.seq() }

// Stats describes the journal's use of its bounds.
type Stats struct {
	Seq        uint64 // last sequence number of the chain
	Base       uint64 // sequence number before the file's first record
	Records    int    // records in the file
	Bytes      int64  // committed length, headers included
	MaxRecords int
	MaxBytes   int64
	// Preallocated is how many bytes past Bytes are allocated on disk
	// by Preallocate; NoPrealloc says the file system cannot.
	Preallocated int64
	NoPrealloc   bool
	// Written is how many bytes appends and compactions wrote since
	// Open (headers included for compactions).
	Written int64
	// Err is the error that poisons the journal, if any.
	Err error
}

// Stats returns the journal's current figures.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Stats{Seq: j.seq(), Base: j.base, Records: j.count, Bytes: j.length, MaxRecords: j.o.MaxRecords,
		MaxBytes: j.o.MaxBytes, Preallocated: j.prealloc, NoPrealloc: j.noAlloc, Written: j.written, Err: j.err}
}

// Size is the committed length of the file, headers included.
func (j *Journal) Size() int64 { j.mu.Lock(); defer j.mu.Unlock(); return j.length }

// Head is the hash of the last committed record, or the genesis hash.
func (j *Journal) Head() [32]byte { j.mu.Lock(); defer j.mu.Unlock(); return j.head }

// Remaining is the capacity left under MaxRecords and MaxBytes. A record of
// n payload bytes fits when records > 0, RecordSize(n) <= bytes and n is
// within MaxRecordBytes.
func (j *Journal) Remaining() (records int, bytes int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return max(j.o.MaxRecords-j.count, 0), max(j.o.MaxBytes-j.length, 0)
}

// Close writes a checkpoint and releases the writer lock. Every successful
// Append is already durable; the checkpoint only brings the header level
// with the records, so that Open can tell a file cut short at a record
// boundary (externally truncated) from one that ends there. A poisoned
// journal gets none: its state is for a reopen to judge.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fd < 0 {
		return nil
	}
	var err error
	if j.err == nil && j.hdrSeq != j.seq() {
		err = j.checkpoint("close")
	}
	if cerr := j.closeFd(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("journal %s: close: %w", j.kind, cerr))
	}
	return err
}

func (j *Journal) closeFd() error {
	var err error
	if j.dirfd >= 0 {
		err = unix.Close(j.dirfd)
		j.dirfd = -1
	}
	if j.fd < 0 {
		return err
	}
	if cerr := unix.Close(j.fd); err == nil {
		err = cerr
	}
	j.fd = -1
	return err
}

// writeAt writes b at off. Under a test fault hook it stops halfway and
// calls the hook at partialPoint, which is how tests stage a torn write.
func writeAt(fd int, b []byte, off int64, partialPoint string, fault func(string)) error {
	if faultHook != nil || kindFaultHook != nil {
		half := len(b) / 2
		if err := pwriteFull(fd, b[:half], off); err != nil {
			return err
		}
		fault(partialPoint)
		b, off = b[half:], off+int64(half)
	}
	return pwriteFull(fd, b, off)
}

// statProblem says what makes st unfit to be the journal's directory or
// file, or "" if nothing does.
func statProblem(st *unix.Stat_t, typ, perm uint32) string {
	switch {
	case st.Mode&unix.S_IFMT != typ:
		return fmt.Sprintf("file type %#o, want %#o", st.Mode&unix.S_IFMT, typ)
	case st.Uid != uint32(os.Geteuid()):
		return fmt.Sprintf("owned by uid %d, want %d", st.Uid, os.Geteuid())
	case st.Mode&07777 != perm:
		return fmt.Sprintf("mode %#o, want %#o", st.Mode&07777, perm)
	}
	return ""
}

func pwriteFull(fd int, b []byte, off int64) error {
	return fullIO("pwrite", func(b []byte, off int64) (int, error) { return unix.Pwrite(fd, b, off) }, b, off)
}

func preadFull(fd int, b []byte, off int64) error {
	return fullIO("pread", func(b []byte, off int64) (int, error) { return unix.Pread(fd, b, off) }, b, off)
}

// fullIO repeats a positional read or write until all of b is done.
func fullIO(op string, f func([]byte, int64) (int, error), b []byte, off int64) error {
	for len(b) > 0 {
		n, err := f(b, off)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("%s at %d: %w", op, off, err)
		case n == 0:
			// Only a file shrunk since fstat reads short: someone else
			// is changing it.
			return fmt.Errorf("%s at %d: %w (file changed underneath)", op, off, io.ErrUnexpectedEOF)
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// Preallocate makes sure the n bytes past the committed length are
// allocated on disk, so that appends of up to n bytes cannot fail for
// lack of space. It never changes the file's size or its committed
// content, and a failure leaves the journal usable. On a file system
// that cannot preallocate it does nothing (Stats.NoPrealloc).
func (j *Journal) Preallocate(n int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fd < 0 {
		return fmt.Errorf("journal %s: preallocate: %w", j.kind, os.ErrClosed)
	}
	return j.preallocate(j.fd, j.length, n)
}

func (j *Journal) preallocate(fd int, length, n int64) error {
	if n <= 0 || j.noAlloc || (fd == j.fd && n <= j.prealloc) {
		return nil
	}
	n = min(n, j.o.MaxBytes-length)
	if n <= 0 {
		return nil
	}
	j.fault("preallocate")
	err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, length, n)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		j.noAlloc = true
		return nil
	case err != nil:
		return fmt.Errorf("journal %s: preallocate %d bytes: %w", j.kind, n, spaceError(err))
	}
	if fd == j.fd {
		j.prealloc = n
	}
	return nil
}

// Compact replaces the file with a new generation whose records are
// carry, in order: the first continues the chain (sequence number Seq()+1,
// chained to Head()), so the new file commits the old one's last
// sequence number and hash. carry[0] is meant to be the caller's
// checkpoint record, which says what the rest carries over. prealloc
// bytes past the new file's end are allocated before it replaces the old
// one. It returns the new records.
//
// On an error before the new file replaces the old one, the journal is
// unchanged and usable; after that point (the directory's fsync) it is
// poisoned. The bounds apply to the new file as to any other.
func (j *Journal) Compact(carry [][]byte, prealloc int64) ([]Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fd < 0 {
		return nil, fmt.Errorf("journal %s: compact: %w", j.kind, os.ErrClosed)
	}
	if j.err != nil {
		if err := j.heal(); err != nil {
			return nil, err
		}
	}
	switch {
	case len(carry) == 0:
		return nil, fmt.Errorf("journal %s: compact: nothing to carry over (want at least a checkpoint record)", j.kind)
	case len(carry) > j.o.MaxRecords:
		return nil, fmt.Errorf("journal %s: compact: %d records over the %d-record bound: %w", j.kind, len(carry), j.o.MaxRecords, ErrFull)
	}
	base, baseHead := j.seq(), j.head
	size := int64(dataStart)
	for i, p := range carry {
		if len(p) > j.o.MaxRecordBytes {
			return nil, fmt.Errorf("journal %s: compact: record %d of %d bytes over the %d-byte record bound: %w", j.kind, i+1, len(p), j.o.MaxRecordBytes, ErrFull)
		}
		size += RecordSize(len(p))
	}
	if size > j.o.MaxBytes {
		return nil, fmt.Errorf("journal %s: compact: %d bytes would pass the %d-byte bound: %w", j.kind, size, j.o.MaxBytes, ErrFull)
	}
	buf := make([]byte, dataStart, size)
	recs := make([]Record, 0, len(carry))
	head := baseHead
	for i, p := range carry {
		seq := base + 1 + uint64(i)
		hash := recordHash(j.id, seq, &head, p)
		off := len(buf) + recHeaderLen
		buf = append(buf, encodeRecord(seq, &head, p, &hash)...)
		recs = append(recs, Record{Seq: seq, Payload: buf[off : off+len(p) : off+len(p)], Hash: hash, Prev: head})
		head = hash
	}
	// Slot 0: the file with none of its records (the older commit
	// point); slot 1: all of them, in force.
	empty := slot{kind: j.tag, ver: formatBased, index: 0, gen: 1, count: base, length: dataStart,
		head: baseHead, id: j.id, base: base, baseHead: baseHead}
	full := empty
	full.index, full.gen, full.count, full.length, full.head = 1, 2, base+uint64(len(carry)), uint64(size), head
	copy(buf[0:], empty.encode())
	copy(buf[slotSize:], full.encode())

	fd, err := j.writeCompacted(buf, prealloc)
	if err != nil {
		return nil, err
	}
	// In force from here: the old file is unlinked, and its descriptor
	// (with its lock) is closed below.
	old := j.fd
	j.fd, j.ver, j.cur, j.gen, j.base, j.baseHead = fd, formatBased, 1, 2, base, baseHead
	j.count, j.length, j.head, j.prealloc = len(carry), size, head, max(prealloc, 0)
	j.hdrSeq = full.count
	j.written += size
	if j.noAlloc {
		j.prealloc = 0
	}
	if err := unix.Close(old); err != nil {
		// The old file is already replaced; nothing of it is needed.
		return recs, fmt.Errorf("journal %s: compact: close the replaced file: %w", j.kind, err)
	}
	return recs, nil
}

// writeCompacted writes buf as the new file under a temporary name and
// renames it over the journal (see the package comment's protocol). It
// returns the new file's descriptor, locked.
func (j *Journal) writeCompacted(buf []byte, prealloc int64) (int, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return -1, fmt.Errorf("journal %s: compact: random name: %w", j.kind, err)
	}
	tmp := "." + j.o.Name + ".compact-" + hex.EncodeToString(rnd[:])
	j.fault("compact-begin")
	fd, err := unix.Openat(j.dirfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0600)
	if err != nil {
		return -1, fmt.Errorf("journal %s: compact: create %s: %w", j.kind, tmp, spaceError(err))
	}
	renamed := false
	defer func() {
		if renamed {
			return
		}
		// A failed compaction leaves the journal as it was; a
		// temporary file that cannot be removed here is removed by the
		// next Open, so these errors change nothing.
		_ = unix.Unlinkat(j.dirfd, tmp, 0)
		_ = unix.Close(fd)
	}()
	if err := unix.Fchmod(fd, 0600); err != nil {
		return -1, fmt.Errorf("journal %s: compact: fchmod: %w", j.kind, err)
	}
	// Locked before its name is the journal's, like a new journal.
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return -1, fmt.Errorf("journal %s: compact: lock the new file: %w", j.kind, err)
	}
	if err := j.preallocate(fd, int64(len(buf)), prealloc); err != nil {
		return -1, fmt.Errorf("journal %s: compact: %w", j.kind, err)
	}
	if err := writeAt(fd, buf, 0, "compact-partial", j.fault); err != nil {
		return -1, fmt.Errorf("journal %s: compact: write the new file: %w", j.kind, spaceError(err))
	}
	j.fault("compact-written")
	if err := unix.Fsync(fd); err != nil {
		return -1, fmt.Errorf("journal %s: compact: fsync the new file: %w", j.kind, spaceError(err))
	}
	j.fault("compact-synced")
	if err := unix.Renameat(j.dirfd, tmp, j.dirfd, j.o.Name); err != nil {
		return -1, fmt.Errorf("journal %s: compact: rename over %s: %w", j.kind, j.o.Name, err)
	}
	renamed = true
	j.fault("compact-renamed")
	// Until the rename is durable a crash may bring back the old file,
	// so nothing may be appended to the new one before this fsync.
	dfd, err := unix.Openat(j.dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Fsync(dfd)
		if cerr := unix.Close(dfd); err == nil {
			err = cerr
		}
	}
	if err != nil {
		// The name may be the old file or the new one after a crash;
		// only a reopen can say which, so the journal refuses writes.
		// The new file's descriptor is kept so Close releases it.
		old := j.fd
		j.fd = fd
		if cerr := unix.Close(old); cerr != nil {
			err = errors.Join(err, cerr)
		}
		j.healable = false
		j.err = fmt.Errorf("journal %s: compact: fsync the directory (journal unusable until reopened): %w", j.kind, err)
		return -1, j.err
	}
	j.fault("compact-dir-synced")
	return fd, nil
}

// peekTailMax bounds how much of the file past the header's commit point
// Peek reads.
const peekTailMax = 64 << 20

// Peek reads a journal's committed figures from its header and the whole
// records that follow the header's commit point in the chain (the header
// lags the records by design): no lock, no verification of the records
// the header commits (the writer may be appending). For status reports;
// Open is what trusts a journal.
func Peek(dir, name, kind string) (Stats, error) {
	var st Stats
	fd, err := unix.Open(dir+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return st, fmt.Errorf("journal %s: peek %s: %w", kind, name, err)
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return st, fmt.Errorf("journal %s: peek %s: %w", kind, name, err)
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, fmt.Errorf("journal %s: peek %s: not a regular file: %w", kind, name, ErrUnsafeFile)
	}
	buf := make([]byte, dataStart)
	if err := preadFull(fd, buf, 0); err != nil {
		return st, fmt.Errorf("journal %s: peek %s: %w", kind, name, err)
	}
	s0, ok0 := decodeSlot(buf, 0)
	s1, ok1 := decodeSlot(buf, 1)
	cur := s0
	if !ok0 || (ok1 && s1.gen > s0.gen) {
		cur = s1
	}
	var tag [8]byte
	copy(tag[:], kind)
	if (!ok0 && !ok1) || cur.kind != tag || cur.count < cur.base {
		return st, fmt.Errorf("journal %s: peek %s: no valid header of this kind: %w", kind, name, ErrCorrupt)
	}
	st.Seq, st.Base, st.Records, st.Bytes = cur.count, cur.base, int(cur.count-cur.base), int64(cur.length)
	st.Preallocated = max(fst.Blocks*512-fst.Size, 0)
	if fst.Size > st.Bytes {
		// A record the writer is appending meanwhile may be read in
		// part; a partial one fails its hash and ends the walk. The
		// read is bounded (threat: a file grown by someone else making
		// a status report allocate without bound); the header lags by
		// fewer than slotLag records, and the whole file of a journal
		// within the default 64 MiB MaxBytes fits the bound.
		tail := make([]byte, min(fst.Size-st.Bytes, peekTailMax))
		if err := preadFull(fd, tail, st.Bytes); err != nil {
			return st, fmt.Errorf("journal %s: peek %s: %w", kind, name, err)
		}
		head, off := cur.head, int64(0)
		for {
			r, end, ok := nextRecord(tail, off, cur.id, st.Seq+1, &head, math.MaxUint32)
			if !ok {
				break
			}
			st.Seq, st.Records, st.Bytes, head, off = r.Seq, st.Records+1, st.Bytes+end-off, r.Hash, end
		}
	}
	return st, nil
}
