// SPDX-License-Identifier: Apache-2.0

package loopext4format

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"golang.org/x/sys/unix"
)

func TestMkfsArgsFixed(t *testing.T) {
	want := []string{"mkfs.ext4", "-q", "-F", "-t", "ext4", "-m", "0", "-E", "nodiscard,root_owner=1000:1001", "/proc/self/fd/3"}
	if got := mkfsArgs(1000, 1001); !slices.Equal(got, want) {
		t.Errorf("mkfsArgs = %q, want %q", got, want)
	}
}

func TestBoundedBuffer(t *testing.T) {
	b := &boundedBuffer{max: 8}
	for _, s := range []string{"abc", "defgh", "ijk"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "abcdefgh [3 more bytes]" {
		t.Errorf("kept %q", got)
	}
}

// TestCheckRequest checks the formatter's own checks of what it is
// handed: glove-loopext4's name grammar (the cases of its TestValidName),
// a directory as the root, a regular file as mkfs.ext4.
func TestCheckRequest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mkfs")
	if err := os.WriteFile(file, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	open := func(p string) *os.File {
		f, err := os.OpenFile(p, unix.O_PATH, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	root, exe := open(dir), open(file)
	long := strings.Repeat("a", 64-len(imageSuffix)) + imageSuffix
	for _, c := range []struct {
		name      string
		root, exe *os.File
		code      wire.ErrorCode // 0: accepted
	}{
		{"a.img", root, exe, 0},
		{"session-42_b.img", root, exe, 0},
		{"a..img", root, exe, 0},
		{long, root, exe, 0},
		{"a.img", exe, exe, wire.ErrRefused},
		{"a.img", root, root, wire.ErrRefused},
	} {
		err := checkRequest(&formatwire.FormatRequest{Name: c.name}, c.root, c.exe)
		var e *wire.Error
		if c.code == 0 && err != nil || c.code != 0 && (!errors.As(err, &e) || e.Code != c.code) {
			t.Errorf("checkRequest(%q, %s, %s) = %v, want code %d", c.name, c.root.Name(), c.exe.Name(), err, c.code)
		}
	}
	for _, name := range []string{"", ".img", "a.img.bak", "a.IMG", "A.img", "data", "img", "a/b.img", "../a.img", "..", ".",
		"a.img/", "-F.img", "_a.img", ".hidden.img", "a b.img", "a\x00.img", "a\n.img", "é.img", "a" + long} {
		var e *wire.Error
		if err := checkRequest(&formatwire.FormatRequest{Name: name}, root, exe); !errors.As(err, &e) || e.Code != wire.ErrBadRequest {
			t.Errorf("checkRequest(%q) = %v, want a bad request", name, err)
		}
	}
}
