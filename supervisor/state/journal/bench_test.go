package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkAppend is one durable append of a 512-byte payload: record
// write, fdatasync, header write, fdatasync.
func BenchmarkAppend(b *testing.B) {
	o := testOpts(testDir(b))
	o.MaxRecords = b.N + 1
	o.MaxBytes = dataStart + int64(b.N+1)*RecordSize(512)
	j, _, _ := mustOpen(b, o)
	defer j.Close()
	p := bytes.Repeat([]byte{'p'}, 512)
	b.SetBytes(RecordSize(512))
	b.ResetTimer()
	for range b.N {
		if _, err := j.Append(p); err != nil {
			b.Fatal(err)
		}
	}
}

// reopenStore is the file of a full store, built with the real writer
// once per test binary: 10,000 durable appends take seconds, and the
// benchmark function itself runs more than once.
var reopenStore []byte

// BenchmarkReopen10000 opens (lock, read, verify every hash) a full store
// of 10,000 records of 512 bytes, gloved's default bound.
func BenchmarkReopen10000(b *testing.B) {
	if reopenStore == nil {
		dir := testDir(b)
		j, _, _ := mustOpen(b, testOpts(dir))
		p := bytes.Repeat([]byte{'p'}, 512)
		for range 10000 {
			if _, err := j.Append(p); err != nil {
				b.Fatal(err)
			}
		}
		if r, _ := j.Remaining(); r != 0 {
			b.Fatalf("store not full: %d records left", r)
		}
		j.Close()
		var err error
		if reopenStore, err = os.ReadFile(filepath.Join(dir, testName)); err != nil {
			b.Fatal(err)
		}
	}
	dir := testDir(b)
	if err := os.WriteFile(filepath.Join(dir, testName), reopenStore, 0600); err != nil {
		b.Fatal(err)
	}
	o := testOpts(dir)
	b.SetBytes(int64(len(reopenStore)))
	b.ResetTimer()
	for range b.N {
		j, recs, _, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		if len(recs) != 10000 {
			b.Fatalf("%d records", len(recs))
		}
		j.Close()
	}
}

// BenchmarkAppendBaseline is the anchor for BenchmarkAppend in the same
// run: the least any durable append costs on this disk, one write of the
// same bytes and one fdatasync, with no header commit. The ratio of the
// two is the price of the two-phase commit that makes a torn append
// recoverable.
func BenchmarkAppendBaseline(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(testDir(b), "baseline"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := bytes.Repeat([]byte{'p'}, int(RecordSize(512)))
	b.SetBytes(RecordSize(512))
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(p); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}
