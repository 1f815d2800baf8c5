package loopext4format

import (
	"slices"
	"testing"
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
