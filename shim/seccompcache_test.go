// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// testProg is a valid-looking two-instruction program: the decoder
// checks shapes, not meaning.
var testProg = []byte{0x06, 0, 0, 0, 0, 0, 0xff, 0x7f, 0x06, 0, 0, 0, 0, 0, 0, 0}

var testKey = sha256.Sum256([]byte("a profile"))

const testFlags = unix.SECCOMP_FILTER_FLAG_TSYNC

// resum replaces an entry's trailing SHA-256 with the right one, so that
// a case reaches the check behind the checksum.
func resum(b []byte) []byte {
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

func TestDecodeCacheEntryRefuses(t *testing.T) {
	good := encodeCacheEntry(testKey, testFlags, testProg)
	if k, fl, prog, err := decodeCacheEntry(good); err != nil || k != testKey || fl != testFlags || !bytes.Equal(prog, testProg) {
		t.Fatalf("the valid entry: %x %#x %x %v", k, fl, prog, err)
	}
	set := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[off:], v)
		return b
	}
	flagsAt := len(seccompCacheMagic) + sha256.Size
	lenAt := flagsAt + 8
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	long := encodeCacheEntry(testKey, testFlags, make([]byte, (maxCachedInsns+1)*8))
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "bytes, want"},
		{"header only", good[:cacheHeader], "bytes, want"},
		{"truncated", good[:len(good)-1], "checksum"},
		{"appended", append(append([]byte(nil), good...), 0), "checksum"},
		{"flipped program bit", set(cacheHeader, good[cacheHeader]^1), "checksum"},
		{"flipped checksum bit", set(len(good)-1, good[len(good)-1]^1), "checksum"},
		{"zero-filled (torn)", make([]byte, len(good)), "checksum"},
		{"magic", resum(set(0, 'X')), "magic"},
		{"flags without TSYNC", resum(set(flagsAt, le64(unix.SECCOMP_FILTER_FLAG_LOG)...)), "flags"},
		{"unknown flag", resum(set(flagsAt, le64(testFlags|1<<40)...)), "flags"},
		{"length beyond the bytes", resum(set(lenAt, le32(24)...)), "program length 24"},
		{"length short of the bytes", resum(set(lenAt, le32(8)...)), "program length 8"},
		{"length wraps", resum(set(lenAt, le32(1<<32-8)...)), "program length"},
		{"no program", encodeCacheEntry(testKey, testFlags, nil), "multiple of 8"},
		{"odd length", encodeCacheEntry(testKey, testFlags, testProg[:12]), "multiple of 8"},
		{"more than BPF_MAXINSNS", long, "bytes, want"},
		{"BPF_MAXINSNS+1 in a short file", resum(set(lenAt, le32((maxCachedInsns+1)*8)...)), "program length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := decodeCacheEntry(c.b)
			if err == nil || !errors.Is(err, errCacheEntry) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decode: %v, want a refusal naming %q", err, c.want)
			}
		})
	}
	if _, _, _, err := decodeCacheEntry(encodeCacheEntry(testKey, testFlags, make([]byte, maxCachedInsns*8))); err != nil {
		t.Errorf("a program of BPF_MAXINSNS: %v", err)
	}
}

// FuzzDecodeCacheEntry: the decoder never panics, and whatever it
// accepts is exactly what the encoder makes of what it returned. Each
// input is also decoded with its last 32 bytes replaced by the right
// SHA-256, so that the checks behind the checksum are reached too.
func FuzzDecodeCacheEntry(f *testing.F) {
	f.Add(encodeCacheEntry(testKey, testFlags, testProg))
	f.Add(encodeCacheEntry(testKey, cacheFlags, testProg[:8]))
	f.Add([]byte(seccompCacheMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		inputs := [][]byte{b}
		if len(b) >= sha256.Size {
			inputs = append(inputs, resum(b))
		}
		for _, in := range inputs {
			k, fl, prog, err := decodeCacheEntry(in)
			if err != nil {
				continue
			}
			if again := encodeCacheEntry(k, fl, prog); !bytes.Equal(again, in) {
				t.Fatalf("accepted %x, which encodes again as %x", in, again)
			}
		}
	})
}

// cacheDir makes a cache directory as gloved does and opens it O_PATH.
func cacheDir(t *testing.T) (string, *seccompCache) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	c, err := openSeccompCache(fd)
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// TestSeccompCacheHit: a program stored and read back is byte for byte
// what a fresh compile of the profile exports.
func TestSeccompCacheHit(t *testing.T) {
	_, c := cacheDir(t)
	prof := seccomp.DefaultProfile(seccomp.ProfileOptions{})
	flags := seccompFlags(prof)
	key, err := seccompCacheKey(prof, nil, flags)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(key, flags); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("empty cache: %v, want ENOENT", err)
	}
	compiled, err := seccomp.ExportBPF(prof)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.put(key, flags, compiled, false); err != nil {
		t.Fatal(err)
	}
	got, err := c.get(key, flags)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := seccomp.ExportBPF(prof)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fresh) {
		t.Errorf("the cached program (%d bytes) differs from a fresh compile (%d bytes)", len(got), len(fresh))
	}
	if _, err := c.get(key, flags|unix.SECCOMP_FILTER_FLAG_LOG); err == nil {
		t.Error("the entry was used for other flags")
	}
}

// TestSeccompCacheKey: the key changes with each input named, and only
// with them.
func TestSeccompCacheKey(t *testing.T) {
	prof := seccomp.DefaultProfile(seccomp.ProfileOptions{})
	flags := seccompFlags(prof)
	base, err := seccompCacheKey(prof, nil, flags)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := seccompCacheKey(seccomp.DefaultProfile(seccomp.ProfileOptions{}), nil, flags); err != nil || again != base {
		t.Fatalf("the same inputs: %x, %v; want %x", again, err, base)
	}
	intended, empty := "intended", ""
	other := seccomp.DefaultProfile(seccomp.ProfileOptions{})
	other.Syscalls[0].Names = append([]string(nil), other.Syscalls[0].Names[1:]...)
	errno := uint(unix.EACCES)
	otherErrno := seccomp.DefaultProfile(seccomp.ProfileOptions{})
	otherErrno.DefaultErrnoRet = &errno
	for name, in := range map[string]struct {
		s     *specs.LinuxSeccomp
		r     *string
		flags uint
	}{
		"profile":           {other, nil, flags},
		"errnoRet":          {otherErrno, nil, flags},
		"routes intended":   {prof, &intended, flags},
		"routes empty":      {prof, &empty, flags},
		"flags":             {prof, nil, flags | unix.SECCOMP_FILTER_FLAG_LOG},
		"flags and profile": {other, nil, flags | unix.SECCOMP_FILTER_FLAG_LOG},
	} {
		k, err := seccompCacheKey(in.s, in.r, in.flags)
		if err != nil || k == base {
			t.Errorf("%s changed: key %x, %v; want another key", name, k, err)
		}
	}
}

// TestSeccompCacheRefusesEntries: an entry that is not the service
// user's own regular, singly linked 0600 file with the right key inside,
// intact, is refused; put with replace then stores a good one.
func TestSeccompCacheRefusesEntries(t *testing.T) {
	other := sha256.Sum256([]byte("another profile"))
	name := entryName(testKey)
	for _, c := range []struct {
		name string
		make func(t *testing.T, dir, path string)
		root bool
	}{
		{"corrupt", func(t *testing.T, _, path string) {
			b := encodeCacheEntry(testKey, testFlags, testProg)
			b[cacheHeader] ^= 1
			writeEntry(t, path, b)
		}, false},
		{"another key", func(t *testing.T, _, path string) {
			writeEntry(t, path, encodeCacheEntry(other, testFlags, testProg))
		}, false},
		{"other flags", func(t *testing.T, _, path string) {
			writeEntry(t, path, encodeCacheEntry(testKey, testFlags|unix.SECCOMP_FILTER_FLAG_LOG, testProg))
		}, false},
		{"symlink", func(t *testing.T, dir, path string) {
			target := filepath.Join(filepath.Dir(dir), "planted")
			writeEntry(t, target, encodeCacheEntry(testKey, testFlags, testProg))
			if err := os.Symlink(filepath.Base(target), path); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"two links", func(t *testing.T, dir, path string) {
			writeEntry(t, path, encodeCacheEntry(testKey, testFlags, testProg))
			if err := os.Link(path, filepath.Join(dir, "second")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"mode 0644", func(t *testing.T, _, path string) {
			writeEntry(t, path, encodeCacheEntry(testKey, testFlags, testProg))
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"fifo", func(t *testing.T, _, path string) {
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"directory", func(t *testing.T, _, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another owner", func(t *testing.T, _, path string) {
			writeEntry(t, path, encodeCacheEntry(testKey, testFlags, testProg))
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to give the entry another owner")
			}
			dir, cache := cacheDir(t)
			path := filepath.Join(dir, name)
			c.make(t, dir, path)
			done := make(chan error, 1)
			go func() { _, err := cache.get(testKey, testFlags); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("get blocked on the entry")
			}
			if err == nil || errors.Is(err, unix.ENOENT) {
				t.Fatalf("get: %v, want a refusal", err)
			}
			if c.name == "directory" {
				return // put cannot remove a directory; the start compiles
			}
			if err := cache.put(testKey, testFlags, testProg, true); err != nil {
				t.Fatal(err)
			}
			if prog, err := cache.get(testKey, testFlags); err != nil || !bytes.Equal(prog, testProg) {
				t.Errorf("after the replacement: %x, %v", prog, err)
			}
		})
	}
}

func writeEntry(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSeccompCacheRefuses: only a directory of the effective uid
// that neither group nor others may write is a cache.
func TestOpenSeccompCacheRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
		root  bool
	}{
		{"group-writable", func(t *testing.T, p string) { chmod(t, p, 0o770) }, "writable by group", false},
		{"other-writable", func(t *testing.T, p string) { chmod(t, p, 0o703) }, "writable by group", false},
		{"another owner", func(t *testing.T, p string) {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534", true},
		{"a file", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			writeEntry(t, p, nil)
		}, "not a directory", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to give the directory another owner")
			}
			p := filepath.Join(t.TempDir(), "cache")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			c.setup(t, p)
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if _, err := openSeccompCache(fd); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("open: %v, want a refusal naming %q", err, c.want)
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSeccompCachePrune: a full cache loses its oldest entry to a new
// one and never holds more than maxCacheEntries; other names are left.
func TestSeccompCachePrune(t *testing.T) {
	dir, c := cacheDir(t)
	old := time.Now().Add(-time.Hour)
	for i := range maxCacheEntries {
		k := sha256.Sum256([]byte{byte(i)})
		p := filepath.Join(dir, entryName(k))
		writeEntry(t, p, encodeCacheEntry(k, testFlags, testProg))
		at := old.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	writeEntry(t, filepath.Join(dir, "not-an-entry"), nil)
	if err := c.put(testKey, testFlags, testProg, false); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != maxCacheEntries+1 {
		t.Errorf("%d names after the put, want %d entries and the other name", len(ents), maxCacheEntries)
	}
	oldest := sha256.Sum256([]byte{0})
	if _, err := os.Stat(filepath.Join(dir, entryName(oldest))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the oldest entry: %v, want it removed", err)
	}
	for _, n := range []string{entryName(testKey), "not-an-entry"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// BenchmarkStage0Seccomp is stage 0's seccomp work for Glove's default
// profile, in this process: what a start without a cache does (the
// routes check, libseccomp's compile and BPF export), and what one with
// a warm cache does instead (the key and the entry's read and checks).
func BenchmarkStage0Seccomp(b *testing.B) {
	prof := seccomp.DefaultProfile(seccomp.ProfileOptions{})
	flags := seccompFlags(prof)
	b.Run("compile", func(b *testing.B) {
		for range b.N {
			if err := seccomp.CheckRoutes(prof); err != nil {
				b.Fatal(err)
			}
			c, err := compileSeccomp(prof)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.BPF(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cache-hit", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "cache")
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		c, err := openSeccompCache(fd)
		if err != nil {
			b.Fatal(err)
		}
		key, err := seccompCacheKey(prof, nil, flags)
		if err != nil {
			b.Fatal(err)
		}
		prog, err := seccomp.ExportBPF(prof)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.put(key, flags, prog, false); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			k, err := seccompCacheKey(prof, nil, flags)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.get(k, flags); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSeccompCacheLookup: without a cache nothing is looked up or
// stored; a miss gives a store that makes the next lookup a hit; the
// routes annotation is part of the key.
func TestSeccompCacheLookup(t *testing.T) {
	s := &specs.Spec{Linux: &specs.Linux{Seccomp: seccomp.DefaultProfile(seccomp.ProfileOptions{})}}
	flags := seccompFlags(s.Linux.Seccomp)
	var none *seccompCache
	if prog, store := none.lookup(s, flags); prog != nil || store != nil {
		t.Fatal("no cache: a program or a store")
	}
	_, c := cacheDir(t)
	prog, store := c.lookup(s, flags)
	if prog != nil || store == nil {
		t.Fatalf("cold cache: program %v, store %v", prog != nil, store != nil)
	}
	if err := store(testProg); err != nil {
		t.Fatal(err)
	}
	if prog, store := c.lookup(s, flags); !bytes.Equal(prog, testProg) || store != nil {
		t.Errorf("after the store: %x, store %v; want the stored program", prog, store != nil)
	}
	s.Annotations = map[string]string{seccomp.RoutesAnnotation: "intended"}
	if prog, _ := c.lookup(s, flags); prog != nil {
		t.Error("the program stored without the routes annotation was found with it")
	}
}
