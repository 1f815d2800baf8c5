package session

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseInotify: events of one read are decoded in order, their
// names without the NUL padding; an event whose name runs past the bytes
// read ends the list; a queue overflow is told.
func TestParseInotify(t *testing.T) {
	ev := func(wd int32, mask uint32, name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent)
		binary.NativeEndian.PutUint32(b[0:4], uint32(wd))
		binary.NativeEndian.PutUint32(b[4:8], mask)
		binary.NativeEndian.PutUint32(b[12:16], uint32(len(name)+pad))
		return append(append(b, name...), make([]byte, pad)...)
	}
	var b []byte
	b = append(b, ev(1, unix.IN_CLOSE_WRITE, "auth.json", 7)...)
	b = append(b, ev(2, unix.IN_Q_OVERFLOW, "", 0)...)
	b = append(b, ev(3, unix.IN_MOVED_TO, "x", 3)...)
	got := parseInotify(b)
	want := []inotifyEvent{{wd: 1, name: "auth.json"}, {wd: 2, overflow: true}, {wd: 3, name: "x"}}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	trunc := ev(4, unix.IN_CLOSE_WRITE, "name", 12)
	if got := parseInotify(append(ev(1, unix.IN_CLOSE_WRITE, "a", 3), trunc[:len(trunc)-1]...)); len(got) != 1 {
		t.Errorf("a truncated event: %+v, want only the whole one before it", got)
	}
	if got := parseInotify(make([]byte, unix.SizeofInotifyEvent-1)); len(got) != 0 {
		t.Errorf("a short read: %+v", got)
	}
}
