// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkAppend is one durable append of a 512-byte payload (record
// write, header slot write, one fdatasync), side by side with its anchor
// in the same loop: one write of the same bytes at the end of a file on
// the same file system and one fdatasync, the least any durable append
// costs on this disk. The two alternate, so both see the same load; it
// reports each median ("p50-ns", "anchor-p50-ns") and their ratio.
func BenchmarkAppend(b *testing.B) {
	dir := testDir(b)
	o := testOpts(dir)
	o.MaxRecords = b.N + 1
	o.MaxBytes = dataStart + int64(b.N+1)*RecordSize(512)
	j, _, _ := mustOpen(b, o)
	defer j.Close()
	f, err := os.OpenFile(filepath.Join(dir, "anchor"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p := bytes.Repeat([]byte{'p'}, 512)
	rec := bytes.Repeat([]byte{'p'}, int(RecordSize(512)))
	appends := make([]time.Duration, 0, b.N)
	anchors := make([]time.Duration, 0, b.N)
	b.SetBytes(RecordSize(512))
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := j.Append(p); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		appends, anchors = append(appends, t1.Sub(t0)), append(anchors, t2.Sub(t1))
	}
	b.StopTimer()
	p50, anchor := median(appends), median(anchors)
	b.ReportMetric(float64(p50), "p50-ns")
	b.ReportMetric(float64(anchor), "anchor-p50-ns")
	b.ReportMetric(float64(p50)/float64(anchor), "ratio")
}

func median(d []time.Duration) time.Duration {
	d = append([]time.Duration(nil), d...)
	sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	return d[len(d)/2]
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

// BenchmarkAppendBaseline is BenchmarkAppend's anchor on its own: one
// write of the same bytes and one fdatasync, with no journal. (The ratio
// is reported by BenchmarkAppend, which runs both in one loop.)
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
