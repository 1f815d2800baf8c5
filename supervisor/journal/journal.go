package journal

import (
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
)

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
}

// OpenInfo says what Open found.
type OpenInfo struct {
	// Created: the file did not exist and Open created it.
	Created bool
	// TornTailBytes is how many uncommitted bytes past the committed
	// length (left by a crash during Append) Open truncated.
	TornTailBytes int64
}

// Journal is an open journal holding the writer lock. Its methods are safe
// for concurrent use.
type Journal struct {
	mu     sync.Mutex
	fd     int
	kind   string
	o      Options
	tag    [8]byte
	id     [16]byte
	cur    uint32 // index of the slot holding the committed state
	gen    uint64
	count  int
	length int64
	head   [32]byte
	err    error // first Append I/O error; poisons the journal
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
	j := &Journal{fd: -1, kind: o.Kind, o: o}
	copy(j.tag[:], o.Kind)
	dirfd, err := j.openDir()
	if err != nil {
		return nil, nil, info, err
	}
	defer unix.Close(dirfd)

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
		return nil, nil, info, fmt.Errorf("journal %s: open %s: %w: %w", o.Kind, o.Name, ErrUnsafeFile, err)
	case err != nil:
		return nil, nil, info, fmt.Errorf("journal %s: open %s: %w", o.Kind, o.Name, err)
	}
	size, err := j.checkFile()
	if err == nil {
		err = j.lock()
	}
	var recs []Record
	if err == nil {
		recs, info.TornTailBytes, err = j.load(size)
	}
	if err != nil {
		j.closeFd()
		return nil, nil, info, err
	}
	return j, recs, info, nil
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
// commit point, verifies every committed record and removes a torn tail.
func (j *Journal) load(size int64) ([]Record, int64, error) {
	buf := make([]byte, size)
	if err := preadFull(j.fd, buf, 0); err != nil {
		return nil, 0, fmt.Errorf("journal %s: read %s: %w", j.kind, j.o.Name, err)
	}
	s0, ok0 := decodeSlot(buf, 0)
	s1, ok1 := decodeSlot(buf, 1)
	cur, old, hasOld := s0, s1, ok1
	if !ok0 || (ok1 && s1.gen > s0.gen) {
		cur, old, hasOld = s1, s0, ok0
	}
	if !ok0 && !ok1 {
		return nil, 0, j.corrupt("no valid header slot (both torn or overwritten)")
	}
	if cur.kind != j.tag {
		return nil, 0, j.corrupt("file holds kind %q (wrong kind)", strings.TrimRight(string(cur.kind[:]), "\x00"))
	}
	if cur.ver != formatVersion {
		return nil, 0, j.corrupt("format version %d, want %d", cur.ver, formatVersion)
	}
	if hasOld && (old.kind != cur.kind || old.ver != cur.ver || old.id != cur.id || old.gen+1 != cur.gen || old.count > cur.count) {
		return nil, 0, j.corrupt("header slots disagree (generations %d and %d)", old.gen, cur.gen)
	}
	if cur.length > uint64(size) {
		return nil, 0, j.corrupt("file is %d bytes, shorter than the committed %d (externally truncated)", size, cur.length)
	}
	if cur.length < dataStart {
		return nil, 0, j.corrupt("committed length %d is inside the header", cur.length)
	}
	length := int64(cur.length)
	// Bound the count before allocating for it: every record takes at
	// least recOverhead bytes of the committed length.
	if cur.count > uint64(j.o.MaxRecords) || cur.count > uint64((length-dataStart)/recOverhead) {
		return nil, 0, j.corrupt("header claims %d records, more than the bound %d or the committed length holds", cur.count, j.o.MaxRecords)
	}
	j.id, j.cur, j.gen, j.head = cur.id, cur.index, cur.gen, genesisHash(cur.id, j.tag)
	recs := make([]Record, 0, cur.count)
	off := int64(dataStart)
	for i := uint64(1); ; i++ {
		// The older slot must be an earlier commit of this same chain.
		if hasOld && i-1 == old.count && (old.length != uint64(off) || old.head != j.head) {
			return nil, 0, j.corrupt("older header slot does not match record %d (header slots disagree)", i-1)
		}
		if i > cur.count {
			break
		}
		if off == length {
			return nil, 0, j.corrupt("record %d: missing, header claims %d records (count mismatch)", i, cur.count)
		}
		if length-off < recOverhead {
			return nil, 0, j.corrupt("record %d: crosses the committed length %d", i, length)
		}
		n := binary.LittleEndian.Uint32(buf[off:])
		if uint64(n) > uint64(j.o.MaxRecordBytes) {
			return nil, 0, j.corrupt("record %d: length %d exceeds the %d-byte record bound", i, n, j.o.MaxRecordBytes)
		}
		end := off + RecordSize(int(n))
		if end > length {
			return nil, 0, j.corrupt("record %d: length %d crosses the committed length %d", i, n, length)
		}
		if seq := binary.LittleEndian.Uint64(buf[off+4:]); seq != i {
			return nil, 0, j.corrupt("record %d: sequence %d, want %d (reordered or duplicated)", i, seq, i)
		}
		if string(buf[off+12:off+recHeaderLen]) != string(j.head[:]) {
			return nil, 0, j.corrupt("record %d: previous hash mismatch (reordered, duplicated or spliced)", i)
		}
		p := off + recHeaderLen
		payload := buf[p : p+int64(n) : p+int64(n)]
		h := recordHash(j.id, i, &j.head, payload)
		if string(buf[end-32:end]) != string(h[:]) {
			return nil, 0, j.corrupt("record %d: hash mismatch (corrupt)", i)
		}
		recs = append(recs, Record{Seq: i, Payload: payload, Hash: h})
		j.head, off = h, end
	}
	if off != length {
		return nil, 0, j.corrupt("committed length %d leaves %d bytes after record %d (count mismatch)", length, length-off, cur.count)
	}
	if j.head != cur.head {
		return nil, 0, j.corrupt("head hash does not match record %d (corrupt)", cur.count)
	}
	j.count, j.length = int(cur.count), length
	torn, err := j.dropTail(buf[length:])
	return recs, torn, err
}

// dropTail removes bytes past the committed length, but only if they could
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
			seq != uint64(j.count)+1 || string(tail[12:recHeaderLen]) != string(j.head[:]) {
			return 0, j.corrupt("%d bytes past the committed length are not a torn record %d (externally extended)", n, j.count+1)
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

// Append writes payload as the next record and returns once it is durable.
func (j *Journal) Append(payload []byte) (Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	seq := uint64(j.count) + 1
	size := RecordSize(len(payload))
	switch {
	case j.fd < 0:
		return Record{}, fmt.Errorf("journal %s: append: %w", j.kind, os.ErrClosed)
	case j.err != nil:
		return Record{}, j.err
	case len(payload) > j.o.MaxRecordBytes:
		return Record{}, fmt.Errorf("journal %s: append record %d: payload of %d bytes over the %d-byte record bound: %w", j.kind, seq, len(payload), j.o.MaxRecordBytes, ErrFull)
	case j.count >= j.o.MaxRecords:
		return Record{}, fmt.Errorf("journal %s: append record %d: at the %d-record bound: %w", j.kind, seq, j.o.MaxRecords, ErrFull)
	case j.length+size > j.o.MaxBytes:
		return Record{}, fmt.Errorf("journal %s: append record %d: %d bytes would pass the %d-byte bound: %w", j.kind, seq, size, j.o.MaxBytes, ErrFull)
	}
	hash := recordHash(j.id, seq, &j.head, payload)
	rec := encodeRecord(seq, &j.head, payload, &hash)
	next := slot{kind: j.tag, ver: formatVersion, index: 1 - j.cur, gen: j.gen + 1,
		count: seq, length: uint64(j.length + size), head: hash, id: j.id}

	fault("record-before")
	if err := writeAt(j.fd, rec, j.length, "record-partial"); err != nil {
		return Record{}, j.poison(seq, "write record", err)
	}
	fault("record-written")
	// The record must be on disk before a header points at it, or a crash
	// could leave a committed header over missing bytes.
	if err := unix.Fdatasync(j.fd); err != nil {
		return Record{}, j.poison(seq, "sync record", err)
	}
	fault("record-synced")
	// Overwrite the older slot: the one in force stays intact if this
	// write tears.
	if err := writeAt(j.fd, next.encode(), int64(next.index)*slotSize, "header-partial"); err != nil {
		return Record{}, j.poison(seq, "write header", err)
	}
	fault("header-written")
	if err := unix.Fdatasync(j.fd); err != nil {
		return Record{}, j.poison(seq, "sync header", err)
	}
	fault("header-synced")
	j.cur, j.gen, j.count, j.length, j.head = next.index, next.gen, int(seq), j.length+size, hash
	return Record{Seq: seq, Payload: rec[recHeaderLen : recHeaderLen+len(payload) : recHeaderLen+len(payload)], Hash: hash}, nil
}

// poison records the first I/O error. After a failed write or fdatasync
// the file may hold anything from nothing to everything, and a later
// fdatasync may report success for pages the kernel already dropped, so
// only a reopen, which re-verifies, can say what is committed.
func (j *Journal) poison(seq uint64, op string, err error) error {
	j.err = fmt.Errorf("journal %s: append record %d: %s (journal unusable until reopened): %w", j.kind, seq, op, err)
	return j.err
}

// Count is the number of committed records.
func (j *Journal) Count() int { j.mu.Lock(); defer j.mu.Unlock(); return j.count }

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

// Close releases the writer lock. Every successful Append is already
// durable, so there is nothing to flush.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fd < 0 {
		return nil
	}
	if err := j.closeFd(); err != nil {
		return fmt.Errorf("journal %s: close: %w", j.kind, err)
	}
	return nil
}

func (j *Journal) closeFd() error {
	if j.fd < 0 {
		return nil
	}
	err := unix.Close(j.fd)
	j.fd = -1
	return err
}

// writeAt writes b at off. Under a test fault hook it stops halfway and
// calls the hook at partialPoint, which is how tests stage a torn write.
func writeAt(fd int, b []byte, off int64, partialPoint string) error {
	if faultHook != nil {
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
